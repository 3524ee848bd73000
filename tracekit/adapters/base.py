"""What every adapter shares: the row builders that turn rows into Arrow record batches of the
unified schema, the accounting of converted and skipped rows, and the user-facing error type.

An adapter is a class with ``FORMAT`` and a ``read(path, source_id, progress)`` generator that
yields ``(table_name, pyarrow.RecordBatch)`` pairs and fills ``self.source`` (the `sources` row
fields it knows) and ``self.accounting`` while it goes.  Adapters never touch DuckDB.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema

BATCH_ROWS = 65_536

Progress = Callable[[int, int], None]  # (done, total) in adapter-defined units (bytes, rows)


class TraceError(Exception):
    """A problem with the input that the user must fix; printed as one line, no traceback."""

    def __init__(self, path, what: str, todo: str = ""):
        self.path, self.what, self.todo = str(path), what, todo
        super().__init__(self.one_line())

    def one_line(self) -> str:
        from ..names import shown  # a file name may hold bytes that are not UTF-8, or control characters

        msg = f"{shown(self.path)}: {self.what}"
        return f"{msg}; {self.todo}" if self.todo else msg


class Accounting:
    """Rows converted per table, rows skipped per reason (with one example each), and values
    repaired per reason (the row is kept, a value changed: see "one rule" below)."""

    def __init__(self) -> None:
        self.converted: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.by_design: set[str] = set()  # reasons that lose nothing of the trace's content
        self.repairs: Counter[str] = Counter()

    def repair(self, reason: str, n: int = 1) -> None:
        """Count ``n`` values changed to keep their rows (a value that does not fit its column,
        invalid UTF-8 replaced, a name id not found, ...).  Every adapter reports them the same
        way: ``sources.metadata.tracekit_repairs`` ({reason: count}, see ``Adapter.source``) and
        the convert summary line."""
        if n:
            self.repairs[reason] += n

    def misfits(self, table: str, name: str, type: pa.DataType, n: int, kept: bool) -> None:
        """Count ``n`` values of ``table``'s ``name`` (an input field or a column) that did not
        fit a column of ``type``, under the one reason text the rule gives them."""
        what = ("values that are not text written as their text" if pa.types.is_string(type)
                else f"values that do not fit {_TYPE_WORDS.get(type, str(type))} read as NULL")
        where = f", the raw value kept in args.{RAW_PREFIX}{name}" if kept else ""
        self.repair(f"{table}.{name}: {what}{where}", n)

    def skip(self, reason: str, example=None, n: int = 1, by_design: bool = False) -> None:
        """Count input rows not converted. ``by_design``: rows left out on purpose that hold
        nothing of the trace's content (display hints, the host's idle processes, tracing
        markers); the others are data that could not be converted (--strict fails on those)."""
        self.skipped[reason] += n
        if by_design:
            self.by_design.add(reason)
        if reason not in self.examples and example is not None:
            text = example if isinstance(example, str) else _json_text(example)
            self.examples[reason] = text[:300]

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def lost(self) -> Counter[str]:
        """The skipped rows that were data (not by design), per reason."""
        return Counter({r: n for r, n in self.skipped.items() if r not in self.by_design})


def _json_text(obj) -> str:
    try:
        return orjson.dumps(obj, default=str).decode()
    except TypeError:
        return repr(obj)


def dumps_args(obj) -> str | None:
    """JSON text of an args dict (None for empty). Ints beyond int64 survive as text."""
    if not obj:
        return None
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return orjson.dumps(obj, default=str).decode()


# -- one rule for a value its column cannot hold ----------------------------------------------
#
# A value *fits* a column when the column holds it exactly (``fit`` below says what that means per
# type).  One that does not:
#  * in a column the row can do without: the column gets NULL (a text column: the value's text),
#    the raw value is kept in the row's ``args`` as ``_raw_<name>`` (tables with args; <name> is
#    the input's field where the adapter knows it, else the column), and the value is counted in
#    ``Accounting.repairs`` ("<table>.<name>: values that do not fit ...", ``Accounting.misfits``);
#  * in a column the row cannot do without (``REQUIRED``: the time that places it, ncu's result
#    id that ties its rows together): the row is skipped and counted in ``skipped_rows`` with the
#    reason (nsys: "row with a start that is not an integer").
# ``fit`` finds the values, ``with_raw_args`` keeps them, ``Accounting.misfits`` counts them;
# ``TableBuilder`` applies the rule to every row it builds, the nsys reader to every cell it reads
# (``NsysAdapter._ints`` / ``_batch`` / ``_strs``), ncu to its identity cells (their text stays an
# ``ncu_metrics`` row: ncu_kernels has no args).
#
# For an adapter's own converter (e.g. a column of ids read from JSON):
#     arr, bad = fit(values, pa.int64())           # exact; bad: positions now NULL
#     if bad:
#         args = with_raw_args(args, {i: {RAW_PREFIX + "pid": values[i]} for i in bad})
#         accounting.misfits("kernels", "pid", pa.int64(), len(bad), kept=True)

RAW_PREFIX = "_raw_"

#: the columns a row cannot do without, per table (the others may be NULL)
REQUIRED: dict[str, tuple[str, ...]] = {
    "kernels": ("start_ns",), "memops": ("start_ns",), "api_calls": ("start_ns",),
    "events": ("start_ns",), "syncs": ("start_ns",), "counters": ("ts_ns", "value"),
    "memory_events": ("ts_ns",), "ncu_kernels": ("id",), "ncu_metrics": ("id",), "ncu_rules": ("id",),
}

_TYPE_WORDS = {pa.int32(): "an int32", pa.int64(): "an int64", pa.float64(): "a double",
               pa.string(): "text", pa.bool_(): "a boolean"}
_MISFIT = (OverflowError, TypeError, ValueError, pa.ArrowInvalid, pa.ArrowTypeError,
           pa.ArrowNotImplementedError)
_NONE = type(None)


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1


def _fit_value(v, t: pa.DataType):
    """(fits, the value for the column).  Integers: ints in range (not bools) and floats with an
    integral value in range (``2.0`` -> 2; ``1.5``, NaN, inf do not fit); doubles: ints up to
    2**53 and floats (not bools); booleans: bools; text: str (anything else does not fit, and its
    text, bytes decoded as UTF-8 with U+FFFD, goes in the column)."""
    if v is None:
        return True, None
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
        if type(v) is int:
            return (True, v) if lo <= v <= hi else (False, None)
        if type(v) is float and v.is_integer() and lo <= v <= hi:
            return True, int(v)
        return False, None
    if pa.types.is_floating(t):
        if type(v) is float:
            return True, v
        if type(v) is int and -2**53 <= v <= 2**53:
            return True, float(v)
        return False, None
    if pa.types.is_boolean(t):
        return (True, v) if type(v) is bool else (False, None)
    if pa.types.is_string(t):
        if type(v) is str:
            return True, v
        if isinstance(v, (bytes, bytearray, memoryview)):
            return False, bytes(v).decode("utf-8", "replace")
        return False, str(v)
    return False, None


def fits(value, type: pa.DataType) -> bool:
    """Whether one value fits a column of ``type`` by ``fit``'s rule (None fits)."""
    return _fit_value(value, type)[0]


