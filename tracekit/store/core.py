"""The store: a DuckDB database holding the unified tables of any number of sources, and its
query API (`Store`: sql / stream / head / rows / one / table), opened by `open`.

Converting writes one source per input inside one transaction (an input that fails leaves the
store as it was; tracekit/store/convert.py, tracekit/store/write.py).  Each conversion also
writes the views and their macros into the store (`copies.persist_views`), for DuckDB clients
without tracekit.  A read-only session uses those copies when they are this tracekit's,
unchanged (`copies.copies_are_current`); otherwise it registers the views it needs as temporary
views, which take precedence over the copies."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from .. import schema, views
from ..adapters.base import Progress
from ..names import shown
from . import parquet, tuning
from .convert import SourceSummary, convert_source, next_source_id
from .copies import copies_are_current
from .db import connect, create_tables
from .errors import StoreError
from .files import check_readable
from .kept import KeptViews

DEFAULT_DB = "tracekit.duckdb"
#: A store opened for queries (`tracekit sql`, `tracekit.open`) runs SQL that may come from
#: anyone: no file, network or extension access beyond the store itself (no COPY TO, read_text,
#: glob, ATTACH, INSTALL / LOAD), and the configuration locked so SQL cannot undo it. The views
#: and tracekit's own commands need nothing more. Opt out: `Store(..., sandbox=False)`,
#: `tracekit.open(path, sandbox=False)`, `tracekit sql --unsafe`.
SANDBOX = (
    "SET enable_external_access = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET enable_progress_bar = false",
    "SET lock_configuration = true",
)


class Store:
    """A tracekit DuckDB store.  ``Store(path)`` opens (creating if needed) for writing;
    ``Store(path, read_only=True)`` for queries."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, read_only: bool = False,
                 replace: bool = False, label: str | None = None, sandbox: bool | None = None):
        self.path = str(path)
        self.label = label or self.path  # the name users know (writing() works on a copy)
        try:
            self.path.encode("utf-8")
        except UnicodeEncodeError:
            raise StoreError(f"{shown(self.label)}: the store's name is not UTF-8 text; rename it "
                             "or choose another --db") from None
        if read_only:
            check_readable(self.path)
        if replace and not read_only:
            for p in (self.path, self.path + ".wal"):
                if os.path.exists(p):
                    os.remove(p)
        try:
            self._con = connect(self.path, read_only)
        except duckdb.Error as e:
            why = str(e).splitlines()[0].replace(self.path, self.label)  # the user's name, not a copy's
            raise StoreError(f"{shown(self.label)}: cannot open the store ({why})") from None
        has_tables = self._con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_catalog = current_database() AND table_schema = 'main'").fetchall()[0][0]
        if read_only or has_tables:
            self._check_version()  # (every table there, or StoreError)
        if not read_only and not has_tables:
            create_tables(self._con)
        self._start(read_only, read_only if sandbox is None else bool(sandbox))
        locked = self._con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0]
        if self.sandboxed and not locked:  # (a second connection to one database shares its settings)
            for stmt in SANDBOX:
                self._con.execute(stmt)

    @classmethod
    def over(cls, con: duckdb.DuckDBPyConnection, path: str, sandboxed: bool) -> Store:
        """A store over ``con``, a connection whose tables nothing writes while it is open (a
        Parquet export's: `open_parquet`)."""
        st = cls.__new__(cls)
        st.path = st.label = path
        st._con = con
        st._start(True, sandboxed)
        return st

    def _start(self, keep: bool, sandboxed: bool) -> None:
        self._views: set[str] = set()  # the views created so far
        self._library = False  # the store's own copies of the views and macros checked
        self._libs: set[str] = set()  # the sql/lib modules created (TEMP), on demand
        self.kept = KeptViews(self._con, keep)  # shared views' rows (tracekit/store/kept.py)
        self.sandboxed = sandboxed

    def _check_version(self) -> None:
        try:
            v = self._con.execute("SELECT value FROM tracekit_meta WHERE key='schema_version'").fetchall()
            v = v[0] if v else None
        except duckdb.Error:
            self._con.close()
            raise StoreError(f"{self.label}: not a tracekit store (a DuckDB file without tracekit's "
                             "tables); pass another --db path") from None
        if v is None or not str(v[0]).strip().isdigit() or int(v[0]) != schema.SCHEMA_VERSION:
            self._con.close()
            raise StoreError(f"{self.label}: made by another tracekit version (store schema "
                             f"{v and v[0]!r}, this tracekit reads {schema.SCHEMA_VERSION}); "
                             "re-create it with `tracekit convert --replace`")
        have: dict[str, set] = {}
        for t, c in self._con.execute(  # (duckdb_columns: information_schema's view of it plans 5 ms longer)
                "SELECT table_name, column_name FROM duckdb_columns() "
                "WHERE database_name = current_database() AND schema_name = 'main'").fetchall():
            have.setdefault(t, set()).add(c)
        for t in schema.TABLES:
            missing = [c for c in t.column_names if c not in have.get(t.name, set())]
            if missing:
                self._con.close()
                raise StoreError(f"{self.label}: damaged store: table {t.name} "
                                 + (f"lacks column {', '.join(missing[:3])}" if t.name in have else "is missing")
                                 + "; re-create it with `tracekit convert --replace`")

    # -- queries -----------------------------------------------------------------------------
    @property
    def raw_con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection as it is, no view registered (conversion steps, metadata)."""
        return self._con

    # Views are created when first needed: all of them on the first use of `con`, and by
    # sql/rows/one/table only those the query names (with the views they use), which a
    # conversion does without and a query of one view mostly too (docs/scaling.md).
    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, with every view of sql/ registered."""
        return self._for(" ".join(v.name for v in views.all_views()), keep=False)  # a text naming them all

    def _for(self, query: str, keep: bool = True) -> duckdb.DuckDBPyConnection:
        """The connection, with the views that the query names registered (and, with ``keep``,
        the shared views it reads through them kept, see below)."""
        if not self._library:
            if self.kept.enabled and self._copies_are_current():
                self._views.update(v.name for v in views.all_views())  # the store's own copies
                self._libs.update(views.lib_modules())
            self._library = True
        names = views.referenced(query)
        need = [n for n in names if n not in self._views]
        # the library modules the query and the views to create call, each after its includes
        libs = [m for m in views.lib_needed(" ".join([query] + [views.by_name(n).text for n in need]))
                if m not in self._libs]
        if libs:
            views.register_library(self._con, libs)
            self._libs.update(libs)
        if need:
            views.register(self._con, need)
            self._views.update(need)
        if keep and self.kept.enabled:
            self.kept.note(names)
        return self._con

    def _copies_are_current(self) -> bool:
        """Whether this store's own copies of the views and macros are this tracekit's
        (`copies.copies_are_current`): then a read-only session uses them."""
        return copies_are_current(self._con, self.path)

    def keep(self, *names: str) -> list[str]:
        """Compute the shared views that ``names`` are or read (`views.kept_views()`) now, and
        keep their rows for this session (tracekit/store/kept.py): for a caller that will read
        them in several queries (`tracekit diagnose` reads roofline in two rules).  Returns the
        views kept now or before; none on a store open for writing."""
        order = views.referenced(" ".join(names))
        self._for(" ".join(names), keep=False)
        return self.kept.keep(order)

    def sql(self, query: str, params=None) -> duckdb.DuckDBPyRelation:
        return self._for(query).sql(query, params=params)

    def stream(self, query: str, params=None) -> pa.RecordBatchReader | None:
        """The query's result as Arrow batches of ``STREAM_BATCH_ROWS`` rows, computed as they are
        read (None where DuckDB gives no result): read it to the end before the next query."""
        rel = self.sql(query, params=params)
        return None if rel is None else rel.to_arrow_reader(tuning.STREAM_BATCH_ROWS)

    def head(self, query: str, n: int, params=None) -> tuple[pa.Table, int] | None:
        """The first ``n`` rows of the query's result (Arrow; 0: all) and the number of all its
        rows (None where DuckDB gives no result). The rows past the first ``n`` are counted as
        they stream from DuckDB, ``STREAM_BATCH_ROWS`` at a time, and let go (`head_of`): a
        result of millions of rows is never held whole (`tracekit sql`'s table output)."""
        reader = self.stream(query, params=params)
        return None if reader is None else head_of(reader, n)

    def rows(self, query: str, params=None) -> list[tuple]:
        """All result rows as tuples."""
        return self._for(query).sql(query, params=params).fetchall()

    def one(self, query: str, params=None):
        """The first row of the result (a tuple), or None; a single column gives its value."""
        rows = self._for(query).sql(query, params=params).limit(1).fetchall()
        if not rows:
            return None
        return rows[0][0] if len(rows[0]) == 1 else rows[0]

    def table(self, name: str) -> duckdb.DuckDBPyRelation:
        return self._con.table(name) if name in schema.BY_NAME else self._for(name).view(name)

    def close(self) -> None:
        self._con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- conversion (tracekit/store/convert.py) and export (tracekit/store/parquet.py) -------
    def next_source_id(self) -> int:
        return next_source_id(self._con)

    def convert(self, path: str | os.PathLike, progress: Progress | None = None,
                format: str | None = None, rank: int | None = None, strict: bool = False
                ) -> SourceSummary:
        """Convert one input into a new source (`convert.convert_source`); raises TraceError for
        bad input (and, with ``strict``, when any input row would be skipped). A failed input adds
        nothing."""
        return convert_source(self._con, path, progress, format, rank, strict)

    def export_parquet(self, directory: str | os.PathLike, partitioned: bool = False) -> list[str]:
        """Write every table as Parquet files in ``directory`` (`parquet.export`); returns the paths."""
        return parquet.export(self._con, directory, partitioned)


