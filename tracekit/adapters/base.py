"""What every adapter shares: the row builders that turn rows into Arrow record batches of the
unified schema, the accounting of converted and skipped rows, and the user-facing error type.

An adapter is a class with ``FORMAT`` and a ``read(path, source_id, progress)`` generator that
yields ``(table_name, pyarrow.RecordBatch)`` pairs and fills ``self.source`` (the `sources` row
fields it knows) and ``self.accounting`` while it goes.  Adapters never touch DuckDB.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterator

import orjson
import pyarrow as pa

from .. import schema

BATCH_ROWS = 65_536

Progress = Callable[[int, int], None]  # (done, total) in adapter-defined units (bytes, rows)


class TraceError(Exception):
    """A problem with the input that the user must fix; printed as one line, no traceback."""

    def __init__(self, path, what: str, todo: str = ""):
        self.path, self.what, self.todo = str(path), what, todo
        super().__init__(self.one_line())

    def one_line(self) -> str:
        msg = f"{self.path}: {self.what}"
        return f"{msg}; {self.todo}" if self.todo else msg


class Accounting:
    """Rows converted per table and rows skipped per reason (with one example each)."""

    def __init__(self) -> None:
        self.converted: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self.by_design: set[str] = set()  # reasons that lose nothing of the trace's content

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


class TableBuilder:
    """Row buffer for one schema table.  Rows come one at a time (``add``, buffered as dicts and
    built with ``from_pylist`` every BATCH_ROWS rows) or many at once, column-wise
    (``add_columns``: Arrow arrays or lists, built into a record batch at once)."""

    def __init__(self, name: str, source_id: int, accounting: Accounting, batch_rows: int = BATCH_ROWS):
        self.table = schema.table(name)
        self.name = name
        self.source_id = source_id
        self.accounting = accounting
        self.batch_rows = batch_rows
        self._row_schema = pa.schema([f for f in self.table.arrow if f.name != "source_id"])
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
        (columns not given are NULL).  Values are cast to the column types exactly (no
        truncation); when one does not fit, the rows go the row-wise way instead, where each row
        that does not fit is counted as skipped."""
        if not n:
            return
        try:
            arrays = [pa.repeat(pa.scalar(self.source_id, pa.int32()), n)]
            for f in self._row_schema:
                v = columns.get(f.name)
                if v is None:
                    arrays.append(pa.nulls(n, f.type))
                elif isinstance(v, (pa.Array, pa.ChunkedArray)):
                    arrays.append(v if v.type == f.type else v.cast(f.type))
                else:
                    arrays.append(pa.array(v, f.type))
            batch = pa.RecordBatch.from_arrays(arrays, schema=self.table.arrow)
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            given = {k: v for k, v in columns.items() if v is not None}  # None: all NULL
            names = list(given)
            lists = [v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v
                     for v in given.values()]
            self.rows.extend(dict(zip(names, vals)) for vals in zip(*lists))
            return
        self.accounting.converted[self.name] += n
        self.batches.append(batch)

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
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
            body = self._checked_rows()
            n = body.num_rows
        sid = pa.repeat(pa.scalar(self.source_id, pa.int32()), n)
        batch = pa.RecordBatch.from_arrays([sid, *body.columns], schema=self.table.arrow)
        self.accounting.converted[self.name] += n
        self.rows = []
        return batch

    def _checked_rows(self) -> pa.RecordBatch:
        """Slow path when a value does not fit its column (e.g. an int beyond int64): keep the
        rows that fit, count the others as skipped."""
        good = []
        for row in self.rows:
            try:
                pa.RecordBatch.from_pylist([row], schema=self._row_schema)
            except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
                col = next((k for k, v in row.items()
                            if not _fits(v, self._row_schema.field(k).type)), "?")
                self.accounting.skip(f"{self.name}: value of {col} does not fit the column type",
                                     f"{e}: {row}")
                continue
            good.append(row)
        return pa.RecordBatch.from_pylist(good, schema=self._row_schema)


def _fits(v, t: pa.DataType) -> bool:
    try:
        pa.array([v], t)
        return True
    except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        return False


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
        self.source: dict = {}

    def read(self, path, source_id: int, progress: Progress | None = None
             ) -> Iterator[tuple[str, pa.RecordBatch]]:
        raise NotImplementedError