def fit(values, type: pa.DataType) -> tuple[pa.Array, list[int]]:
    """Fit a column of values to an Arrow column type, exactly: no value is truncated, wrapped or
    rounded on the way (pyarrow alone truncates ``1.5`` to 1 in an integer column).

    ``values``: a pyarrow Array / ChunkedArray (any type) or a Python sequence.  Returns ``(array,
    bad)``: ``array`` of ``type`` and of the same length, and ``bad``, the positions (ascending) of
    the values that did not fit: NULL in ``array`` (a text column: the value's text).  What fits:
    see ``_fit_value``; an Arrow array fits when a safe cast succeeds (integers out of a narrower
    column's range do not fit).  The caller applies the rule: ``Accounting.misfits`` to count,
    ``with_raw_args`` to keep the raw values (``values[i]`` for ``i`` in ``bad``), or a skip for a
    ``REQUIRED`` column.  Cost: one C-level conversion when everything fits (plus a scan of the
    Python types of a list), value by value otherwise."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if values.type == type:
            return values, []
        if (pa.types.is_string(type) and not pa.types.is_null(values.type) and not (
                pa.types.is_string(values.type) or pa.types.is_large_string(values.type))) or (
                pa.types.is_boolean(values.type) and not pa.types.is_boolean(type)):
            values = values.to_pylist()  # numbers or bytes as text, bools as numbers: value by value
        else:
            try:
                return values.cast(type), []
            except _MISFIT:
                pass
            if pa.types.is_integer(type) and pa.types.is_integer(values.type):
                lo, hi = _int_range(type)
                ok = pc.and_(pc.greater_equal(values, lo), pc.less_equal(values, hi))
                bad = pc.indices_nonzero(pc.invert(ok.fill_null(True))).to_pylist()
                return pc.if_else(ok, values, pa.scalar(None, values.type)).cast(type), bad
            values = values.to_pylist()
    types = set(map(type_of, values))
    plain = {int} if pa.types.is_integer(type) else {int, float} if pa.types.is_floating(type) \
        else {bool} if pa.types.is_boolean(type) else {str} if pa.types.is_string(type) else set()
    if types - {_NONE} <= plain:
        try:
            arr = pa.array(values, type)
            if not (int in types and pa.types.is_floating(type)) or all(
                    -2**53 <= v <= 2**53 for v in values if type_of(v) is int):
                return arr, []
        except _MISFIT:
            pass
    out, bad = [], []
    for i, v in enumerate(values):
        ok, x = _fit_value(v, type)
        out.append(x)
        if not ok:
            bad.append(i)
    return pa.array(out, type), bad


type_of = type  # ``fit``'s parameter named ``type`` shadows the builtin


def raw_json_value(v):
    """A raw value as JSON can hold it: bytes as ``hex:...`` (as the nsys args do), numbers beyond
    64 bits and non-finite floats as their text."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "hex:" + bytes(v).hex().upper()
    if type(v) is int and not -2**63 <= v < 2**64:
        return str(v)
    if type(v) is float and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v


