"""Converting one input into a new source of a store: the adapter's rows inserted (`db`), then
the source's last steps (GPU rows' pid, nesting, the sources row), all in one transaction."""

from __future__ import annotations

import datetime as _dt
import gc
import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa

from .. import __version__, budget, schema, views
from ..adapters import detect
from ..adapters.base import Accounting, Progress, TraceError
from ..names import plural, shown
from ..nesting import LateRows, nest_source
from . import tuning
from .db import arrow_pool, gathered, insert, insert_runs, read_ahead, roll_back


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
        line = f"[{self.source_id}] {shown(self.path)} ({self.format}): {rows}"
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


def next_source_id(con: duckdb.DuckDBPyConnection) -> int:
    """The source_id the next source of the store gets."""
    return con.execute(views.query("convert", "next_source_id")).fetchall()[0][0]


def convert_source(con: duckdb.DuckDBPyConnection, path: str | os.PathLike, progress: Progress | None = None,
                   format: str | None = None, rank: int | None = None, strict: bool = False
                   ) -> SourceSummary:
    """Convert one input into a new source of the store open on ``con`` (`Store.convert`);
    raises TraceError for bad input (and, with ``strict``, when any input row would be
    skipped). A failed input adds nothing.

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
    prev, order, threads = con.execute(
        "SELECT current_setting('memory_limit'), current_setting('preserve_insertion_order'), "
        "current_setting('threads')").fetchall()[0]
    tune = tuning.OWN_PROCESS
    gc_on = gc.isenabled()
    if tune:
        gc.disable()
    pool = pa.default_memory_pool()
    try:
        adapter = detect.adapter_for(path, format)
        parallel = tuning.PARALLEL_INSERT and adapter.PARALLEL_INSERT
        if tune and tuning.CONVERT_ARROW_POOL and not parallel:
            pa.set_memory_pool(arrow_pool(tuning.CONVERT_ARROW_POOL, pool))
        plan = budget.plan()
        cap = (plan.duckdb_limit if parallel else plan.duckdb_serial_limit) // budget.MB
        for limit in (f"{cap}MiB", f"{2 * cap}MiB"):
            con.execute(f"SET memory_limit = '{limit}'")
            try:
                return convert_once(con, adapter, path, progress, rank, strict, parallel)
            except duckdb.OutOfMemoryException:
                adapter = type(adapter)()  # a fresh reader for the next attempt
        con.execute(f"SET memory_limit = '{prev}'")
        return convert_once(con, adapter, path, progress, rank, strict, parallel)
    finally:
        if tune and gc_on:
            gc.enable()
        if tune:
            pa.set_memory_pool(pool)
        con.execute(f"SET memory_limit = '{prev}'")
        con.execute(f"SET preserve_insertion_order = {'true' if order else 'false'}")
        con.execute(f"SET threads = {threads}")


def convert_once(con: duckdb.DuckDBPyConnection, adapter, path: Path, progress, rank, strict,
                 parallel: bool) -> SourceSummary:
    """One attempt of `convert_source`, under the memory cap it set: the rows inserted and the
    source finished in one transaction."""
    source_id = next_source_id(con)
    if not parallel and tuning.SERIAL_INSERT_THREADS:  # `convert_source` restores `threads` after
        con.execute(f"SET threads = {tuning.SERIAL_INSERT_THREADS}")
    con.execute("BEGIN TRANSACTION")
    try:
        rows = LateRows(adapter.read(path, source_id, progress))
        if parallel:
            insert_runs(con, read_ahead(rows))
        else:  # gathered on the reader's thread: the inserts are few and the queue even
            for table_name, batch in read_ahead(gathered(rows, budget.plan().insert_bytes), depth=1):
                insert(con, table_name, batch)
        acc = adapter.accounting
        lost = acc.lost
        if strict and lost:
            reason, n = lost.most_common(1)[0]
            raise TraceError(path, f"{plural(sum(lost.values()), 'input row')} would be skipped "
                             f"(e.g. {n:,}: {reason})", "drop --strict to convert the rest")
        info = dict(adapter.source)
        if rank is not None:
            info["rank"] = rank
        finish_source(con, source_id, path, adapter.FORMAT, info, adapter.accounting, rows.held)
        con.execute("COMMIT")
    except BaseException:
        roll_back(con)
        raise
    acc = adapter.accounting
    meta = info.get("metadata") or {}
    meta = orjson.loads(meta) if isinstance(meta, str) else meta
    repairs = {str(r): n for r, n in (meta.get("tracekit_repairs") or {}).items() if isinstance(n, int)}
    return SourceSummary(source_id, str(path), adapter.FORMAT, dict(acc.converted), dict(acc.skipped),
                         frozenset(acc.by_design), repairs)


def finish_source(con: duckdb.DuckDBPyConnection, source_id: int, path: Path, fmt: str, info: dict,
                  acc: Accounting, held: list | None = None) -> None:
    """The source's last steps: GPU rows' pid, events' nesting, the sources row.  ``held``:
    the events rows held back from the inserts (`nesting.LateRows`), inserted here nested
    (`nesting.nest_source`)."""
    # GPU work carries no pid in Kineto: take it from the launching API call (same correlation),
    # the one pid of the source's calls with that correlation.  The reader fills most from the
    # calls it saw before (kineto/gpu_pid.py): those that another call contradicts are taken
    # back here (an UPDATE of no rows, as a rule), then the rows without one are filled.
    q = views.queries("convert")
    sid = {"sid": source_id}
    if schema.pid_from_launch(fmt):
        for t in schema.GPU_TABLES:
            con.execute(q["pid_contradicted"].replace("{{table}}", t), sid)
    # The correlation -> pid map is built once, and only when some GPU row lacks its pid
    # (nsys rows have it: no pass over its millions of API calls), of the correlations of
    # those rows only (the reader filled most)
    need = [t for t in schema.GPU_TABLES if con.execute(q["pid_missing"].replace("{{table}}", t), sid).fetchall()]
    if need:
        wanted = " UNION ALL ".join(q["pid_wanted"].replace("{{table}}", t) for t in need)
        con.execute(q["corr_pid"].replace("{{wanted}}", wanted), sid)
        try:
            for t in need:
                con.execute(q["fill_pid"].replace("{{table}}", t), sid)
        finally:
            con.execute("DROP TABLE __tk_corr_pid")
    nest_source(con, source_id, held or [], lambda b: insert(con, "events", b))
    span = con.execute(q["span"], sid).fetchall()
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
    insert(con, "sources", pa.RecordBatch.from_pylist([row], schema=schema.table("sources").arrow))
    if acc.skipped:
        rows = [{"source_id": source_id, "reason": r, "count": n, "example": acc.examples.get(r),
                 "by_design": r in acc.by_design}
                for r, n in acc.skipped.items()]
        insert(con, "skipped_rows",
                pa.RecordBatch.from_pylist(rows, schema=schema.table("skipped_rows").arrow))
