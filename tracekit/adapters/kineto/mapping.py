"""How a Kineto event's raw fields map to the schema's columns: the one definition.

Three readers apply it (tracekit/adapters/kineto/): one event at a time (`row_columns`: B/E
pairs, events of unusual shapes), column-wise on decoded events (`list_columns`: the Python
path) and column-wise on the compiled scanner's columns (`scanned_columns`).  None of them
names a field or a column: they evaluate the tables below, so a new column is one line here.

* `ARGS`: the fields of an event's ``args`` object that columns read: the decoded struct of
  every path is made from it (decode.py), and the C scanner's columns for them are named here
  (``scan``); tests/adapters/test_kineto_mapping.py checks the scanner against this list (a field it
  does not scan makes the tables that read it go the Python way: `scannable`).
* `CAT`: the event's ``cat`` (lower-cased) -> the table and the category / kind of its rows.
* `COLUMNS`: per table, each column's sources, the first one present (not null) taken, and its
  conversion.  `KEEP_RAW`: the raw pid / tid kept in ``args`` (as ``_raw_pid`` / ``_raw_tid``) when the
  column named does not hold it (not an id, or another value taken first).
* the derived columns: `api_of`, `memop_kinds`, `sync_type`, `category_of`, `ARGS_CATEGORIES`,
  `GPU_TRACK_CATEGORIES`.

Times (ts / dur, exact ns) and their skip reasons are decode.py's; flows are flows.py's.
"""

from __future__ import annotations

from functools import cache

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..fit import fit

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Arg:
    """A field of the args object: its attribute on the decoded struct, its raw key, its type
    ("id": an int or a text id like '0x1f'; "int": an int; "int3": a list of ints, read as x, y,
    z when it has three; "text": a string), and the scanner's columns holding it (none: the
    scanner checks its type only, or does not know it)."""
    attr: str
    key: str
    type: str
    scan: tuple = ()


ARGS = (
    Arg("device", "device", "id", ("device",)),
    Arg("context", "context", "id", ("context",)),
    Arg("stream", "stream", "id", ("stream",)),
    Arg("correlation", "correlation", "id", ("correlation",)),
    Arg("external_id", "External id", "id", ("external_id",)),
    Arg("external_id_lc", "external id", "id", ("external_id_lc",)),
    Arg("grid", "grid", "int3", ("grid_x", "grid_y", "grid_z")),
    Arg("block", "block", "int3", ("block_x", "block_y", "block_z")),
    Arg("registers", "registers per thread", "int", ("registers",)),
    Arg("shared", "shared memory", "int", ("shared",)),
    Arg("bytes", "bytes", "id"),
    Arg("kind", "kind", "text"),
    Arg("sync_kind", "cuda_sync_kind", "text"),
    Arg("wait_event", "wait_on_cuda_event_id", "int"),
)
ARG = {a.attr: a for a in ARGS}

