"""The store: a DuckDB database holding the unified tables of any number of sources.

Converting writes one source per input inside one transaction (an input that fails leaves the
store as it was).  Each conversion also writes the views and their macros into the store
(`persist_views`), for DuckDB clients without tracekit.  A read-only session uses those copies
when they are this tracekit's, unchanged (`Store._copies_are_current`); otherwise it registers
the views it needs as temporary views, which take precedence over the copies.
"""

from __future__ import annotations

import builtins
import datetime as _dt
import errno
import gc
import glob
import os
import queue
import re
import shlex
import shutil
import stat
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa

from . import __version__, budget, schema, views
from .adapters import detect
from .adapters.base import Accounting, Progress, TraceError
from .nesting import _derive_nesting, _renest_tracks

DEFAULT_DB = "tracekit.duckdb"
# Tuning constants: each one's default, what it trades and the measurement that chose it are in
# docs/scaling.md ("Knobs"); a comment here says what the value is, not why.
# DuckDB's memory cap while converting (beyond it the open transaction spills to disk) is the
# memory budget's share (tracekit/budget.py: 128 MiB of the default 400 MB, 64 MiB for one
# inserting thread).
# For adapters with long runs of one table (Adapter.PARALLEL_INSERT: nsys), each run is inserted
# by one statement on up to INSERT_THREADS threads (fewer where the budget says: budget.plan),
# without keeping the input order: queries order explicitly (rowid order is no promise of the store).
PARALLEL_INSERT = True
INSERT_THREADS = 4
# DuckDB threads while the gathered tables of a serial reader (Kineto, ncu) are inserted (None:
# leave `threads` as it is).
SERIAL_INSERT_THREADS = 1
# Arrow memory pool while converting without parallel inserts (None: leave pyarrow's default).
# Arrays keep the pool they came from, so switching back afterwards is safe.
CONVERT_ARROW_POOL = "system"
# Process-wide tuning while converting -- Python's cyclic garbage collector paused, pyarrow's
# default memory pool switched to CONVERT_ARROW_POOL (both restored after) -- only where tracekit
# owns the process: the `tracekit` command (cli.entry), its worker processes (parallel.py),
# tracekit.convert(..., own_process=True), a benchmark job. A library call changes neither.
OWN_PROCESS = False
# Rows per row group of a store opened for writing (None: DuckDB's default, 122,880); stores
# opened read-only are unaffected.
ROW_GROUP_SIZE = 32768
# The DuckDB storage format a new store is written in (ATTACH's STORAGE_VERSION; None: the
# running DuckDB's default).  DuckDB 2.0 writes format 69 by default, which DuckDB 1.x (the
# `duckdb` CLI on PyPI, duckdb-cli 1.5.6; notebooks with an older duckdb) refuses to open; with
# "v1.5.0" any DuckDB >= 1.5 opens the store.  Measured on the kineto fixtures decode_b32 +
# decode_b1: the same file size (5.8 MB) and convert time within noise.  A store keeps the format
# it was created in (adding sources does not change it).
STORAGE_VERSION = "v1.5.0"
# Rows per Arrow batch of a shared view's kept rows (Store._keep_view: each batch's text columns
# are dictionary-encoded as it comes, so a batch of long names is the most held twice).
KEEP_BATCH_ROWS = 16384
# At most this many bytes of kept rows per session (the 179 MB Kineto capture's 16 shared views
# take 69 MB; beyond the cap a session keeps no more).
KEEP_MAX_BYTES = 256 << 20
# A store with more GPU operations (kernels + memops) keeps nothing: its shared views would take
# more than KEEP_MAX_BYTES (~1.05 kB per operation for all 16 on the 179 MB capture), and finding
# that out by computing them cost a 1 M-kernel store's second query 7.9 s and 1.5 GB more than
# computing them inside the query (2.7 s).
KEEP_MAX_GPU_ROWS = 200_000
# Rows per Arrow batch of a streamed result (Store.head, Store.stream; one DuckDB vector): the
# fewest bytes held while a result streams past (idle_gaps on the 179 MB capture, `tracekit sql` peak RSS: 2,048 rows 244 MB,
# against 338 MB with the result held whole; 2,048-row batches were also the fastest, 0.14-0.15 s
# against 0.16-0.19 s for 8,192 and 65,536 rows and 0.18-0.23 s whole).
STREAM_BATCH_ROWS = 2048



@dataclass
class SourceSummary:
    source_id: int
    path: str
    format: str
    converted: dict[str, int]
    skipped: dict[str, int] = field(default_factory=dict)
    by_design: frozenset = frozenset()  # skip reasons that lose nothing (Accounting.by_design)
    repairs: dict[str, int] = field(default_factory=dict)  # metadata.tracekit_repairs: values changed

    def one_line(self) -> str:
        rows = ", ".join(f"{t} {n:,}" for t, n in sorted(self.converted.items()) if n) or "no rows"
        line = f"[{self.source_id}] {_shown(self.path)} ({self.format}): {rows}"
        if self.skipped:
            total = sum(self.skipped.values())
            why = "; ".join(f"{n:,} {r}" + (" [by design]" if r in self.by_design else "")
                            for r, n in sorted(self.skipped.items(), key=lambda x: -x[1]))
            line += f"; skipped {total:,} ({why})"
        else:
            line += "; skipped 0"
        if self.repairs:
            why = "; ".join(f"{n:,} {r}" for r, n in sorted(self.repairs.items(), key=lambda x: -x[1]))
            line += f"; repaired {sum(self.repairs.values()):,} ({why})"
        return line


