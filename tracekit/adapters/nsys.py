"""Nsight Systems SQLite exports (every version 2020.5 → 2026.2) and ``.nsys-rep`` / ``.qdrep``
reports → unified schema.

Reading strategy
----------------
The export is opened read-only (``file:…?mode=ro&immutable=1``) with the stdlib ``sqlite3``.  Every
table and column is feature-detected (``PRAGMA table_info``): a missing table means "no rows", a
missing column reads as NULL, columns nobody mapped (nsys's many extras, users' own appended
columns) land in ``args`` as JSON.

The two big tables (``CUPTI_ACTIVITY_KIND_KERNEL``, ``CUPTI_ACTIVITY_KIND_RUNTIME``: millions of
rows) are read with no Python per row: the Arrow ADBC SQLite driver reads them in rowid ranges of
CHUNK_ROWS, a few ranges ahead in threads (it releases the GIL), straight into Arrow arrays;
names are StringIds look-ups with Arrow ``take``, and ``args`` is made from the extra integer
columns by ``_args_arrow`` (templates per combination of the low-cardinality columns, joined by
polars) to the exact text SQLite's ``json_object`` gives.  A range is only taken that way when
every value it holds is an integer; any other range (a user-edited file, a value of another
type) is read again through the sqlite3 path below, so both paths give the same rows, repairs and
skipped-row accounting.

The other tables (and the big ones without the driver) are streamed with ``fetchmany`` in chunks
and converted **column-wise**: a chunk becomes Arrow arrays, times/ids are computed with Arrow
kernels, and ``args`` is built by SQLite itself (``json_object``; ``json_patch`` drops the NULLs),
so the per-row Python work is a few dictionary look-ups (strings, enums).  Small tables (devices,
processes, threads) go through the usual ``Builders``.

Mapping (see docs/schema.md for the column-level notes)
-------------------------------------------------------
* ``CUPTI_ACTIVITY_KIND_KERNEL`` → ``kernels`` (``demangledName``/``shortName``/``mangledName`` via
  ``StringIds``; ``pid`` from ``globalPid``: the launching process, so the API↔GPU join is
  per process, as nsys does it).
* ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` (``--cuda-graph-trace=graph``: one row per graph launch, the
  graph's kernels are *not* in KERNEL) → ``kernels`` too, named ``[CUDA graph <graphId>]`` with
  ``graph_id`` set and ``graphExecId`` in ``args``: otherwise the GPU would look idle during graph
  replays.  They are told apart by ``graph_id`` set with ``graph_node_id`` NULL (kernels of a graph
  traced per node carry a ``graph_node_id``); ``hotspots`` and ``nvtx_gpu_projection`` leave them
  out, as nsys's reports (which read KERNEL only) do.
* ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``MEMSET`` → ``memops`` (copy and memory kinds through the enum
  copies below: the ``ENUM_*`` tables only exist from 2023.1).
* ``CUPTI_ACTIVITY_KIND_RUNTIME`` → ``api_calls``: ``eventClass`` 0 → ``cuda_runtime``, 1 →
  ``cuda_driver``; ``name`` without the ``_vNNNN`` suffix, ``raw_name`` as recorded.  eventClass 67
  (CUDA backtrace: a wrapper range around the real call, same correlationId) → ``events``
  category ``cuda_backtrace`` so it never doubles the correlation join; any other class is skipped
  with a reason.
* ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` → ``syncs`` (streamId / eventId 4294967295 → NULL).
* ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``--cuda-memory-usage=true``) → ``memory_events``, allocator
  ``cuda`` (memoryOperationType 0 → ``alloc``, 1 → ``free``; other types are skipped with a reason).
* ``NVTX_EVENTS`` → ``events``: ranges (eventType 59/60 and NVTXT 70/71) → category ``nvtx``,
  marks (34) → ``nvtx_mark`` (instants).  Name = ``coalesce(StringIds[textId], text)``; domain =
  name of the eventType-75 row with the same ``domainId`` in the same process (NULL for the
  default domain 0 and for domains whose creation row is missing: the id stays in
  ``args.domainId``).  Unclosed ranges end at the table's largest timestamp (as nsys's reports do;
  ``args.unclosed`` = true).  ``args`` keeps ``eventType`` (the range style: 60/71 = StartEnd) and
  ``endGlobalTid`` (set when a start/end range ended on another thread).  Every other eventType
  (domain create/destroy 75/76, category 33 and thread 39 naming, CUDA naming 97–99, ...) is
  counted in ``skipped_rows`` with its type.
* ``OSRT_API`` eventClass 27 → ``events`` category ``osrt``; the zero-length start/finish markers
  (eventClass 31/32) are skipped with a reason.
* ``PROFILER_OVERHEAD`` and ``CUPTI_ACTIVITY_KIND_OVERHEAD`` → ``events`` category ``overhead``.
* ``GPU_METRICS`` ⨝ ``TARGET_INFO_GPU_METRICS`` → ``counters`` (GPU = ``typeId & 0xFF``).
* ``TARGET_INFO_GPU`` (+ 2020.5's ``TARGET_INFO_CUDA_GPU``; ``TARGET_INFO_CUDA_DEVICE`` alone when
  it is the only description) → ``devices``.
* ``PROCESSES`` / ``ThreadNames`` → ``processes`` / ``threads``, for the processes that have
  converted activity (with sampling on, PROCESSES lists every process of the host: those rows
  are counted as skipped).  A process with activity but no PROCESSES row (2020.5) gets a row named
  after its main thread.
* ``sources``: ``EXPORT_SCHEMA_VERSION`` / ``EXPORT_PRODUCT_VERSION``, host from
  ``TARGET_INFO_SYSTEM_ENV.Hostname``, clock origin ``capture_start`` with offset
  ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``; ``metadata`` = the ``META_DATA_EXPORT`` /
  ``EXPORT_META_DATA`` pairs plus ``tables_not_converted`` (row count of every non-empty table not
  read, e.g. SCHED_EVENTS, CUDA_CALLCHAINS, META_DATA_CAPTURE).  ``META_DATA_CAPTURE`` and the
  device environment hold the user's environment variables: never copied.

pid / tid are decoded from ``globalTid`` / ``globalPid``: bits 47–24 PID, 23–0 TID.
"""

from __future__ import annotations

import hashlib
import re
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import schema
from ..names import api_base_name, short_kernel_name
from .base import Adapter, Builders, TraceError

try:  # columnar SQLite reader (Apache Arrow ADBC): the big tables without Python per row
    import adbc_driver_sqlite.dbapi as _adbc
except ImportError:  # pragma: no cover - a dependency; without it every table takes the sqlite3 path
    _adbc = None

CHUNK_ROWS = 65_536
#: threads of the columnar reader (KERNEL, RUNTIME); its ranges are CHUNK_ROWS rowids.  On the
#: 16-core GPU host, 10 M kernels + 22 M API calls: reader alone 11.8 s with 4 threads, 10.6 s
#: with 8; convert 17.5-19.8 s with 4 (3 runs), 14.0-18.7 s with 8 (6 runs), 13.4 s with 12 (the
#: inserts share the cores).  On 2 cores it stays 1.
FAST_READERS = max(1, min(8, (os.cpu_count() or 1) - 1))
NSYS_REP_MAGIC = b"NVIDIA Tegra Profiler Report"
NO_STREAM = 4294967295

# -- enum copies (ENUM_* tables exist only from 2023.1; labels as nsys 2023.1–2026.2 print them) --
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "uvm_HtoD", 12: "uvm_DtoH",
              13: "uvm_DtoD"}
MEM_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed",
             5: "device_static", 6: "managed_static", 7: None}
