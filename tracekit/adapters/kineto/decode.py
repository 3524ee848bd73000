"""Decoding Kineto's JSON: the event and args structs, exact times, raw texts as Arrow columns,
the top-level object, and the repairs (invalid UTF-8, lone surrogates, elements nested beyond
the decoder's depth)."""

from __future__ import annotations

import itertools
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ..base import TraceError
from ..fit import RAW_PREFIX
from .mapping import ARGS, as_int

_EMPTY = msgspec.Raw(b"")


class Event(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The Chrome-trace fields of an event (the C scanner accepts these keys and no other)."""
    ph: str = ""
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = _EMPTY
    dur: msgspec.Raw = _EMPTY
    id: int | str | None = None
    args: msgspec.Raw = _EMPTY
    s: str | None = None
    bp: str | None = None


# the args fields that columns read (mapping.ARGS), typed as the column-wise paths take them
_ARG_TYPES = {"id": int | str | None, "int": int | None, "int3": list[int] | None, "text": str | None}
_Args = msgspec.defstruct("_Args", [(a.attr, _ARG_TYPES[a.type], None) for a in ARGS], gc=False,
                          rename={a.attr: a.key for a in ARGS}, module=__name__)

EV = msgspec.json.Decoder(Event)
_ARGS = msgspec.json.Decoder(_Args)
ANY = msgspec.json.Decoder()
TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
LIST = msgspec.json.Decoder(list[msgspec.Raw])
EVS = msgspec.json.Decoder(list[Event])
ARGS_LIST = msgspec.json.Decoder(list[_Args | None])
NO_ARGS = _Args()
NULL_JSON = b"null"
_EMPTY_ARGS = {b"", b"null", b"{}"}

TS_LIMIT = 2**62  # |ts|, dur in ns: ts + dur must still fit int64


def us_text_to_ns(raw: bytes) -> int:
    """Exact ns from a JSON number of µs (``"12.345"`` → 12345). Raises ValueError."""
    if raw[:1] == b'"':
        raw = raw[1:-1]
    if b"e" in raw or b"E" in raw:
        try:
            return int((Decimal(raw.decode()) * 1000).to_integral_value())
        except InvalidOperation:
            raise ValueError(raw) from None
    dot = raw.find(b".")
    if dot < 0:
        return int(raw) * 1000
    ip, fp = raw[:dot], raw[dot + 1:]
    if len(fp) > 3:  # sub-ns digits: round half to even like Decimal
        return int((Decimal(raw.decode()) * 1000).to_integral_value())
    neg = ip.startswith(b"-")
    v = abs(int(ip or b"0")) * 1000 + int((fp + b"000")[:3] or b"0")
    return -v if neg else v


_I64 = 2**63 - 1
OK, _MISSING, _NONNUM = 0, 1, 2
_MILLI = pa.scalar(1000, pa.decimal128(4, 0))


def us_value(raw) -> tuple[int, int | None]:
    """(code, exact ns) of one raw ts / dur: _MISSING (absent or null), _NONNUM, or OK."""
    raw = bytes(raw)
    if not raw or raw == NULL_JSON:
        return _MISSING, None
    try:
        return OK, us_text_to_ns(raw)
    except ValueError:
        return _NONNUM, None


def ts_skip(ph: str, code: int, ts) -> str | None:
    """Why an event's ts is not converted (its skip reason), or None: the rule of every path."""
    if code == _MISSING:
        return f"'{ph}' event without ts"
    if code == _NONNUM:
        return f"'{ph}' event with a non-numeric ts"
    if not -TS_LIMIT < ts < TS_LIMIT:
        return f"'{ph}' event with ts out of range"
    return None


def dur_skip(code: int, dur) -> str | None:
    """Why a complete ('X') event's dur is not converted, or None."""
    if code == _MISSING:
        return "complete ('X') event without dur"
    if code == _NONNUM:
        return "complete ('X') event with a non-numeric dur"
    if dur < 0:
        return "complete ('X') event with a negative dur"
    if dur >= TS_LIMIT:
        return "complete ('X') event with dur out of range"
    return None


def _strings(raws: list, validate: bool = True) -> pa.Array:
    """Raw JSON texts as an Arrow string array (one copy: joined, then framed by their lengths);
    raises pa.ArrowInvalid when one is not valid UTF-8 (checked when ``validate``)."""
    lens = list(map(len, raws))
    data = b"".join(raws)
    offsets = pa.array(itertools.accumulate(lens, initial=0),
                       pa.int32() if len(data) < 2**31 else pa.int64())
    arr = (pa.StringArray if offsets.type == pa.int32() else pa.LargeStringArray).from_buffers(
        len(raws), offsets.buffers()[1], pa.py_buffer(data))
    if validate:
        arr.validate(full=True)
    return arr


def us_column(raws: list) -> tuple[pa.Array, list | None]:
    """Exact ns (int64) of raw JSON numbers of µs, as us_text_to_ns.  Returns (values, None) when
    every text is a plain number that Arrow parses exactly as a decimal (the usual case), else
    (values with nulls, a code per value: OK, _MISSING for an absent or null value, _NONNUM);
    values beyond int64 are clamped to ±(2**63 - 1), out of range either way."""
    try:
        d = pc.cast(_strings(raws, validate=False), pa.decimal128(22, 3))
        return pc.cast(pc.multiply(d, _MILLI), pa.int64()), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        pass  # something Arrow does not take exactly: more than 3 decimals, text, null, ...
    vals, codes = [], []
    for x in map(bytes, raws):
        if not x or x == NULL_JSON:
            vals.append(None)
            codes.append(_MISSING)
            continue
        try:
            v = us_text_to_ns(x)
        except ValueError:
            vals.append(None)
            codes.append(_NONNUM)
            continue
        vals.append(v if -_I64 <= v <= _I64 else (_I64 if v > 0 else -_I64))
        codes.append(OK)
    return pa.array(vals, pa.int64()), codes


def with_extras(texts: pa.Array, extras: dict) -> pa.Array:
    """The args texts with, for the rows in ``extras`` (row -> {field: raw value}), those fields
    added as ``_raw_<field>`` (adapters/fit.py's rule): a raw value no column holds (a pid that
    is not an id, a kernel's pid / tid that differ from its args' device / stream), kept as the
    one-by-one reader keeps them. Not counted as repairs: torch.profiler writes text pids / tids
    ("Spans", "Traces") in its own rows of every trace, which is no damage; the fuzz counts them
    as kept."""
    if not extras:
        return texts
    out = texts.to_pylist()
    for i, extra in extras.items():
        t = out[i]
        d = ANY.decode(t.encode()) if t else {}
        if not isinstance(d, dict):
            d = {"args": d}
        d.update({f"{RAW_PREFIX}{k}": v for k, v in extra.items()})
        out[i] = msgspec.json.encode(d).decode()
    return pa.array(out, pa.string())


def args_texts(evs: list) -> pa.Array:
    """The args column (`args_text` without extra fields) of many events."""
    raws = [e.args for e in evs]
    try:
        arr = _strings(raws)
    except pa.ArrowInvalid:  # invalid UTF-8: replaced, as one by one
        arr = pa.array([bytes(r).decode("utf-8", "replace") for r in raws], pa.string())
    short = [i for i, n in enumerate(map(len, raws)) if n <= 4]
    empty = [i for i in short if bytes(raws[i]) in _EMPTY_ARGS]
    if empty:
        mask = [False] * len(raws)
        for i in empty:
            mask[i] = True
        arr = pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)
    return arr


