"""Name normalization shared by all adapters (one definition each).

* ``short_kernel_name``: the base function name of a (demangled) kernel name, the way nsys's
  ``shortName`` and ncu's "function" base spell it: no return type, no namespaces, no template
  arguments, no parameter list.  It is the key used to match kernels across tools.
* ``api_base_name``: a CUDA API name without nsys's version suffix (``cudaLaunchKernel_v7000``).
* ``printable``: text as a terminal may show it: control characters (escape sequences, carriage
  returns, bells: anything a kernel or NVTX name may carry) written as ``\x1b``-style escapes.
* ``shown``: a file name or message as one printable line (undecodable bytes, control characters).
* ``plural``: a count and its noun for user-facing text, '1 kernel', '2,808 kernels', '0.97 waves'.
"""

from __future__ import annotations

import re
from functools import lru_cache

_API_SUFFIX = re.compile(r"_v\d+$")
_SPACE = re.compile(r"\s+")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, keep_newlines: bool = False) -> str:
    """Text safe to print on a terminal: every control character (C0 but tab and, with
    keep_newlines, newline; DEL; C1; the Unicode line / paragraph separators) as an escape."""
    pat = _CONTROL if keep_newlines else _CONTROL_NL
    return pat.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


_CONTROL_NL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def shown(text, keep_newlines: bool = False) -> str:
    """A file name or message safe to print: bytes of a name that are not UTF-8 (decoded by
    Python as surrogates) as ``\\xNN``, then `printable`."""
    text = str(text)
    if any("\udc80" <= c <= "\udcff" for c in text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return printable(text, keep_newlines)


def plural(n, noun: str, spec: str = ",", nouns: str | None = None) -> str:
    """``n`` formatted with ``spec``, then the noun: singular when the number reads exactly '1'
    (1.0 with spec '.2g' gives '1 wave'), else ``nouns`` (default: the noun + 's')."""
    text = format(n, spec)
    return f"{text} {noun if text == '1' else nouns or noun + 's'}"


def api_base_name(name: str) -> str:
    return _API_SUFFIX.sub("", name) if name else name


def _strip_brackets(s: str, open_: str, close: str) -> str:
    """Remove every balanced open_..close group (nested) from s."""
    out, depth = [], 0
    for ch in s:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def _mangled_base(s: str) -> str | None:
    """Base function name of an Itanium-mangled symbol (``_ZN2at6native3fooILi4EEEvi`` → ``foo``,
    ``_Z14one_warptilingILi128EEviPf`` → ``one_warptiling``), or None when it cannot be read.
    Only the function's own (possibly nested) name is parsed; template arguments are skipped."""
    i = 2
    if s.startswith("L", i):  # internal linkage
        i += 1

    def source_name(j: int) -> tuple[str, int] | None:
        k = j
        while k < len(s) and s[k].isdigit():
            k += 1
        if k == j:
            return None
        n = int(s[j:k])
        if n <= 0 or k + n > len(s) or not _IDENT.match(s[k:k + n]):
            return None
        return s[k:k + n], k + n

    def skip_template_args(j: int) -> int | None:
        """j at 'I'; returns the index after its matching 'E'."""
        depth = 0
        while j < len(s):
            c = s[j]
            if c.isdigit():
                r = source_name(j)
                if r is None:
                    return None
                j = r[1]
                continue
            if c == "L":  # literal: L <type> <value> E, or L _Z <encoding> E
                j += 1
                if s.startswith("_Z", j):
                    return None
                if j < len(s) and s[j].islower():
                    j += 1
                    while j < len(s) and s[j] != "E":
                        j += 1
                    j += 1
                    continue
                depth += 1  # a mangled type follows: treat like an open group
                continue
            if c in "INX":
                depth += 1
            elif c == "E":
                depth -= 1
                if depth == 0:
                    return j + 1
            elif c in "ST" and j + 1 < len(s):  # substitution / template param: S_, S0_, T_, T1_, St...
                k = j + 1
                while k < len(s) and (s[k].isalnum() and s[k] != "_"):
                    k += 1
                j = k + 1 if k < len(s) and s[k] == "_" else j + 2
                continue
            j += 1
        return None

    if s.startswith("N", i):
        i += 1
        while i < len(s) and s[i] in "rVKRO":  # cv / ref qualifiers
            i += 1
        last = None
        while i < len(s):
            c = s[i]
            if c == "E":
                return last
            if c.isdigit():
                r = source_name(i)
                if r is None:
                    return None
                last, i = r
            elif c == "I":
                j = skip_template_args(i)
                if j is None:
                    return last
                i = j
            elif c == "S":  # substitution prefix (S_, S0_, St, ...)
                k = i + 1
                while k < len(s) and s[k] != "_" and not s[k].isdigit() and s[k].islower():
                    k += 1
                if s.startswith("St", i) or s.startswith("Sa", i) or s.startswith("Ss", i):
                    i += 2
                    continue
                k = i + 1
                while k < len(s) and s[k] != "_":
                    k += 1
                i = k + 1
            else:
                return last
        return last
    r = source_name(i)
    return r[0] if r else None


@lru_cache(maxsize=65_536)
def short_kernel_name(name: str | None) -> str | None:
    """``void at::native::foo<4, float>(int, T2)`` → ``foo``; ``ampere_sgemm_128x64_nn`` unchanged;
    a mangled ``_ZN2at6native3fooILi4EEEvi`` (ncu ``--print-kernel-base mangled``) → ``foo``."""
    if not name:
        return name
    s = name.strip()
    if s.startswith("_Z") and " " not in s:
        return _mangled_base(s) or s
    # lambdas and anonymous namespaces contain parentheses and angle brackets of their own
    s = s.replace("(anonymous namespace)", "anon").replace("<unnamed>", "anon")
    s = s.replace("operator<<", "operator_shl").replace("operator>>", "operator_shr")
    s = s.replace("operator()", "operator_call")
    s = _strip_brackets(s, "<", ">")
    # parameter list: drop from the first top-level '(' that follows an identifier
    s = _strip_brackets(s, "(", ")")
    s = _strip_brackets(s, "[", "]")
    s = _SPACE.sub(" ", s).strip()
    if " " in s:  # return type / qualifiers before the name
        s = s.rsplit(" ", 1)[-1]
    s = s.rsplit("::", 1)[-1]
    s = s.replace("operator_call", "operator()")
    return s or name