class StoreError(Exception):
    pass


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


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for t in schema.TABLES:
        con.execute(t.ddl())
    con.execute("CREATE TABLE IF NOT EXISTS tracekit_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute(
        "INSERT INTO tracekit_meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
        [str(schema.SCHEMA_VERSION)],
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
            raise StoreError(f"{_shown(self.label)}: the store's name is not UTF-8 text; rename it "
                             "or choose another --db") from None
        if read_only:
            _check_readable(self.path)
        if replace and not read_only:
            for p in (self.path, self.path + ".wal"):
                if os.path.exists(p):
                    os.remove(p)
        try:
            self._con = _connect(self.path, read_only)
        except duckdb.Error as e:
            why = str(e).splitlines()[0].replace(self.path, self.label)  # the user's name, not a copy's
            raise StoreError(f"{_shown(self.label)}: cannot open the store ({why})") from None
        has_tables = self._con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_catalog = current_database() AND table_schema = 'main'").fetchall()[0][0]
        if read_only or has_tables:
            self._check_version()  # (every table there, or StoreError)
        if not read_only and not has_tables:
            _create_tables(self._con)
        self._views: set[str] = set()  # the views created so far
        self._library = False  # the store's own copies of the views and macros checked
        self._libs: set[str] = set()  # the sql/lib modules created (TEMP), on demand
        self._init_kept(read_only)
        self.sandboxed = read_only if sandbox is None else bool(sandbox)
        locked = self._con.execute("SELECT current_setting('lock_configuration')").fetchall()[0][0]
        if self.sandboxed and not locked:  # (a second connection to one database shares its settings)
            for stmt in SANDBOX:
                self._con.execute(stmt)

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
            if self._keep and self._copies_are_current():
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
        if keep and self._keep:
            self._keep_shared(names)
        return self._con

    def _copies_are_current(self) -> bool:
        """Whether the views and macros a conversion wrote into this store (`persist_views`) are
        this tracekit's, as it wrote them: the same SQL files (``views_digest``) and every copy
        still carrying the comment it was written with (`_copies_marked`: one replaced or dropped
        since fails). Then a read-only session
        uses them instead of creating its own TEMP copies (which binds every view it creates:
        0.6 s for all 43, ~50 ms for the library alone); a TEMP view still takes precedence, also
        inside their bodies (kept rows, below)."""
        try:
            meta = self._con.execute("SELECT value FROM tracekit_meta WHERE key = 'views_digest'").fetchall()
            cat = self._con.execute("SELECT current_database()").fetchall()[0][0]
        except duckdb.Error:  # (a Parquet export: no tracekit_meta)
            return False
        digest = views.digest()
        if not meta or meta[0][0] != digest:
            return False
        if _verified(self.path, digest):  # checked before, and the file unchanged since
            return True
        if not _copies_marked(self._con, cat, digest):
            return False
        _record_verified(self.path, digest)
        return True

    # -- shared views, computed once ---------------------------------------------------------
    # A session of queries on a store that nothing writes (opened read-only, or a Parquet
    # export) keeps the rows of a shared view (`views.kept_views()`: gpu_launches, idle_gaps,
    # roofline, phase_ops ...) once a second query needs them (naming them or reading them
    # through another view), and reads them from then on instead of computing them inside every
    # query again: `tracekit diagnose`, a notebook, a script of several statements. One query
    # alone is planned whole, as before (DuckDB can then push its filters into the shared
    # views); the second query of a shared view pays for keeping its rows (all of them, whatever
    # its filter: on the 179 MB capture roofline's took about a first query's time), the
    # queries after it read them. The rows are kept as
    # Arrow, text columns dictionary-encoded (a kernel name of 360 characters is stored once, not
    # once per row), and read back with the view's own column types. When a parameter they
    # depend on changes (`--param`, SET VARIABLE), every kept view is dropped and computed again
    # when needed; a query on `con` itself, which does not look, fails instead of answering with
    # the old value. `Store.con` never keeps. A store of more than KEEP_MAX_GPU_ROWS GPU
    # operations keeps nothing, and a session keeps at most KEEP_MAX_BYTES of rows (then the rest
    # is computed in each query, as before). Figures: docs/scaling.md ("Shared views, computed
    # once").
    def _init_kept(self, keep: bool) -> None:
        self._keep = bool(keep)
        self._needs: dict[str, int] = {}  # shared view -> queries that needed it
        self._small: bool | None = None  # `_small_enough`, once asked
        self._kept: dict[str, dict] = {}  # kept view -> the parameter values it was computed with
        self._kept_rows: dict[str, pa.Table] = {}

    def _keep_shared(self, names: list[str]) -> None:
        shared = [n for n in names if n in views.kept_views()]
        if not shared:
            return
        self._drop_stale()
        for n in shared:  # creation order: the shared views a view reads are kept before it
            if n not in self._kept and self._keep:
                self._needs[n] = self._needs.get(n, 0) + 1
                if self._needs[n] >= 2 and self._small_enough():
                    try:
                        self._keep_view(n)
                    except duckdb.Error:  # (the query itself will say what is wrong, if it is)
                        self._needs[n] = -(1 << 30)  # not tried again

    def _drop_stale(self) -> None:
        """Drop every kept view if a parameter one was computed with has changed since."""
        if self._kept:
            values = self._parameter_values()
            if any(values[p] != v for kept in self._kept.values() for p, v in kept.items()):
                self._drop_kept()

    def _small_enough(self) -> bool:
        """Whether this store's GPU operations are few enough to keep the shared views' rows
        (KEEP_MAX_GPU_ROWS); asked once per session, and a store over it keeps nothing."""
        if self._small is None:
            n = self._con.execute("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops)").fetchall()[0][0]
            self._small = n <= KEEP_MAX_GPU_ROWS
            self._keep = self._keep and self._small
        return self._small

    def keep(self, *names: str) -> list[str]:
        """Compute the shared views that ``names`` are or read (`views.kept_views()`) now, and
        keep their rows for this session (see "shared views, computed once" above): for a caller
        that will read them in several queries (`tracekit diagnose` reads roofline in two rules).
        Returns the views kept now or before; none on a store open for writing."""
        order = views.referenced(" ".join(names))
        self._for(" ".join(names), keep=False)
        self._drop_stale()
        for n in order:
            if n in views.kept_views() and n not in self._kept and self._keep and self._small_enough():
                self._keep_view(n)
        return [n for n in order if n in self._kept]

    def _parameter_values(self) -> dict[str, str | None]:
        """The current value (as text; None: unset) of every parameter a shared view reads."""
        params = sorted({p for n in views.kept_views() for p in views.parameters(n)})
        if not params:
            return {}
        row = self._con.execute("SELECT " + ", ".join(f"getvariable('{p}')::VARCHAR" for p in params)).fetchall()[0]
        return dict(zip(params, row))

    def _keep_view(self, name: str) -> None:
        """Keep view ``name``'s rows (its shared views kept already); beyond KEEP_MAX_BYTES, drop
        them again and keep no more in this session."""
        values = self._parameter_values()
        values = {p: values[p] for p in views.parameters(name)}
        rel = self._con.sql(f"SELECT * FROM {name}")
        cols, types = rel.columns, [str(t) for t in rel.types]
        reader = rel.to_arrow_reader(KEEP_BATCH_ROWS)
        batches = [_dictionary_text(b) for b in reader]
        rows = pa.Table.from_batches(batches, schema=batches[0].schema if batches
                                     else _dictionary_text(reader.schema.empty_table()).schema)
        table = f"__tk_kept_{name}"
        self._con.register(table, rows)
        back = [str(t) for t in self._con.sql(f"SELECT * FROM {table}").types]
        select = ", ".join(_ident(c) if b == t else f"CAST({_ident(c)} AS {t}) AS {_ident(c)}"
                           for c, t, b in zip(cols, types, back))
        where = ""
        if values:
            same = " AND ".join(f"getvariable('{p}')::VARCHAR IS NOT DISTINCT FROM {_sql_lit(v)}"
                                for p, v in values.items())
            msg = (f"tracekit: the rows of view {name} were kept with parameters "
                   + ", ".join(f"{p}={v}" for p, v in values.items())
                   + " and one has changed since; run the query through tracekit (Store.sql, "
                   "tracekit.open(...).sql, tracekit sql), which computes them again")
            where = f" WHERE (SELECT CASE WHEN {same} THEN true ELSE error({_sql_lit(msg)}) END)"
        self._con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {select} FROM {table}{where}")
        self._kept[name] = values
        self._kept_rows[name] = rows
        if sum(t.nbytes for t in self._kept_rows.values()) > KEEP_MAX_BYTES:
            self._drop_kept([name])  # too big to hold: this session keeps no more
            self._keep = False

    def _drop_kept(self, which: list[str] | None = None) -> None:
        """Kept views (``which``; None: all) back to their definitions (computed in each query
        again)."""
        names = [n for n in views.creation_order() if n in self._kept and (which is None or n in which)]
        views.register(self._con, names)
        for n in names:
            self._con.unregister(f"__tk_kept_{n}")
            del self._kept[n], self._kept_rows[n]
            self._needs.pop(n, None)

    def sql(self, query: str, params=None) -> duckdb.DuckDBPyRelation:
        return self._for(query).sql(query, params=params)

    def stream(self, query: str, params=None) -> pa.RecordBatchReader | None:
        """The query's result as Arrow batches of ``STREAM_BATCH_ROWS`` rows, computed as they are
        read (None where DuckDB gives no result): read it to the end before the next query."""
        rel = self.sql(query, params=params)
        return None if rel is None else rel.to_arrow_reader(STREAM_BATCH_ROWS)

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

    # -- conversion --------------------------------------------------------------------------
    def next_source_id(self) -> int:
        return self._con.execute("SELECT coalesce(max(source_id), -1) + 1 FROM sources").fetchall()[0][0]

    def convert(self, path: str | os.PathLike, progress: Progress | None = None,
                format: str | None = None, rank: int | None = None, strict: bool = False
                ) -> SourceSummary:
        """Convert one input into a new source; raises TraceError for bad input (and, with
        ``strict``, when any input row would be skipped). A failed input adds nothing.

        DuckDB's memory is capped at the memory budget's share meanwhile (`budget.plan`; what the
        transaction holds goes to disk beyond it), so peak memory stays flat in the trace size;
        should an operation still run out of memory under the cap, the input is converted again
        with twice the cap, and then without one.

        Where tracekit owns the process (OWN_PROCESS), Python's cyclic garbage collector is paused
        meanwhile (restored after): the readers allocate millions of short-lived, acyclic objects,
        and collection passes over them cost 10-13 % of the conversion time and grew with the
        trace size.  Likewise pyarrow's default memory pool is CONVERT_ARROW_POOL meanwhile,
        except with parallel inserts (less memory held)."""
        path = Path(path)
        con = self._con
        prev, order, threads = con.execute(
            "SELECT current_setting('memory_limit'), current_setting('preserve_insertion_order'), "
            "current_setting('threads')").fetchall()[0]
        tune = OWN_PROCESS
        gc_on = gc.isenabled()
        if tune:
            gc.disable()
        pool = pa.default_memory_pool()
        try:
            adapter = detect.adapter_for(path, format)
            parallel = PARALLEL_INSERT and adapter.PARALLEL_INSERT
            if tune and CONVERT_ARROW_POOL and not parallel:
                pa.set_memory_pool(_arrow_pool(CONVERT_ARROW_POOL, pool))
            plan = budget.plan()
            cap = (plan.duckdb_limit if parallel else plan.duckdb_serial_limit) // budget.MB
            for limit in (f"{cap}MiB", f"{2 * cap}MiB"):
                con.execute(f"SET memory_limit = '{limit}'")
                try:
                    return self._convert(adapter, path, progress, rank, strict, parallel)
                except duckdb.OutOfMemoryException:
                    adapter = type(adapter)()  # a fresh reader for the next attempt
            con.execute(f"SET memory_limit = '{prev}'")
            return self._convert(adapter, path, progress, rank, strict, parallel)
        finally:
            if tune and gc_on:
                gc.enable()
            if tune:
                pa.set_memory_pool(pool)
            con.execute(f"SET memory_limit = '{prev}'")
            con.execute(f"SET preserve_insertion_order = {'true' if order else 'false'}")
            con.execute(f"SET threads = {threads}")

    def _convert(self, adapter, path: Path, progress, rank, strict, parallel) -> SourceSummary:
        source_id = self.next_source_id()
        con = self._con
        if not parallel and SERIAL_INSERT_THREADS:  # `convert` restores `threads` after
            con.execute(f"SET threads = {SERIAL_INSERT_THREADS}")
        con.execute("BEGIN TRANSACTION")
        try:
            if parallel:
                _insert_runs(con, _read_ahead(adapter.read(path, source_id, progress)))
            else:  # gathered on the reader's thread: the inserts are few and the queue even
                for table_name, batch in _read_ahead(_gathered(adapter.read(path, source_id, progress),
                                                               budget.plan().insert_bytes), depth=1):
                    _insert(con, table_name, batch)
            acc = adapter.accounting
            lost = acc.lost
            if strict and lost:
                from .names import plural

                reason, n = lost.most_common(1)[0]
                raise TraceError(path, f"{plural(sum(lost.values()), 'input row')} would be skipped "
                                 f"(e.g. {n:,}: {reason})", "drop --strict to convert the rest")
            info = dict(adapter.source)
            if rank is not None:
                info["rank"] = rank
            self._finish_source(source_id, path, adapter.FORMAT, info, adapter.accounting,
                                adapter.nested, adapter.gpu_pids_filled, adapter.held_events)
            con.execute("COMMIT")
        except BaseException:
            _roll_back(con)
            raise
        acc = adapter.accounting
        meta = info.get("metadata") or {}
        meta = orjson.loads(meta) if isinstance(meta, str) else meta
        repairs = {str(r): n for r, n in (meta.get("tracekit_repairs") or {}).items() if isinstance(n, int)}
        return SourceSummary(source_id, str(path), adapter.FORMAT, dict(acc.converted), dict(acc.skipped),
                             frozenset(acc.by_design), repairs)

    def _finish_source(self, source_id: int, path: Path, fmt: str, info: dict, acc: Accounting,
                       nested: list | None = None, gpu_pids_filled: int = 0,
                       held: list | None = None) -> None:
        """The source's last steps: GPU rows' pid, events' nesting, the sources row.  ``nested``:
        the tracks (pid, tid, device_id, stream_id) whose events the reader began to nest and
        left to the store: nested again whole here (`nesting._renest_tracks`), with ``held``, the
        events of those tracks the reader held back, inserted here; the events the
        reader did not nest at all are nested after (`Adapter.nested`, `nesting.StreamNesting`).
        ``gpu_pids_filled``: how many GPU rows the reader gave a pid (`Adapter.gpu_pids_filled`)."""
        con = self._con
        # GPU work carries no pid in Kineto: take it from the launching API call (same correlation),
        # the one pid of the source's calls with that correlation.  The reader fills most from the
        # calls it saw before (kineto/gpu_pid.py): those that another call contradicts are taken
        # back here (an UPDATE of no rows, as a rule), then the rows without one are filled.
        if gpu_pids_filled:
            for t in schema.GPU_TABLES:
                con.execute(
                    f"""UPDATE {t} AS g SET pid = NULL FROM api_calls AS a
                        WHERE g.source_id = $sid AND a.source_id = $sid AND g.pid IS NOT NULL
                          AND a.correlation_id = g.correlation_id AND a.pid <> g.pid""", {"sid": source_id})
        # The correlation -> pid map is built once, and only when some GPU row lacks its pid
        # (nsys rows have it: no pass over its millions of API calls), of the correlations of
        # those rows only (the reader filled most: the 179 MB capture's map had 69 k calls for a
        # few memops, 27 ms)
        need = [t for t in schema.GPU_TABLES if con.execute(
            f"SELECT 1 FROM {t} WHERE source_id = $sid AND pid IS NULL AND correlation_id IS NOT NULL "
            "LIMIT 1", {"sid": source_id}).fetchall()]
        if need:
            wanted = " UNION ALL ".join(f"SELECT correlation_id FROM {t} WHERE source_id = $sid AND pid IS NULL"
                                        for t in need)
            con.execute(
                f"""CREATE OR REPLACE TEMP TABLE __tk_corr_pid AS
                    SELECT correlation_id, any_value(pid) AS pid FROM api_calls
                    WHERE source_id = $sid AND correlation_id IS NOT NULL AND correlation_id IN ({wanted})
                    GROUP BY correlation_id HAVING count(DISTINCT pid) = 1""", {"sid": source_id})
            try:
                for t in need:
                    con.execute(
                        f"""UPDATE {t} AS g SET pid = a.pid FROM __tk_corr_pid AS a
                            WHERE g.source_id = $sid AND g.pid IS NULL
                              AND g.correlation_id = a.correlation_id""", {"sid": source_id})
            finally:
                con.execute("DROP TABLE __tk_corr_pid")
        if nested:
            late = _renest_tracks(con, source_id, nested, held)
            for b in late.combine_chunks().to_batches() if late is not None else ():
                _insert(con, "events", b)
        _derive_nesting(con, source_id)
        span = con.execute(
            " UNION ALL ".join(
                f"SELECT min({s}), max({e}) FROM {t} WHERE source_id = $sid"
                for t, s, e in (("kernels", "start_ns", "end_ns"), ("memops", "start_ns", "end_ns"),
                                ("api_calls", "start_ns", "end_ns"), ("events", "start_ns", "end_ns"),
                                ("syncs", "start_ns", "end_ns"), ("counters", "ts_ns", "ts_ns"))),
            {"sid": source_id}).fetchall()
        los = [r[0] for r in span if r[0] is not None]
        his = [r[1] for r in span if r[1] is not None]
        row = {
            "source_id": source_id,
            "path": str(path.resolve()),
            "format": fmt,
            "start_ns": min(los) if los else None,
            "end_ns": max(his) if his else None,
            "rows_converted": orjson.dumps({k: v for k, v in sorted(acc.converted.items())}).decode(),
            "rows_skipped": acc.total_skipped,
            "converted_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "tracekit_version": __version__,
        }
        for k, v in info.items():
            if k == "metadata" and v is not None and not isinstance(v, str):
                v = orjson.dumps(v, default=str).decode()
            row[k] = v
        _insert(con, "sources", pa.RecordBatch.from_pylist([row], schema=schema.table("sources").arrow))
        if acc.skipped:
            rows = [{"source_id": source_id, "reason": r, "count": n, "example": acc.examples.get(r),
                     "by_design": r in acc.by_design}
                    for r, n in acc.skipped.items()]
            _insert(con, "skipped_rows",
                    pa.RecordBatch.from_pylist(rows, schema=schema.table("skipped_rows").arrow))

    def export_parquet(self, directory: str | os.PathLike, partitioned: bool = False) -> list[str]:
        """Write every table as ``DIR/<table>.parquet``; returns the paths.  ``partitioned``:
        a Hive-partitioned dataset instead, one folder per table and per source,
        ``DIR/<table>/source_id=<n>/data_0.parquet`` (docs/scaling.md), which `open_parquet`
        and any Parquet engine read back.

        Whole or not at all: the export is written into a hidden folder beside DIR
        (``.<name>.export-<pid>``), its manifest (`EXPORT_MANIFEST`: every file and its size,
        every table's rows) last, and then swapped with DIR in one rename (``renameat2``
        RENAME_EXCHANGE; elsewhere two renames), so a reader sees the old export or the new one,
        never a mix; a kill leaves DIR as it was, and the next export removes the leftovers.
        DIR may hold nothing but an export (a folder of other files is refused, not replaced)."""
        d = Path(directory)
        _check_export_dir(d)
        d.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale_exports(d)
        tmp = d.parent / f".{d.name}.export-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            rows = {}
            for t in schema.TABLES:
                if partitioned:
                    p = tmp / t.name
                    self._con.execute(f"COPY {t.name} TO '{_sql_str(str(p))}' (FORMAT parquet, "
                                      "COMPRESSION zstd, PARTITION_BY (source_id), OVERWRITE_OR_IGNORE)")
                else:
                    p = tmp / f"{t.name}.parquet"
                    self._con.execute(f"COPY {t.name} TO '{_sql_str(str(p))}' (FORMAT parquet, COMPRESSION zstd)")
                rows[t.name] = self._con.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0]
            files = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
            manifest = {"tracekit_version": __version__, "schema_version": schema.SCHEMA_VERSION,
                        "layout": "partitioned" if partitioned else "flat", "rows": rows, "files": files}
            part = tmp / f".{EXPORT_MANIFEST}.part"
            part.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
            os.replace(part, tmp / EXPORT_MANIFEST)
            _swap_in(tmp, d)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return [str(d / (t.name if partitioned else f"{t.name}.parquet")) for t in schema.TABLES]


