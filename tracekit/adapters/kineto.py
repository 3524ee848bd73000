"""Kineto / torch.profiler Chrome-trace JSON (``.json``, ``.json.gz``) → unified schema.

Reading strategy (memory: the input blocks in flight plus one chunk, whatever the trace size):

* The file is read, and inflated (by ISA-L where its wheel installs, else zlib), in blocks by
  a background thread (inflating lets the other core work meanwhile).  The top-level keys
  before ``traceEvents`` are decoded as raw JSON values; the events array is cut into chunks of
  a few MB at event boundaries (``},`` + newline: a JSON string cannot hold a raw newline, and a
  cut inside an event leaves its brackets unbalanced, so the chunk fails to decode and is
  extended instead); the keys after the array are read at the end.
* Each chunk is read by the compiled scanner (``tracekit/_native.c``, built at install where a
  C compiler is found) straight into Arrow columns (``args`` kept as raw JSON text), and routed
  with Arrow compute (`_scanned`).  The scanner accepts only the shapes that the rules below
  take column-wise and declines any other chunk, which then goes the Python way: decoded in one
  msgspec call into small typed structs, ``args`` kept as raw text, the ``args`` fields that
  map to columns decoded in one call per table, rows routed and built as Arrow columns
  (`_columnar`).  Both give the same rows (tests/test_kineto_scan.py); without the scanner
  (``TRACEKIT_KINETO_SCAN=0``, or no compiler at install) large traces read ~1.5x slower.
* A document that does not look like that (one line of JSON, say) is read whole and cut into
  chunks of its event slices.  A chunk whose events have unusual shapes (fields of other types,
  B/E pairs, invalid UTF-8) is converted event by event, with the same rules.

Timestamps are parsed from their decimal text into exact int64 ns (``ts`` is µs with up to three
decimals; epoch-µs floats with ns digits do not fit a float64): vectorized through Arrow decimals,
falling back to exact per-value parsing for texts Arrow does not take.  Every event is either
converted or counted in ``skipped_rows`` with a reason.  See docs/schema.md for the column mapping.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import queue
import re
import threading
import zlib
from collections import defaultdict
from decimal import Decimal, InvalidOperation
from pathlib import Path

import msgspec
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from ..names import short_kernel_name
from .base import Adapter, Builders, TraceError

try:  # ISA-L's inflate: 3-4x zlib's speed on these traces (0.06 vs 0.18-0.26 s for 179 MB)
    from isal import igzip as _gzip
    from isal.isal_zlib import error as _inflate_error
except ImportError:  # pragma: no cover - a platform without isal wheels
    _gzip, _inflate_error = gzip, zlib.error

from ..native import native as _native

# Use the compiled scanner where it is built (TRACEKIT_KINETO_SCAN=0 turns it off: the results
# are the same, only slower; the tests compare both)
SCAN = _native is not None and os.environ.get("TRACEKIT_KINETO_SCAN", "1") != "0"
_SCAN_I64, _SCAN_STR = _native.kineto_names() if _native is not None else ((), ())

_EMPTY = msgspec.Raw(b"")


class _Event(msgspec.Struct, forbid_unknown_fields=True, gc=False):
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


class _Args(msgspec.Struct, gc=False, rename={
        "external_id": "External id", "external_id_lc": "external id",
        "registers": "registers per thread", "shared": "shared memory",
        "sync_kind": "cuda_sync_kind", "wait_event": "wait_on_cuda_event_id"}):
    device: int | str | None = None
    context: int | str | None = None
    stream: int | str | None = None
    correlation: int | str | None = None
    external_id: int | str | None = None
    external_id_lc: int | str | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers: int | None = None
    shared: int | None = None
    bytes: int | str | None = None
    kind: str | None = None
    sync_kind: str | None = None
    wait_event: int | None = None


_EV = msgspec.json.Decoder(_Event)
_ARGS = msgspec.json.Decoder(_Args)
_ANY = msgspec.json.Decoder()
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_EVS = msgspec.json.Decoder(list[_Event])
_ARGS_LIST = msgspec.json.Decoder(list[_Args | None])
_NO_ARGS = _Args()
_NULL = b"null"
_EMPTY_ARGS = {b"", b"null", b"{}"}

BLOCK_BYTES = 8 << 20      # JSON text read (inflated) per step, and so the size of a chunk
HEAD_LIMIT = 64 << 20      # traceEvents must start within this many bytes to be streamed
WHOLE_CHUNK_EVENTS = 20_000  # events per chunk when the document is read whole
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = b"},\n"

INT64_MAX = 2**63 - 1
TS_LIMIT = 2**62  # |ts|, dur in ns: ts + dur must still fit int64

# cat (lower-cased) → (table, normalized category); aliases cover the 2021 formats
_CAT = {
    "kernel": ("kernels", None),
    "gpu_memcpy": ("memops", "memcpy"),
    "memcpy": ("memops", "memcpy"),
    "gpu_memset": ("memops", "memset"),
    "memset": ("memops", "memset"),
    "cuda_runtime": ("api_calls", "cuda_runtime"),
    "runtime": ("api_calls", "cuda_runtime"),
    "cuda_driver": ("api_calls", "cuda_driver"),
    "cuda_sync": ("syncs", None),
    "cpu_op": ("events", "cpu_op"),
    "operator": ("events", "cpu_op"),
    "user_annotation": ("events", "user_annotation"),
    "gpu_user_annotation": ("events", "gpu_user_annotation"),
    "python_function": ("events", "python_function"),
    "cpu_instant_event": ("events", "instant"),
    "overhead": ("events", "overhead"),
    "trace": ("events", "profiler"),
}

_SYNC_TYPES = {"stream sync": "stream_sync", "event sync": "event_sync",
               "context sync": "context_sync", "stream wait event": "stream_wait_event"}
_MEMCPY = re.compile(r"memcpy\s+([A-Za-z]+)\s*(?:\(\s*(\w+)\s*->\s*(\w+)\s*\))?", re.IGNORECASE)
_MEMSET = re.compile(r"memset\s*\(\s*(\w+)\s*\)", re.IGNORECASE)
_COPY_KINDS = {"htod": "HtoD", "dtoh": "DtoH", "dtod": "DtoD", "htoh": "HtoH", "ptop": "PtoP",
               "dtop": "PtoP", "ptod": "PtoP", "htoa": "HtoA", "atoh": "AtoH", "atoa": "AtoA",
               "atod": "AtoD", "dtoa": "DtoA"}
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


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


def _int(v) -> int | None:
    """An id as int64, or None (hex strings '0x1f' accepted; values beyond int64 → None)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -INT64_MAX - 1 <= v <= INT64_MAX else None
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    if isinstance(v, str):
        try:
            n = int(v, 0)
        except ValueError:
            return None
        return n if -INT64_MAX - 1 <= n <= INT64_MAX else None
    return None


def _stream(v) -> int | None:
    n = _int(v)
    return None if n in (4294967295, -1) else n


_I64 = 2**63 - 1
_OK, _MISSING, _NONNUM = 0, 1, 2
_MILLI = pa.scalar(1000, pa.decimal128(4, 0))
_STREAM_NONE = pa.array([4294967295, -1], pa.int64())
_INSTANT_PHASES = pa.array([ord(x) for x in "iIn"], pa.uint8())


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


def _us_column(raws: list) -> tuple[pa.Array, list | None]:
    """Exact ns (int64) of raw JSON numbers of µs, as us_text_to_ns.  Returns (values, None) when
    every text is a plain number that Arrow parses exactly as a decimal (the usual case), else
    (values with nulls, a code per value: _OK, _MISSING for an absent or null value, _NONNUM);
    values beyond int64 are clamped to ±(2**63 - 1), out of range either way."""
    try:
        d = pc.cast(_strings(raws, validate=False), pa.decimal128(22, 3))
        return pc.cast(pc.multiply(d, _MILLI), pa.int64()), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
        pass  # something Arrow does not take exactly: more than 3 decimals, text, null, ...
    vals, codes = [], []
    for x in map(bytes, raws):
        if not x or x == _NULL:
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
        codes.append(_OK)
    return pa.array(vals, pa.int64()), codes


def _ints(vals: list) -> tuple[pa.Array, list, bool]:
    """Ids with `_int`'s rules: (int64 array, the values as a list, whether every non-null value
    was kept).  One C-level conversion when all are int64 ints (the usual case)."""
    try:
        if any(type(v) is float for v in vals):  # pyarrow would truncate 1.5 to 1, silently
            raise TypeError("float id")
        return pa.array(vals, pa.int64()), vals, True
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        conv = [_int(v) for v in vals]
        kept = all(c is not None or v is None for c, v in zip(conv, vals))
        return pa.array(conv, pa.int64()), conv, kept


