"""NsysAdapter: opens the export (or exports a report), reads every table through the mixins
(reader.SqliteReader, gpu.GpuTables, host.HostTables), builds the record batches and describes the
source (devices, processes, threads, ``sources`` metadata)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ..base import Adapter, Builders, TraceError
from ..fit import RAW_PREFIX, cap_text, fit, with_raw_args
from ..detect import sniff_nsys as sniff  # noqa: F401 (the format's sniffer, re-exported)
from .common import (
    CUPTI_OVERHEAD,
    GRAPH_TRACE,
    KERNEL,
    MEM_USAGE,
    MEMCPY,
    MEMSET,
    NSYS_MARKERS,
    READ_TABLES,
    RUNTIME,
    SYNC,
    int32_or_none,
    int_or_none,
    is_int64,
    json_text,
    quote_ident,
    str_or_none,
)
from .gpu import GpuTables
from .host import HostTables
from .reader import SqliteReader
from .report import export_report, is_report


def _check_no_writer(path: Path) -> None:
    """Refuse an export that another process is writing (an `nsys export` still running, a
    script mid-transaction): it is read with ``immutable=1`` (no locks, the fastest), which would
    see its pages half-written.  A writer shows as its journal beside the file (a hot
    ``-journal`` or a ``-wal``) or as the lock a plain read-only connection cannot take."""
    for ext in ("-journal", "-wal"):
        try:
            if os.path.getsize(f"{path}{ext}") > 0:
                raise TraceError(path, f"locked by a writer (its {ext[1:]} file is beside it: another "
                                 "process is writing it, or was killed while writing)",
                                 "wait for the export to finish, or export it again")
        except OSError:
            pass
    try:
        con = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode=ro", uri=True, timeout=0)
    except sqlite3.Error:
        return  # (said as it is read)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise TraceError(path, "locked by a writer (another process holds it mid-transaction)",
                             "wait for the export to finish, then convert it") from None
    except sqlite3.Error:
        pass
    finally:
        con.close()


class NsysAdapter(SqliteReader, GpuTables, HostTables, Adapter):
    FORMAT = "nsys"
    PARALLEL_INSERT = True

    def read(self, path, source_id, progress=None):
        path = Path(path)
        meta_extra: dict = {}
        db_path = path
        if is_report(path):
            db_path, meta_extra = export_report(path)
        else:
            _check_no_writer(path)
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
        try:
            names = [r[0] for r in self._all("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.DatabaseError as e:
            raise TraceError(path, f"not a readable SQLite database ({e})",
                             "pass an `nsys export --type sqlite` file or the .nsys-rep report") from None
        self.tables = {n: [r[1] for r in self._all(f"PRAGMA table_info({quote_ident(n)})")] for n in names}
        if not any(t in self.tables for t in NSYS_MARKERS) and not any(
                t.startswith("CUPTI_ACTIVITY_KIND_") for t in self.tables):
            raise TraceError(path, "SQLite file is not an Nsight Systems export (no StringIds, CUPTI, "
                             "NVTX or OSRT tables)", "pass the output of `nsys export --type sqlite`")
        self.active_pids: set[int] = set()
        self.next_event_id = 0
        self.strings = self._strings()
        self._sid_keys = pa.array(list(self.strings), pa.int64())
        self._sid_values = pa.array(list(self.strings.values()), pa.string())
        self.counts = {t: con.execute(f"SELECT count(*) FROM {quote_ident(t)}").fetchone()[0] for t in self.tables}
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
    def _ints(self, table: str, cols: dict, name: str, n: int, keep: bool = True,
              required: bool = False) -> pa.Array:
        """Column ``name`` of a chunk of ``table`` as int64, by the one rule (fit.fit): a value
        that is not an integer (a user-edited file) is NULL, its raw value kept in the row's args
        as ``_raw_<name>`` (``keep``: the target table has args) and counted.  ``required`` (a
        row's time): NULL and nothing counted here, the caller skips the row with the reason.
        Each column of a chunk is fitted once (``cols["__fit"]``), so a repair is counted once."""
        done = cols.setdefault("__fit", {})
        if name in done:
            return done[name]
        v = cols.get(name)
        if v is None:
            arr = pa.nulls(n, pa.int64())
        else:
            arr, bad = fit(v, pa.int64())
            if bad and not required:
                self._keep_raw(table, cols, name, pa.int64(), v, bad, keep)
        done[name] = arr
        return arr

    def _times(self, table: str, cols: dict, n: int, end_required: bool = True):
        """(start, end) of a chunk: the times that place a row, required (``_ints``); the rows
        without a usable one are skipped by ``_valid_interval``.  ``end_required=False``: an end
        that does not fit is repaired instead (NVTX: a range without end is kept)."""
        return (self._ints(table, cols, "start", n, required=True),
                self._ints(table, cols, "end", n, required=end_required))

    def _keep_raw(self, table: str, cols: dict, name: str, t: pa.DataType, values, bad: list[int],
                  keep: bool) -> None:
        """Count the values of ``bad`` that did not fit, and keep them in the chunk's args."""
        self.accounting.misfits(table, name, t, len(bad), keep)
        if keep:
            arrow = isinstance(values, (pa.Array, pa.ChunkedArray))
            cols["__args"] = with_raw_args(cols["__args"], {
                i: {RAW_PREFIX + name: values[i].as_py() if arrow else values[i]} for i in bad})

    def _batch(self, table: str, n: int, cols: dict) -> pa.RecordBatch:
        """A record batch of schema table ``table`` from its columns (arrays or lists), each
        fitted by the one rule (fit.fit): a value that does not fit (an id beyond an int32
        column, a number in a text column) is NULL (text: its text), counted, and kept in args
        as ``_raw_<column>``."""
        fields = schema.table(table).arrow
        arrays: dict[str, pa.Array] = {}
        extras: dict[int, dict] = {}
        has_args = "args" in fields.names
        for f in fields:
            v = cols.get(f.name)
            if f.name in ("source_id", "args"):
                continue
            if v is None:
                arrays[f.name] = pa.nulls(n, f.type)
                continue
            arr, bad = fit(v, f.type)
            arrays[f.name] = arr
            if bad:
                self.accounting.misfits(table, f.name, f.type, len(bad), has_args)
                arrow = isinstance(v, (pa.Array, pa.ChunkedArray))
                for i in bad:
                    extras.setdefault(i, {})[RAW_PREFIX + f.name] = v[i].as_py() if arrow else v[i]
        if has_args:
            args = cols.get("args")
            if extras:
                args = with_raw_args(args if args is not None else [None] * n, extras)
            arrays["args"] = pa.nulls(n, pa.string()) if args is None else self._strs(table, "args", args)
        sid = pa.nulls(n, pa.int32()).fill_null(self.sid)
        return cap_text(table, pa.RecordBatch.from_arrays(
            [sid if f.name == "source_id" else arrays[f.name] for f in fields], schema=fields), self.accounting)

    def _strs(self, table: str, name: str, v, cols: dict | None = None) -> pa.Array:
        """A column as text by the one rule: a value of another type is written as its text
        (bytes decoded with U+FFFD, numbers written out), counted, and with ``cols`` (the chunk)
        its raw value kept in args as ``_raw_<name>``."""
        arr, bad = fit(v, pa.string())
        if bad:
            if cols is not None:
                self._keep_raw(table, cols, name, pa.string(), v, bad, True)
            else:
                self.accounting.misfits(table, name, pa.string(), len(bad), False)
        return arr

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
            raw = dict(zip(keys, rows[i]))
            why = ("with a start that is not an integer" if s is None and raw.get("start") is not None
                   else "without start" if s is None
                   else "with an end that is not an integer" if e is None and raw.get("end") is not None
                   else "without end" if e is None
                   else "with end before start" if e < s else "with a duration beyond int64")
            self.accounting.skip(f"{table}: row {why}", raw)
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

    def _devices(self, b: Builders):
        gpus = self._all_rows("TARGET_INFO_GPU")
        cuda_gpus = {r.get("deviceId"): r for r in self._all_rows("TARGET_INFO_CUDA_GPU")}
        cuda_dev: dict = {}
        for r in self._all_rows("TARGET_INFO_CUDA_DEVICE"):
            cuda_dev.setdefault(r.get("gpuId"), []).append(r)
        mapped = {"id", "deviceId", "name", "computeMajor", "computeMinor", "smCount", "totalMemory",
                  "memoryBandwidth", "clockRate", "threadsPerWarp", "uuid"}
        I32, I64 = int32_or_none, int_or_none
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
                device_id=I32(dev), name=str_or_none(g.get("name") or cg.get("name")), vendor="nvidia",
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=I32(g.get("smCount", cg.get("numMultiprocessors"))),
                total_memory_bytes=I64(g.get("totalMemory", cg.get("globalMemorySize"))),
                memory_bandwidth_bytes_per_s=I64(bw), clock_rate_hz=I64(clock),
                max_threads_per_sm=I32(threads), warp_size=warp, uuid=str_or_none(g.get("uuid")),
                args=json_text(rest))
        if not gpus:  # no GPU table: TARGET_INFO_CUDA_DEVICE is the only description (2025.3+)
            for dev, rs in cuda_dev.items():
                r = rs[0]
                b["devices"].add(device_id=int32_or_none(dev), vendor="nvidia",
                                 sm_count=int32_or_none(r.get("numMultiprocessors")),
                                 uuid=str_or_none(r.get("uuid")),
                                 args=json_text({"cuda_devices": [{k: v for k, v in x.items() if v is not None}
                                                              for x in rs]}))
        yield from b.drain()

    def _processes_threads(self, b: Builders):
        active = self.active_pids
        thread_names: dict = {}
        seen_threads: set = set()
        for r in self._rows("ThreadNames", ["globalTid", "nameId"]):
            g = r["globalTid"]
            if not is_int64(g):
                self.accounting.skip("ThreadNames: row without an integer globalTid", r)
                continue
            pid, tid = (g >> 24) & 0xFFFFFF, g & 0xFFFFFF
            name = self.strings.get(r["nameId"]) if is_int64(r["nameId"]) else None
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
            pid = r["pid"] if is_int64(r["pid"]) else None
            if pid is None and is_int64(r["globalPid"]):
                pid = (r["globalPid"] >> 24) & 0xFFFFFF
            if pid not in active:
                self.accounting.skip("PROCESSES: host process without converted activity "
                                     "(nsys lists every process of the host)", r, by_design=True)
            elif pid in seen:
                self.accounting.skip("PROCESSES: second row for the same pid (first kept)", r)
            else:
                seen.add(pid)
                b["processes"].add(pid=pid, name=str_or_none(r["name"]))
        for pid in sorted(active - seen):  # e.g. 2020.5: no PROCESSES table
            b["processes"].add(pid=pid, name=thread_names.get((pid, pid)))

    def _source_info(self, meta_extra: dict) -> dict:
        meta: dict = {}
        for t in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
            for r in self._rows(t, ["name", "value"]):
                if r["name"] is not None:
                    meta[str_or_none(r["name"])] = r["value"]
        host = None
        if "TARGET_INFO_SYSTEM_ENV" in self.tables and {"name", "value"} <= set(self.tables["TARGET_INFO_SYSTEM_ENV"]):
            rows = self._all("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1")
            host = str_or_none(rows[0][0]) if rows else None
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
        ranks = {r["rank"] for r in self._rows("MPI_RANKS", ["rank"]) if is_int64(r["rank"])
                 and -2**31 <= r["rank"] < 2**31}
        not_read = {t: self.counts[t] for t in sorted(self.tables)
                    if t not in READ_TABLES and not t.startswith("ENUM_") and self.counts.get(t)}
        if not_read:
            meta["tables_not_converted"] = not_read
        meta.update(meta_extra)
        return {
            "format_version": str_or_none(meta.get("EXPORT_SCHEMA_VERSION")),
            "tool_version": str_or_none(meta.get("EXPORT_PRODUCT_VERSION")),
            "host": host,
            "rank": ranks.pop() if len(ranks) == 1 else None,
            "world_size": None,
            "clock_origin": origin,
            "clock_offset_ns": offset,
            "metadata": meta,
        }