#: The file an export (`Store.export_parquet`) writes last: its files with their sizes and its
#: tables' rows; `open_parquet` refuses an export whose files differ from it.
EXPORT_MANIFEST = "tracekit_export.json"


def _export_names() -> set[str]:
    return {EXPORT_MANIFEST} | {n for t in schema.TABLES for n in (t.name, f"{t.name}.parquet")}


def _check_export_dir(d: Path) -> None:
    """An export replaces DIR whole: only a folder holding an export (or nothing) may be replaced."""
    if not d.exists():
        return
    if not d.is_dir():
        raise StoreError(f"--parquet {d}: exists and is not a folder; choose another --parquet DIR")
    other = sorted(p.name for p in d.iterdir() if p.name not in _export_names())
    if other:
        raise StoreError(f"--parquet {d}: holds files that are not a tracekit export (e.g. {other[0]}), "
                         "which writing the export would remove; export into an empty or new folder")


def _clean_stale_exports(d: Path) -> None:
    """Remove the hidden folders of exports into DIR whose process is gone (killed mid-export)."""
    pat = re.compile(rf"^\.{re.escape(d.name)}\.(export|old)-(\d+)$")
    try:
        entries = list(d.parent.iterdir())
    except OSError:
        return
    for p in entries:
        m = pat.match(p.name)
        if m and not _pid_alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)