def _with_extras(texts: pa.Array, extras: dict) -> pa.Array:
    """The args texts with, for the rows in ``extras`` (row -> {field: raw value}), those fields
    added as ``_<field>``: a raw value no column holds (a pid that is not an id, a kernel's pid /
    tid that differ from its args' device / stream), kept as the one-by-one reader keeps them."""
    if not extras:
        return texts
    out = texts.to_pylist()
    for i, extra in extras.items():
        t = out[i]
        d = _ANY.decode(t.encode()) if t else {}
        if not isinstance(d, dict):
            d = {"args": d}
        d.update({f"_{k}": v for k, v in extra.items()})
        out[i] = msgspec.json.encode(d).decode()
    return pa.array(out, pa.string())


def _lost_ids(raw: list, conv: list, used: list | None = None) -> list[int]:
    """Rows whose raw id is not what the column got: not convertible (conv None), or, with
    ``used``, a different value was used for the column (a kernel's args.device over its pid)."""
    if used is None:
        return [i for i, (r, c) in enumerate(zip(raw, conv)) if r is not None and c is None]
    return [i for i, (r, c, u) in enumerate(zip(raw, conv, used)) if r is not None and (c is None or c != u)]


def _gpu_id_extras(ev, a, pid, tid) -> dict:
    """A GPU op's raw pid / tid that its device / stream columns do not hold (not an id, or args
    name another device / stream): kept in args as ``_pid`` / ``_tid``."""
    extra = {}
    for field, raw, conv, used in (("pid", ev.pid, pid, _int(a.device) if a.device is not None else pid),
                                   ("tid", ev.tid, tid, _int(a.stream) if a.stream is not None else tid)):
        if raw is not None and (conv is None or conv != used):
            extra[field] = raw
    return extra


def _streams(arr: pa.Array) -> pa.Array:
    """`_stream` on an int64 array: the 'no stream' markers become NULL."""
    if not len(arr):
        return arr
    return pc.if_else(pc.is_in(arr, value_set=_STREAM_NONE), pa.scalar(None, pa.int64()), arr)


def _args_texts(evs: list) -> pa.Array:
    """The args column (`_args_text` without extra fields) of many events."""
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


class _LazyRaw:
    """The raw text of event i of a chunk, sliced only if asked for (an example of a skip)."""

    __slots__ = ("chunk", "i")

    def __init__(self, chunk, i):
        self.chunk, self.i = chunk, i

    def __bytes__(self):
        return self.chunk.raw(self.i)


class _Chunk:
    """A decoded chunk of events and, on demand, the raw text of each."""

    __slots__ = ("text", "evs", "raws")

    def __init__(self, text: bytes, evs: list, raws: list | None):
        self.text, self.evs, self.raws = text, evs, raws

    def raw(self, i: int) -> bytes:
        if self.raws is None:
            self.raws = _LIST.decode(self.text)
        return bytes(self.raws[i])


#: A .gz input may inflate to at most this many times its size (beyond INFLATE_FLOOR bytes): real
#: traces inflate 5-25x (the 179 MB capture: 9.6x); 2 MB of gzip holding 2 GiB of whitespace is a
#: decompression bomb, refused before it takes the memory.
INFLATE_RATIO = int(os.environ.get("TRACEKIT_MAX_INFLATE_RATIO", "100"))
INFLATE_FLOOR = 64 * 2**20


class _Blocks:
    """The file's (inflated) bytes in blocks, read ahead by a background thread."""

    def __init__(self, path: Path, block: int | None = None):
        self.path = path
        self.total = os.path.getsize(path)
        self.done = 0  # compressed bytes read so far
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._block = block or BLOCK_BYTES
        self.notes: dict[str, int] = {}  # repairs of the byte stream (BOM, UTF-16, gzip tail)
        self._t = threading.Thread(target=self._work, name="tracekit-read", daemon=True)
        self._t.start()

    def _work(self):
        try:
            with open(self.path, "rb") as raw:
                gz = raw.read(2) == b"\x1f\x8b"
                raw.seek(0)
                f = _gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
                inflated, dec = 0, None
                while not self._stop.is_set():
                    try:
                        raw_blk = f.read(self._block)
                    except (EOFError, OSError, zlib.error, _inflate_error):
                        found = _gzip_trailing_garbage(self.path) if gz else None
                        if found is None or len(found[0]) < inflated:
                            raise
                        members, junk = found
                        self.notes["bytes after the end of the gzip data, ignored"] = junk
                        raw_blk = members[inflated:]  # what the gzip reader had not handed out
                        f = io.BytesIO(b"")  # then the end
                    at_eof = not raw_blk
                    first = inflated == 0
                    inflated += len(raw_blk)
                    if gz and inflated > INFLATE_FLOOR and inflated > INFLATE_RATIO * self.total:
                        raise TraceError(self.path, f"the gzip data inflates to over {INFLATE_RATIO}x its "
                                         f"size ({inflated:,} bytes from {self.total:,}): not a trace "
                                         "(a decompression bomb?)", "set TRACEKIT_MAX_INFLATE_RATIO "
                                         "higher if this really is your trace")
                    if first and raw_blk:
                        blk, dec = _sniff_encoding(raw_blk, self.notes)
                    elif dec is not None:
                        blk = dec(raw_blk, at_eof)
                    else:
                        blk = raw_blk
                    if blk:
                        self._put((blk, raw.tell()))
                    if at_eof:
                        self._put((b"", raw.tell()))
                        return
        except BaseException as e:  # handed to the reader
            self._put((e, 0))

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next(self) -> bytes:
        """The next block; b"" at the end.  Raises TraceError for corrupt gzip data."""
        item, pos = self._q.get()
        if isinstance(item, BaseException):
            if isinstance(item, TraceError):
                raise item
            if isinstance(item, (EOFError, OSError, zlib.error, _inflate_error)):
                raise TraceError(self.path, f"truncated or corrupt gzip data ({item})",
                                 "re-copy or re-export the trace") from None
            raise item
        self.done = pos
        return item

    def close(self):
        self._stop.set()
        self._t.join()


_SURROGATE = re.compile(rb"(\\\\)|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})")


def _fix_surrogates(buf: bytes) -> tuple[bytes, int]:
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


