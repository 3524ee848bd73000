"""Reading the SQLite export: feature-detected tables, chunks through ``sqlite3`` (``fetchmany``,
invalid UTF-8 replaced and counted) and the columnar fast path (Arrow ADBC, rowid ranges read
ahead in threads) for the big tables, StringIds look-ups in Arrow."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc

from ... import budget
from ..fit import RAW_PREFIX, with_raw_args
from .args import args_arrow, args_sql
from .common import is_int64, quote_ident, utf8_text

# The columnar SQLite reader (Apache Arrow ADBC): the big tables without Python per row.  Imported
# on first use (`_adbc_driver`): its import pulls in polars, ~0.15 s that a Kineto or ncu
# conversion would pay for nothing.  None: not installed (every table takes the sqlite3 path).
_UNLOADED = object()
_adbc = _UNLOADED


def _adbc_driver():
    global _adbc
    if _adbc is _UNLOADED:
        try:
            import adbc_driver_sqlite.dbapi as driver
        except ImportError:  # pragma: no cover - a dependency
            driver = None
        _adbc = driver
    return _adbc

#: rows per chunk at most: the memory budget may make them fewer (`chunk_rows`)
CHUNK_ROWS = 65_536
#: threads of the columnar reader (KERNEL, RUNTIME) at most (the memory budget may make them
#: fewer: `readers`); its ranges are `chunk_rows` rowids.  One core is left to DuckDB's inserts,
#: which share the cores; past ~8 threads the reader gains little (docs/scaling.md, "Knobs").
#: On 2 cores it stays 1.
FAST_READERS = max(1, min(8, (os.cpu_count() or 1) - 1))


def chunk_rows() -> int:
    """Rows per chunk: CHUNK_ROWS, or fewer under the memory budget (a chunk of kernels with their
    args is ~700 B a row, and several are in flight: 8,192 rows at the default 400 MB)."""
    return max(1, min(CHUNK_ROWS, budget.plan().nsys_chunk_rows))


def readers() -> int:
    return max(1, min(FAST_READERS, budget.plan().nsys_readers))



class SqliteReader:
    """The reading half of NsysAdapter (a mixin: ``self.con``, ``self.tables``, ``self.counts``,
    ``self.strings`` and ``self.accounting`` are set by the adapter)."""

    def _use_replacing_decoder(self, what: str) -> None:
        """Invalid UTF-8 in a text value: from now on decode with U+FFFD replacement (counted)."""
        self.con.text_factory = utf8_text
        self.accounting.repair(f"{what}: invalid UTF-8 in text values, replaced with U+FFFD")

    def _all(self, sql: str) -> list:
        """fetchall, tolerating invalid UTF-8 (rare: the default str decoding is kept for speed)."""
        try:
            return self.con.execute(sql).fetchall()
        except UnicodeDecodeError as e:  # raised directly by some sqlite3 paths (e.g. a corrupt schema)
            if self.con.text_factory is utf8_text:
                raise sqlite3.DatabaseError(f"undecodable text ({e.reason})") from None
            self._use_replacing_decoder("schema")
            return self._all(sql)
        except sqlite3.OperationalError as e:
            if "decode" not in str(e).lower() or self.con.text_factory is utf8_text:
                raise
            m = re.search(r"FROM\s+\"?(\w+)", sql)
            self._use_replacing_decoder(m.group(1) if m else "query")
            return self.con.execute(sql).fetchall()

    def _strings(self) -> dict:
        if "StringIds" not in self.tables or not {"id", "value"} <= set(self.tables["StringIds"]):
            return {}
        out: dict = {}
        bad = 0
        for i, v in self._all("SELECT id, value FROM StringIds"):
            if not is_int64(i) or v is None:
                bad += 1
                continue
            out[i] = v if isinstance(v, str) else utf8_text(v) if isinstance(v, bytes) else str(v)
        self.accounting.repair("StringIds: rows without an integer id or a value, ignored", bad)
        return out

    def _lookup(self, table: str, cols: dict, column: str) -> pa.Array:
        """StringIds look-up of the chunk's column of ids, in Arrow: NULL where the id is unknown
        (counted, the id kept in the row's args as ``_raw_<column>``)."""
        ids = self._ints(table, cols, column, len(cols["__args"]))
        out = pc.take(self._sid_values, pc.index_in(ids, value_set=self._sid_keys))
        if out.null_count > ids.null_count:
            missing = pc.indices_nonzero(pc.and_(pc.is_valid(ids), pc.is_null(out))).to_pylist()
            self.accounting.repair(f"{table}.{column}: ids not found in StringIds (name left NULL)",
                                   len(missing))
            cols["__args"] = with_raw_args(cols["__args"], {i: {RAW_PREFIX + column: ids[i].as_py()}
                                                            for i in missing})
        return out

    def _select(self, table: str, wanted: list[str], args_skip: set[str] = frozenset(),
                where: str = ""):
        """Yield (rows, columns) chunks: `columns` maps each wanted column to a tuple (None when
        the table lacks it) and '__args' to the JSON text of the remaining non-NULL columns."""
        have = self.tables[table]
        sel = [(quote_ident(c) if c in have else "NULL") for c in wanted]
        rest = [c for c in have if c not in args_skip and c not in wanted]
        sel.append(args_sql(rest))
        sql = f"SELECT {', '.join(sel)} FROM {quote_ident(table)} {where}"
        keys = list(wanted) + ["__args"]
        for rows in self._chunks(table, sql):
            yield rows, dict(zip(keys, zip(*rows)))

    def _select_fast(self, table: str, wanted: list[str]):
        """``_select`` through the columnar reader (ADBC): the same (rows, columns) chunks, with
        Arrow arrays as columns and ``args`` built without Python per row (``args_arrow``).

        The table is cut into rowid ranges of `chunk_rows()`, read by up to `readers()` threads
        (each with its own connection; the driver releases the GIL) a few ranges ahead, and handed
        out in rowid order.  Only tables whose rowids are contiguous are read this way: their
        ranges are then exactly the ``fetchmany`` chunks of the sqlite3 path (a plain scan is in
        rowid order), which matters where a chunk allocates ids (``_event_ids`` in ``_runtime``).
        A range is only taken when every column it returns is an integer column (what nsys
        writes); one with another type of value (a user-edited file), or whose reading fails, is
        read again through ``_select`` (the same rowid range, one chunk there too), so the rows,
        repairs and skipped-row accounting are those of the sqlite3 path.  Without the driver,
        when the rowid is not addressable (columns named rowid, _rowid_ and oid) or the rowids
        have gaps, the whole table goes through ``_select``."""
        have = self.tables[table]
        lower = {c.lower() for c in have}
        rid = next((r for r in ("rowid", "_rowid_", "oid") if r not in lower), None)
        plan = None
        if _adbc_driver() is not None and rid is not None:
            try:
                lo, hi = self.con.execute(f"SELECT min({rid}), max({rid}) FROM {quote_ident(table)}").fetchone()
                rest = [c for c in have if c not in wanted]
                keys = [self.con.execute("SELECT json_object(?, 0)", (c,)).fetchone()[0][1:-2]
                        for c in rest]
                if lo is not None and hi - lo + 1 == self.counts.get(table):
                    plan = (lo, hi, rest, keys)
            except sqlite3.Error:
                plan = None
        if plan is None:
            yield from self._select(table, wanted)
            return
        lo, hi, rest, keys = plan
        cols = [c for c in wanted if c in have] + rest
        sql = f"SELECT {', '.join(quote_ident(c) for c in cols)} FROM {quote_ident(table)} WHERE {rid} BETWEEN ? AND ?"
        step = chunk_rows()
        ranges = [(x, min(x + step - 1, hi)) for x in range(lo, hi + 1, step)]
        for (a, b), rb in self._read_ranges(sql, ranges):
            n = 0 if rb is None else rb.num_rows
            if rb is None or not all(pa.types.is_integer(ty) or pa.types.is_null(ty) for ty in rb.schema.types):
                yield from self._select(table, wanted, where=f"WHERE {rid} BETWEEN {a} AND {b}")
                continue
            if not n:
                continue
            arrays = dict(zip(cols, rb.columns))
            c = {k: arrays[k] if k in arrays else pa.nulls(n, pa.int64()) for k in wanted}
            c["__args"] = args_arrow(keys, [arrays[k] for k in rest], n)
            yield _ArrowRows(c, wanted), c

    def _read_ranges(self, sql: str, ranges: list[tuple[int, int]]):
        """Yield (range, RecordBatch or None when it could not be read) in order, reading up to
        `readers()` ranges ahead in threads."""
        local = threading.local()
        n_readers, step = readers(), chunk_rows()
        opened: list = []
        lock = threading.Lock()

        def read(r):
            try:
                con = getattr(local, "con", None)
                if con is None:
                    con = local.con = _adbc_driver().connect(self._uri)
                    with lock:
                        opened.append(con)
                cur = con.cursor()
                try:
                    cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(step)})
                    cur.execute(sql, r)
                    t = cur.fetch_arrow_table()
                finally:
                    cur.close()
                if t.num_columns and any(ch.num_chunks != 1 for ch in t.columns):
                    t = t.combine_chunks()
                return pa.RecordBatch.from_arrays([ch.chunk(0) if ch.num_chunks else pa.array([], ch.type)
                                                   for ch in t.columns], names=t.column_names)
            except Exception:  # noqa: BLE001 - read again through sqlite3 (the same error or none)
                return None

        pool = ThreadPoolExecutor(max_workers=n_readers, thread_name_prefix="tracekit-nsys")
        try:
            pending: deque = deque()
            todo = iter(ranges)
            for r in todo:
                pending.append((r, pool.submit(read, r)))
                if len(pending) > n_readers:
                    break
            while pending:
                r, fut = pending.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(read, nxt)))
                yield r, fut.result()
        finally:
            for _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True)
            for con in opened:
                try:
                    con.close()
                except Exception:  # noqa: BLE001 - closing read-only connections
                    pass

    def _chunks(self, table: str, sql: str):
        """fetchmany chunks; on invalid UTF-8, re-run with the replacing decoder and resume after
        the rows already delivered (same query on an immutable file: same order)."""
        cur = self.con.execute(sql)
        done = 0
        step = chunk_rows()
        while True:
            try:
                rows = cur.fetchmany(step)
            except (sqlite3.OperationalError, UnicodeDecodeError) as e:
                if self.con.text_factory is utf8_text and isinstance(e, UnicodeDecodeError):
                    raise sqlite3.DatabaseError(f"undecodable text ({e.reason})") from None
                if "decode" not in str(e).lower() or self.con.text_factory is utf8_text:
                    raise
                self._use_replacing_decoder(table)
                cur = self.con.execute(sql)
                left = done
                while left:
                    left -= len(cur.fetchmany(min(left, step)))
                continue
            if not rows:
                return
            done += len(rows)
            yield rows

    # -- descriptions --------------------------------------------------------------------------
    def _rows(self, table: str, wanted: list[str]) -> list[dict]:
        if table not in self.tables:
            return []
        have = self.tables[table]
        sel = ", ".join(quote_ident(c) if c in have else "NULL" for c in wanted)
        return [dict(zip(wanted, r)) for r in self._all(f"SELECT {sel} FROM {quote_ident(table)}")]

    def _all_rows(self, table: str) -> list[dict]:
        if table not in self.tables:
            return []
        cols = self.tables[table]
        return [dict(zip(cols, r)) for r in self._all(f"SELECT * FROM {quote_ident(table)}")]


class _ArrowRows:
    """Row ``i`` of Arrow columns as a tuple (the examples of skipped rows)."""

    def __init__(self, cols: dict, keys: list[str]):
        self.cols, self.keys = cols, keys

    def __len__(self) -> int:
        return len(self.cols[self.keys[0]])

    def __getitem__(self, i: int) -> tuple:
        return tuple(self.cols[k][i].as_py() for k in self.keys)