def _swap_in(new: Path, d: Path) -> None:
    """Put folder ``new`` at ``d`` in one step; the old ``d`` (if any) ends up at ``new``, for the
    caller to remove."""
    if not os.path.lexists(d):
        os.rename(new, d)
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
        AT_FDCWD, RENAME_EXCHANGE = -100, 2
        if renameat2(AT_FDCWD, os.fsencode(new), AT_FDCWD, os.fsencode(d), RENAME_EXCHANGE) == 0:
            return
    except (AttributeError, OSError):
        pass
    old = d.parent / f".{d.name}.old-{os.getpid()}"
    os.rename(d, old)
    os.rename(new, d)
    os.rename(old, new)


def open_parquet(directory: str | os.PathLike, sandbox: bool = False) -> Store:
    """Query a Parquet export of a store (``export_parquet``: the flat ``DIR/<table>.parquet``
    files, or the Hive-partitioned ``DIR/<table>/source_id=<n>/*.parquet`` dataset, also made by
    other tools) with every tracekit view on top: an in-memory DuckDB whose tables are views over
    the files (not loaded; a filter on source_id reads only that source's partitions).  Tables
    without files are empty.

    ``sandbox``: the SQL gets `SANDBOX` as on a store.  DuckDB lets a locked connection reach
    files only through ``allowed_paths``, which would let SQL overwrite them too, so the tables
    are then read into memory (``CREATE TABLE ... AS SELECT`` from the files) before the lock."""
    d = Path(directory)
    if not d.is_dir():
        raise StoreError(f"{d}: no such folder; write a Parquet export with "
                         f"`tracekit convert TRACE --parquet {d}`")
    _check_manifest(d)
    flat = {t.name: d / f"{t.name}.parquet" for t in schema.TABLES if (d / f"{t.name}.parquet").is_file()}
    parts = {t.name: d / t.name for t in schema.TABLES if any(d.glob(f"{t.name}/source_id=*/*.parquet"))}
    if not flat and not parts:
        raise StoreError(f"{d}: not a tracekit Parquet export (neither <table>.parquet files nor "
                         "<table>/source_id=<n>/ folders); write one with "
                         f"`tracekit convert TRACE --parquet {d} [--partitioned]`")
    if flat and parts:
        raise StoreError(f"{d}: holds both the flat (<table>.parquet) and the partitioned "
                         "(<table>/source_id=<n>/) layout; export into an empty folder")
    st = Store.__new__(Store)
    st.path = st.label = str(d)
    st._con = fit_threads(duckdb.connect())
    st._views = set()
    st._library = False
    st._libs = set()
    st._init_kept(True)  # nothing writes the files while it is open
    st.sandboxed = bool(sandbox)
    kind = "TABLE" if sandbox else "VIEW"
    try:
        for t in schema.TABLES:
            cols = ", ".join('"' + c.name + '"' for c in t.arrow)
            # the folder's own name is escaped: DuckDB reads a path as a glob pattern, so a folder
            # named run[1] or a*b would match other folders or none (glob.escape: [[], [*], [?])
            if t.name in flat:
                src = f"read_parquet('{_sql_str(glob.escape(str(flat[t.name])))}')"
            elif t.name in parts:
                src = (f"read_parquet('{_sql_str(glob.escape(str(parts[t.name])))}/*/*.parquet', "
                       "hive_partitioning = true, hive_types = {'source_id': INTEGER})")
            else:
                st._con.execute(t.ddl().replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE", 1))
                continue
            st._con.execute(f"CREATE {kind} {t.name} AS SELECT {cols} FROM {src}")
    except duckdb.Error as e:
        st._con.close()
        raise StoreError(f"{d}: not a Parquet export of this tracekit's tables "
                         f"({str(e).splitlines()[0]}); export it again with `tracekit convert --parquet`") from None
    if sandbox:
        for stmt in SANDBOX:
            st._con.execute(stmt)
    return st


def _check_manifest(d: Path) -> None:
    """An export written by tracekit (`Store.export_parquet`) holds exactly the files its manifest
    lists, each of its size; any other (a half-written or mixed export, a file changed since) is
    refused.  A folder without a manifest (other tools' datasets, exports of older tracekits) is
    read as it is."""
    m = d / EXPORT_MANIFEST
    if not m.exists():
        return
    redo = f"export it again (`tracekit convert TRACE --parquet {d}`)"
    try:
        files = orjson.loads(m.read_bytes())["files"]
        have = {str(f.relative_to(d)): f.stat().st_size for f in d.rglob("*")
                if f.is_file() and f.name != EXPORT_MANIFEST}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StoreError(f"{d}: unreadable export manifest {EXPORT_MANIFEST} ({e}); {redo}") from None
    for name, size in files.items():
        if name not in have:
            raise StoreError(f"{d}: incomplete Parquet export ({name} is missing); {redo}")
        if have[name] != size:
            raise StoreError(f"{d}: Parquet export changed since it was written ({name}: {have[name]:,} "
                             f"bytes, the manifest says {size:,}); {redo}")
    extra = sorted(set(have) - set(files))
    if extra:
        raise StoreError(f"{d}: Parquet export mixed with other files ({extra[0]} is not one of its "
                         f"files); {redo}")


def os_error_line(e: OSError, store=None) -> str:
    """One line for an environment fault (full disk, read-only folder, no permission): which file,
    what the system said, what to do."""
    import errno

    where = e.filename or store or "?"
    why = e.strerror or str(e)
    todo = {errno.ENOSPC: "free some space or write elsewhere",
            errno.EROFS: "write to a writable location",
            errno.EACCES: "write where you have permission",
            errno.EPERM: "write where you have permission",
            errno.EDQUOT: "free some of your quota or write elsewhere"}.get(e.errno, "check the path")
    return f"{where}: {why}; {todo}"


class Rollback(Exception):
    """Raised inside a ``writing()`` block: leave the store exactly as it was (nothing is written,
    no new file appears), without an error."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _clean_stale(path: Path) -> None:
    """Remove what killed conversions of this store left next to it: ``.<name>.tmp-<pid>`` copies
    (with their .wal and spill folder) and ``.<name>.parts-<pid>`` worker folders, of processes
    that are gone."""
    _remove_left_by_dead(path.parent, re.compile(rf"^\.{re.escape(path.name)}\.(?:tmp|parts)-(\d+)"))


def _remove_left_by_dead(folder: Path, pat: re.Pattern) -> None:
    """Remove the entries of ``folder`` whose name matches ``pat`` (group 1: the pid that made
    them) where that process is gone."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for p in entries:
        m = pat.match(p.name)
        if m and not _pid_alive(int(m.group(1))):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


_DUCKDB_MAGIC = b"DUCK"


def _check_replaceable(path: Path) -> None:
    """--replace deletes the file at the store's path: only ever a DuckDB file (or an empty one)."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return
    if head and head[8:12] != _DUCKDB_MAGIC:
        what = ("an SQLite database (an nsys export?)" if head.startswith(b"SQLite format 3")
                else "not a DuckDB file")
        raise StoreError(f"{path}: is {what}, not a tracekit store; refusing to replace it: "
                         "choose another --db")


def _check_readable(path: str) -> None:
    """A store to query: it exists, is a regular file, and is not another tool's file."""
    from .names import printable

    shown = printable(path)
    if not os.path.lexists(path):
        raise StoreError(f"{shown}: no such store; run `tracekit convert TRACE --db {shown}` first")
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StoreError(f"{shown}: a symbolic link loop; point --db at the store itself") from None
        raise StoreError(os_error_line(e, shown)) from None
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{shown}: not a regular file; --db takes a tracekit store (a DuckDB file)")
    try:
        with builtins.open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise StoreError(os_error_line(e, shown)) from None
    if len(head) >= 12 and head[8:12] != b"DUCK":  # (a DuckDB file: a checksum, then DUCK)
        what = _input_kind(Path(path), head)
        if what is None:
            raise StoreError(f"{shown}: not a tracekit store (not a DuckDB file); --db takes the store "
                             "that `tracekit convert TRACE` writes")
        raise StoreError(f"{shown}: {what}, not a tracekit store; convert it first: tracekit convert "
                         f"{shlex.quote(shown)} (then query the store it writes)")


def _input_kind(path: Path, head: bytes) -> str | None:
    """What a file given as a store is, when it is an input `tracekit convert` reads (or SQLite)."""
    if head.startswith(detect.SQLITE_MAGIC):
        return "an SQLite file"
    try:
        fmt = detect.sniff(path)
    except TraceError:
        return None
    what = next(f.what for f in detect.REGISTRY if f.name == fmt)
    return f"{'an' if what[0].lower() in 'aeion' else 'a'} {what}"


def _check_path(path: Path) -> None:
    """The store's path, checked before any work: its folder exists, its name is UTF-8, and a
    store there may be written (a read-only store -- no write permission bit -- is neither
    added to nor replaced)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(f"{_shown(path)}: the store's name is not UTF-8 text; choose another --db") from None
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"{path}: no such folder {parent}; create it or choose another --db")
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{path}: not a regular file; choose another --db")
    if not st.st_mode & 0o222:
        raise StoreError(f"{path}: the store is read-only (mode {stat.S_IMODE(st.st_mode):04o}); "
                         "make it writable (chmod u+w) to convert into it, or choose another --db")


def _shown(path) -> str:
    """A path as it may be printed: undecodable bytes and control characters escaped."""
    from .names import shown

    return shown(path)


class _WriterCheck:
    """`_no_other_writer`'s handle: the store file's mode (None: no store yet) and its shared lock."""

    def __init__(self, path: Path, mode: int | None, fd: int | None):
        self.path, self.mode, self.fd = path, mode, fd

    def lock(self) -> None:
        """Take (again) a shared lock on the store file, as DuckDB's read-only connections do (a
        POSIX record lock: any close of the file in this process drops it, e.g. copying it), or
        raise StoreError naming the process that holds it for writing."""
        if self.fd is None:
            return
        import fcntl
        import struct

        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                return  # (no locks on this file system: nothing to learn)
        pid = None
        try:  # F_GETLK: who holds it (struct flock: type, whence, start, len, pid)
            got = fcntl.fcntl(self.fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0) + bytes(4))
            pid = struct.unpack("hhqqi", got[:struct.calcsize("hhqqi")])[4]
        except (OSError, struct.error):
            pass
        raise StoreError(f"{_shown(self.path)}: is open for writing by another process"
                         + (f" (PID {pid})" if pid and pid > 0 else "")
                         + "; close it there (or wait for it to finish), then convert again")


@contextmanager
def _no_other_writer(path: Path, replace: bool):
    """Refuse a conversion into a store that another process holds open for writing (DuckDB's
    lock on the file): the conversion would replace the file under it, and its later writes
    would be lost.  A shared lock is held meanwhile (`_WriterCheck.lock`, taken again after the
    store is copied), so no DuckDB can open it for writing until the new store is in place.
    With ``replace``, a DuckDB file that is not a tracekit store is refused (never deleted)."""
    try:
        st = os.stat(path)
    except OSError:
        yield _WriterCheck(path, None, None)
        return
    fd = None
    if st.st_size:
        try:
            import fcntl  # noqa: F401 (POSIX only)

            fd = os.open(path, os.O_RDONLY)
        except (ImportError, OSError):
            fd = None
    check = _WriterCheck(path, stat.S_IMODE(st.st_mode), fd)
    try:
        check.lock()
        if replace and st.st_size:
            _check_is_store(path)
        yield check
    finally:
        if fd is not None:
            os.close(fd)


def _check_is_store(path: Path) -> None:
    """--replace deletes the file at the store's path: a DuckDB database without tracekit's
    tables is someone's data, refused.  (A file DuckDB cannot open -- a damaged store -- may be
    replaced.)"""
    try:
        con = duckdb.connect(str(path), read_only=True, config=dict(_NO_EXTENSIONS))
    except duckdb.Error:
        return
    try:
        is_store = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                               "AND table_name = 'tracekit_meta'").fetchall()[0][0]
    except duckdb.Error:
        is_store = 1
    finally:
        con.close()
    if not is_store:
        raise StoreError(f"{_shown(path)}: is a DuckDB database that is not a tracekit store (no "
                         "tracekit_meta table); refusing to replace it: choose another --db")


@contextmanager
def _locked(path: Path):
    """An exclusive lock on the store for the whole conversion (``.<name>.lock`` next to it, gone
    when the conversion ends), so two conversions into one store run one after the other and both
    sources are kept (each works on a copy: without the lock the last rename would win)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks here
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    waited = False
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield  # a read-only folder: the conversion itself will fail with a clear message
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not waited:
                print(f"tracekit: waiting for another conversion into {path} to finish", file=sys.stderr)
                waited = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # the holder removes the file before it unlocks: lock only the file still there
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            os.unlink(lock)
        finally:
            os.close(fd)


