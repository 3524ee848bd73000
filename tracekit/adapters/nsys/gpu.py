"""GPU activity tables: kernels, CUDA graph launches, memcpy / memset, synchronization, CUDA memory
usage events (a mixin of NsysAdapter)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...names import short_kernel_name
from .common import (
    COPY_KINDS,
    GRAPH_TRACE,
    KERNEL,
    MEM_KIND_LABELS,
    MEM_KINDS,
    MEM_OPS,
    MEM_USAGE,
    MEMCPY,
    MEMSET,
    NO_STREAM,
    SYNC,
    SYNC_TYPES,
    memcpy_name,
    merge_unknown_enums,
    decode_pid,
)


#: the columns every GPU activity table has (kernels, graph launches, memcpy, memset, syncs)
ACTIVITY = ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid"]


class GpuTables:
    def _kernels_lacking(self) -> None:
        """An export without the kernel table (trimmed, or renamed by another nsys version) whose
        runtime calls launched kernels: those kernels are missing from it. Said as skipped rows
        (one per launch call; the summary line shows them, --strict fails), never in silence."""
        runtime = "CUPTI_ACTIVITY_KIND_RUNTIME"
        if runtime not in self.tables or "nameId" not in self.tables[runtime]:
            return
        launch = ("LaunchKernel", "LaunchCooperativeKernel", "LaunchKernelEx")
        graph = ("cudaGraphLaunch", "cuGraphLaunch")
        n = 0
        for name_id, k in self.con.execute(f'SELECT nameId, count(*) FROM "{runtime}" GROUP BY nameId').fetchall():
            name = str(self.strings.get(name_id) or "")
            if any(x in name for x in launch) or (GRAPH_TRACE not in self.tables and name.startswith(graph)):
                n += k
        if not n:
            return
        like = sorted(x for x in self.tables if x.startswith("CUPTI_ACTIVITY_KIND_") and "KERNEL" in x.upper())
        self.accounting.skip(
            f"kernels of launch calls: the export lacks the {KERNEL} table"
            + (f" (it has {', '.join(like)})" if like else "")
            + "; export again with CUDA tracing on (nsys export --type sqlite of the full report)",
            example=None, n=n)

    def _activity(self, t: str, table: str, more: list[str], columns, select=None):
        """The rows of the GPU activity table `t` as `table` batches: the columns every activity
        row has (device, context, stream, interval, pid, correlation id, args) and those that
        `columns(c, n, I)` gives for a chunk (c: its columns, I: a column as int64), which win.
        A row without a usable interval is skipped."""
        wanted = ACTIVITY + more
        for rows, c in (select or self._select)(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start, end = self._times(t, c, n)
            cols = {"device_id": I("deviceId"), "context_id": I("contextId"), "stream_id": I("streamId"),
                    "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start),
                    "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId")}
            cols.update(columns(c, n, I))
            cols.setdefault("args", c["__args"])  # last: the columns read above keep raw values there
            batch = self._batch(table, n, cols)
            yield from self._emit(table, batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _kernels(self):
        t = KERNEL
        if t not in self.tables:
            self._kernels_lacking()
            return

        def columns(c, n, I):
            name = self._lookup(t, c, "demangledName")
            short = self._lookup(t, c, "shortName")
            if name.null_count:  # no demangled name: fall back to the short name
                name = pc.coalesce(name, short)
            if short.null_count:  # no short name (trimmed exports): derive it like Kineto does
                short = pc.coalesce(short, pa.array([short_kernel_name(x) for x in name.to_pylist()],
                                                    pa.string()))
            st, dy = I("staticSharedMemory"), I("dynamicSharedMemory")
            return {"name": name, "short_name": short, "mangled_name": self._lookup(t, c, "mangledName"),
                    "grid_x": I("gridX"), "grid_y": I("gridY"), "grid_z": I("gridZ"),
                    "block_x": I("blockX"), "block_y": I("blockY"), "block_z": I("blockZ"),
                    "registers_per_thread": I("registersPerThread"), "static_shared_bytes": st,
                    "dynamic_shared_bytes": dy, "shared_bytes": pc.add(st, dy),
                    "graph_id": I("graphId"), "graph_node_id": I("graphNodeId"),
                    "launch_type": I("launchType")}
        yield from self._activity(t, "kernels", [
            "demangledName", "shortName", "mangledName", "launchType", "registersPerThread", "gridX", "gridY",
            "gridZ", "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory", "graphNodeId",
            "graphId"], columns, select=self._select_fast)

    def _graph_trace(self):
        def columns(c, n, I):
            name = [f"[CUDA graph {g}]" if g is not None else "[CUDA graph]" for g in c["graphId"]]
            return {"name": name, "short_name": name, "graph_id": I("graphId")}
        if GRAPH_TRACE in self.tables:
            yield from self._activity(GRAPH_TRACE, "kernels", ["graphId"], columns)

    def _memcpy(self):
        names: dict = {}

        def columns(c, n, I):
            ck, sk, dk = c["copyKind"], c["srcKind"], c["dstKind"]
            keys = list(zip(ck, sk, dk))
            for k in set(keys) - names.keys():
                names[k] = memcpy_name(*k)
            return {"kind": pa.nulls(n, pa.string()).fill_null("memcpy"),
                    "copy_kind": [COPY_KINDS.get(x, "unknown") for x in ck],
                    "src_kind": [MEM_KINDS.get(x) for x in sk], "dst_kind": [MEM_KINDS.get(x) for x in dk],
                    "bytes": I("bytes"), "name": [names[k] for k in keys], "graph_node_id": I("graphNodeId"),
                    "args": merge_unknown_enums(c["__args"], (("copyKind", ck, COPY_KINDS),
                                                               ("srcKind", sk, MEM_KINDS),
                                                               ("dstKind", dk, MEM_KINDS)))}
        if MEMCPY in self.tables:
            yield from self._activity(MEMCPY, "memops", ["bytes", "copyKind", "srcKind", "dstKind", "graphNodeId"],
                                      columns)

    def _memset(self):
        def columns(c, n, I):
            mk = c["memKind"]
            return {"kind": pa.nulls(n, pa.string()).fill_null("memset"),
                    "dst_kind": [MEM_KINDS.get(x) for x in mk], "bytes": I("bytes"),
                    "name": [f"Memset ({MEM_KIND_LABELS.get(x, 'Unknown')})" for x in mk],
                    "graph_node_id": I("graphNodeId"),
                    "args": merge_unknown_enums(c["__args"], (("memKind", mk, MEM_KINDS),))}
        if MEMSET in self.tables:
            yield from self._activity(MEMSET, "memops", ["bytes", "memKind", "graphNodeId"], columns)

    def _syncs(self):
        def columns(c, n, I):
            stream, event = I("streamId"), I("eventId")  # 4294967295: no stream / no event
            st = c["syncType"]
            return {"stream_id": pc.if_else(pc.equal(stream, NO_STREAM), pa.scalar(None, pa.int64()), stream),
                    "event_id": pc.if_else(pc.equal(event, NO_STREAM), pa.scalar(None, pa.int64()), event),
                    "sync_type": [SYNC_TYPES.get(x, "unknown") for x in st],
                    "args": merge_unknown_enums(c["__args"], (("syncType", st, SYNC_TYPES),))}
        if SYNC in self.tables:
            yield from self._activity(SYNC, "syncs", ["syncType", "eventId"], columns)

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
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start = self._ints(t, c, "start", n, required=True)
            op, mk = c["memoryOperationType"], c["memKind"]
            ok = [x in MEM_OPS and s is not None for x, s in zip(op, start.to_pylist())]
            for i, v in enumerate(ok):
                if not v:
                    self.accounting.skip(
                        (f"{t}: row with a start that is not an integer" if rows[i][0] is not None
                         else f"{t}: row without start") if start[i].as_py() is None
                        else f"{t}: memoryOperationType {op[i]} (neither allocation nor deallocation)",
                        dict(zip(wanted, rows[i])))
            batch = self._batch("memory_events", n, {
                "device_id": I("deviceId"), "ts_ns": start, "kind": [MEM_OPS.get(x) for x in op],
                "address": I("address"), "bytes": I("bytes"),
                "allocator": pa.nulls(n, pa.string()).fill_null("cuda"),
                "memory_kind": [MEM_KINDS.get(x, "unknown") or "unknown" for x in mk],
                "pid": decode_pid(I("globalPid")), "correlation_id": I("correlationId"),
                "name": self._strs(t, "name", c["name"], c),
                "args": merge_unknown_enums(c["__args"], (("memKind", mk, MEM_KINDS),))})
            yield from self._emit("memory_events", batch, None if all(ok) else pa.array(ok))
            self._tick(n)