MEM_KIND_LABELS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
                   5: "Device Static", 6: "Managed Static", 7: "Unknown"}
SYNC_TYPES = {0: "unknown", 1: "event_sync", 2: "stream_wait_event", 3: "stream_sync",
              4: "context_sync"}
API_CLASSES = {0: "cuda_runtime", 1: "cuda_driver"}
EVENT_CLASS_LABELS = {0: "CUDA runtime", 1: "CUDA driver", 26: "CUDA API", 27: "OSRT runtime",
                      28: "cuDNN", 29: "cuBLAS", 31: "OSRT start", 32: "OSRT finish",
                      67: "CUDA backtrace", 77: "CUDA graph node creation",
                      94: "CUDA graph exec creation", 95: "CUDA graph creation",
                      96: "CUDA graph clone", 103: "CUDA overhead"}
CUDA_BACKTRACE = 67
OSRT_CLASS = 27
NVTX_RANGES = (59, 60, 70, 71)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
#: NVTX rows that name things rather than record them (domain / category / thread naming, domain
#: destroy, CUDA resource naming): left out on purpose, nothing of the timeline is lost
NVTX_BY_DESIGN = {33, 39, 75, 76, 97, 98, 99}
NVTX_TYPE_LABELS = {33: "NvtxCategory", 34: "NvtxMark", 35: "NvtxPushRange", 36: "NvtxPopRange",
                    37: "NvtxStartRange", 38: "NvtxEndRange", 39: "NvtxThread",
                    59: "NvtxPushPopRange", 60: "NvtxStartEndRange", 64: "NvtxtDomain",
                    65: "NvtxtCategory", 66: "NvtxtMark", 67: "NvtxtPushRange",
                    68: "NvtxtPopRange", 69: "NvtxtStartRange", 70: "NvtxtPushPopRange",
                    71: "NvtxtStartEndRange", 75: "NvtxDomainCreate", 76: "NvtxDomainDestroy",
                    97: "NvtxNameCudaDevice", 98: "NvtxNameCudaContext", 99: "NvtxNameCudaStream"}

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUPTI_OVERHEAD = "CUPTI_ACTIVITY_KIND_OVERHEAD"
MEM_USAGE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
MEM_OPS = {0: "alloc", 1: "free"}  # ENUM_CUDA_DEV_MEM_EVENT_OPER

#: tables read (and so not listed under metadata.tables_not_converted); ENUM_* are schema aids
READ_TABLES = {KERNEL, GRAPH_TRACE, MEMCPY, MEMSET, RUNTIME, SYNC, CUPTI_OVERHEAD, MEM_USAGE, "NVTX_EVENTS",
               "OSRT_API", "PROFILER_OVERHEAD", "GPU_METRICS", "TARGET_INFO_GPU_METRICS",
               "StringIds", "PROCESSES", "ThreadNames", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU",
               "TARGET_INFO_CUDA_DEVICE", "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV",
               "META_DATA_EXPORT", "EXPORT_META_DATA", "MPI_RANKS"}
NSYS_MARKERS = ("StringIds", "NVTX_EVENTS", "OSRT_API", "META_DATA_EXPORT", "EXPORT_META_DATA",
                "TARGET_INFO_SESSION_START_TIME", "ThreadNames")

_INT = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def decode_pid(g: pa.Array) -> pa.Array:
    """globalTid / globalPid → OS pid (bits 47–24)."""
    return pc.bit_wise_and(pc.shift_right(g, 24), 0xFFFFFF)


def decode_tid(g: pa.Array) -> pa.Array:
    """globalTid → OS tid (bits 23–0)."""
    return pc.bit_wise_and(g, 0xFFFFFF)


# -- .nsys-rep / .qdrep ------------------------------------------------------------------------
def find_nsys() -> str | None:
    env = os.environ.get("NSYS")
    if env:
        if os.path.isdir(env):  # an install folder: look for the binary inside
            for cand in ("nsys", "bin/nsys", "target-linux-x64/nsys"):
                p = os.path.join(env, cand)
                if os.path.isfile(p) and os.access(p, os.X_OK):
                    return p
            return None
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else shutil.which(env)
    return shutil.which("nsys")


def is_report(path: Path) -> bool:
    """True for an ``.nsys-rep`` / ``.qdrep`` report (by magic, else by suffix)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(NSYS_REP_MAGIC))
    except OSError:
        return False
    if head == NSYS_REP_MAGIC:
        return True
    return not head.startswith(b"SQLite format 3") and path.suffix.lower() in (".nsys-rep", ".qdrep")


def _cache_path(path: Path) -> Path:
    """``<input>.sqlite`` next to the input when that folder is writable, else a temp-dir file
    keyed by the input's path, size and modification time."""
    beside = path.with_name(path.name + ".sqlite")
    if os.access(path.parent, os.W_OK) and (not beside.exists() or os.access(beside, os.W_OK)):
        return beside
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / "tracekit-nsys-export"
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{path.stem}-{key}.sqlite"


def export_report(path: Path) -> tuple[Path, dict]:
    """Export a report to SQLite with ``nsys export`` (reusing a fresh cache); returns the SQLite
    path and notes for ``sources.metadata``."""
    cache = _cache_path(path)
    note = {"report": str(path.resolve()), "exported_sqlite": str(cache)}
    if cache.exists() and cache.stat().st_mtime_ns >= path.stat().st_mtime_ns and cache.stat().st_size:
        note["export"] = "reused the cached export"
        return cache, note
    nsys = find_nsys()
    if nsys is None:
        raise TraceError(path, "is an Nsight Systems report, and reading it needs `nsys`, which is not on "
                         "PATH (or in the NSYS environment variable)",
                         "install Nsight Systems (https://developer.nvidia.com/nsight-systems) or pass "
                         "the SQLite export instead (`nsys export --type sqlite REPORT`)")
    tmp = cache.with_name(f"{cache.stem}.tmp{os.getpid()}.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(tmp), str(path)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise TraceError(path, f"could not run {nsys} ({e.strerror or e})",
                         "check the NSYS variable / PATH, or pass the SQLite export instead") from None
    if r.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        lines = [l.strip() for l in (r.stderr or r.stdout or "").splitlines() if l.strip()]
        why = lines[-1] if lines else f"exit status {r.returncode}"
        raise TraceError(path, f"`nsys export --type sqlite` failed ({why})",
                         "open the report in Nsight Systems to check it, or export it by hand")
    os.replace(tmp, cache)
    note["export"] = " ".join(cmd[:-3] + ["-o", str(cache), str(path)])
    return cache, note