def with_raw_args(args, extras: dict[int, dict]):
    """The args JSON texts (an Arrow string array, or a list or tuple of str / None) with, for each
    row ``i`` in ``extras``, its members ``{key: raw value}`` added (keys ``_raw_<name>``; values
    by ``raw_json_value``).  Returns a list of texts (``args`` itself when ``extras`` is empty).
    A row's args that are not a JSON object are kept under "args"."""
    if not extras:
        return args
    out = args.to_pylist() if isinstance(args, (pa.Array, pa.ChunkedArray)) else list(args)
    for i, extra in extras.items():
        t = out[i]
        d = orjson.loads(t) if t else {}
        if not isinstance(d, dict):
            d = {"args": d}
        d.update({k: raw_json_value(v) for k, v in extra.items()})
        out[i] = dumps_args(d)
    return out


# -- text too long for a column ------------------------------------------------------------------
#
# A text value longer than TEXT_LIMIT bytes (UTF-8) is cut to its first TEXT_LIMIT bytes (at a
# character boundary), counted in ``Accounting.repairs``; a JSON column's value (``args``) becomes
# ``{"_truncated": "<its first TEXT_LIMIT bytes>"}`` so it stays a JSON object.  Real names and
# args are at most kilobytes (the longest kernel names: ~4 KB); a 100 MB event name held whole
# takes gigabytes on the way into DuckDB (its blocks are 256 KiB, a string must fit its memory
# limit), so conversion would fail under any normal memory budget.  Applied where every batch is
# built (``TableBuilder``, the nsys reader's ``_batch``), so no path can skip it.

TEXT_LIMIT = 1 << 20  # 1 MiB


def text_cut_reason(table: str, name: str, json_column: bool) -> str:
    if json_column:
        return (f"{table}.{name}: JSON text over {TEXT_LIMIT:,} bytes kept as "
                f'{{"_truncated": its first {TEXT_LIMIT:,} bytes}}')
    return f"{table}.{name}: text over {TEXT_LIMIT:,} bytes cut to its first {TEXT_LIMIT:,} bytes"