def persist_views(con: duckdb.DuckDBPyConnection) -> bool:
    """Write the macros of ``sql/lib/`` and every view of ``sql/`` into the store (not TEMP:
    `views.persist`), so that DuckDB clients without tracekit find them; replace the copies an
    earlier conversion wrote and drop those this tracekit no longer has.  ``tracekit_meta``
    records them: ``persisted_views`` / ``persisted_macros`` (JSON lists of names),
    ``views_version`` (the tracekit version that wrote them) and ``views_digest`` (`views.digest`
    of their SQL).  One transaction: all or nothing.  Creating them binds every view: 0.62-0.65 s
    of CPU on one thread (registering them all TEMP: 0.57-0.59 s; `roofline` and `phase_roofline`
    the most) and +0.5 MB of file (4.7 -> 5.3 MB, decode_b1), so a store whose copies have this
    digest and are all there (views and macros) is left alone (adding sources: ~0.01 s); returns
    whether it wrote them.

    Each copy gets the comment ``tracekit <digest>``: a read-only session uses the copies only
    while all of them carry it (`Store._copies_are_current`); otherwise it creates its own as
    TEMP objects, which DuckDB resolves first (also inside a persisted view's body), so a store
    written by another tracekit version, or edited by hand, gives this version's results.
    ``schema_version`` is about the tables only."""
    con.execute("BEGIN TRANSACTION")
    try:
        old = dict(con.execute("SELECT key, value FROM tracekit_meta WHERE key IN "
                               "('persisted_views', 'persisted_macros', 'views_digest')").fetchall())
        cat = con.execute("SELECT current_database()").fetchall()[0][0]
        digest = views.digest()
        if old.get("views_digest") == digest and _copies_marked(con, cat, digest):  # (all there, unchanged)
            con.execute("COMMIT")
            return False
        macros, names = views.persist(con)
        where = '"' + cat.replace('"', '""') + '".main.'
        mark = _sql_lit(f"tracekit {digest}")  # (`_copies_marked`)
        for v in names:
            con.execute(f'COMMENT ON VIEW {where}"{v}" IS {mark}')
        for m, kind in con.execute(
                "SELECT DISTINCT function_name, function_type FROM duckdb_functions() WHERE database_name = $c "
                "AND schema_name = 'main' AND function_type IN ('macro', 'table_macro') AND list_contains($m, function_name)",
                {"c": cat, "m": macros}).fetchall():
            con.execute(f'COMMENT ON MACRO {"TABLE " if kind == "table_macro" else ""}{where}"{m}" IS {mark}')
        for v in sorted(set(orjson.loads(old.get("persisted_views") or "[]")) - set(names)):
            con.execute(f'DROP VIEW IF EXISTS {where}"{v}"')
        for m in sorted(set(orjson.loads(old.get("persisted_macros") or "[]")) - set(macros)):
            kinds = {r[0] for r in con.execute(
                "SELECT function_type FROM duckdb_functions() WHERE database_name = $c "
                "AND schema_name = 'main' AND function_name = $m", {"c": cat, "m": m}).fetchall()}
            for kind in kinds & {"macro", "table_macro"}:
                con.execute(f'DROP MACRO {"TABLE " if kind == "table_macro" else ""}IF EXISTS {where}"{m}"')
        for key, value in (("persisted_views", orjson.dumps(names).decode()),
                           ("persisted_macros", orjson.dumps(macros).decode()),
                           ("views_version", __version__), ("views_digest", digest)):
            con.execute("INSERT INTO tracekit_meta VALUES (?, ?) ON CONFLICT DO UPDATE SET value = excluded.value",
                        [key, value])
        con.execute("COMMIT")
        return True
    except BaseException:
        _roll_back(con)
        raise