class LazyRaw:
    """The raw text of event i of a chunk, sliced only if asked for (an example of a skip)."""

    __slots__ = ("chunk", "i")

    def __init__(self, chunk, i):
        self.chunk, self.i = chunk, i

    def __bytes__(self):
        return self.chunk.raw(self.i)


class Chunk:
    """A decoded chunk of events and, on demand, the raw text of each."""

    __slots__ = ("text", "evs", "raws")

    def __init__(self, text: bytes, evs: list, raws: list | None):
        self.text, self.evs, self.raws = text, evs, raws

    def raw(self, i: int) -> bytes:
        if self.raws is None:
            self.raws = LIST.decode(self.text)
        return bytes(self.raws[i])


_SURROGATE = re.compile(rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})")


def fix_surrogates(buf: bytes) -> tuple[bytes, int]:
    """JSON text with every lone UTF-16 surrogate escape (``\\ud800`` not part of a pair: valid
    JSON that no UTF-8 string can hold) replaced by ``\\ufffd``; and how many."""
    n = 0

    def sub(m):
        nonlocal n
        if m.group(3):
            n += 1
            return rb"\ufffd"
        return m.group(0)

    out = _SURROGATE.sub(sub, bytes(buf))
    return out, n


# a JSON string (skipped whole, and remembered when it is an object key) or a bare token that
# JSON does not have but Python's json.dump writes for a float that is not finite
_TOKENS = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"(\s*:)?|([-+]?(?:NaN|Infinity))', re.S)
_NONFINITE_HINT = re.compile(rb"NaN|Infinity")