def cap_text(table: str, batch: pa.RecordBatch, accounting: Accounting) -> pa.RecordBatch:
    """``batch`` with every text value over TEXT_LIMIT bytes cut (see above), counted.  Costs
    nothing for a column whose whole buffer is under the limit, one pass over its lengths
    otherwise (~0.1 ms per 65,536 values: ~0.4 ms per batch of Kineto events)."""
    cols = None
    for i, f in enumerate(batch.schema):
        if not pa.types.is_string(f.type):
            continue
        arr = batch.column(i)
        if arr.nbytes <= TEXT_LIMIT:
            continue
        lengths = pc.binary_length(arr)
        if (pc.max(lengths).as_py() or 0) <= TEXT_LIMIT:  # ~0.1 ms for 65,536 values
            continue
        over = pc.greater(lengths, TEXT_LIMIT).fill_null(False)
        idx = pc.indices_nonzero(over).to_pylist()
        if not idx:
            continue
        json_column = _is_json_column(table, f.name)
        cut = []
        for j in idx:
            head = bytes(arr[j].as_buffer()[:TEXT_LIMIT]).decode("utf-8", "ignore")  # a split
            cut.append(orjson.dumps({"_truncated": head}).decode() if json_column else head)  # char dropped
        accounting.repair(text_cut_reason(table, f.name, json_column), len(idx))
        if cols is None:
            cols = list(batch.columns)
        cols[i] = pc.replace_with_mask(arr, over, pa.array(cut, pa.string()))
    return batch if cols is None else pa.RecordBatch.from_arrays(cols, schema=batch.schema)


def _is_json_column(table: str, name: str) -> bool:
    try:
        return any(c.name == name and c.json for c in schema.table(table).columns)
    except KeyError:
        return False


class TableBuilder:
    """Row buffer for one schema table.  Rows come one at a time (``add``, buffered as dicts and
    built with ``from_pylist`` every BATCH_ROWS rows) or many at once, column-wise
    (``add_columns``: Arrow arrays or lists, built into a record batch at once).  Every value goes
    through the one rule above (``fit``): the rows keep their order, a value that does not fit its
    column is NULL with its raw value in ``args`` (counted as a repair), a row whose ``REQUIRED``
    column does not fit is skipped (counted).  The one-at-a-time path takes pyarrow's conversion
    first and the rule only when that fails: integer columns must be given ints there (pyarrow
    truncates a float), as the adapters' converters (Kineto's ``_int``, ncu's ``_int_cell``) do."""

    def __init__(self, name: str, source_id: int, accounting: Accounting, batch_rows: int = BATCH_ROWS):
        self.table = schema.table(name)
        self.name = name
        self.source_id = source_id
        self.accounting = accounting
        self.batch_rows = batch_rows
        self._row_schema = pa.schema([f for f in self.table.arrow if f.name != "source_id"])
        self._required = set(REQUIRED.get(name, ()))
        self.rows: list[dict] = []
        self.batches: list[pa.RecordBatch] = []  # built by add_columns, not yet handed out

    @property
    def n(self) -> int:
        return len(self.rows)

    def add(self, **row) -> None:
        """One row; columns not given are NULL."""
        self.rows.append(row)

    def add_columns(self, n: int, columns: dict) -> None:
        """``n`` rows given column-wise: each value a pyarrow Array or a list of length ``n``
        (columns not given, or given as None, are NULL), fitted to the column types by ``fit``."""
        if not n:
            return
        batch = self._fitted(n, columns)
        if batch.num_rows:
            self.accounting.converted[self.name] += batch.num_rows
            self.batches.append(batch)

    def _fitted(self, n: int, columns: dict) -> pa.RecordBatch:
        """The record batch of ``n`` rows given column-wise, by the rule (see the class)."""
        arrays: dict[str, pa.Array] = {}
        extras: dict[int, dict] = {}
        drop: dict[int, str] = {}  # row -> the required column that does not fit
        misfit: list[tuple[str, pa.DataType, list[int]]] = []
        for f in self._row_schema:
            v = columns.get(f.name)
            if v is None:
                arrays[f.name] = pa.nulls(n, f.type)
                continue
            if f.name == "args":
                continue  # last: it takes the raw values
            arr, bad = fit(v, f.type)
            arrays[f.name] = arr
            if not bad:
                continue
            if f.name in self._required:
                for i in bad:
                    drop.setdefault(i, f.name)
                continue
            misfit.append((f.name, f.type, bad))
            for i in bad:
                raw = v[i].as_py() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v[i]
                extras.setdefault(i, {})[RAW_PREFIX + f.name] = raw
        has_args = "args" in self._row_schema.names
        for name, t, bad in misfit:
            self.accounting.misfits(self.name, name, t, sum(1 for i in bad if i not in drop), has_args)
        if has_args:
            args = columns.get("args")
            if extras:
                args = with_raw_args(args if args is not None else [None] * n, extras)
            if args is not None:
                arr, bad = fit(args, pa.string())
                arrays["args"] = arr
                if bad:
                    self.accounting.misfits(self.name, "args", pa.string(), len(bad), False)
        for i, col in sorted(drop.items()):
            reason = f"{self.name}: value of {col} does not fit the column type"
            example = None
            if reason not in self.accounting.examples:
                example = {k: (v[i].as_py() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v[i])
                           for k, v in columns.items() if v is not None}
            self.accounting.skip(reason, example)
        sid = pa.repeat(pa.scalar(self.source_id, pa.int32()), n)
        batch = pa.RecordBatch.from_arrays([sid, *(arrays[f.name] for f in self._row_schema)],
                                           schema=self.table.arrow)
        if drop:
            keep = [True] * n
            for i in drop:
                keep[i] = False
            batch = batch.filter(pa.array(keep))
        return cap_text(self.name, batch, self.accounting)

    def full(self) -> bool:
        return len(self.rows) >= self.batch_rows or bool(self.batches)

    def take(self) -> list[pa.RecordBatch]:
        """The batches ready now: those built column-wise, and the buffered rows when full."""
        out, self.batches = self.batches, []
        if len(self.rows) >= self.batch_rows:
            out.append(self.flush())
        return out

    def flush(self) -> pa.RecordBatch | None:
        """The buffered rows as one batch (None when there are none)."""
        n = len(self.rows)
        if not n:
            return None
        try:
            body = pa.RecordBatch.from_pylist(self.rows, schema=self._row_schema)
            sid = pa.repeat(pa.scalar(self.source_id, pa.int32()), n)
            batch = cap_text(self.name, pa.RecordBatch.from_arrays([sid, *body.columns],
                                                                   schema=self.table.arrow), self.accounting)
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
            rows = self.rows  # a value that does not fit: the rule, column by column
            batch = self._fitted(n, {f.name: [r.get(f.name) for r in rows] for f in self._row_schema})
        self.accounting.converted[self.name] += batch.num_rows
        self.rows = []
        return batch