def _roll_back(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK after an error, which is raised after it whatever happens here: DuckDB may have
    ended the transaction itself (a full disk, out of memory: "no transaction is active"), and
    that second error must not replace the first (what the user has to fix)."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def _copies_marked(con: duckdb.DuckDBPyConnection, cat: str, digest: str) -> bool:
    """Whether every view and macro of this tracekit is in database ``cat`` (not TEMP) with the
    comment `persist_views` gave it, ``tracekit <digest>``: a copy replaced since (``CREATE OR
    REPLACE`` by hand, another tracekit) has lost it, a dropped one is missing. (A digest of
    DuckDB's rendering of the definitions cannot tell: it changes each time the catalog is
    written back, ``7.7e12`` <-> ``CAST(7700000000000.0 AS DOUBLE)``.)"""
    mark = f"tracekit {digest}"
    names, macros = [v.name for v in views.all_views()], sorted(set(views.macro_names()))
    rows = con.execute(
        "SELECT 'view', view_name, comment FROM duckdb_views() WHERE database_name = $c AND schema_name = 'main' "
        "AND NOT temporary AND list_contains($v, view_name) "
        "UNION ALL SELECT 'macro', function_name, comment FROM duckdb_functions() WHERE database_name = $c "
        "AND schema_name = 'main' AND function_type IN ('macro', 'table_macro') AND list_contains($m, function_name)",
        {"c": cat, "v": names, "m": macros}).fetchall()
    return ({r[1] for r in rows if r[0] == "view"} == set(names)
            and {r[1] for r in rows if r[0] == "macro"} == set(macros)
            and all(r[2] == mark for r in rows))


def _file_state(path: str) -> str | None:
    """The state of a store file that any change DuckDB writes to it changes: its inode, size and
    modification time, and a hash of its headers (the first 12 KiB, whose checkpoint iteration
    every checkpoint advances); None while a WAL is beside it (changes not checkpointed)."""
    import hashlib

    try:
        if os.path.exists(f"{path}.wal"):
            return None
        st = os.stat(path)
        with builtins.open(path, "rb") as f:
            head = f.read(12288)
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{hashlib.sha256(head).hexdigest()[:32]}"


def _verified_record(path: str, digest: str) -> tuple[Path, str] | None:
    """Where the record of this store's checked copies is kept (the cache folder, `CACHE_ENV`,
    ``verified/``, one file per store path) and what it holds for the file's present state
    (`_file_state`) and ``digest``; None without a cache folder or a state."""
    import hashlib

    d, state = _cache_dir(), _file_state(path)
    if d is None or state is None:
        return None
    key = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:24]
    return d / "verified" / key, f"{state} {digest}"


def _verified(path: str, digest: str) -> bool:
    """Whether `_copies_marked` found this store's copies current (views and macros of
    ``digest``) in the file's present state, or the conversion that wrote it made them so
    (`writing`): the check reads DuckDB's catalog of ~3,400 functions, 20-35 ms of every
    session, which the record (`_verified_record`) saves."""
    rec = _verified_record(path, digest)
    try:
        return rec is not None and rec[0].read_text() == rec[1]
    except OSError:
        return False


def _record_verified(path: str, digest: str) -> None:
    """Record that the store's copies are current in the file's present state (best effort: a
    cache folder that cannot be written only means checking again next time)."""
    rec = _verified_record(path, digest)
    if rec is None:
        return
    vp, text = rec
    try:
        vp.parent.mkdir(parents=True, exist_ok=True)
        part = vp.with_name(f".{vp.name}.{os.getpid()}-{threading.get_ident()}")
        part.write_text(text)
        os.replace(part, vp)
    except OSError:
        pass


