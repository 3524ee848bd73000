"""Name normalization shared by all adapters (one definition each).

* ``short_kernel_name``: the base function name of a (demangled) kernel name, the way nsys's
  ``shortName`` and ncu's "function" base spell it: no return type, no namespaces, no template
  arguments, no parameter list.  It is the key used to match kernels across tools.
* ``api_base_name``: a CUDA API name without nsys's version suffix (``cudaLaunchKernel_v7000``).
"""

from __future__ import annotations

import re
from functools import lru_cache

_API_SUFFIX = re.compile(r"_v\d+$")
_SPACE = re.compile(r"\s+")


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


@lru_cache(maxsize=65_536)
def short_kernel_name(name: str | None) -> str | None:
    """``void at::native::foo<4, float>(int, T2)`` → ``foo``; ``ampere_sgemm_128x64_nn`` unchanged."""
    if not name:
        return name
    s = name.strip()
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