def head_of(rows: pa.RecordBatchReader, n: int) -> tuple[pa.Table, int]:
    """The first ``n`` rows of a stream of batches (0: all of them) and the number of all its
    rows, read to its end: the batches past the first ``n`` rows are counted and let go."""
    kept, total = [], 0
    for batch in rows:
        if not n or total < n:
            kept.append(batch if not n else batch.slice(0, n - total))
        total += batch.num_rows
    return pa.Table.from_batches(kept, schema=rows.schema), total


def open_parquet(directory: str | os.PathLike, sandbox: bool = False) -> Store:
    """Query a Parquet export of a store (``Store.export_parquet``: the flat ``DIR/<table>.parquet``
    files, or the Hive-partitioned ``DIR/<table>/source_id=<n>/*.parquet`` dataset, also made by
    other tools) with every tracekit view on top: an in-memory DuckDB whose tables are views over
    the files (`parquet.connect`).

    ``sandbox``: the SQL gets `SANDBOX` as on a store.  DuckDB lets a locked connection reach
    files only through ``allowed_paths``, which would let SQL overwrite them too, so the tables
    are then read into memory (``CREATE TABLE ... AS SELECT`` from the files) before the lock."""
    con = parquet.connect(directory, sandbox)
    if sandbox:
        for stmt in SANDBOX:
            con.execute(stmt)
    return Store.over(con, str(Path(directory)), bool(sandbox))


def open(path: str | os.PathLike = DEFAULT_DB, read_only: bool = True,  # noqa: A001
         sandbox: bool | None = None) -> Store:
    """Open a store for queries (the Python API entry point: ``tracekit.open(path).sql(q)``).
    Read-only stores are sandboxed (`SANDBOX`: no file / network / extension access from SQL,
    configuration locked) unless ``sandbox=False``.  A folder is a Parquet export
    (`open_parquet`), sandboxed likewise."""
    if os.path.isdir(path):
        return open_parquet(path, sandbox=read_only if sandbox is None else sandbox)
    return Store(path, read_only=read_only, sandbox=sandbox)