def nonfinite_reason(token: str, field: str) -> str:
    """The repair reason of a ``NaN`` / ``Infinity`` token read as null (Accounting.repairs)."""
    return (f"JSON token {token} (not JSON: Python's json.dump writes it for a float that is not "
            f"finite) read as null, field {field!r}")


def fix_nonfinite(buf) -> tuple[bytes, dict[tuple[str, str], int]]:
    """``buf`` with each bare ``NaN``, ``Infinity``, ``-Infinity`` token (outside strings)
    replaced by ``null``, and how many per (token, the object key it is the value of, or of
    the list it is in; ``?`` when the key is not on the token's line).  Only for text that did
    not decode: the tokenizer runs on the lines that hold such a word, and a JSON string
    cannot span lines, so each line is tokenized on its own."""
    data = bytes(buf)
    counts: dict[tuple[str, str], int] = {}
    if _NONFINITE_HINT.search(data) is None:
        return data, counts
    out, done, seen = [], 0, -1
    for hint in _NONFINITE_HINT.finditer(data):
        if hint.start() < seen:
            continue
        lo = data.rfind(b"\n", 0, hint.start()) + 1
        hi = data.find(b"\n", hint.end())
        hi = len(data) if hi < 0 else hi
        seen = hi
        key = None
        for m in _TOKENS.finditer(data, lo, hi):
            if m.group(2) is None:
                if m.group(1) is not None:
                    key = m.group(0)[:m.group(0).rfind(b'"') + 1]
                continue
            a, z = m.span(2)
            prev = data[a - 1:a] if a > lo else b""
            nxt = data[z:z + 1]
            if prev.isalnum() or prev in (b"_", b".") or nxt.isalnum() or nxt in (b"_", b"."):
                continue  # part of another token
            if key is not None:
                try:
                    field = msgspec.json.decode(key)
                except msgspec.DecodeError:
                    field = key.decode("utf-8", "replace")
            else:
                field = "?"
            k = (m.group(2).decode(), str(field))
            counts[k] = counts.get(k, 0) + 1
            out.append(data[done:a])
            out.append(b"null")
            done = z
    if not counts:
        return data, counts
    out.append(data[done:])
    return b"".join(out), counts


def split_array(text: bytes) -> list | None:
    """The top-level elements of a JSON array text as byte slices, found without recursion (for
    an element nested deeper than the decoder allows); None when the text is not one array."""
    i, n = 0, len(text)
    while i < n and text[i] in b" \t\r\n":
        i += 1
    if i >= n or text[i] != ord("["):
        return None
    out, depth, start, in_str, esc = [], 0, None, False, False
    for j in range(i + 1, n):
        c = text[j]
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
            continue
        if c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            depth += 1
        elif c in (0x5D, 0x7D):
            if depth == 0:  # the array's end
                if start is not None:
                    out.append(msgspec.Raw(text[start:j].strip()))
                return out
            depth -= 1
        elif c == 0x2C and depth == 0:
            if start is not None:
                out.append(msgspec.Raw(text[start:j].strip()))
            start = None
            continue
        if start is None and c not in b" \t\r\n":
            start = j
    return None


