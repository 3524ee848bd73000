"""What every adapter shares: the row builders that turn rows into Arrow record batches of the
unified schema, the accounting of converted and skipped rows, and the user-facing error type
(the rule for values that do not fit a column: fit.py).

An adapter is a class with ``FORMAT`` and a ``read(path, source_id, progress)`` generator that
yields ``(table_name, pyarrow.RecordBatch)`` pairs of the schema's tables (tracekit/schema.py)
and fills ``self.source`` (the `sources` row fields it knows) and ``self.accounting`` while it
goes.  That is all it hands on: whatever a later stage needs is in those rows (e.g. the events it
leaves unnested have depth NULL, which the store derives: `nesting.nest_source`).  Adapters never
touch DuckDB.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import orjson
import pyarrow as pa

from .. import schema
from .fit import RAW_PREFIX, REQUIRED, TYPE_WORDS, cap_text, fit, with_raw_args

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
                else f"values that do not fit {TYPE_WORDS.get(type, str(type))} read as NULL")
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