def _sniff_encoding(blk: bytes, notes: dict):
    """The first block of the document: a UTF-8 byte order mark dropped; UTF-16 / UTF-32 (by their
    BOM, or ASCII characters alternating with NULs) transcoded to UTF-8, block by block (returns the decoder
    for the next blocks: f(block, final) -> bytes). Each noted in ``notes``."""
    import codecs

    if blk.startswith(codecs.BOM_UTF8):
        notes["UTF-8 byte order mark removed"] = 1
        return blk[3:], None
    enc = None
    for bom, e in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                   (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if blk.startswith(bom):
            enc = e
            break
    head = blk[:4]
    if enc is None and len(head) == 4 and head[1] == 0 and head[3] == 0 and head[0] and head[2]:
        enc = "utf-16-le"  # ASCII text (whitespace, '{') as 2-byte units, no BOM
    elif enc is None and len(head) == 4 and head[0] == 0 and head[2] == 0 and head[1] and head[3]:
        enc = "utf-16-be"
    if enc is None:
        return blk, None
    d = codecs.getincrementaldecoder(enc)(errors="replace")
    notes[f"text encoded as {enc.upper()}, read as such (transcoded to UTF-8)"] = 1

    def dec(b: bytes, final: bool) -> bytes:
        return d.decode(b, final).encode("utf-8")

    return dec(blk, False), dec


def _gzip_trailing_garbage(path: Path) -> tuple[bytes, int] | None:
    """When a .gz file is whole gzip members followed by bytes that are not gzip (a copy that
    appended junk): (the members' inflated bytes, the number of junk bytes). None when the gzip
    data itself is truncated or corrupt, or there is no junk."""
    with open(path, "rb") as f:
        data = f.read()
    out, pos, n = [], 0, 0
    while pos < len(data) and data[pos:pos + 2] == b"\x1f\x8b":
        d = zlib.decompressobj(31)
        try:
            out.append(d.decompress(data[pos:]))
        except zlib.error:
            return None
        if not d.eof:
            return None  # truncated
        pos = len(data) - len(d.unused_data)
        n += 1
    junk = len(data) - pos
    return (b"".join(out), junk) if n and junk else None


def _split_array(text: bytes) -> list | None:
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


def _read_bytes(path: Path, notes: dict | None = None) -> bytes:
    """The whole (inflated, UTF-8) document: `_Blocks`' reading, joined."""
    src = _Blocks(path)
    parts = []
    try:
        while True:
            blk = src.next()
            if not blk:
                break
            parts.append(blk)
    finally:
        src.close()
    if notes is not None:
        notes.update(src.notes)
    return b"".join(parts)


def _decode_top(path: Path, buf: bytes) -> tuple[dict, list, int]:
    """Top-level map (raw values) and the raw event list; repairs invalid UTF-8 (counted)."""
    repairs = 0
    try:
        top = _TOP.decode(buf)
    except msgspec.ValidationError:
        raise TraceError(path, "not a Chrome trace: the JSON is not an object with a traceEvents list",
                         "pass a torch.profiler export_chrome_trace() file") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        if "UTF-8" in msg:
            fixed = buf.decode("utf-8", "replace")
            repairs = fixed.count("\ufffd")
            return _decode_top(path, fixed.encode())[0:2] + (repairs,)
        if "escape" in msg or "surrogate" in msg:
            fixed, n = _fix_surrogates(buf)
            if n:
                top, events, r = _decode_top(path, fixed)
                return top, events, r + n
        if "truncated" in msg:
            raise TraceError(path, f"JSON is truncated (the file ends at byte {len(buf):,} inside the data)",
                             "the profiler did not finish writing it; re-export the trace") from None
        raise TraceError(path, f"invalid JSON ({msg})", "check that this is a torch.profiler trace") from None
    if "traceEvents" not in top:
        raise TraceError(path, "JSON object has no traceEvents key",
                         "pass a torch.profiler export_chrome_trace() file")
    try:
        events = _LIST.decode(top.pop("traceEvents"))
    except msgspec.ValidationError:
        raise TraceError(path, "traceEvents is not a list", "pass a torch.profiler trace") from None
    return top, events, repairs


class KinetoAdapter(Adapter):
    FORMAT = "kineto"

    def read(self, path, source_id, progress=None):
        for name, batch in self._read(path, source_id, progress):
            if name == "events":
                yield from self._split_memory(batch, source_id)
            else:
                yield name, batch

    def _split_memory(self, batch: pa.RecordBatch, source_id: int):
        """The `[memory]` instants (profile_memory=True) of an events batch go to memory_events;
        one whose args are not an allocation record (no integer Bytes) stays an event."""
        mask = pc.and_(pc.equal(batch.column("name"), "[memory]"), batch.column("is_instant")).fill_null(False)
        if not pc.any(mask).as_py():
            yield "events", batch
            return
        idx = pc.indices_nonzero(mask).to_pylist()
        mem = batch.take(pa.array(idx, pa.int64()))
        args = mem.column("args").to_pylist()
        keep, rows = [], defaultdict(list)
        known = ("Bytes", "Addr", "Total Allocated", "Total Reserved", "Device Type", "Device Id")
        for i, (text, ts, pid, tid) in enumerate(zip(args, mem.column("start_ns").to_pylist(),
                                                     mem.column("pid").to_pylist(), mem.column("tid").to_pylist())):
            try:
                a = orjson.loads(text) if text else {}
            except orjson.JSONDecodeError:
                a = {}
            nbytes = a.get("Bytes") if isinstance(a, dict) else None
            if not isinstance(nbytes, int) or isinstance(nbytes, bool) or not -2**63 < nbytes < 2**63:
                keep.append(idx[i])
                continue
            dtype, dev = a.get("Device Type"), a.get("Device Id")
            ints = {k: a.get(k) if isinstance(a.get(k), int) and not isinstance(a.get(k), bool)
                    and -2**63 <= a.get(k) < 2**63 else None for k in known}
            rows["device_id"].append(dev if dtype == 1 and ints["Device Id"] is not None and -2**31 <= dev < 2**31 else None)
            rows["ts_ns"].append(ts)
            rows["kind"].append("free" if nbytes < 0 else "alloc")
            rows["address"].append(ints["Addr"])
            rows["bytes"].append(abs(nbytes))
            rows["allocated_bytes"].append(ints["Total Allocated"])
            rows["reserved_bytes"].append(ints["Total Reserved"])
            rows["allocator"].append("pytorch")
            rows["memory_kind"].append("device" if dtype == 1 else "host" if dtype == 0 else f"device_type_{dtype}")
            rows["pid"].append(pid)
            rows["tid"].append(tid)
            # every field not in a column stays in args: other keys, non-integer values of known
            # ones, and the Device Id of host memory (no device_id there)
            rest = {k: v for k, v in a.items() if k not in known or (ints[k] is None and v is not None)}
            if rows["device_id"][-1] is None and ints["Device Id"] is not None:
                rest["Device Id"] = dev
            rows["args"].append(orjson.dumps(rest).decode() if rest else None)
        others = pc.invert(mask)
        if keep:
            others = pc.or_(others, pc.is_in(pa.array(range(batch.num_rows), pa.int64()),
                                              value_set=pa.array(keep, pa.int64())))
        ev = batch.filter(others)
        if ev.num_rows:
            yield "events", ev
        if rows:
            n = len(rows["ts_ns"])
            t = schema.table("memory_events")
            cols = {"source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n)}
            cols.update({c: pa.array(rows.get(c, [None] * n), t.arrow.field(c).type) for c in t.column_names[1:]})
            moved = n
            self.accounting.converted["events"] -= moved
            self.accounting.converted["memory_events"] += moved
            yield "memory_events", pa.RecordBatch.from_pydict(cols, schema=t.arrow)

    def _read(self, path, source_id, progress=None):
        path = self._path = Path(path)
        acc = self.accounting
        b = Builders(source_id, acc)
        self._first_ts: int | None = None
        self._open_flows: dict = {}
        self._early_ends: dict = {}  # (kind, id) -> (id, (pid, tid, ts)): an 'f' before its 's'
        self._begin_stack: dict = {}
        self._counted_pids: set = set()
        self._event_id = 0
        self._utf8_repairs = 0      # invalid UTF-8 repaired inside single events
        self._chunk_repairs = 0     # ... in whole chunks of the streamed document
        self._short: dict = {}      # kernel name -> short name
        self.scan_counts = [0, 0]   # chunks read by the compiled scanner / not (the Python way)
        top = None
        src = _Blocks(path)
        self._stream_notes = src.notes
        try:
            parts = yield from self._stream(path, src, b, progress)
            if parts is not None:
                top, tail = parts
                top.update(tail)
        finally:
            src.close()
        if top is None:  # not streamable: read whole (nothing was converted yet)
            top = yield from self._whole(path, b, progress)
        yield from b.ready()
        repairs = top.pop("__repairs__", 0) + self._chunk_repairs
        meta = {}
        for k, v in top.items():
            try:
                meta[k] = _ANY.decode(v)
            except msgspec.DecodeError:
                meta[k] = bytes(v).decode("utf-8", "replace")
        if repairs:
            meta["tracekit_repairs"] = {"invalid_utf8_characters_replaced": repairs}
        yield from self._devices(b, meta.get("deviceProperties"))
        fl = defaultdict(list)
        for (cat, fid), (pid, tid, ts) in self._open_flows.items():
            fl["flow_id"].append(fid)
            fl["kind"].append(cat)
            fl["start_pid"].append(pid)
            fl["start_tid"].append(tid)
            fl["start_ns"].append(ts)
            for k in ("end_pid", "end_tid", "end_ns"):
                fl[k].append(None)
        for (cat, _), (fid, (pid, tid, ts)) in self._early_ends.items():  # ends that no start met
            fl["flow_id"].append(fid)
            fl["kind"].append(cat)
            for k in ("start_pid", "start_tid", "start_ns"):
                fl[k].append(None)
            fl["end_pid"].append(pid)
            fl["end_tid"].append(tid)
            fl["end_ns"].append(ts)
        if fl:
            fl["flow_id"] = _ints(fl["flow_id"])[0]
            b["flows"].add_columns(len(fl["kind"]), fl)
        for stack in self._begin_stack.values():
            for _ in stack:
                acc.skip("B (begin) event without a matching E (end) event")
        if self._utf8_repairs:
            meta.setdefault("tracekit_repairs", {})["invalid_utf8_in_events"] = self._utf8_repairs
        if self._stream_notes:
            meta.setdefault("tracekit_repairs", {}).update(self._stream_notes)
        yield from b.drain()
        self.source = self._source_info(path, meta)

    # -- reading ---------------------------------------------------------------------------
    def _stream(self, path: Path, src: _Blocks, b, progress):
        """Convert the events while reading; returns (top-level keys before, after traceEvents)
        as raw values, or None (having converted nothing) when the document is not laid out for
        it.  Raises TraceError for a document that is not valid JSON."""
        head = b""
        while True:
            blk = src.next()
            head += blk
            m = _TRACE_EVENTS.search(head)
            if m or not blk or len(head) > HEAD_LIMIT:
                break
        if not m:
            return None
        h = head[:m.start()].rstrip()
        if h.endswith(b","):
            h = h[:-1]
        try:
            top = _TOP.decode(h + b"}")
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        # buf: '[' + the event text not converted yet.  A chunk is cut in place: the ',' after
        # its last event becomes ']' while it is decoded, then '[' to open the next chunk
        buf = bytearray(b"[")
        buf += memoryview(head)[m.end():]
        del head
        eof = not blk
        # the document must have event boundaries at line ends (as torch.profiler writes it)
        while not eof and buf.find(_BOUNDARY) < 0 and len(buf) < 2 * BLOCK_BYTES:
            blk = src.next()
            buf += blk
            eof = not blk
        if not eof and buf.find(_BOUNDARY) < 0:
            return None
        floor = 1  # a cut before this failed: the next one must be later
        while not eof:
            cut = buf.rfind(_BOUNDARY, floor)
            if cut >= 0:
                buf[cut + 1] = 0x5D  # ']'
                with memoryview(buf) as whole, whole[:cut + 2] as chunk:
                    ok = self._chunk(b, chunk, None)
                if ok:
                    buf[cut + 1] = 0x5B  # '['
                    del buf[:cut + 1]
                    floor = 1
                    if progress:
                        progress(src.done, src.total)
                    yield from b.ready()
                else:
                    buf[cut + 1] = 0x2C  # ','
                    floor = cut + 1
            blk = src.next()
            eof = not blk
            buf += blk
        pending = bytes(memoryview(buf)[1:])
        del buf
        tail = self._finish(b, pending)
        if tail is None:  # not valid JSON: the whole-document reader says why
            _decode_top(path, _read_bytes(path))
            raise RuntimeError(f"{path}: the streaming reader failed on a valid document")
        if progress:
            progress(src.total, src.total)
        return top, tail

    def _finish(self, b, rest: bytes) -> dict | None:
        """The last events, the closing ']' and the keys after it; None if that is not JSON."""
        hi = len(rest)
        for _ in range(10_000):
            p = rest.rfind(b"]", 0, hi)
            if p < 0:
                return None
            hi = p
            t = rest[p + 1:].strip()
            try:
                if t == b"}":
                    tail = {}
                elif t[:1] == b",":
                    tail = _TOP.decode(b"{" + t[1:])
                else:
                    continue
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if "traceEvents" in tail:
                raise TraceError(self._path, "the JSON object has two traceEvents keys",
                                 "keep one events list per trace")
            body = rest[:p].strip()
            if not body or self._chunk(b, b"[" + body + b"]", None):
                return tail
        return None

    def _whole(self, path: Path, b, progress):
        """The whole document in memory, cut into chunks of its event slices."""
        buf = _read_bytes(path, self._stream_notes)
        top, raw_events, repairs = _decode_top(path, buf)
        del buf
        if repairs:
            top["__repairs__"] = repairs
        n = len(raw_events)
        for i in range(0, n, WHOLE_CHUNK_EVENTS):
            part = raw_events[i:i + WHOLE_CHUNK_EVENTS]
            self._chunk(b, b"[" + b",".join(part) + b"]", part)
            if progress:
                progress(i + len(part), n)
            yield from b.ready()
        if progress:
            progress(n, n)
        return top

    def _chunk(self, b, text: bytes, raws: list | None) -> bool:
        """Convert a chunk of events (a JSON array text).  ``raws``: the event slices when known.
        False, having converted nothing, when the text is not a JSON array (a cut inside an event)."""
        if SCAN:
            cols = _native.kineto_scan(text)
            if cols is not None and self._scanned(b, text, cols):
                self.scan_counts[0] += 1
                return True
            self.scan_counts[1] += 1
        try:
            evs = _EVS.decode(text)
        except (msgspec.DecodeError, RecursionError):  # unusual shapes, nesting beyond the
            evs = None                                   # decoder's depth, or a bad cut
        try:
            if evs is not None and self._columnar(b, _Chunk(text, evs, raws)):
                return True
        except RecursionError:  # an args object nested too deep: event by event below
            pass
        # one by one (events are kept across chunks, B/E pairs: on a copy of the text, since
        # a streamed chunk is a view of a buffer that is reused)
        evs = None
        if raws is None:
            raws = self._raw_slices(bytes(text))
            if raws is None:
                return False
        self._one_by_one(b, raws)
        return True

    def _raw_slices(self, text: bytes) -> list | None:
        """The event slices of a chunk that did not decode; invalid UTF-8 repaired (counted)."""
        try:
            return _LIST.decode(text)
        except RecursionError:  # an element nested beyond the decoder's depth
            return _split_array(bytes(text))
        except msgspec.ValidationError:
            return None
        except msgspec.DecodeError as e:
            if "UTF-8" not in str(e):
                fixed, n = _fix_surrogates(bytes(text))
                if not n:
                    return None
                self._chunk_repairs += n
                return self._raw_slices(fixed)
        fixed = text.decode("utf-8", "replace")
        try:
            raws = _LIST.decode(fixed.encode())
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        self._chunk_repairs += fixed.count("\ufffd")
        return raws

    def _one_by_one(self, b, raws: list) -> None:  # noqa: C901
        for raw in raws:
            try:
                ev, extra, raw = self._decode_event(raw)
                if ev is None:
                    continue
                self._event_id = self._route(b, ev, extra, raw, self._open_flows, self._begin_stack,
                                             self._counted_pids, self._event_id)
            except RecursionError:
                self.accounting.skip("event nested deeper than the JSON decoder allows (~1000 levels)",
                                     bytes(raw)[:300])

    # -- a chunk, from the compiled scanner's columns ------------------------------------------
    def _scanned(self, b, text, cols) -> bool:
        """Convert a chunk that `_native.kineto_scan` read into columns, with the rules of `_columnar`
        (in the same order, so the rows come out the same).  The scanner only accepts the
        shapes those rules take column-wise: every non-'M' event has an exact ts in range, every
        'X' event a dur in range, ids are ints, args fields have their usual types.  The few
        events converted one by one (metadata, counters, memcpy/memset/sync) and the groups
        with a pid or tid given as text are converted from their decoded text, as there.
        False, having changed nothing, when one of those does not decode."""
        n, ph, i64, valid, strs = cols
        if not n:
            return True
        c = {}
        for name, data, v in zip(_SCAN_I64, i64, valid):
            c[name] = pa.Array.from_buffers(pa.int64(), n, [v and pa.py_buffer(v), pa.py_buffer(data)])
        for name, (off, data, v) in zip(_SCAN_STR, strs):
            c[name] = pa.Array.from_buffers(pa.string(), n, [v and pa.py_buffer(v), pa.py_buffer(off),
                                                            pa.py_buffer(data)])
        span0, span1 = c["span_start"], c["span_end"]

        def decoded(idx):  # the events at idx as structs (one by one, like the Python path)
            return [_EV.decode(text[s_:e_]) for s_, e_ in zip(span0.take(idx).to_pylist(),
                                                            span1.take(idx).to_pylist())]

        def at(pattern):
            return [m.start() for m in re.finditer(pattern, ph)]

        phs = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(ph)])
        is_x = pc.equal(phs, ord("X"))
        xs = pc.indices_nonzero(is_x)
        groups = []  # (cat, table, kind, indices into the chunk), in order of first appearance
        mark = pc.is_in(phs, value_set=_INSTANT_PHASES)  # the rows of `events`, for their ids
        if len(xs):
            enc = c["cat"].take(xs).dictionary_encode(null_encoding="encode")
            for k, cat in enumerate(enc.dictionary.to_pylist()):
                table, kind = _CAT.get((cat or "").lower(), ("events", None))
                ci = xs.take(pc.indices_nonzero(pc.equal(enc.indices, k))) if len(enc.dictionary) > 1 else xs
                groups.append((cat, table, kind, ci))
            codes = [k for k, g in enumerate(groups) if g[1] == "events"]
            if codes:
                mark = pc.replace_with_mask(mark, is_x, pc.is_in(
                    enc.indices, value_set=pa.array(codes, enc.indices.type)))
        textual = c["text_pid_tid"]
        has_text = pc.max(textual).as_py() == 1

        def text_rows(idx) -> bool:  # a pid or tid given as text among these rows?
            return has_text and pc.max(textual.take(idx)).as_py() == 1

        flows = at(rb"[sft]")
        instants = at(rb"[iIn]")
        try:  # the events converted from their decoded text: decoded before anything is changed
            meta = decoded(at(b"M")) if b"M" in ph else []
            counters = at(b"C") if b"C" in ph else []
            counter_evs = decoded(counters) if counters else []
            # memops, syncs (few rows), and groups with a text pid/tid: as the Python path does
            few = {k: decoded(ci) for k, (_, table, _, ci) in enumerate(groups)
                   if table in ("memops", "syncs") or text_rows(ci)}
            flow_evs = decoded(flows) if flows and text_rows(flows) else None
            instant_evs = decoded(instants) if instants and text_rows(instants) else None
        except msgspec.DecodeError:
            return False
        for ev in meta:
            self._metadata(b, ev)
        if len(meta) == n:
            return True
        ts = c["ts"]
        if self._first_ts is None:
            self._first_ts = ts[re.search(rb"[^M]", ph).start()].as_py()
        for i, ev in zip(counters, counter_evs):
            self._counter(b, ev, ts[i].as_py(), text[span0[i].as_py():span1[i].as_py()])
        if flows:
            fi = pa.array(flows, pa.int64())
            fph = bytes(ph[i] for i in flows)
            if flow_evs is None:  # in C, on the columns
                fenc = c["cat"].take(fi).dictionary_encode()
                lower = [(x or "").lower() or "flow" for x in fenc.dictionary.to_pylist()] + ["flow"]
                kinds = [lower[k] for k in fenc.indices.fill_null(len(lower) - 1).to_pylist()]
                cols = [c[k].take(fi) for k in ("id", "pid", "tid")] + [ts.take(fi)]
                bufs = []
                for a in cols[:3]:
                    bufs += [a.buffers()[1], a.buffers()[0] if a.null_count else None]
                self._add_flows(b, _native.kineto_flows(fph, kinds, *bufs, cols[3].buffers()[1],
                                                        self._open_flows, self._early_ends))
            else:  # a text pid / tid among them: as the Python path
                pids, tids = (_ints([getattr(e, f) for e in flow_evs])[1] for f in ("pid", "tid"))
                self._flows(b, list(fph.decode()), c["cat"].take(fi).to_pylist(),
                            c["id"].take(fi).to_pylist(), pids, tids, ts.take(fi).to_pylist())
        # event ids: one per `events` row, in input order
        cum = pc.cumulative_sum(mark.cast(pa.int64()))
        base = self._event_id - 1
        self._event_id += cum[-1].as_py()
        dur = c["dur"]
        for k, (cat, table, kind, ci) in enumerate(groups):
            t0 = ts.take(ci)
            d = dur.take(ci)
            end = pc.add(t0, d)
            sub = few.get(k)
            if table == "events":
                category = kind or (cat or "").lower() or "unknown"
                with_args = bool(cat) and category in ("cpu_op", "user_annotation", "gpu_user_annotation")
                ids = pc.add(cum.take(ci), base)
                if sub is not None:
                    self._events(b, sub, ids.to_pylist(), t0, end, d, category, with_args, False)
                else:
                    self._scanned_events(b, c, ci, ids, t0, end, d, category, with_args, False)
            elif table == "kernels":
                if sub is not None:
                    self._kernels(b, sub, t0, end, d)
                else:
                    self._scanned_kernels(b, c, ci, t0, end, d)
            elif table == "api_calls":
                if sub is not None:
                    self._api_calls(b, sub, t0, end, d, kind)
                else:
                    self._scanned_api_calls(b, c, ci, t0, end, d, kind)
            else:
                self._few(b, table, kind, sub, t0, end, d)
        if instants:
            ii = pa.array(instants, pa.int64())
            t0 = ts.take(ii)
            ids = pc.add(cum.take(ii), base)
            zero = pa.repeat(pa.scalar(0, pa.int64()), len(instants))
            if instant_evs is not None:
                self._events(b, instant_evs, ids.to_pylist(), t0, t0, zero, "instant", False, True)
            else:
                self._scanned_events(b, c, ii, ids, t0, t0, zero, "instant", False, True)
        return True

    def _scanned_events(self, b, c, ci, ids, t0, end, dur, category, with_args, instant) -> None:
        m = len(ci)
        pid, tid = c["pid"].take(ci), c["tid"].take(ci)
        device = stream = None
        if category == "gpu_user_annotation":
            device, stream, pid, tid = pid, tid, None, None
        b["events"].add_columns(m, {
            "event_id": ids, "pid": pid, "tid": tid, "device_id": device, "stream_id": stream,
            "start_ns": t0, "end_ns": end, "dur_ns": dur, "name": c["name"].take(ci),
            "category": pa.repeat(pa.scalar(category), m),
            "external_id": c["external_id"].take(ci) if with_args else None,
            "correlation_id": c["correlation"].take(ci) if with_args else None,
            "is_instant": pa.repeat(pa.scalar(instant), m), "args": c["args"].take(ci)})

    def _scanned_kernels(self, b, c, ci, t0, end, dur) -> None:
        names = c["name"].take(ci)
        enc = names.dictionary_encode()
        short = self._short_names(enc.dictionary.to_pylist())
        extras: dict = {}
        for field, raw, used in (("pid", c["pid"].take(ci), c["device"].take(ci)),
                                 ("tid", c["tid"].take(ci), c["stream"].take(ci))):
            differ = pc.fill_null(pc.not_equal(raw, used), False)
            if pc.any(differ).as_py():
                vals = raw.to_pylist()
                for i in pc.indices_nonzero(differ).to_pylist():
                    extras.setdefault(i, {})[field] = vals[i]
        b["kernels"].add_columns(len(ci), {
            "device_id": pc.coalesce(c["device"].take(ci), c["pid"].take(ci)),
            "context_id": c["context"].take(ci),
            "stream_id": _streams(pc.coalesce(c["stream"].take(ci), c["tid"].take(ci))),
            "start_ns": t0, "end_ns": end, "dur_ns": dur, "name": names,
            "short_name": pa.array(short, pa.string()).take(enc.indices),
            "correlation_id": c["correlation"].take(ci), "external_id": c["external_id"].take(ci),
            **{k: c[k].take(ci) for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")},
            "registers_per_thread": c["registers"].take(ci), "shared_bytes": c["shared"].take(ci),
            "args": _with_extras(c["args"].take(ci), extras)})

    def _scanned_api_calls(self, b, c, ci, t0, end, dur, kind) -> None:
        m = len(ci)
        names = c["name"].take(ci)
        api = pa.repeat(pa.scalar(kind), m)
        if kind == "cuda_runtime":
            hip = pc.fill_null(pc.starts_with(names, "hip"), False)
            api = pc.if_else(hip, pa.scalar("hip_runtime"), api)
        b["api_calls"].add_columns(m, {
            "pid": c["pid"].take(ci), "tid": c["tid"].take(ci),
            "start_ns": t0, "end_ns": end, "dur_ns": dur, "name": names, "raw_name": names,
            "api": api, "correlation_id": c["correlation"].take(ci),
            "external_id": pc.coalesce(c["external_id"].take(ci), c["external_id_lc"].take(ci)),
            "args": c["args"].take(ci)})

    def _short_names(self, names: list) -> list:
        """`short_kernel_name` of each name, each distinct name worked out once per trace."""
        short = self._short
        for nm in set(names) - short.keys():
            short[nm] = short_kernel_name(nm)
        return [short[nm] for nm in names]

    # -- a chunk, column-wise ----------------------------------------------------------------
    def _skip(self, reason: str, ch: _Chunk, i: int) -> None:
        acc = self.accounting
        acc.skip(reason, ch.raw(i) if reason not in acc.examples else None)

    def _columnar(self, b, ch: _Chunk) -> bool:
        """Convert a decoded chunk with the rules of `_route`, one table and category at a time;
        False (having converted nothing) when it has B/E events, which go one by one."""
        evs = ch.evs
        n = len(evs)
        by_ph: dict[str, list[int]] = defaultdict(list)
        for i, ph in enumerate([e.ph for e in evs]):
            by_ph[ph].append(i)
        if "B" in by_ph or "E" in by_ph:
            return False  # begin/end pairs: one by one, in order
        for i in by_ph.pop("M", ()):
            self._metadata(b, evs[i])
        if not by_ph:
            return True
        ts, codes = _us_column([e.ts for e in evs])
        lo_hi = pc.min_max(ts).as_py() if codes is None else None
        if codes is not None or lo_hi["min"] is None or not (
                -TS_LIMIT < lo_hi["min"] and lo_hi["max"] < TS_LIMIT):
            tsl = ts.to_pylist()
            for ph, idx in list(by_ph.items()):
                keep = []
                for i in idx:
                    code = codes[i] if codes is not None else _OK
                    if code == _MISSING:
                        self._skip(f"'{ph}' event without ts", ch, i)
                    elif code == _NONNUM:
                        self._skip(f"'{ph}' event with a non-numeric ts", ch, i)
                    elif not -TS_LIMIT < tsl[i] < TS_LIMIT:
                        self._skip(f"'{ph}' event with ts out of range", ch, i)
                    else:
                        keep.append(i)
                by_ph[ph] = keep
        if self._first_ts is None:
            first = min((idx[0] for idx in by_ph.values() if idx), default=None)
            if first is not None:
                self._first_ts = ts[first].as_py()
        flows = sorted(itertools.chain(by_ph.pop("s", ()), by_ph.pop("f", ()), by_ph.pop("t", ())))
        instants = sorted(itertools.chain(by_ph.pop("i", ()), by_ph.pop("I", ()), by_ph.pop("n", ())))
        xs = by_ph.pop("X", [])
        for i in by_ph.pop("C", ()):
            self._counter(b, evs[i], ts[i].as_py(), _LazyRaw(ch, i))
        for ph, idx in by_ph.items():
            for i in idx:
                self._skip(f"unsupported phase '{ph}'", ch, i)
        if flows:
            sub = [evs[i] for i in flows]
            self._flows(b, [e.ph for e in sub], [e.cat for e in sub], [e.id for e in sub],
                        _ints([e.pid for e in sub])[1], _ints([e.tid for e in sub])[1],
                        ts.take(flows).to_pylist())
        # complete events: dur, then one group per category
        groups: dict = defaultdict(list)
        dur = None
        if xs:
            dur, dcodes = _us_column([evs[i].dur for i in xs])
            lo_hi = pc.min_max(dur).as_py() if dcodes is None else None
            if dcodes is not None or not (0 <= lo_hi["min"] and lo_hi["max"] < TS_LIMIT):
                durl = dur.to_pylist()
                keep = []
                for j, i in enumerate(xs):
                    code = dcodes[j] if dcodes is not None else _OK
                    if code == _MISSING:
                        self._skip("complete ('X') event without dur", ch, i)
                    elif code == _NONNUM:
                        self._skip("complete ('X') event with a non-numeric dur", ch, i)
                    elif durl[j] < 0:
                        self._skip("complete ('X') event with a negative dur", ch, i)
                    elif durl[j] >= TS_LIMIT:
                        self._skip("complete ('X') event with dur out of range", ch, i)
                    else:
                        keep.append(j)
            else:
                keep = range(len(xs))
            cats = [evs[i].cat for i in xs]
            for j in keep:
                groups[cats[j]].append(j)
        # event ids: one per `events` row, in input order
        ev_groups = []
        for cat, js in groups.items():
            table, kind = _CAT.get((cat or "").lower(), ("events", None))
            if table == "events":
                ev_groups.append((cat, kind, js))
        if instants or ev_groups:
            mark = bytearray(n)
            for i in instants:
                mark[i] = 1
            for _, _, js in ev_groups:
                for j in js:
                    mark[xs[j]] = 1
            cum = list(itertools.accumulate(mark))
            base = self._event_id - 1
            self._event_id += cum[-1]
        for cat, js in groups.items():
            table, kind = _CAT.get((cat or "").lower(), ("events", None))
            ci = [xs[j] for j in js]
            sub = [evs[i] for i in ci]
            t0 = ts.take(ci)
            d = dur.take(js)
            end = pc.add(t0, d)
            if table == "events":
                category = kind or (cat or "").lower() or "unknown"
                self._events(b, sub, [base + cum[i] for i in ci], t0, end, d, category,
                             bool(cat) and category in ("cpu_op", "user_annotation", "gpu_user_annotation"),
                             False)
            elif table == "kernels":
                self._kernels(b, sub, t0, end, d)
            elif table == "api_calls":
                self._api_calls(b, sub, t0, end, d, kind)
            else:  # memops, syncs: few rows
                self._few(b, table, kind, sub, t0, end, d)
        if instants:
            t0 = ts.take(instants)
            self._events(b, [evs[i] for i in instants], [base + cum[i] for i in instants], t0, t0,
                         pa.repeat(pa.scalar(0, pa.int64()), len(instants)), "instant", False, True)
        return True

    def _few(self, b, table, kind, sub, t0, end, d) -> None:
        """memops and syncs rows (few per trace), row by row."""
        args = self._args_many(sub)
        pids = _ints([e.pid for e in sub])[1]
        tids = _ints([e.tid for e in sub])[1]
        for ev, a, s_, e_, d_, pid, tid in zip(sub, args, t0.to_pylist(), end.to_pylist(),
                                              d.to_pylist(), pids, tids):
            if table == "memops":
                self._memop(b, ev, a, kind, s_, e_, d_, pid, tid)
            else:
                self._sync(b, ev, a, s_, e_, d_, pid, tid, None)

    def _args_many(self, sub: list) -> list:
        """The mapped args fields of many events: one decode call (per event if one is unusual)."""
        raws = [e.args or _NULL for e in sub]
        raws[0] = b"[" + raws[0]
        raws[-1] = bytes(raws[-1]) + b"]"
        try:
            out = _ARGS_LIST.decode(b",".join(raws))
        except (msgspec.ValidationError, msgspec.DecodeError):
            return [self._args(e, b"") for e in sub]
        return [a if a is not None else _NO_ARGS for a in out]

    def _events(self, b, sub, ids, t0, end, dur, category, with_args, instant) -> None:
        m = len(sub)
        pid, pidl, pid_kept = _ints([e.pid for e in sub])
        tid, tidl, tid_kept = _ints([e.tid for e in sub])
        if not (pid_kept and tid_kept):  # text pids/tids are kept in args: row by row
            for ev, eid, s_, e_, p, t in zip(sub, ids, t0.to_pylist(), end.to_pylist(), pidl, tidl):
                self._event(b, ev, None, s_, e_, p, t, category, eid, instant=instant)
            return
        ext = corr = None
        if with_args:
            args = self._args_many(sub)
            ext = _ints([a.external_id for a in args])[0]
            corr = _ints([a.correlation for a in args])[0]
        device = stream = None
        if category == "gpu_user_annotation":
            device, stream, pid, tid = pid, tid, None, None
        b["events"].add_columns(m, {
            "event_id": pa.array(ids, pa.int64()), "pid": pid, "tid": tid, "device_id": device,
            "stream_id": stream, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "name": [e.name for e in sub], "category": pa.repeat(pa.scalar(category), m),
            "external_id": ext, "correlation_id": corr,
            "is_instant": pa.repeat(pa.scalar(instant), m), "args": _args_texts(sub)})

    def _kernels(self, b, sub, t0, end, dur) -> None:
        m = len(sub)
        args = self._args_many(sub)
        pidl = _ints([e.pid for e in sub])[1]
        tidl = _ints([e.tid for e in sub])[1]
        extras: dict = {}
        for field, raw, conv, used in (
                ("pid", [e.pid for e in sub], pidl, [_int(a.device) if a.device is not None else p
                                                     for a, p in zip(args, pidl)]),
                ("tid", [e.tid for e in sub], tidl, [_int(a.stream) if a.stream is not None else t
                                                     for a, t in zip(args, tidl)])):
            for i in _lost_ids(raw, conv, used):
                extras.setdefault(i, {})[field] = raw[i]
        none3 = (None, None, None)
        grid = [a.grid if a.grid and len(a.grid) == 3 else none3 for a in args]
        block = [a.block if a.block and len(a.block) == 3 else none3 for a in args]
        names = [e.name for e in sub]
        b["kernels"].add_columns(m, {
            "device_id": _ints([a.device if a.device is not None else p for a, p in zip(args, pidl)])[0],
            "context_id": _ints([a.context for a in args])[0],
            "stream_id": _streams(_ints([a.stream if a.stream is not None else t
                                         for a, t in zip(args, tidl)])[0]),
            "start_ns": t0, "end_ns": end, "dur_ns": dur, "name": names,
            "short_name": self._short_names(names),
            "correlation_id": _ints([a.correlation for a in args])[0],
            "external_id": _ints([a.external_id for a in args])[0],
            "grid_x": [g[0] for g in grid], "grid_y": [g[1] for g in grid], "grid_z": [g[2] for g in grid],
            "block_x": [g[0] for g in block], "block_y": [g[1] for g in block],
            "block_z": [g[2] for g in block],
            "registers_per_thread": _ints([a.registers for a in args])[0],
            "shared_bytes": _ints([a.shared for a in args])[0], "args": _with_extras(_args_texts(sub), extras)})

    def _api_calls(self, b, sub, t0, end, dur, kind) -> None:
        m = len(sub)
        args = self._args_many(sub)
        names = [e.name for e in sub]
        if kind == "cuda_runtime":
            api = [("hip_runtime" if nm and nm.startswith("hip") else kind) for nm in names]
        else:
            api = pa.repeat(pa.scalar(kind), m)
        pid, pidl, _ = _ints([e.pid for e in sub])
        tid, tidl, _ = _ints([e.tid for e in sub])
        extras: dict = {}
        for field, raw, conv in (("pid", [e.pid for e in sub], pidl), ("tid", [e.tid for e in sub], tidl)):
            for i in _lost_ids(raw, conv):
                extras.setdefault(i, {})[field] = raw[i]
        b["api_calls"].add_columns(m, {
            "pid": pid, "tid": tid,
            "start_ns": t0, "end_ns": end, "dur_ns": dur, "name": names, "raw_name": names,
            "api": api, "correlation_id": _ints([a.correlation for a in args])[0],
            "external_id": _ints([a.external_id if a.external_id is not None else a.external_id_lc
                                  for a in args])[0],
            "args": _with_extras(_args_texts(sub), extras)})

    def _flows(self, b, phs, cats, ids, pids, tids, tss) -> None:
        """Flow endpoints in input order (`_flow`'s rules), given column-wise: phase, cat, id
        (as in the event), pid and tid (as `_int` makes them), ts (ns)."""
        self._add_flows(b, self._flow_rows(phs, cats, ids, pids, tids, tss))

    @staticmethod
    def _add_flows(b, cols) -> None:
        """The flow rows (8 lists: kind, id, start pid / tid / ns, end pid / tid / ns)."""
        if cols[0]:
            names = ("kind", "flow_id", "start_pid", "start_tid", "start_ns", "end_pid", "end_tid", "end_ns")
            cols = dict(zip(names, cols))
            cols["flow_id"] = _ints(cols["flow_id"])[0]
            b["flows"].add_columns(len(cols["kind"]), cols)

    def _flow_rows(self, phs, cats, ids, pids, tids, tss) -> tuple:
        """`_flows`' rows, and its changes to the open flows and the early ends (`_native`'s
        kineto_flows does the same in C, on columns)."""
        open_flows = self._open_flows
        pop = open_flows.pop
        lower: dict = {}
        for c in set(cats):
            lower[c] = (c or "").lower() or "flow"
        keys = list(zip([lower[c] for c in cats], ids))
        ends = list(zip(pids, tids, tss))
        restarted = []  # (key, start) of a start that never ended: a second 's' came
        linked = []     # (key, id, start or None, end)
        early = self._early_ends
        for ph, key, fid, end in zip(phs, keys, ids, ends):
            if ph == "s":
                start = pop(key, None)
                if start is not None:
                    restarted.append((key, fid, start))
                elif key in early and early[key][1][2] >= end[2]:  # its end came first
                    efid, eend = early.pop(key)
                    linked.append((key, efid, end, eend))
                    continue
                open_flows[key] = end
                continue
            start = pop(key, None)
            if ph == "t" and start is not None:  # step: end this link, start the next from here
                open_flows[key] = end
            if ph == "f" and start is None:  # an end before its start (in file order): wait for it
                prev = early.pop(key, None)
                if prev is not None:
                    linked.append((key, prev[0], None, prev[1]))
                early[key] = (fid, end)
                continue
            linked.append((key, fid, start, end))
        rows = [(k[0], fid, st, None) for k, fid, st in restarted] + [
            (k[0], fid, st, en) for k, fid, st, en in linked]
        if not rows:
            return ([],) * 8
        none3 = (None, None, None)
        kind, fid, st, en = zip(*rows)
        sp, stid, sts = zip(*[x or none3 for x in st])
        ep, etid, ets = zip(*[x or none3 for x in en])
        return tuple(map(list, (kind, fid, sp, stid, sts, ep, etid, ets)))

    def _sync(self, b, ev, args, ts, end, dur, pid, tid, extra) -> None:
        b["syncs"].add(
            device_id=_int(args.device) if args.device is not None else pid,
            context_id=_int(args.context), stream_id=_stream(args.stream if args.stream is not None else tid),
            start_ns=ts, end_ns=end, dur_ns=dur,
            sync_type=_SYNC_TYPES.get((args.sync_kind or ev.name or "").lower(), "unknown"),
            correlation_id=_int(args.correlation), event_id=_int(args.wait_event),
            args=self._args_text(ev, extra))


    def _decode_event(self, raw):
        """(event, extra fields, raw) or (None, None, raw) when the event is skipped."""
        try:
            return _EV.decode(raw), None, raw
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as e:
            if "UTF-8" not in str(e):
                fixed, n = _fix_surrogates(bytes(raw))
                if n:  # a lone surrogate escape: U+FFFD, counted like invalid UTF-8
                    self._utf8_repairs += n
                    return self._decode_event(msgspec.Raw(fixed))
                self.accounting.skip("malformed JSON event", bytes(raw))
                return None, None, raw
            text = bytes(raw).decode("utf-8", "replace")  # invalid bytes → U+FFFD, counted
            self._utf8_repairs += text.count("\ufffd")
            raw = msgspec.Raw(text.encode())
            try:
                return _EV.decode(raw), None, raw
            except msgspec.ValidationError:
                pass
        ev, extra = self._generic(raw)
        if ev is None:
            self.accounting.skip("event is not a JSON object with Chrome trace fields", bytes(raw))
        return ev, extra, raw

    @staticmethod
    def _generic(raw):
        """Fallback for events with unusual fields or types: keep every field."""
        try:
            d = _ANY.decode(raw)
        except msgspec.DecodeError:
            return None, None
        if not isinstance(d, dict):
            return None, None
        known = {f: d.pop(f) for f in _Event.__struct_fields__ if f in d}
        for f in ("ts", "dur", "args"):
            if f in known:
                known[f] = msgspec.Raw(msgspec.json.encode(known[f]))
        for f in ("name", "cat", "ph", "s", "bp"):
            if f in known and not isinstance(known[f], str):
                d[f"_{f}"] = known[f]
                known[f] = None if known[f] is None else str(known[f])
        for f in ("pid", "tid", "id"):
            if f in known and not isinstance(known[f], (int, str, type(None))):
                d[f"_{f}"] = known.pop(f)
        return _Event(**known), (d or None)

    def _route(self, b, ev: _Event, extra, raw, open_flows, begin_stack, counted_pids, event_id) -> int:
        acc = self.accounting
        ph = ev.ph
        if ph == "M":
            self._metadata(b, ev)
            return event_id
        ts_raw = bytes(ev.ts)
        if not ts_raw or ts_raw == b"null":
            acc.skip(f"'{ph}' event without ts", bytes(raw))
            return event_id
        try:
            ts = us_text_to_ns(ts_raw)
        except ValueError:
            acc.skip(f"'{ph}' event with a non-numeric ts", bytes(raw))
            return event_id
        if not -TS_LIMIT < ts < TS_LIMIT:
            acc.skip(f"'{ph}' event with ts out of range", bytes(raw))
            return event_id
        if self._first_ts is None:
            self._first_ts = ts
        if ph in ("s", "f", "t"):
            self._flow(b, ev, ts, open_flows)
            return event_id
        if ph == "C":
            self._counter(b, ev, ts, raw)
            return event_id
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ph in ("i", "I", "n"):
            return self._event(b, ev, extra, ts, ts, pid, tid, "instant", event_id, instant=True)
        if ph == "B":
            begin_stack.setdefault((ev.pid, ev.tid), []).append((ev, ts))
            return event_id
        if ph == "E":
            stack = begin_stack.get((ev.pid, ev.tid))
            if not stack:
                acc.skip("E (end) event without a matching B (begin) event", bytes(raw))
                return event_id
            bev, bts = stack.pop()
            return self._event(b, bev, extra, bts, ts, pid, tid, None, event_id)
        if ph != "X":
            acc.skip(f"unsupported phase '{ph}'", bytes(raw))
            return event_id
        dur_raw = bytes(ev.dur)
        if not dur_raw or dur_raw == b"null":
            acc.skip("complete ('X') event without dur", bytes(raw))
            return event_id
        try:
            dur = us_text_to_ns(dur_raw)
        except ValueError:
            acc.skip("complete ('X') event with a non-numeric dur", bytes(raw))
            return event_id
        if dur < 0:
            acc.skip("complete ('X') event with a negative dur", bytes(raw))
            return event_id
        if dur >= TS_LIMIT:
            acc.skip("complete ('X') event with dur out of range", bytes(raw))
            return event_id
        end = ts + dur
        cat = (ev.cat or "").lower()
        table, kind = _CAT.get(cat, ("events", None))
        if table == "events":
            return self._event(b, ev, extra, ts, end, pid, tid, kind or cat or "unknown", event_id)
        args = self._args(ev, raw)
        if table == "kernels":
            self._kernel(b, ev, args, ts, end, dur, pid, tid, extra)
        elif table == "memops":
            self._memop(b, ev, args, kind, ts, end, dur, pid, tid, extra)
        elif table == "api_calls":
            api = kind
            if api == "cuda_runtime" and (ev.name or "").startswith("hip"):
                api = "hip_runtime"
            ex = dict(extra or {})
            for field, raw, conv in (("pid", ev.pid, pid), ("tid", ev.tid, tid)):
                if raw is not None and conv is None:
                    ex[field] = raw
            b["api_calls"].add(
                pid=pid, tid=tid, start_ns=ts, end_ns=end, dur_ns=dur, name=ev.name, raw_name=ev.name,
                api=api, correlation_id=_int(args.correlation),
                external_id=_int(args.external_id if args.external_id is not None else args.external_id_lc),
                args=self._args_text(ev, ex or None))
        elif table == "syncs":
            self._sync(b, ev, args, ts, end, dur, pid, tid, extra)
        return event_id

    def _args(self, ev: _Event, raw) -> _Args:
        a = bytes(ev.args)
        if not a or a == b"null":
            return _Args()
        try:
            return _ARGS.decode(a)
        except msgspec.ValidationError:
            try:
                d = _ANY.decode(a)
            except msgspec.DecodeError:
                d = None
            if not isinstance(d, dict):  # kept verbatim in the args column; no fields to map
                return _Args()
            out = _Args()
            for f in _Args.__struct_fields__:
                key = _Args.__struct_encode_fields__[_Args.__struct_fields__.index(f)]
                v = d.get(key)
                if f in ("grid", "block"):
                    v = [_int(x) for x in v] if isinstance(v, list) else None
                elif f in ("registers", "shared", "wait_event"):
                    v = _int(v)
                setattr(out, f, v)
            return out

    @staticmethod
    def _args_text(ev: _Event, extra) -> str | None:
        a = bytes(ev.args)
        if extra:
            d = _ANY.decode(a) if a and a != b"null" else {}
            if not isinstance(d, dict):
                d = {"args": d}
            d.update({f"_{k}" if not k.startswith("_") else k: v for k, v in extra.items()})
            return msgspec.json.encode(d).decode()
        if not a or a == b"null" or a == b"{}":
            return None
        return a.decode("utf-8", "replace")

    def _kernel(self, b, ev, a: _Args, ts, end, dur, pid, tid, extra=None):
        g = a.grid if a.grid and len(a.grid) == 3 else (None, None, None)
        bl = a.block if a.block and len(a.block) == 3 else (None, None, None)
        name = ev.name
        extra = {**(extra or {}), **_gpu_id_extras(ev, a, pid, tid)}
        b["kernels"].add(
            device_id=_int(a.device) if a.device is not None else pid,
            context_id=_int(a.context), stream_id=_stream(a.stream if a.stream is not None else tid),
            start_ns=ts, end_ns=end, dur_ns=dur, name=name, short_name=short_kernel_name(name),
            correlation_id=_int(a.correlation), external_id=_int(a.external_id),
            grid_x=g[0], grid_y=g[1], grid_z=g[2], block_x=bl[0], block_y=bl[1], block_z=bl[2],
            registers_per_thread=_int(a.registers), shared_bytes=_int(a.shared),
            args=self._args_text(ev, extra or None))

    def _memop(self, b, ev, a: _Args, kind, ts, end, dur, pid, tid, extra=None):
        name = ev.name or ""  # for the patterns; the column keeps ev.name as given
        copy_kind = src = dst = None
        if kind == "memcpy":
            m = _MEMCPY.search(name)
            if m:
                copy_kind = _COPY_KINDS.get(m.group(1).lower(), m.group(1))
                src = m.group(2) and m.group(2).lower()
                dst = m.group(3) and m.group(3).lower()
            elif a.kind:
                copy_kind = _COPY_KINDS.get(a.kind.lower(), a.kind)
            copy_kind = copy_kind or "unknown"
        else:
            m = _MEMSET.search(name)
            dst = m.group(1).lower() if m else None
        b["memops"].add(
            device_id=_int(a.device) if a.device is not None else pid,
            context_id=_int(a.context), stream_id=_stream(a.stream if a.stream is not None else tid),
            start_ns=ts, end_ns=end, dur_ns=dur, kind=kind, copy_kind=copy_kind, src_kind=src,
            dst_kind=dst, bytes=_int(a.bytes), name=ev.name, correlation_id=_int(a.correlation),
            external_id=_int(a.external_id),
            args=self._args_text(ev, {**(extra or {}), **_gpu_id_extras(ev, a, pid, tid)} or None))

    def _event(self, b, ev, extra, ts, end, pid, tid, category, event_id, instant=False) -> int:
        cat = category or (ev.cat or "").lower() or "unknown"
        if extra is None and (ev.pid is not None and pid is None or ev.tid is not None and tid is None):
            extra = {}
        if extra is not None:  # keep non-numeric pid/tid
            if ev.pid is not None and pid is None:
                extra["pid"] = ev.pid
            if ev.tid is not None and tid is None:
                extra["tid"] = ev.tid
        device = stream = None
        if cat == "gpu_user_annotation":
            device, stream, pid, tid = pid, tid, None, None
        a = None
        if ev.cat and cat in ("cpu_op", "user_annotation", "gpu_user_annotation"):
            a = self._args(ev, b"")
        b["events"].add(
            event_id=event_id, pid=pid, tid=tid, device_id=device, stream_id=stream, start_ns=ts,
            end_ns=end, dur_ns=end - ts, name=ev.name, category=cat,
            external_id=_int(a.external_id) if a else None,
            correlation_id=_int(a.correlation) if a else None,
            is_instant=instant, args=self._args_text(ev, extra))
        return event_id + 1

    def _flow(self, b, ev, ts, open_flows):
        key = ((ev.cat or "").lower() or "flow", ev.id)
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ev.ph == "s":
            if key in open_flows:  # a second start: the first one never ended
                spid, stid, sts = open_flows.pop(key)
                b["flows"].add(flow_id=_int(ev.id), kind=key[0], start_pid=spid, start_tid=stid,
                               start_ns=sts)
            elif key in self._early_ends and self._early_ends[key][1][2] >= ts:  # its end came first
                efid, (epid, etid, ets) = self._early_ends.pop(key)
                b["flows"].add(flow_id=_int(efid), kind=key[0], start_pid=pid, start_tid=tid,
                               start_ns=ts, end_pid=epid, end_tid=etid, end_ns=ets)
                return
            open_flows[key] = (pid, tid, ts)
            return
        start = open_flows.pop(key, None)
        if ev.ph == "t" and start is not None:  # step: end this link, start the next from here
            open_flows[key] = (pid, tid, ts)
        if ev.ph == "f" and start is None:  # an end before its start (in file order): wait for it
            prev = self._early_ends.pop(key, None)
            if prev is not None:
                efid, (epid, etid, ets) = prev
                b["flows"].add(flow_id=_int(efid), kind=key[0], end_pid=epid, end_tid=etid, end_ns=ets)
            self._early_ends[key] = (ev.id, (pid, tid, ts))
            return
        spid, stid, sts = start if start else (None, None, None)
        b["flows"].add(flow_id=_int(ev.id), kind=key[0], start_pid=spid, start_tid=stid, start_ns=sts,
                       end_pid=pid, end_tid=tid, end_ns=ts)

    def _counter(self, b, ev, ts, raw):
        try:
            d = _ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            d = None
        if not isinstance(d, dict) or not d:
            self.accounting.skip("counter ('C') event without numeric args", bytes(raw))
            return
        pid = _int(ev.pid)
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                b["counters"].add(pid=pid, name=f"{ev.name}.{k}", ts_ns=ts, value=float(v))
            else:
                self.accounting.skip("counter ('C') value that is not a number", bytes(raw))

    def _metadata(self, b, ev: _Event):
        try:
            a = _ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            a = {}
        a = a if isinstance(a, dict) else {}
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ev.name == "process_name":
            b["processes"].add(pid=pid, name=a.get("name"))
        elif ev.name == "process_labels":
            b["processes"].add(pid=pid, labels=str(a.get("labels")))
        elif ev.name == "thread_name":
            b["threads"].add(pid=pid, tid=tid, name=a.get("name"))
        else:  # sort indices and other display hints
            self.accounting.skip(f"metadata event '{ev.name}' (display hint, not kept)", by_design=True)

    def _devices(self, b, props):
        if not isinstance(props, list):
            return
        for p in props:
            if not isinstance(p, dict):
                continue
            name = p.get("name")
            major, minor = p.get("computeMajor"), p.get("computeMinor")
            amd = bool(name) and any(s in name for s in ("AMD", "Instinct", "Radeon"))
            rest = {k: v for k, v in p.items() if k not in (
                "id", "name", "computeMajor", "computeMinor", "numSms", "totalGlobalMem",
                "maxThreadsPerMultiprocessor", "warpSize")}
            b["devices"].add(
                device_id=_int(p.get("id")), name=name, vendor="amd" if amd else "nvidia",
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=_int(p.get("numSms")), total_memory_bytes=_int(p.get("totalGlobalMem")),
                max_threads_per_sm=_int(p.get("maxThreadsPerMultiprocessor")),
                warp_size=_int(p.get("warpSize")),
                args=msgspec.json.encode(rest).decode() if rest else None)
        yield from b.drain()

    def _source_info(self, path: Path, meta: dict) -> dict:
        dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        rank = _int(dist.get("rank"))
        if rank is None:
            m = _RANK_IN_NAME.search(path.name)
            rank = int(m.group(1)) if m else None
        base = _int(meta.get("baseTimeNanoseconds"))
        first = self._first_ts
        if first is not None and first > 10**17:  # ts were epoch µs (> ~1973 in ns)
            origin, offset = "unix_epoch", 0
        elif base is not None:
            origin, offset = "base_time", base
        else:
            origin, offset = "unknown", None
        versions = [f"{k}={meta[k]}" for k in ("cupti_version", "cuda_runtime_version",
                                                "cuda_driver_version", "roctracer_version",
                                                "hip_runtime_version") if k in meta]
        return {
            "format_version": str(meta["schemaVersion"]) if "schemaVersion" in meta else None,
            "tool_version": " ".join(versions) or None,
            "host": meta.get("hostname") if isinstance(meta.get("hostname"), str) else None,
            "rank": rank,
            "world_size": _int(dist.get("world_size")),
            "clock_origin": origin,
            "clock_offset_ns": offset,
            "metadata": meta,
        }