def decode_top(path: Path, buf: bytes, nonfinite: dict | None = None) -> tuple[dict, list, int]:
    """Top-level map (raw values) and the raw event list; repairs invalid UTF-8 (counted in the
    result) and ``NaN`` / ``Infinity`` tokens (read as null, counted in ``nonfinite``:
    {(token, field): n}, see ``fix_nonfinite``)."""
    repairs = 0
    try:
        top = TOP.decode(buf)
    except msgspec.ValidationError:
        raise TraceError(path, "not a Chrome trace: the JSON is not an object with a traceEvents list",
                         "pass a torch.profiler export_chrome_trace() file") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        if "UTF-8" in msg:
            fixed = buf.decode("utf-8", "replace")
            repairs = fixed.count("\ufffd")
            top, events, r = decode_top(path, fixed.encode(), nonfinite)
            return top, events, r + repairs
        if "escape" in msg or "surrogate" in msg:
            fixed, n = fix_surrogates(buf)
            if n:
                top, events, r = decode_top(path, fixed, nonfinite)
                return top, events, r + n
        if "truncated" in msg:
            raise TraceError(path, f"JSON is truncated (the file ends at byte {len(buf):,} inside the data)",
                             "the profiler did not finish writing it; re-export the trace") from None
        if nonfinite is not None:
            fixed, counts = fix_nonfinite(buf)
            if counts:
                top, events, r = decode_top(path, fixed, nonfinite)
                for k, n in counts.items():
                    nonfinite[k] = nonfinite.get(k, 0) + n
                return top, events, r
        raise TraceError(path, f"invalid JSON ({msg}{_near(buf, msg)})",
                         "check that this is a torch.profiler trace") from None
    if "traceEvents" not in top:
        raise TraceError(path, "JSON object has no traceEvents key",
                         "pass a torch.profiler export_chrome_trace() file")
    try:
        events = LIST.decode(top.pop("traceEvents"))
    except msgspec.ValidationError:
        raise TraceError(path, "traceEvents is not a list", "pass a torch.profiler trace") from None
    return top, events, repairs



def _near(buf, msg: str) -> str:
    """``, near '...'``: the text around the byte a decoder's message names (the token it
    rejected, and the field before it), or nothing."""
    m = re.search(r"byte (\d+)", msg)
    if not m:
        return ""
    at = int(m.group(1))
    text = bytes(buf[max(0, at - 40):at + 20]).decode("utf-8", "replace")
    return f", near {' '.join(text.split())!r}"


def decode_args(ev: Event) -> _Args:
    """The mapped fields of an event's args (`mapping.ARGS`); when one has another type, each
    is read as its type allows (an id that is not one: None, kept in the args text)."""
    a = bytes(ev.args)
    if not a or a == b"null":
        return _Args()
    try:
        return _ARGS.decode(a)
    except msgspec.ValidationError:
        try:
            d = ANY.decode(a)
        except msgspec.DecodeError:
            d = None
        if not isinstance(d, dict):  # kept verbatim in the args column; no fields to map
            return _Args()
        out = _Args()
        for f in ARGS:
            v = d.get(f.key)
            if f.type == "int3":
                v = [as_int(x) for x in v] if isinstance(v, list) else None
            elif f.type == "int":
                v = as_int(v)
            setattr(out, f.attr, v)
        return out


def args_text(ev: Event, extra) -> str | None:
    """The args column of one event: its raw args text, with the ``extra`` fields (a raw value
    no column holds) added as ``_raw_<field>``."""
    a = bytes(ev.args)
    if extra:
        d = ANY.decode(a) if a and a != b"null" else {}
        if not isinstance(d, dict):
            d = {"args": d}
        d.update({f"{RAW_PREFIX}{k}" if not k.startswith(RAW_PREFIX) else k: v for k, v in extra.items()})
        return msgspec.json.encode(d).decode()
    if not a or a == b"null" or a == b"{}":
        return None
    return a.decode("utf-8", "replace")


def generic_event(raw):
    """(event, extra fields) of an event with unusual fields or types: every field kept (the
    Chrome-trace ones of another type as ``_raw_<field>``); (None, None) if it is not an object."""
    try:
        d = ANY.decode(raw)
    except msgspec.DecodeError:
        return None, None
    if not isinstance(d, dict):
        return None, None
    known = {f: d.pop(f) for f in Event.__struct_fields__ if f in d}
    for f in ("ts", "dur", "args"):
        if f in known:
            known[f] = msgspec.Raw(msgspec.json.encode(known[f]))
    for f in ("name", "cat", "ph", "s", "bp"):
        if f in known and not isinstance(known[f], str):
            d[f"{RAW_PREFIX}{f}"] = known[f]
            known[f] = None if known[f] is None else str(known[f])
    for f in ("pid", "tid", "id"):
        if f in known and not isinstance(known[f], (int, str, type(None))):
            d[f"{RAW_PREFIX}{f}"] = known.pop(f)
    return Event(**known), (d or None)
