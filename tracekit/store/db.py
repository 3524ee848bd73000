"""DuckDB connections to a store and the Arrow inserts of a conversion: connecting (threads fitted
to the CPUs, no extension loaded by itself), the tables, the inserts (read ahead on a thread,
gathered, run in parallel), and the quoting of SQL text."""

from __future__ import annotations

import os
import queue
import threading

import duckdb
import pyarrow as pa

from .. import budget, schema
from . import tuning


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for t in schema.TABLES:
        con.execute(t.ddl())
    con.execute("CREATE TABLE IF NOT EXISTS tracekit_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute(
        "INSERT INTO tracekit_meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
        [str(schema.SCHEMA_VERSION)],
    )


def roll_back(con: duckdb.DuckDBPyConnection) -> None:
    """ROLLBACK after an error, which is raised after it whatever happens here: DuckDB may have
    ended the transaction itself (a full disk, out of memory: "no transaction is active"), and
    that second error must not replace the first (what the user has to fix)."""
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass


def read_ahead(items, depth: int = 4):
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


def arrow_pool(name: str, default: pa.MemoryPool) -> pa.MemoryPool:
    """The named Arrow memory pool ("system", "jemalloc", "mimalloc"; another name is a KeyError);
    the default where this pyarrow build lacks it."""
    make = {"system": pa.system_memory_pool, "jemalloc": pa.jemalloc_memory_pool,
            "mimalloc": pa.mimalloc_memory_pool}[name]
    try:
        return make()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return default


def gathered(items, limit: int):
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


def insert_runs(con: duckdb.DuckDBPyConnection, items) -> None:
    """Insert (table, batch) items: each run of consecutive batches of one table (and schema)
    as one INSERT that DuckDB runs on up to INSERT_THREADS threads, without keeping insertion
    order, pulling the batches as it goes (no run is held in memory).  An exception of the item
    iterator is raised here as it was.  The caller restores `preserve_insertion_order` and
    `threads` (after its ROLLBACK, should this fail: an aborted transaction takes no SET)."""
    pending = next(items, None)
    threads, order = con.execute(
        "SELECT current_setting('threads'), current_setting('preserve_insertion_order')").fetchall()[0]
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET threads = {max(1, min(threads, tuning.INSERT_THREADS, budget.plan().insert_threads))}")
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
NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the store file; for writing, the file attached with ROW_GROUP_SIZE and, for
    a new file, STORAGE_VERSION (options of ATTACH, not of connect; an existing file keeps its
    format: DuckDB refuses to lower it) and its spill files beside it, as DuckDB puts a file's.
    Extensions are neither installed nor loaded automatically (`NO_EXTENSIONS`)."""
    row_group, storage = tuning.ROW_GROUP_SIZE, tuning.STORAGE_VERSION
    if read_only or not (row_group or storage):
        return fit_threads(duckdb.connect(path, read_only=read_only, config=dict(NO_EXTENSIONS)))
    con = fit_threads(duckdb.connect(config={"temp_directory": path + ".tmp", **NO_EXTENSIONS}))
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    opts = ([f"ROW_GROUP_SIZE {int(row_group)}"] if row_group else []) + (
        [f"STORAGE_VERSION '{sql_str(storage)}'"] if storage and new else [])
    try:
        con.execute(f"ATTACH '{sql_str(path)}' AS {_WRITE_ALIAS}" + (f" ({', '.join(opts)})" if opts else ""))
        con.execute(f"USE {_WRITE_ALIAS}")
    except duckdb.Error:
        con.close()
        raise
    return con


def sql_str(s: str) -> str:
    return s.replace("'", "''")


def sql_lit(v) -> str:
    return "NULL" if v is None else "'" + sql_str(str(v)) + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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


def insert(con: duckdb.DuckDBPyConnection, table_name: str, batch: pa.RecordBatch) -> None:
    # from_arrow + insert_into (not register + INSERT ... SELECT): a registered object stays
    # referenced by the open transaction, so every batch of a conversion would stay in memory
    con.from_arrow(_json_typed(table_name, batch)).insert_into(table_name)