# -- the adapter -------------------------------------------------------------------------------
class NsysAdapter(Adapter):
    FORMAT = "nsys"
    PARALLEL_INSERT = True

    def read(self, path, source_id, progress=None):
        path = Path(path)
        meta_extra: dict = {}
        db_path = path
        if is_report(path):
            db_path, meta_extra = export_report(path)
        try:
            con = sqlite3.connect(f"file:{db_path.resolve().as_posix()}?mode=ro&immutable=1", uri=True)
        except sqlite3.Error as e:
            raise TraceError(path, f"cannot open the SQLite file ({e})", "check the path and permissions") from None
        self._uri = f"file:{db_path.resolve().as_posix()}?mode=ro&immutable=1"
        try:
            yield from self._read(con, path, source_id, progress, meta_extra)
        except sqlite3.DatabaseError as e:
            raise TraceError(path, f"corrupt or unreadable SQLite file ({e})",
                             "re-export it with `nsys export --type sqlite`") from None
        finally:
            con.close()

    # -------------------------------------------------------------------------------------------
    def _read(self, con, path, sid, progress, meta_extra):
        self.con, self.sid = con, sid
        self.repairs: dict[str, int] = {}
        try:
            names = [r[0] for r in self._all("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.DatabaseError as e:
            raise TraceError(path, f"not a readable SQLite database ({e})",
                             "pass an `nsys export --type sqlite` file or the .nsys-rep report") from None
        self.tables = {n: [r[1] for r in self._all(f"PRAGMA table_info({_q(n)})")] for n in names}
        if not any(t in self.tables for t in NSYS_MARKERS) and not any(
                t.startswith("CUPTI_ACTIVITY_KIND_") for t in self.tables):
            raise TraceError(path, "SQLite file is not an Nsight Systems export (no StringIds, CUPTI, "
                             "NVTX or OSRT tables)", "pass the output of `nsys export --type sqlite`")
        self.active_pids: set[int] = set()
        self.next_event_id = 0
        self.strings = self._strings()
        self._sid_keys = pa.array(list(self.strings), pa.int64())
        self._sid_values = pa.array(list(self.strings.values()), pa.string())
        self.counts = {t: con.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0] for t in self.tables}
        work = (KERNEL, GRAPH_TRACE, MEMCPY, MEMSET, RUNTIME, SYNC, MEM_USAGE, "NVTX_EVENTS", "OSRT_API",
                "PROFILER_OVERHEAD", CUPTI_OVERHEAD, "GPU_METRICS")
        self.total = sum(self.counts.get(t, 0) for t in work)
        self.done = 0
        self.progress = progress
        if progress:
            progress(0, self.total)

        b = Builders(sid, self.accounting)
        yield from self._devices(b)
        yield from self._kernels()
        yield from self._graph_trace()
        yield from self._memcpy()
        yield from self._memset()
        yield from self._runtime()
        yield from self._syncs()
        yield from self._memory_usage()
        yield from self._nvtx()
        yield from self._osrt()
        yield from self._overhead("PROFILER_OVERHEAD")
        yield from self._overhead(CUPTI_OVERHEAD)
        yield from self._gpu_metrics()
        self._processes_threads(b)
        yield from b.drain()
        if progress:
            progress(self.total, self.total)
        self.source = self._source_info(meta_extra)

    # -- helpers -----------------------------------------------------------------------------
    def _use_replacing_decoder(self, what: str) -> None:
        """Invalid UTF-8 in a text value: from now on decode with U+FFFD replacement (counted)."""
        self.con.text_factory = _text
        key = f"{what}: invalid UTF-8 in text values, replaced with U+FFFD"
        self.repairs[key] = self.repairs.get(key, 0) + 1

    def _all(self, sql: str) -> list:
        """fetchall, tolerating invalid UTF-8 (rare: the default str decoding is kept for speed)."""
        try:
            return self.con.execute(sql).fetchall()
        except UnicodeDecodeError as e:  # raised directly by some sqlite3 paths (e.g. a corrupt schema)
            if self.con.text_factory is _text:
                raise sqlite3.DatabaseError(f"undecodable text ({e.reason})") from None
            self._use_replacing_decoder("schema")
            return self._all(sql)
        except sqlite3.OperationalError as e:
            if "decode" not in str(e).lower() or self.con.text_factory is _text:
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
            if not _is_int64(i) or v is None:
                bad += 1
                continue
            out[i] = v if isinstance(v, str) else _text(v) if isinstance(v, bytes) else str(v)
        if bad:
            self.repairs["StringIds: rows without an integer id or a value, ignored"] = bad
        return out

    def _lookup(self, table: str, column: str, ids) -> pa.Array:
        """StringIds look-up of a column of ids, in Arrow (NULL where the id is unknown; counted)."""
        ids = self._ints(table, {column: ids}, column, len(ids))
        out = pc.take(self._sid_values, pc.index_in(ids, value_set=self._sid_keys))
        missing = out.null_count - ids.null_count
        if missing:
            key = f"{table}.{column}: ids not found in StringIds (name left NULL)"
            self.repairs[key] = self.repairs.get(key, 0) + missing
        return out

    def _select(self, table: str, wanted: list[str], args_skip: set[str] = frozenset(),
                where: str = ""):
        """Yield (rows, columns) chunks: `columns` maps each wanted column to a tuple (None when
        the table lacks it) and '__args' to the JSON text of the remaining non-NULL columns."""
        have = self.tables[table]
        sel = [(_q(c) if c in have else "NULL") for c in wanted]
        rest = [c for c in have if c not in args_skip and c not in wanted]
        sel.append(_args_sql(rest))
        sql = f"SELECT {', '.join(sel)} FROM {_q(table)} {where}"
        keys = list(wanted) + ["__args"]
        for rows in self._chunks(table, sql):
            yield rows, dict(zip(keys, zip(*rows)))

    def _select_fast(self, table: str, wanted: list[str]):
        """``_select`` through the columnar reader (ADBC): the same (rows, columns) chunks, with
        Arrow arrays as columns and ``args`` built without Python per row (``_args_arrow``).

        The table is cut into rowid ranges of CHUNK_ROWS, read by up to FAST_READERS threads
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
        if _adbc is not None and rid is not None:
            try:
                lo, hi = self.con.execute(f"SELECT min({rid}), max({rid}) FROM {_q(table)}").fetchone()
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
        sql = f"SELECT {', '.join(_q(c) for c in cols)} FROM {_q(table)} WHERE {rid} BETWEEN ? AND ?"
        ranges = [(x, min(x + CHUNK_ROWS - 1, hi)) for x in range(lo, hi + 1, CHUNK_ROWS)]
        for (a, b), rb in self._read_ranges(sql, ranges):
            n = 0 if rb is None else rb.num_rows
            if rb is None or not all(pa.types.is_integer(ty) or pa.types.is_null(ty) for ty in rb.schema.types):
                yield from self._select(table, wanted, where=f"WHERE {rid} BETWEEN {a} AND {b}")
                continue
            if not n:
                continue
            arrays = dict(zip(cols, rb.columns))
            c = {k: arrays[k] if k in arrays else pa.nulls(n, pa.int64()) for k in wanted}
            c["__args"] = _args_arrow(keys, [arrays[k] for k in rest], n)
            yield _ArrowRows(c, wanted), c

    def _read_ranges(self, sql: str, ranges: list[tuple[int, int]]):
        """Yield (range, RecordBatch or None when it could not be read) in order, reading up to
        FAST_READERS ranges ahead in threads."""
        local = threading.local()
        opened: list = []
        lock = threading.Lock()

        def read(r):
            try:
                con = getattr(local, "con", None)
                if con is None:
                    con = local.con = _adbc.connect(self._uri)
                    with lock:
                        opened.append(con)
                cur = con.cursor()
                try:
                    cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(CHUNK_ROWS)})
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

        pool = ThreadPoolExecutor(max_workers=FAST_READERS, thread_name_prefix="tracekit-nsys")
        try:
            pending: deque = deque()
            todo = iter(ranges)
            for r in todo:
                pending.append((r, pool.submit(read, r)))
                if len(pending) > FAST_READERS:
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
        while True:
            try:
                rows = cur.fetchmany(CHUNK_ROWS)
            except (sqlite3.OperationalError, UnicodeDecodeError) as e:
                if self.con.text_factory is _text and isinstance(e, UnicodeDecodeError):
                    raise sqlite3.DatabaseError(f"undecodable text ({e.reason})") from None
                if "decode" not in str(e).lower() or self.con.text_factory is _text:
                    raise
                self._use_replacing_decoder(table)
                cur = self.con.execute(sql)
                left = done
                while left:
                    left -= len(cur.fetchmany(min(left, CHUNK_ROWS)))
                continue
            if not rows:
                return
            done += len(rows)
            yield rows

    def _ints(self, table: str, cols: dict, name: str, n: int) -> pa.Array:
        v = cols.get(name)
        if v is None:
            return pa.nulls(n, pa.int64())
        if isinstance(v, pa.Array):  # from the columnar reader: int64 already (checked there)
            return v if v.type == pa.int64() else v.cast(pa.int64())
        try:
            if any(type(x) is float for x in v):  # pyarrow would truncate 1.5 to 1, silently
                raise TypeError("float in an integer column")
            return pa.array(v, pa.int64())
        except _INT:  # a value of another type (user-edited file): NULL it, count it
            fixed = [x if isinstance(x, int) and not isinstance(x, bool) and -2**63 <= x < 2**63
                     else int(x) if type(x) is float and x.is_integer() and -2**63 <= x < 2**63 else None
                     for x in v]
            bad = sum(1 for x, y in zip(v, fixed) if x is not None and y is None)
            key = f"{table}.{name}: non-integer values read as NULL"
            self.repairs[key] = self.repairs.get(key, 0) + bad
            return pa.array(fixed, pa.int64())

    def _batch(self, table: str, n: int, cols: dict) -> pa.RecordBatch:
        arrays = []
        for f in schema.table(table).arrow:
            if f.name == "source_id":
                arrays.append(pa.nulls(n, pa.int32()).fill_null(self.sid))
                continue
            v = cols.get(f.name)
            if v is None:
                arrays.append(pa.nulls(n, f.type))
            elif isinstance(v, pa.Array):
                arrays.append(v if v.type == f.type else self._cast(table, f, v))
            elif pa.types.is_string(f.type):
                arrays.append(self._strs(table, f.name, v))
            else:
                arrays.append(pa.array(v, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema.table(table).arrow)

    def _cast(self, table: str, f: pa.Field, v: pa.Array) -> pa.Array:
        """Cast to the column type; integers that do not fit a narrower column become NULL
        (counted in metadata.tracekit_repairs)."""
        try:
            return v.cast(f.type)
        except (pa.ArrowInvalid, OverflowError):
            if not (pa.types.is_integer(f.type) and pa.types.is_integer(v.type)):
                raise
        bits = f.type.bit_width
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if pa.types.is_signed_integer(f.type) else (0, 2 ** bits - 1)
        fits = pc.and_(pc.greater_equal(v, lo), pc.less_equal(v, hi))
        out = pc.if_else(fits, v, pa.scalar(None, v.type)).cast(f.type)
        key = f"{table}.{f.name}: values beyond the column's range read as NULL"
        self.repairs[key] = self.repairs.get(key, 0) + out.null_count - v.null_count
        return out

    def _strs(self, table: str, name: str, v) -> pa.Array:
        """A list of values as text (bytes decoded with U+FFFD, numbers written out; counted)."""
        try:
            return pa.array(v, pa.string())
        except _INT:
            fixed = [x if x is None or isinstance(x, str) else _text(x) if isinstance(x, bytes) else str(x)
                     for x in v]
            key = f"{table}.{name}: non-text values read as text"
            self.repairs[key] = self.repairs.get(key, 0) + sum(
                1 for x in v if x is not None and not isinstance(x, str))
            return pa.array(fixed, pa.string())

    def _valid_interval(self, table: str, rows, keys, start: pa.Array, end: pa.Array,
                        among: pa.Array | None = None) -> pa.Array | None:
        """Mask of the rows (of `among`, default all) with a usable interval (start and end set,
        end >= start); the others of `among` are counted as skipped.  None = all rows usable."""
        # a duration beyond int64 (times near the int64 limits) is not an interval either
        span = pc.subtract(pc.cast(end, pa.float64(), safe=False), pc.cast(start, pa.float64(), safe=False))
        ok = pc.and_(pc.and_(pc.is_valid(start), pc.is_valid(end)), pc.greater_equal(end, start))
        ok = pc.and_(ok, pc.less(span, 9.2e18)).fill_null(False)
        if among is not None:
            ok = pc.and_(ok, among)
        elif pc.all(ok).as_py():
            return None
        check = among.to_pylist() if among is not None else None
        for i, v in enumerate(ok.to_pylist()):
            if v or (check is not None and not check[i]):
                continue
            s, e = start[i].as_py(), end[i].as_py()
            why = ("without start" if s is None else "without end" if e is None
                   else "with end before start" if e < s else "with a duration beyond int64")
            self.accounting.skip(f"{table}: row {why}", dict(zip(keys, rows[i])))
        return ok

    def _emit(self, table: str, batch: pa.RecordBatch, mask: pa.Array | None = None):
        if mask is not None:
            batch = batch.filter(mask)
        if batch.num_rows:
            self.accounting.converted[table] += batch.num_rows
            if "pid" in batch.schema.names:
                self.active_pids.update(p for p in pc.unique(batch.column("pid")).to_pylist() if p is not None)
            yield table, batch

    def _tick(self, n: int) -> None:
        self.done += n
        if self.progress:
            self.progress(self.done, self.total)

    def _event_ids(self, n: int) -> pa.Array:
        a = pa.array(range(self.next_event_id, self.next_event_id + n), pa.int64())
        self.next_event_id += n
        return a

    # -- GPU activity --------------------------------------------------------------------------
    def _kernels(self):
        t = KERNEL
        if t not in self.tables:
            return
        wanted = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                  "demangledName", "shortName", "mangledName", "launchType", "registersPerThread",
                  "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "staticSharedMemory",
                  "dynamicSharedMemory", "graphNodeId", "graphId"]
        for rows, c in self._select_fast(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            name = self._lookup(t, "demangledName", c["demangledName"])
            short = self._lookup(t, "shortName", c["shortName"])
            if name.null_count:  # no demangled name: fall back to the short name
                name = pc.coalesce(name, short)
            if short.null_count:  # no short name (trimmed exports): derive it like Kineto does
                short = pc.coalesce(short, pa.array([short_kernel_name(x) for x in name.to_pylist()],
                                                    pa.string()))
            st, dy = I("staticSharedMemory"), I("dynamicSharedMemory")
            batch = self._batch("kernels", n, {
                "device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": I("streamId"),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "name": name, "short_name": short,
                "mangled_name": self._lookup(t, "mangledName", c["mangledName"]),
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "grid_x": I("gridX"), "grid_y": I("gridY"), "grid_z": I("gridZ"),
                "block_x": I("blockX"), "block_y": I("blockY"), "block_z": I("blockZ"),
                "registers_per_thread": I("registersPerThread"), "static_shared_bytes": st,
                "dynamic_shared_bytes": dy, "shared_bytes": pc.add(st, dy),
                "graph_id": I("graphId"), "graph_node_id": I("graphNodeId"),
                "launch_type": I("launchType"), "args": c["__args"]})
            yield from self._emit("kernels", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _graph_trace(self):
        t = GRAPH_TRACE
        if t not in self.tables:
            return
        wanted = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                  "graphId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            name = [f"[CUDA graph {g}]" if g is not None else "[CUDA graph]" for g in c["graphId"]]
            batch = self._batch("kernels", n, {
                "device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": I("streamId"),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "name": name, "short_name": name, "pid": decode_pid(I("globalPid")),
                "correlation_id": I("correlationId"), "graph_id": I("graphId"), "args": c["__args"]})
            yield from self._emit("kernels", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _memcpy(self):
        t = MEMCPY
        if t not in self.tables:
            return
        wanted = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                  "bytes", "copyKind", "srcKind", "dstKind", "graphNodeId"]
        names: dict = {}
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            ck, sk, dk = c["copyKind"], c["srcKind"], c["dstKind"]
            keys = list(zip(ck, sk, dk))
            for k in set(keys) - names.keys():
                names[k] = _memcpy_name(*k)
            batch = self._batch("memops", n, {
                "device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": I("streamId"),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "kind": pa.nulls(n, pa.string()).fill_null("memcpy"),
                "copy_kind": [COPY_KINDS.get(x, "unknown") for x in ck],
                "src_kind": [MEM_KINDS.get(x) for x in sk], "dst_kind": [MEM_KINDS.get(x) for x in dk],
                "bytes": I("bytes"), "name": [names[k] for k in keys],
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "graph_node_id": I("graphNodeId"),
                "args": _merge_unknown_enums(c["__args"], (("copyKind", ck, COPY_KINDS),
                                                           ("srcKind", sk, MEM_KINDS),
                                                           ("dstKind", dk, MEM_KINDS)))})
            yield from self._emit("memops", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _memset(self):
        t = MEMSET
        if t not in self.tables:
            return
        wanted = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                  "bytes", "memKind", "graphNodeId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            mk = c["memKind"]
            batch = self._batch("memops", n, {
                "device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": I("streamId"),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "kind": pa.nulls(n, pa.string()).fill_null("memset"),
                "dst_kind": [MEM_KINDS.get(x) for x in mk], "bytes": I("bytes"),
                "name": [f"Memset ({MEM_KIND_LABELS.get(x, 'Unknown')})" for x in mk],
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "graph_node_id": I("graphNodeId"),
                "args": _merge_unknown_enums(c["__args"], (("memKind", mk, MEM_KINDS),))})
            yield from self._emit("memops", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _syncs(self):
        t = SYNC
        if t not in self.tables:
            return
        wanted = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid",
                  "syncType", "eventId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            stream, event = I("streamId"), I("eventId")  # 4294967295: no stream / no event
            stream = pc.if_else(pc.equal(stream, NO_STREAM), pa.scalar(None, pa.int64()), stream)
            event = pc.if_else(pc.equal(event, NO_STREAM), pa.scalar(None, pa.int64()), event)
            st = c["syncType"]
            batch = self._batch("syncs", n, {
                "device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": stream,
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "sync_type": [SYNC_TYPES.get(x, "unknown") for x in st],
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "event_id": event,
                "args": _merge_unknown_enums(c["__args"], (("syncType", st, SYNC_TYPES),))})
            yield from self._emit("syncs", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _memory_usage(self):
        """CUDA_GPU_MEMORY_USAGE_EVENTS (--cuda-memory-usage=true): every allocation and free the
        driver saw (cudaMalloc*, cuMemAlloc*, cudaHostAlloc, static device variables)."""
        t = MEM_USAGE
        if t not in self.tables:
            return
        wanted = ["start", "deviceId", "address", "bytes", "memKind", "memoryOperationType",
                  "globalPid", "correlationId", "name"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, op, mk = I("start"), c["memoryOperationType"], c["memKind"]
            ok = [x in MEM_OPS and s is not None for x, s in zip(op, start.to_pylist())]
            for i, v in enumerate(ok):
                if not v:
                    self.accounting.skip(
                        f"{t}: row without start" if start[i].as_py() is None
                        else f"{t}: memoryOperationType {op[i]} (neither allocation nor deallocation)",
                        dict(zip(wanted, rows[i])))
            batch = self._batch("memory_events", n, {
                "device_id": I("deviceId"), "ts_ns": start, "kind": [MEM_OPS.get(x) for x in op],
                "address": I("address"), "bytes": I("bytes"),
                "allocator": pa.nulls(n, pa.string()).fill_null("cuda"),
                "memory_kind": [MEM_KINDS.get(x, "unknown") or "unknown" for x in mk],
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "name": self._strs(t, "name", c["name"]),
                "args": _merge_unknown_enums(c["__args"], (("memKind", mk, MEM_KINDS),))})
            yield from self._emit("memory_events", batch, None if all(ok) else pa.array(ok))
            self._tick(n)

    # -- host side -----------------------------------------------------------------------------
    def _runtime(self):
        t = RUNTIME
        if t not in self.tables:
            return
        wanted = ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"]
        api_names: dict = {}
        for rows, c in self._select_fast(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            g = I("globalTid")
            raw = self._lookup(t, "nameId", c["nameId"])
            enc = raw.dictionary_encode()
            for s in set(enc.dictionary.to_pylist()) - api_names.keys():
                api_names[s] = api_base_name(s)
            base = pc.take(pa.array([api_names[s] for s in enc.dictionary.to_pylist()], pa.string()),
                           enc.indices)
            ec = c["eventClass"]
            klass = I("eventClass")
            common = {"pid": decode_pid(g), "tid": decode_tid(g), "start_ns": start, "end_ns": end,
                      "dur_ns": pc.subtract(end, start), "correlation_id": I("correlationId"),
                      "args": c["__args"]}
            ok = self._valid_interval(t, rows, wanted, start, end)
            ok = pa.array([True] * n) if ok is None else ok
            is_api = pc.is_in(klass, pa.array(list(API_CLASSES), pa.int64())).fill_null(False)
            is_bt = pc.equal(klass, CUDA_BACKTRACE).fill_null(False)
            api = self._batch("api_calls", n, {
                **common, "name": base, "raw_name": raw,
                "api": pc.if_else(pc.equal(klass, 0), pa.scalar(API_CLASSES[0]),
                                  pc.if_else(pc.equal(klass, 1), pa.scalar(API_CLASSES[1]),
                                             pa.scalar(None, pa.string()))),
                "return_value": I("returnValue")})
            yield from self._emit("api_calls", api, pc.and_(ok, is_api))
            if pc.any(is_bt).as_py():
                ev = self._batch("events", n, {
                    **common, "event_id": self._event_ids(n), "name": base,
                    "category": pa.nulls(n, pa.string()).fill_null("cuda_backtrace"),
                    "is_instant": pa.nulls(n, pa.bool_()).fill_null(False),
                    # events have no return_value column: keep it in args
                    "args": _merge_unknown_enums(_seq(c["__args"]), (("returnValue", _seq(c["returnValue"]), {}),))})
                yield from self._emit("events", ev, pc.and_(ok, is_bt))
            other = pc.and_(ok, pc.invert(pc.or_(is_api, is_bt)))
            if pc.any(other).as_py():
                ec = _seq(ec)
                for i in (i for i, v in enumerate(other.to_pylist()) if v):
                    x = ec[i]
                    self.accounting.skip(
                        f"{t}: row with eventClass {x} ({EVENT_CLASS_LABELS.get(x, 'unknown class')}), "
                        "not a CUDA runtime or driver call", dict(zip(wanted, rows[i])))
            self._tick(n)

    def _nvtx(self):
        t = "NVTX_EVENTS"
        if t not in self.tables:
            return
        have = set(self.tables[t])
        con = self.con
        # domain names per process (eventType 75), first creation row wins
        domains: dict = {}
        if {"eventType", "domainId"} <= have:
            txt = _q("text") if "text" in have else "NULL"
            tid = _q("textId") if "textId" in have else "NULL"
            gt = _q("globalTid") if "globalTid" in have else "NULL"
            order = "ORDER BY start" if "start" in have else ""
            for g, d, text, text_id in self._all(
                    f"SELECT {gt}, domainId, {txt}, {tid} FROM NVTX_EVENTS WHERE eventType = "
                    f"{NVTX_DOMAIN_CREATE} {order}"):
                key = (((g if _is_int64(g) else 0) >> 24) & 0xFFFFFF, d)
                if key not in domains:
                    domains[key] = self.strings.get(text_id, text)
        hi = con.execute(
            f"SELECT {'max(start)' if 'start' in have else 'NULL'}, "
            f"{'max(' + _q('end') + ')' if 'end' in have else 'NULL'} FROM NVTX_EVENTS").fetchone()
        maxts = max((v for v in hi if _is_int64(v)), default=None)
        wanted = ["start", "end", "eventType", "globalTid", "text", "textId", "domainId"]
        # eventType stays in args (the range style); endGlobalTid too (only set when a range ended
        # on another thread); domainId only when it is not the default domain
        args_skip = {"text", "textId", "start", "end", "globalTid"}
        extra = {"unclosed": f"CASE WHEN {_q('end') if 'end' in have else 'NULL'} IS NULL AND "
                             f"{_q('eventType') if 'eventType' in have else 'NULL'} IN "
                             f"({', '.join(map(str, NVTX_RANGES))}) THEN json('true') END"}
        for rows, c in self._select_nvtx(t, wanted, args_skip, extra):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end, etype = I("start"), I("end"), I("eventType")
            is_range = pc.is_in(etype, pa.array(NVTX_RANGES, pa.int64())).fill_null(False)
            is_mark = pc.equal(etype, NVTX_MARK).fill_null(False)
            if maxts is not None:
                end = pc.if_else(pc.and_(is_range, pc.is_null(end)), pa.scalar(maxts, pa.int64()), end)
            end = pc.if_else(is_mark, start, end)
            g = I("globalTid")
            pid = decode_pid(g)
            name = pc.coalesce(self._lookup(t, "textId", c["textId"]), self._strs(t, "text", c["text"]))
            dom_ids = c["domainId"]
            if domains:
                pids = pid.to_pylist()
                dom = [domains.get((p, d)) if d else None for p, d in zip(pids, dom_ids)]
            else:
                dom = None
            kept = pc.or_(is_range, is_mark)
            mask = self._valid_interval(t, rows, wanted, start, end, among=kept)
            batch = self._batch("events", n, {
                "event_id": self._event_ids(n), "pid": pid, "tid": decode_tid(g), "start_ns": start,
                "end_ns": end, "dur_ns": pc.subtract(end, start), "name": name,
                "category": pc.if_else(is_mark, pa.scalar("nvtx_mark"), pa.scalar("nvtx")),
                "domain": dom, "is_instant": is_mark, "args": c["__args"]})
            yield from self._emit("events", batch, mask)
            # the rows that are neither ranges nor marks, counted per eventType
            if not pc.all(kept).as_py():
                for i in (i for i, v in enumerate(kept.to_pylist()) if not v):
                    x = c["eventType"][i]
                    self.accounting.skip(_nvtx_skip_reason(x), dict(zip(wanted, rows[i])),
                                         by_design=x in NVTX_BY_DESIGN)
            self._tick(n)

    def _select_nvtx(self, table, wanted, args_skip, extra):
        have = self.tables[table]
        sel = [(_q(c) if c in have else "NULL") for c in wanted]
        rest = [c for c in have if c not in args_skip]
        sel.append(_args_sql(rest, extra, drop_zero={"domainId"}))
        keys = list(wanted) + ["__args"]
        for rows in self._chunks(table, f"SELECT {', '.join(sel)} FROM {_q(table)}"):
            yield rows, dict(zip(keys, zip(*rows)))

    def _osrt(self):
        t = "OSRT_API"
        if t not in self.tables:
            return
        wanted = ["start", "end", "eventClass", "globalTid", "nameId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end, klass = I("start"), I("end"), I("eventClass")
            g = I("globalTid")
            is_call = pc.or_(pc.equal(klass, OSRT_CLASS), pc.is_null(klass)).fill_null(False)
            mask = self._valid_interval(t, rows, wanted, start, end, among=is_call)
            batch = self._batch("events", n, {
                "event_id": self._event_ids(n), "pid": decode_pid(g), "tid": decode_tid(g),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "name": self._lookup(t, "nameId", c["nameId"]),
                "category": pa.nulls(n, pa.string()).fill_null("osrt"),
                "is_instant": pa.nulls(n, pa.bool_()).fill_null(False), "args": c["__args"]})
            yield from self._emit("events", batch, mask)
            if not pc.all(is_call).as_py():
                for i in (i for i, v in enumerate(is_call.to_pylist()) if not v):
                    x = c["eventClass"][i]
                    self.accounting.skip(
                        f"{t}: eventClass {x} ({EVENT_CLASS_LABELS.get(x, 'unknown class')}) row, a "
                        "zero-length tracing marker, not an OS runtime call", dict(zip(wanted, rows[i])),
                        by_design=True)
            self._tick(n)

    def _overhead(self, t: str):
        if t not in self.tables:
            return
        wanted = ["start", "end", "globalTid", "nameId", "correlationId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731
            start, end = I("start"), I("end")
            g = I("globalTid")
            batch = self._batch("events", n, {
                "event_id": self._event_ids(n), "pid": decode_pid(g), "tid": decode_tid(g),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                "name": self._lookup(t, "nameId", c["nameId"]),
                "category": pa.nulls(n, pa.string()).fill_null("overhead"),
                "correlation_id": I("correlationId"),
                "is_instant": pa.nulls(n, pa.bool_()).fill_null(False), "args": c["__args"]})
            yield from self._emit("events", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _gpu_metrics(self):
        t = "GPU_METRICS"
        if t not in self.tables:
            return
        have = set(self.tables[t])
        if not {"timestamp", "value"} <= have:
            if self.counts.get(t):
                self.accounting.skip(f"{t}: rows of an unknown layout (no timestamp/value columns)",
                                     None, self.counts[t])
            return
        metric_names: dict = {}
        mt = self.tables.get("TARGET_INFO_GPU_METRICS", [])
        if {"typeId", "metricId", "metricName"} <= set(mt):
            for ty, mi, nm in self._all("SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS"):
                if isinstance(ty, int) and isinstance(mi, int):
                    metric_names.setdefault((ty << 32) | (mi & 0xFFFFFFFF), nm)
        keys = pa.array(list(metric_names), pa.int64())
        values = pa.array(list(metric_names.values()), pa.string())
        wanted = ["timestamp", "typeId", "metricId", "value"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            ts = self._ints(t, c, "timestamp", n)
            ty = self._ints(t, c, "typeId", n)
            mi = self._ints(t, c, "metricId", n)
            key = pc.bit_wise_or(pc.shift_left(ty, 32), pc.bit_wise_and(mi, 0xFFFFFFFF))
            names = pc.coalesce(pc.take(values, pc.index_in(key, value_set=keys)),  # unnamed: "metric N"
                                pc.binary_join_element_wise("metric ", pc.cast(mi, pa.string()), ""))
            try:
                value = pa.array(c["value"], pa.float64())
            except _INT:
                value = pa.array([float(v) if isinstance(v, (int, float)) else None for v in c["value"]],
                                 pa.float64())
            ok = pc.and_(pc.is_valid(ts), pc.is_valid(value))
            if not pc.all(ok).as_py():
                for i in (i for i, v in enumerate(ok.to_pylist()) if not v):
                    self.accounting.skip(f"{t}: sample without timestamp or value", dict(zip(wanted, rows[i])))
            batch = self._batch("counters", n, {
                "device_id": pc.bit_wise_and(ty, 0xFF), "name": names, "ts_ns": ts, "value": value})
            yield from self._emit("counters", batch, ok)
            self._tick(n)

    # -- descriptions --------------------------------------------------------------------------
    def _rows(self, table: str, wanted: list[str]) -> list[dict]:
        if table not in self.tables:
            return []
        have = self.tables[table]
        sel = ", ".join(_q(c) if c in have else "NULL" for c in wanted)
        return [dict(zip(wanted, r)) for r in self._all(f"SELECT {sel} FROM {_q(table)}")]

    def _all_rows(self, table: str) -> list[dict]:
        if table not in self.tables:
            return []
        cols = self.tables[table]
        return [dict(zip(cols, r)) for r in self._all(f"SELECT * FROM {_q(table)}")]

    def _devices(self, b: Builders):
        gpus = self._all_rows("TARGET_INFO_GPU")
        cuda_gpus = {r.get("deviceId"): r for r in self._all_rows("TARGET_INFO_CUDA_GPU")}
        cuda_dev: dict = {}
        for r in self._all_rows("TARGET_INFO_CUDA_DEVICE"):
            cuda_dev.setdefault(r.get("gpuId"), []).append(r)
        mapped = {"id", "deviceId", "name", "computeMajor", "computeMinor", "smCount", "totalMemory",
                  "memoryBandwidth", "clockRate", "threadsPerWarp", "uuid"}
        I32, I64 = _int32_or_none, _int_or_none
        for g in gpus:
            dev = g.get("id", g.get("deviceId"))
            cg = cuda_gpus.get(dev, {})
            major = g.get("computeMajor", cg.get("computeCapabilityMajor"))
            minor = g.get("computeMinor", cg.get("computeCapabilityMinor"))
            warp = I32(g.get("threadsPerWarp", cg.get("numThreadsPerWarp")))
            warps = I32(g.get("maxWarpsPerSm", cg.get("maxWarpsPerMultiprocessor")))
            bw = g.get("memoryBandwidth")
            if bw is None and I64(cg.get("globalMemoryBandwidth")) is not None:
                bw = cg["globalMemoryBandwidth"] * 1000  # 2020.5: kB/s
            clock = g.get("clockRate")
            if clock is None and I64(cg.get("coreClockRate")) is not None:
                clock = cg["coreClockRate"] * 1000  # 2020.5: kHz
            # values of another type than the column's (or out of its range) stay in args
            rest = {k: v for k, v in g.items() if v is not None and (k not in mapped or (
                I64(v) is None if k not in ("name", "uuid") else not isinstance(v, str)))}
            rest.update({f"cuda_gpu.{k}": v for k, v in cg.items() if v is not None and k not in (
                "deviceId", "computeCapabilityMajor", "computeCapabilityMinor", "numThreadsPerWarp",
                "globalMemoryBandwidth", "coreClockRate", "numMultiprocessors", "globalMemorySize", "name")})
            if dev in cuda_dev:
                rest["cuda_devices"] = [{k: v for k, v in r.items() if v is not None} for r in cuda_dev[dev]]
            threads = warps * warp if warps is not None and warp is not None else None
            b["devices"].add(
                device_id=I32(dev), name=_str_or_none(g.get("name") or cg.get("name")), vendor="nvidia",
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=I32(g.get("smCount", cg.get("numMultiprocessors"))),
                total_memory_bytes=I64(g.get("totalMemory", cg.get("globalMemorySize"))),
                memory_bandwidth_bytes_per_s=I64(bw), clock_rate_hz=I64(clock),
                max_threads_per_sm=I32(threads), warp_size=warp, uuid=_str_or_none(g.get("uuid")),
                args=_json(rest))
        if not gpus:  # no GPU table: TARGET_INFO_CUDA_DEVICE is the only description (2025.3+)
            for dev, rs in cuda_dev.items():
                r = rs[0]
                b["devices"].add(device_id=_int32_or_none(dev), vendor="nvidia",
                                 sm_count=_int32_or_none(r.get("numMultiprocessors")),
                                 uuid=_str_or_none(r.get("uuid")),
                                 args=_json({"cuda_devices": [{k: v for k, v in x.items() if v is not None}
                                                              for x in rs]}))
        yield from b.drain()

    def _processes_threads(self, b: Builders):
        active = self.active_pids
        thread_names: dict = {}
        seen_threads: set = set()
        for r in self._rows("ThreadNames", ["globalTid", "nameId"]):
            g = r["globalTid"]
            if not _is_int64(g):
                self.accounting.skip("ThreadNames: row without an integer globalTid", r)
                continue
            pid, tid = (g >> 24) & 0xFFFFFF, g & 0xFFFFFF
            name = self.strings.get(r["nameId"]) if _is_int64(r["nameId"]) else None
            thread_names.setdefault((pid, tid), name)
            if pid not in active:
                self.accounting.skip("ThreadNames: thread of a process without converted activity", r,
                                     by_design=True)
            elif (pid, tid) in seen_threads:
                self.accounting.skip("ThreadNames: second name row for the same thread (first kept)", r)
            else:
                seen_threads.add((pid, tid))
                b["threads"].add(pid=pid, tid=tid, name=name)
        seen: set = set()
        for r in self._rows("PROCESSES", ["globalPid", "pid", "name"]):
            pid = r["pid"] if _is_int64(r["pid"]) else None
            if pid is None and _is_int64(r["globalPid"]):
                pid = (r["globalPid"] >> 24) & 0xFFFFFF
            if pid not in active:
                self.accounting.skip("PROCESSES: host process without converted activity "
                                     "(nsys lists every process of the host)", r, by_design=True)
            elif pid in seen:
                self.accounting.skip("PROCESSES: second row for the same pid (first kept)", r)
            else:
                seen.add(pid)
                b["processes"].add(pid=pid, name=_str_or_none(r["name"]))
        for pid in sorted(active - seen):  # e.g. 2020.5: no PROCESSES table
            b["processes"].add(pid=pid, name=thread_names.get((pid, pid)))

    def _source_info(self, meta_extra: dict) -> dict:
        meta: dict = {}
        for t in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
            for r in self._rows(t, ["name", "value"]):
                if r["name"] is not None:
                    meta[_str_or_none(r["name"])] = r["value"]
        host = None
        if "TARGET_INFO_SYSTEM_ENV" in self.tables and {"name", "value"} <= set(self.tables["TARGET_INFO_SYSTEM_ENV"]):
            rows = self._all("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
            host = _str_or_none(rows[0][0]) if rows else None
        utc = None
        for r in self._rows("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"]):
            if isinstance(r["utcEpochNs"], int):
                utc = r["utcEpochNs"]
                break
        origin, offset = "capture_start", utc
        normalize = str(meta.get("EXPORT_PARAM_TIME_NORMALIZE", "false")).lower() == "true"
        shift = str(meta.get("EXPORT_PARAM_TIME_SHIFT", "0")).strip() not in ("", "0")
        if normalize or shift:  # exported with --ts-normalize / --ts-shift: mapping unverified
            origin, offset = "unknown", None
            meta["tracekit_clock_note"] = ("exported with --ts-normalize/--ts-shift: the clock mapping "
                                           "is unknown; use --align")
        ranks = {r["rank"] for r in self._rows("MPI_RANKS", ["rank"]) if _is_int64(r["rank"])
                 and -2**31 <= r["rank"] < 2**31}
        not_read = {t: self.counts[t] for t in sorted(self.tables)
                    if t not in READ_TABLES and not t.startswith("ENUM_") and self.counts.get(t)}
        if not_read:
            meta["tables_not_converted"] = not_read
        if self.repairs:
            meta["tracekit_repairs"] = dict(self.repairs)
        meta.update(meta_extra)
        return {
            "format_version": _str_or_none(meta.get("EXPORT_SCHEMA_VERSION")),
            "tool_version": _str_or_none(meta.get("EXPORT_PRODUCT_VERSION")),
            "host": host,
            "rank": ranks.pop() if len(ranks) == 1 else None,
            "world_size": None,
            "clock_origin": origin,
            "clock_offset_ns": offset,
            "metadata": meta,
        }


# -- module helpers ------------------------------------------------------------------------------
class _ArrowRows:
    """Row ``i`` of Arrow columns as a tuple (the examples of skipped rows)."""

    def __init__(self, cols: dict, keys: list[str]):
        self.cols, self.keys = cols, keys

    def __len__(self) -> int:
        return len(self.cols[self.keys[0]])

    def __getitem__(self, i: int) -> tuple:
        return tuple(self.cols[k][i].as_py() for k in self.keys)


def _args_arrow(keys: list[str], arrays: list[pa.Array], n: int, max_card: int = 256) -> pa.Array:
    """The JSON text that ``_args_sql`` has SQLite build, for integer columns, without Python per
    row: the non-NULL members in column order, NULL when there are none.  ``keys`` are the member
    prefixes as SQLite writes them (``"name":``).

    Columns with few distinct values (nsys's constant-ish extras) are folded into one code per
    row; each distinct code becomes a text template in Python (the members of those columns, and
    which of the other columns are NULL), and a row's text is its template's literal pieces
    around the decimal text of its other columns, joined by polars (Arrow's string joins are
    several times slower)."""
    parts = []  # (key, "low", dictionary, mult, card) or (key, "high", array, mult or None, 2)
    code = None
    mult = 1
    for k, a in zip(keys, arrays):
        if a.null_count == n:
            continue
        enc = pc.dictionary_encode(a, null_encoding="encode")
        card = len(enc.dictionary)
        if card <= max_card and mult * card < (1 << 62):
            term, part = enc.indices.cast(pa.int64()), (k, "low", enc.dictionary.to_pylist(), mult, card)
        elif a.null_count:
            term, card, part = pc.is_null(a).cast(pa.int64()), 2, (k, "high", a, mult, 2)
        else:
            parts.append((k, "high", a, None, 1))
            continue
        if mult * card >= (1 << 62):  # too many combinations: no folding
            return _args_joined(keys, arrays, n)
        term = term if mult == 1 else pc.multiply(term, mult)
        code = term if code is None else pc.add(code, term)
        parts.append(part)
        mult *= card
    if not parts:
        return pa.nulls(n, pa.string())
    enc = pc.dictionary_encode(code if code is not None else pa.repeat(pa.scalar(0, pa.int64()), n))
    combos = enc.dictionary.to_pylist()
    if len(combos) > 1024 and len(combos) * 8 > n:
        return _args_joined(keys, arrays, n)
    highs = [p for p in parts if p[1] == "high"]
    lits: list[list] = [[] for _ in range(len(highs) + 1)]
    for x in combos:
        pieces, buf, first = [], "", True
        for k, kind, v, m, card in parts:
            if kind == "low":
                val = v[(x // m) % card]
                if val is not None:
                    buf += ("{" if first else ",") + k + str(val)
                    first = False
            elif m is not None and (x // m) % 2:  # NULL in this row: no member
                pieces.append(buf)
                buf = ""
            else:
                pieces.append(buf + ("{" if first else ",") + k)
                buf, first = "", False
        pieces.append(buf + "}")
        if first:  # no member at all: NULL
            pieces = [None] + [""] * len(highs)
        for j, piece in enumerate(pieces):
            lits[j].append(piece)
    import polars as pl

    if not highs:
        return pc.take(pa.array(lits[0], pa.string()), enc.indices)
    frame = {"__i": enc.indices.cast(pa.uint32())}
    exprs = []
    for j, lit in enumerate(lits):
        exprs.append(pl.lit(lit[0], dtype=pl.Utf8) if len(set(lit)) == 1
                     else pl.lit(pl.Series(lit, dtype=pl.Utf8)).gather(pl.col("__i")))
        if j < len(highs):
            frame[f"h{j}"] = highs[j][2]
            exprs.append(pl.col(f"h{j}").cast(pl.Utf8).fill_null(""))
    out = pl.from_arrow(pa.table(frame)).select(pl.concat_str(exprs).alias("a")).to_series().to_arrow()
    return out.cast(pa.string())


def _args_joined(keys: list[str], arrays: list[pa.Array], n: int) -> pa.Array:
    """``_args_arrow`` member by member (when the columns have too many distinct values)."""
    pieces = [pc.binary_join_element_wise("," + k, pc.cast(a, pa.string()), "")
              for k, a in zip(keys, arrays) if a.null_count < n]
    if not pieces:
        return pa.nulls(n, pa.string())
    body = pc.binary_join_element_wise(*pieces, "", null_handling="replace", null_replacement="")
    text = pc.binary_join_element_wise("{", pc.utf8_slice_codeunits(body, 1), "}", "")
    return pc.if_else(pc.equal(body, ""), pa.scalar(None, pa.string()), text)


def _seq(v):
    """A column as a Python sequence (Arrow arrays of the columnar reader become lists)."""
    return v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _is_int64(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63


def _int_or_none(v):
    return v if _is_int64(v) else None


def _int32_or_none(v):
    return v if _is_int64(v) and -2**31 <= v < 2**31 else None


def _str_or_none(v) -> str | None:
    """A text value of a description table (another type written out, bytes decoded)."""
    if v is None or isinstance(v, str):
        return v
    return _text(v) if isinstance(v, bytes) else str(v)


def _json(d: dict) -> str | None:
    return orjson.dumps(d, default=str).decode() if d else None


def _memcpy_name(ck, sk, dk) -> str:
    kind = COPY_KINDS.get(ck, "unknown")
    if sk is None and dk is None:
        return f"Memcpy {kind}"
    return f"Memcpy {kind} ({MEM_KIND_LABELS.get(sk, 'Unknown')} -> {MEM_KIND_LABELS.get(dk, 'Unknown')})"


def _merge_unknown_enums(args: tuple, checks) -> list:
    """Keep raw codes that the enum copies do not know in args (so nothing is lost)."""
    out = list(args)
    for key, vals, known in checks:
        for i, v in enumerate(vals):
            if v is not None and v not in known:
                d = orjson.loads(out[i]) if out[i] else {}
                d[key] = v
                out[i] = orjson.dumps(d, default=_str_or_none).decode()
    return out


def _nvtx_skip_reason(x) -> str:
    label = NVTX_TYPE_LABELS.get(x, "unknown type")
    if x == NVTX_DOMAIN_CREATE:
        return ("NVTX_EVENTS: eventType 75 (NvtxDomainCreate) row, used as the domain name of the "
                "process's ranges, not kept as an event")
    return f"NVTX_EVENTS: eventType {x} ({label}) row, not a range or mark"


def _args_sql(columns: list[str], extra: dict | None = None, drop_zero: set = frozenset()) -> str:
    """SQL for the JSON text of the non-NULL values of `columns` (NULL when none): built by SQLite
    (json_object, then json_patch onto '{}' which drops the NULL members). BLOBs become hex text."""
    pairs = []
    for c in columns:
        v = f"CASE typeof({_q(c)}) WHEN 'blob' THEN 'hex:' || hex({_q(c)}) ELSE {_q(c)} END"
        if c in drop_zero:
            v = f"CASE typeof({_q(c)}) WHEN 'blob' THEN 'hex:' || hex({_q(c)}) ELSE NULLIF({_q(c)}, 0) END"
        pairs.append(f"'{c.replace(chr(39), chr(39) * 2)}', {v}")
    for k, expr in (extra or {}).items():
        pairs.append(f"'{k}', {expr}")
    if not pairs:
        return "NULL"
    expr = "'{}'"
    for i in range(0, len(pairs), 50):  # SQLite caps a function's argument count
        expr = f"json_patch({expr}, json_object({', '.join(pairs[i:i + 50])}))"
    return f"NULLIF({expr}, '{{}}')"