class Builders:
    """One TableBuilder per data table, created on first use."""

    def __init__(self, source_id: int, accounting: Accounting):
        self.source_id = source_id
        self.accounting = accounting
        self._b: dict[str, TableBuilder] = {}

    def __getitem__(self, name: str) -> TableBuilder:
        b = self._b.get(name)
        if b is None:
            b = self._b[name] = TableBuilder(name, self.source_id, self.accounting)
        return b

    def ready(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        """Batches ready now (call often while reading)."""
        for name, b in self._b.items():
            if b.full():
                for batch in b.take():
                    yield name, batch

    def drain(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        for name, b in self._b.items():
            for batch in b.take():
                yield name, batch
            batch = b.flush()
            if batch is not None:
                yield name, batch


class Adapter:
    FORMAT = ""
    # True when read() yields long runs of batches of one table (nsys: all kernels, then all API
    # calls): the store then inserts each run on several threads, in no particular row order.
    # Not for short interleaved runs (Kineto): docs/scaling.md ("Knobs") has why.
    PARALLEL_INSERT = False

    def __init__(self) -> None:
        self.accounting = Accounting()
        self._source: dict = {}

    @property
    def source(self) -> dict:
        """The `sources` row fields the adapter knows (set by ``read``), with the repairs of
        ``self.accounting`` merged into ``metadata.tracekit_repairs`` ({reason: count}): every
        adapter reports them this one way."""
        src = self._source
        repairs = self.accounting.repairs
        if not repairs:
            return src
        meta = src.get("metadata")
        meta = orjson.loads(meta) if isinstance(meta, str) else dict(meta or {})
        merged = dict(meta.get("tracekit_repairs") or {})
        for reason, n in repairs.items():
            merged[reason] = merged.get(reason, 0) + n
        meta["tracekit_repairs"] = merged
        return {**src, "metadata": meta}

    @source.setter
    def source(self, value: dict) -> None:
        self._source = value

    def read(self, path, source_id: int, progress: Progress | None = None
             ) -> Iterator[tuple[str, pa.RecordBatch]]:
        raise NotImplementedError