#: Where a new store's starting file is kept (`_from_template`): $TRACEKIT_CACHE_DIR, else
#: $XDG_CACHE_HOME/tracekit, else ~/.cache/tracekit; TRACEKIT_CACHE_DIR set empty: no template.
CACHE_ENV = "TRACEKIT_CACHE_DIR"


def _cache_dir() -> Path | None:
    d = os.environ.get(CACHE_ENV)
    if d is not None:
        return Path(d) if d else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracekit"


#: What `persist_views` writes beyond the SQL (2: each copy commented with the digest), in the
#: template's name: a template written before is not reused.
_TEMPLATE_FORMAT = "2"


def _template_key() -> str:
    import hashlib

    h = hashlib.sha256()
    for part in (__version__, views.digest(), str(schema.SCHEMA_VERSION), duckdb.__version__,
                 str(STORAGE_VERSION), _TEMPLATE_FORMAT, *(t.ddl() for t in schema.TABLES)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def _template_path() -> Path | None:
    d = _cache_dir()
    return None if d is None else d / f"store-template-{_template_key()}.duckdb"


def _from_template(tmp: Path) -> bool:
    """Start a new store as a copy of the template: an empty store with the tables, the views and
    the macros already written (`persist_views`), which writing them into every new store would
    cost ~0.25-0.3 s (binding every view).  The template is made by the first conversion of this
    tracekit, SQL, schema and DuckDB (its name is a hash of them) in the cache folder
    (`CACHE_ENV`); False, having written nothing at ``tmp``, when there is none and none can be
    made (a read-only home): the store then starts empty, as without a cache."""
    tpl = _template_path()
    if tpl is None:
        return False
    d = tpl.parent
    _clean_stale_templates(d)
    try:
        if not tpl.exists():
            d.mkdir(parents=True, exist_ok=True)
            part = d / f".{tpl.name}.{os.getpid()}-{threading.get_ident()}"
            part.unlink(missing_ok=True)
            try:
                con = _connect(str(part), False)
                try:
                    _create_tables(con)
                    persist_views(con)
                    con.execute("CHECKPOINT")
                finally:
                    con.close()
                os.replace(part, tpl)  # whole or not at all, should two conversions race
                for old in d.glob("store-template-*.duckdb"):  # other versions' (best effort)
                    if old != tpl:
                        old.unlink(missing_ok=True)
            finally:
                for p in (part, Path(f"{part}.wal")):
                    p.unlink(missing_ok=True)
                shutil.rmtree(f"{part}.tmp", ignore_errors=True)
        shutil.copyfile(tpl, tmp)
        return True
    except (OSError, duckdb.Error):
        for p in (tmp, Path(f"{tmp}.wal")):
            p.unlink(missing_ok=True)
        return False


def _clean_stale_templates(d: Path) -> None:
    """Remove the partial templates (``.store-template-<key>.duckdb.<pid>-<thread>``, with their
    .wal and spill folder) that conversions killed while making one left in the cache folder."""
    _remove_left_by_dead(d, re.compile(r"^\.store-template-[0-9a-f]+\.duckdb\.(\d+)-\d+"))


@contextmanager
def writing(path: str | os.PathLike = DEFAULT_DB, replace: bool = False, persist: bool = True):
    """Open a store for conversion atomically: work on a temporary copy next to it and move it
    into place only when the block ends without an exception. Readers of the old store are never
    blocked or shown a half-written state, and a crash leaves the store as it was. Conversions
    into one store take turns (a lock next to it); ``Rollback`` raised in the block leaves the
    store untouched; leftovers of killed conversions are removed.  Before the store is moved
    into place, the views and their macros are written into it (`persist_views`), unless it began
    as a copy of the template (`_from_template`), which has them; ``persist=False``: neither, for
    the private stores of parallel workers."""
    path = Path(path)
    _check_path(path)
    if replace and path.exists():
        _check_replaceable(path)
    with _locked(path), _no_other_writer(path, replace) as other:
        _clean_stale(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        for p in (tmp, Path(f"{tmp}.wal")):
            p.unlink(missing_ok=True)
        if path.exists() and not replace:
            try:
                shutil.copyfile(path, tmp)
                if Path(f"{path}.wal").exists():
                    shutil.copyfile(f"{path}.wal", f"{tmp}.wal")
                other.lock()  # (copying closed the file: the lock is taken again, or a writer came)
            except BaseException as e:  # (a full disk: no partial copy left behind)
                for p in (tmp, Path(f"{tmp}.wal")):
                    p.unlink(missing_ok=True)
                if isinstance(e, OSError) and e.filename is not None and str(tmp) in str(e.filename):
                    e.filename = str(path)  # the user's store, not the hidden copy
                raise
        # a copy of the template has this tracekit's views and macros: nothing to persist
        templated = persist and not (path.exists() and not replace) and _from_template(tmp)
        try:
            try:
                st = Store(tmp, label=str(path))
            except Exception:
                if not templated:
                    raise
                # a damaged template (a truncated copy, a full disk): drop it and start empty, as
                # without a cache; the next conversion makes it again
                for p in (tmp, Path(f"{tmp}.wal"), _template_path()):
                    p.unlink(missing_ok=True)
                templated = False
                st = Store(tmp, label=str(path))
        except BaseException:
            for p in (tmp, Path(f"{tmp}.wal")):
                p.unlink(missing_ok=True)
            raise
        ok = False
        try:
            yield st
            if persist and not templated:
                persist_views(st._con)
            try:
                st._con.execute("CHECKPOINT")
            except duckdb.IOException as e:  # the disk filled while the store is written out: the
                if "No space left on device" not in str(e):  # old store stays, said in one line
                    raise
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
            ok = True
        except Rollback:
            pass
        finally:
            st.close()
            if ok:
                if other.mode is not None:
                    os.chmod(tmp, other.mode)  # the store keeps its file mode
                os.replace(tmp, path)
                Path(f"{path}.wal").unlink(missing_ok=True)
                if persist:  # its copies are this tracekit's: written now, or the template's
                    _record_verified(str(path), views.digest())
            for p in (tmp, Path(f"{tmp}.wal")):
                p.unlink(missing_ok=True)
            shutil.rmtree(f"{tmp}.tmp", ignore_errors=True)


def _read_ahead(items, depth: int = 4):
    """Iterate a generator that runs in a background thread, up to ``depth`` items ahead: the
    adapter parses (Python, holding the GIL) while DuckDB inserts the previous batches (C++,
    without it).  Exceptions of the generator are raised here; stopping early stops it."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if not put((item, None)):
                    break
        except BaseException as e:  # handed to the consumer
            put((None, e))
        finally:
            items.close()
        put((done, None))

    t = threading.Thread(target=work, name="tracekit-adapter", daemon=True)
    t.start()
    try:
        while True:
            item, err = q.get()
            if err is not None:
                raise err
            if item is done:
                return
            yield item
    finally:
        stop.set()
        t.join()


def _arrow_pool(name: str, default: pa.MemoryPool) -> pa.MemoryPool:
    """The named Arrow memory pool ("system", "jemalloc", "mimalloc"; another name is a KeyError);
    the default where this pyarrow build lacks it."""
    make = {"system": pa.system_memory_pool, "jemalloc": pa.jemalloc_memory_pool,
            "mimalloc": pa.mimalloc_memory_pool}[name]
    try:
        return make()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return default


def _gathered(items, limit: int):
    """(table, batch) items regrouped as (table, Arrow table): the batches of each table gathered,
    in their order, while all that is held stays under ``limit`` bytes; beyond, the table holding
    the most is handed on as one (the tables' relative order changes; each table's own does not).
    Every insert costs ~1 ms of fixed work in DuckDB's Python layer, and a few large inserts
    overlap the reader better than many small ones: the 179 MB capture's 144 batches become ~40
    inserts, and reading + inserting its rows takes 0.8-1.0 s instead of 1.0-1.3 (docs/scaling.md).
    ``items`` is a generator."""
    held: dict[str, list] = {}
    size: dict[str, int] = {}
    total = 0
    try:
        for name, batch in items:
            held.setdefault(name, []).append(batch)
            size[name] = size.get(name, 0) + batch.nbytes
            total += batch.nbytes
            if total >= limit:
                big = max(size, key=size.__getitem__)
                total -= size.pop(big)
                yield big, pa.Table.from_batches(held.pop(big))
        for name, batches in held.items():
            yield name, pa.Table.from_batches(batches)
    finally:
        items.close()  # stopped early: the reader stops too


def _insert_runs(con: duckdb.DuckDBPyConnection, items) -> None:
    """Insert (table, batch) items: each run of consecutive batches of one table (and schema)
    as one INSERT that DuckDB runs on up to INSERT_THREADS threads, without keeping insertion
    order, pulling the batches as it goes (no run is held in memory).  An exception of the item
    iterator is raised here as it was.  The caller restores `preserve_insertion_order` and
    `threads` (after its ROLLBACK, should this fail: an aborted transaction takes no SET)."""
    pending = next(items, None)
    threads, order = con.execute(
        "SELECT current_setting('threads'), current_setting('preserve_insertion_order')").fetchall()[0]
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET threads = {max(1, min(threads, INSERT_THREADS, budget.plan().insert_threads))}")
    while pending is not None:
        name, first = pending
        pending = None
        failed: list[BaseException] = []

        def run(name=name, first=first):
            nonlocal pending
            yield first
            while True:
                try:
                    item = next(items, None)
                except BaseException as e:  # raised again below, not as a DuckDB error
                    failed.append(e)  # noqa: B023 (this run is consumed before the next)
                    return
                if item is None:
                    return
                if item[0] != name or item[1].schema != first.schema:
                    pending = item
                    return
                yield item[1]

        reader = pa.RecordBatchReader.from_batches(
            _json_typed(name, first).schema, (_json_typed(name, b) for b in run()))
        try:
            con.from_arrow(reader).insert_into(name)
        except duckdb.Error:
            if failed:
                raise failed[0] from None
            raise
        if failed:
            raise failed[0]
    con.execute(f"SET preserve_insertion_order = {'true' if order else 'false'}")
    con.execute(f"SET threads = {threads}")


_WRITE_ALIAS = "tracekit_store"  # the catalog name of a store opened for writing


def fit_threads(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Cap the connection's DuckDB ``threads`` at the CPUs this process may run on
    (`budget.usable_cpus`): DuckDB counts the machine's cores, not the process's affinity, and
    16 threads on 2 CPUs (``taskset -c 0,1`` on a 16-core host, 2026-12-04) took the issue-24 job
    to 402 MB peak RSS and 3.8 s of CPU for 2.85 s of wall.  ``threads`` is the database
    instance's (every connection to it); a locked configuration is left as it is."""
    try:
        cpus = budget.usable_cpus()
        if cpus < con.execute("SELECT current_setting('threads')").fetchall()[0][0]:
            con.execute(f"SET threads = {cpus}")
    except duckdb.Error:  # (lock_configuration: a sandboxed store's second connection)
        pass
    return con


#: Every connection to a store: DuckDB neither downloads nor loads an extension by itself (a
#: file of another kind, e.g. an SQLite database, would otherwise fetch ``sqlite_scanner`` from
#: the network at connect, before the sandbox applies).
_NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the store file; for writing, the file attached with ROW_GROUP_SIZE and, for
    a new file, STORAGE_VERSION (options of ATTACH, not of connect; an existing file keeps its
    format: DuckDB refuses to lower it) and its spill files beside it, as DuckDB puts a file's.
    Extensions are neither installed nor loaded automatically (`_NO_EXTENSIONS`)."""
    if read_only or not (ROW_GROUP_SIZE or STORAGE_VERSION):
        return fit_threads(duckdb.connect(path, read_only=read_only, config=dict(_NO_EXTENSIONS)))
    con = fit_threads(duckdb.connect(config={"temp_directory": path + ".tmp", **_NO_EXTENSIONS}))
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    opts = ([f"ROW_GROUP_SIZE {int(ROW_GROUP_SIZE)}"] if ROW_GROUP_SIZE else []) + (
        [f"STORAGE_VERSION '{_sql_str(STORAGE_VERSION)}'"] if STORAGE_VERSION and new else [])
    try:
        con.execute(f"ATTACH '{_sql_str(path)}' AS {_WRITE_ALIAS}" + (f" ({', '.join(opts)})" if opts else ""))
        con.execute(f"USE {_WRITE_ALIAS}")
    except duckdb.Error:
        con.close()
        raise
    return con


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def _sql_lit(v) -> str:
    return "NULL" if v is None else "'" + _sql_str(str(v)) + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _dictionary_text(data):
    """A record batch (or table) with its text columns dictionary-encoded (kept rows: see
    `Store._keep_view`)."""
    import pyarrow.compute as pc

    cols = [pc.dictionary_encode(c) if pa.types.is_string(c.type) or pa.types.is_large_string(c.type)
            or pa.types.is_string_view(c.type) else c for c in data.columns]
    return type(data).from_arrays(cols, names=data.schema.names)


#: the JSON columns of each table, by position: handed to DuckDB as Arrow's JSON extension type
_JSON_COLS = {t.name: [i for i, c in enumerate(t.columns) if c.json] for t in schema.TABLES}
_JSON_EXT = pa.json_(pa.string())


def _json_typed(table_name: str, data):
    """``data`` (a record batch or table of ``table_name``) with its JSON columns given Arrow's
    JSON extension type over the same text (no copy): DuckDB then stores the text as it is,
    where from a string column it parses every value to check it (yyjson: 0.05-0.07 s of the
    179 MB capture's inserts, on the thread that inserts).  The readers' JSON is valid by
    construction (encoded by orjson / msgspec / SQLite, or input text the Kineto scanner
    validated); tests/store/test_store_safety.py checks every stored value of the real traces."""
    idx = _JSON_COLS.get(table_name)
    if not idx:
        return data
    for i in idx:
        col = data.column(i)
        if col.type != pa.string():
            continue
        if isinstance(col, pa.ChunkedArray):
            col = pa.chunked_array([pa.ExtensionArray.from_storage(_JSON_EXT, c) for c in col.chunks], _JSON_EXT)
        else:
            col = pa.ExtensionArray.from_storage(_JSON_EXT, col)
        data = data.set_column(i, pa.field(data.schema.field(i).name, _JSON_EXT), col)
    return data


def _insert(con: duckdb.DuckDBPyConnection, table_name: str, batch: pa.RecordBatch) -> None:
    # from_arrow + insert_into (not register + INSERT ... SELECT): a registered object stays
    # referenced by the open transaction, so every batch of a conversion would stay in memory
    con.from_arrow(_json_typed(table_name, batch)).insert_into(table_name)


def head_of(rows: pa.RecordBatchReader, n: int) -> tuple[pa.Table, int]:
    """The first ``n`` rows of a stream of batches (0: all of them) and the number of all its
    rows, read to its end: the batches past the first ``n`` rows are counted and let go."""
    kept, total = [], 0
    for batch in rows:
        if not n or total < n:
            kept.append(batch if not n else batch.slice(0, n - total))
        total += batch.num_rows
    return pa.Table.from_batches(kept, schema=rows.schema), total


def open(path: str | os.PathLike = DEFAULT_DB, read_only: bool = True,  # noqa: A001
         sandbox: bool | None = None) -> Store:
    """Open a store for queries (the Python API entry point: ``tracekit.open(path).sql(q)``).
    Read-only stores are sandboxed (`SANDBOX`: no file / network / extension access from SQL,
    configuration locked) unless ``sandbox=False``.  A folder is a Parquet export
    (`open_parquet`), sandboxed likewise."""
    if os.path.isdir(path):
        return open_parquet(path, sandbox=read_only if sandbox is None else sandbox)
    return Store(path, read_only=read_only, sandbox=sandbox)