# cat (lower-cased) -> (table, normalized category / kind); aliases cover the 2021 formats.
# A cat not here is an `events` row of category cat (lower-cased), or 'unknown'.
CAT = {
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


def table_of(cat) -> tuple[str, str | None]:
    """The table of a complete ('X') event's rows and its category / kind."""
    return CAT.get((cat or "").lower(), ("events", None))


def category_of(cat, kind) -> str:
    """The `events.category` of an event of that cat (kind: `table_of`'s)."""
    return kind or (cat or "").lower() or "unknown"


# events of these categories have their args' external / correlation ids read into columns
ARGS_CATEGORIES = ("cpu_op", "user_annotation", "gpu_user_annotation")
# events of these categories are on a GPU track: their pid / tid are the device / stream
GPU_TRACK_CATEGORIES = ("gpu_user_annotation",)


def with_args(cat, category) -> bool:
    return bool(cat) and category in ARGS_CATEGORIES


@dataclass(frozen=True)
class Col:
    """A column's sources, the first present (not null) one taken: an event field ("pid",
    "tid", "name"), or an args field ("args.<attr>", "args.<attr>.<i>" for item i of an int3);
    and its conversion: "id" (int64 by `decode._int`), "stream" (an id; the 'no stream' markers
    4294967295 / -1 NULL), "raw" (as given)."""
    src: tuple
    conv: str = "id"


_GPU = {"device_id": Col(("args.device", "pid")), "context_id": Col(("args.context",)),
        "stream_id": Col(("args.stream", "tid"), "stream")}
_IDS = {"correlation_id": Col(("args.correlation",)), "external_id": Col(("args.external_id",))}
_NAME = Col(("name",), "raw")

COLUMNS = {
    "kernels": {**_GPU, "name": _NAME, **_IDS,
                **{f"{g}_{x}": Col((f"args.{g}.{i}",), "raw")
                   for g in ("grid", "block") for i, x in enumerate("xyz")},
                "registers_per_thread": Col(("args.registers",)), "shared_bytes": Col(("args.shared",))},
    "memops": {**_GPU, "bytes": Col(("args.bytes",)), "name": _NAME, **_IDS},
    "syncs": {**_GPU, "correlation_id": Col(("args.correlation",)), "event_id": Col(("args.wait_event",))},
    "api_calls": {"pid": Col(("pid",)), "tid": Col(("tid",)), "name": _NAME, "raw_name": _NAME,
                  "correlation_id": Col(("args.correlation",)),
                  "external_id": Col(("args.external_id", "args.external_id_lc"))},
    # the args columns only for ARGS_CATEGORIES; pid / tid go to device_id / stream_id on GPU tracks
    "events": {"pid": Col(("pid",)), "tid": Col(("tid",)), "name": _NAME, **_IDS},
}

# raw event field -> the column that must hold it; else it is kept in args as _<field>
KEEP_RAW = {
    "kernels": {"pid": "device_id", "tid": "stream_id"},
    "memops": {"pid": "device_id", "tid": "stream_id"},
    "syncs": {},
    "api_calls": {"pid": "pid", "tid": "tid"},
    "events": {"pid": "pid", "tid": "tid"},
}


def api_of(kind: str, name) -> str:
    """`api_calls.api`: the cat's kind; HIP calls logged under cuda_runtime are 'hip_runtime'."""
    if kind == "cuda_runtime" and name and name.startswith("hip"):
        return "hip_runtime"
    return kind


_MEMCPY = re.compile(r"memcpy\s+([A-Za-z]+)\s*(?:\(\s*(\w+)\s*->\s*(\w+)\s*\))?", re.IGNORECASE)
_MEMSET = re.compile(r"memset\s*\(\s*(\w+)\s*\)", re.IGNORECASE)
_COPY_KINDS = {"htod": "HtoD", "dtoh": "DtoH", "dtod": "DtoD", "htoh": "HtoH", "ptop": "PtoP",
               "dtop": "PtoP", "ptod": "PtoP", "htoa": "HtoA", "atoh": "AtoH", "atoa": "AtoA",
               "atod": "AtoD", "dtoa": "DtoA"}


def memop_kinds(kind: str, name, args_kind) -> tuple:
    """(copy_kind, src_kind, dst_kind) of a memcpy / memset from its name ('Memcpy DtoH
    (Device -> Pageable)', 'Memset (Device)') or args.kind."""
    name = name or ""
    copy_kind = src = dst = None
    if kind == "memcpy":
        m = _MEMCPY.search(name)
        if m:
            copy_kind = _COPY_KINDS.get(m.group(1).lower(), m.group(1))
            src = m.group(2) and m.group(2).lower()
            dst = m.group(3) and m.group(3).lower()
        elif args_kind:
            copy_kind = _COPY_KINDS.get(args_kind.lower(), args_kind)
        copy_kind = copy_kind or "unknown"
    else:
        m = _MEMSET.search(name)
        dst = m.group(1).lower() if m else None
    return copy_kind, src, dst


_SYNC_TYPES = {"stream sync": "stream_sync", "event sync": "event_sync",
               "context sync": "context_sync", "stream wait event": "stream_wait_event"}


def sync_type(sync_kind, name) -> str:
    return _SYNC_TYPES.get((sync_kind or name or "").lower(), "unknown")


# -- the conversions ----------------------------------------------------------------------------

def as_int(v) -> int | None:
    """An id as int64, or None (hex strings '0x1f' accepted; values beyond int64 -> None)."""
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


_STREAM_NONE = (4294967295, -1)
_STREAM_NONE_ARR = pa.array(_STREAM_NONE, pa.int64())


def _stream(v) -> int | None:
    n = as_int(v)
    return None if n in _STREAM_NONE else n


def as_ints(vals: list) -> tuple[pa.Array, list, bool]:
    """Ids with `as_int`'s rules: (int64 array, the values as a list, whether every non-null value
    was kept).  What fits an int64 is adapters/fit.py's one rule (`fit`: one C-level conversion
    when all fit, the usual case); `as_int` reads the others (id text such as "12" or "0x1f")."""
    arr, bad = fit(vals, pa.int64())
    if not bad:
        return arr, vals, True
    conv = list(vals)
    for i in bad:
        conv[i] = as_int(vals[i])
    kept = all(conv[i] is not None or vals[i] is None for i in bad)
    return pa.array(conv, pa.int64()), conv, kept


def _streams(arr: pa.Array) -> pa.Array:
    """`_stream` on an int64 array: the 'no stream' markers become NULL."""
    if not len(arr):
        return arr
    return pc.if_else(pc.is_in(arr, value_set=_STREAM_NONE_ARR), pa.scalar(None, pa.int64()), arr)


# -- the evaluators ----------------------------------------------------------------------------

def _parse(src: str) -> tuple:
    """("ev", field, None) | ("args", attr, item or None)"""
    if not src.startswith("args."):
        return ("ev", src, None)
    parts = src.split(".")
    return ("args", parts[1], int(parts[2]) if len(parts) == 3 else None)


_PARSED = {t: {c: tuple(_parse(s) for s in col.src) for c, col in cols.items()} for t, cols in COLUMNS.items()}


def _raw(p, ev, a):
    where, attr, item = p
    if where == "ev":
        return getattr(ev, attr)
    if a is None:
        return None
    v = getattr(a, attr)
    if item is not None:
        return v[item] if v and len(v) == 3 else None
    return v


def _first(ps, ev, a):
    for p in ps:
        v = _raw(p, ev, a)
        if v is not None:
            return v
    return None


def row_columns(table: str, ev, a, extra: dict | None = None) -> tuple[dict, dict | None]:
    """One event's mapped columns and the raw fields to keep in args (``extra`` first, then
    `KEEP_RAW`'s), or None.  ``a``: its decoded args (None: args not read)."""
    out = {}
    for c, col in COLUMNS[table].items():
        v = _first(_PARSED[table][c], ev, a)
        out[c] = v if col.conv == "raw" else _stream(v) if col.conv == "stream" else as_int(v)
    keep = dict(extra) if extra else {}
    for field, c in KEEP_RAW[table].items():
        raw = getattr(ev, field)
        if raw is None:
            continue
        conv = as_int(raw)
        if conv is None or conv != as_int(_first(_PARSED[table][c], ev, a)):
            keep[field] = raw
    return out, keep or None


def _raws(ps, evs, args) -> list:
    """`_first` of many events (the usual one-source cases without a call per row)."""
    if len(ps) == 1:
        where, attr, item = ps[0]
        if where == "ev":
            return [getattr(e, attr) for e in evs]
        if item is None:
            return [getattr(a, attr) if a is not None else None for a in args]
    return [_first(ps, e, a) for e, a in zip(evs, args)]


def list_columns(table: str, evs: list, args: list | None) -> tuple[dict, dict]:
    """The mapped columns of many decoded events (lists / Arrow arrays) and {row: {field: raw}}
    of the raw fields to keep in args.  ``args``: their decoded args (None: not read)."""
    out = {}
    ids = {}  # column -> its raw values (before conversion), for KEEP_RAW
    for c, col in COLUMNS[table].items():
        ps = _PARSED[table][c]
        if args is None and all(p[0] == "args" for p in ps):
            out[c] = None
            continue
        raws = _raws(ps, evs, args if args is not None else [None] * len(evs))
        ids[c] = raws
        if col.conv == "raw":
            out[c] = raws
        else:
            arr = as_ints(raws)[0]
            out[c] = _streams(arr) if col.conv == "stream" else arr
    extras: dict = {}
    for field, c in KEEP_RAW[table].items():
        raw = [getattr(e, field) for e in evs]
        conv = as_ints(raw)[1]
        if c == field:  # the column is the field: kept when it is not an id
            lost = [i for i, (r, v) in enumerate(zip(raw, conv)) if r is not None and v is None]
        else:
            lost = [i for i, (r, v, u) in enumerate(zip(raw, conv, ids[c]))
                    if r is not None and (v is None or v != as_int(u))]
        for i in lost:
            extras.setdefault(i, {})[field] = raw[i]
    return out, extras


def scannable(table: str, scanned: set) -> bool:
    """Whether the scanner's columns (names in ``scanned``) hold every source of the table."""
    for ps in _PARSED[table].values():
        for where, attr, item in ps:
            name = attr if where == "ev" else (ARG[attr].scan[item or 0] if ARG[attr].scan else None)
            if name not in scanned:
                return False
    return True


def _scan_name(p) -> str:
    where, attr, item = p
    return attr if where == "ev" else ARG[attr].scan[item or 0]


@cache
def scanned_sources(table: str, with_args: bool = True) -> tuple[str, ...]:
    """The scanner's columns that `scanned_columns` reads for ``table``: the ones to gather."""
    names: list[str] = []
    for k in COLUMNS[table]:
        ps = _PARSED[table][k]
        if not with_args and all(p[0] == "args" for p in ps):
            continue
        names += [_scan_name(p) for p in ps]
    for field, k in KEEP_RAW[table].items():
        if k != field:
            names += [field] + [_scan_name(p) for p in _PARSED[table][k]]
    return tuple(dict.fromkeys(names))


def scanned_columns(table: str, c: dict, with_args: bool = True) -> tuple[dict, dict]:
    """The mapped columns of scanned events, ``c`` the scanner's columns gathered at their rows
    (`scanned_sources` names the ones read), and {row: {field: raw}} of the raw fields to keep in
    args.  The scanner's pids / tids are ids (text ones go the Python way), so only a GPU table
    keeps one (another id first)."""
    out = {}
    for k, col in COLUMNS[table].items():
        ps = _PARSED[table][k]
        if not with_args and all(p[0] == "args" for p in ps):
            out[k] = None
            continue
        arrs = [c[_scan_name(p)] for p in ps]
        v = arrs[0] if len(arrs) == 1 else pc.coalesce(*arrs)
        out[k] = _streams(v) if col.conv == "stream" else v
    extras: dict = {}
    for field, k in KEEP_RAW[table].items():
        if k == field:
            continue
        raw = c[field]
        ps = _PARSED[table][k]
        arrs = [c[_scan_name(p)] for p in ps]
        used = arrs[0] if len(arrs) == 1 else pc.coalesce(*arrs)
        differ = pc.fill_null(pc.not_equal(raw, used), False)
        if pc.any(differ).as_py():
            vals = raw.to_pylist()
            for i in pc.indices_nonzero(differ).to_pylist():
                extras.setdefault(i, {})[field] = vals[i]
    return out, extras


def by_name(fn, names: pa.Array) -> pa.Array:
    """``fn(name)`` for each name of an Arrow string array (None too), worked out once per
    distinct name."""
    enc = names.dictionary_encode(null_encoding="encode")
    return pa.array([fn(n) for n in enc.dictionary.to_pylist()], pa.string()).take(enc.indices)
