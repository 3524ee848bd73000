"""The unified tracekit schema: the one definition of every table, column, type and meaning.

Every adapter (Kineto, Nsight Systems, Nsight Compute) emits Arrow record batches of these tables;
the store creates its DuckDB tables from them; ``tracekit schema`` and ``docs/schema.md`` are
generated from them.  Nothing else in the project may spell a column list of its own.

Conventions shared by every table:

* Times are int64 **nanoseconds on the source's own clock** (``*_ns``).  ``sources.clock_offset_ns``
  maps them onto the common clock (Unix epoch ns): ``common_ns = ts_ns + clock_offset_ns``.
* ``source_id`` (one per converted input file) is on every row; ids such as ``pid``, ``tid``,
  ``correlation_id`` are only unique within a source (nsys: correlation ids within a process).
* Intervals are half-open ``[start_ns, end_ns)``; ``dur_ns = end_ns - start_ns`` (0 allowed).
* ``args`` columns hold the remaining raw fields of the input row as a JSON object, so nothing is lost.
"""

from __future__ import annotations

from .schema_types import BOOL, F64, I32, I64, JSON, STR, C, Column, Table

SCHEMA_VERSION = 3

# How the store compresses its JSON columns (DuckDB's USING COMPRESSION; None: DuckDB chooses,
# which is its dictionary + FSST method).  Long, unique JSON texts (Kineto's args: about a third
# of a trace's text) compress better and faster with zstd (docs/scaling.md, "Knobs").
JSON_COMPRESSION = "zstd"

SOURCE_ID = C("source_id", I32, "The converted input this row came from (`sources.source_id`).",
              "assigned by the store", "assigned by the store", "assigned by the store")


def _interval(what: str, kineto: str, nsys: str) -> tuple[Column, ...]:
    return (
        C("start_ns", I64, f"Start of the {what}, ns on the source clock.", kineto, nsys),
        C("end_ns", I64, f"End of the {what} (exclusive), ns on the source clock.",
          "start_ns + dur", "`end`"),
        C("dur_ns", I64, "end_ns - start_ns (>= 0).", "`dur` (µs → ns)", "`end - start`"),
    )


#: the mapping of GPU rows' pid in a format whose GPU rows carry none (`pid_from_launch`)
LAUNCH_PID = "pid of the API call with the same correlation"

ARGS = C("args", JSON, "Every input field not mapped to a column, as a JSON object (NULL when none).",
         "the event's `args` object, plus unmapped top-level fields", "unmapped columns", json=True)

TABLES: tuple[Table, ...] = (
    Table(
        "sources",
        "One row per converted input file. The unit of merging: several sources in one store are "
        "several traces (ranks, hosts, tools) on one timeline.",
        (
            SOURCE_ID,
            C("path", STR, "Absolute path of the input as given to `tracekit convert`."),
            C("format", STR, "`kineto`, `nsys` or `ncu`."),
            C("format_version", STR, "Version of the file format, where the file says.",
              "`schemaVersion`", "`EXPORT_SCHEMA_VERSION`", "CSV layout (`details`, `raw`, ...)"),
            C("tool_version", STR, "Version of the profiler that wrote it, where known.",
              "`cupti_version` / `roctracer_version` and CUDA/HIP runtime versions",
              "`EXPORT_PRODUCT_VERSION`", "—"),
            C("host", STR, "Host name, where known.", "—", "`TARGET_INFO_SYSTEM_ENV` `Hostname`",
              "`Host Name`"),
            C("rank", I32, "Distributed rank, NULL when unknown (never a silent 0).",
              "`distributedInfo.rank`, else `rank-N` / `rank_N` in the file name"),
            C("world_size", I32, "Distributed world size, NULL when unknown.",
              "`distributedInfo.world_size`"),
            C("clock_origin", STR,
              "What ts 0 of this source is: `unix_epoch` (times are Unix ns), "
              "`base_time` (Kineto relative to `baseTimeNanoseconds`), `capture_start` (nsys), "
              "or `unknown` (no mapping known: use `--align`)."),
            C("clock_offset_ns", I64,
              "Add to any `*_ns` of this source to get Unix-epoch ns (the common clock). NULL when "
              "unknown.", "`baseTimeNanoseconds` (0 for epoch-µs traces)",
              "`TARGET_INFO_SESSION_START_TIME.utcEpochNs`"),
            C("start_ns", I64, "Earliest start of any converted row (source clock)."),
            C("end_ns", I64, "Latest end of any converted row (source clock)."),
            C("rows_converted", JSON, "Rows written per table, as a JSON object `{table: n}`.",
              json=True),
            C("rows_skipped", I64, "Input rows not converted (reasons in `skipped_rows`)."),
            C("converted_at", STR, "ISO-8601 UTC time of the conversion."),
            C("tracekit_version", STR, "tracekit version that converted it."),
            C("metadata", JSON, "Top-level metadata of the input kept verbatim (JSON object).",
              "every top-level key except `traceEvents`", "`META_DATA_EXPORT` name/value pairs",
              "CSV preamble", json=True),
        ),
    ),
    Table(
        "skipped_rows",
        "Input rows that were not converted, counted per reason, so no loss is silent.",
        (
            SOURCE_ID,
            C("reason", STR, "Why the rows were skipped (one sentence)."),
            C("count", I64, "How many input rows were skipped for this reason."),
            C("example", STR, "The first such row, abbreviated to 300 characters."),
            C("by_design", BOOL, "True when the rows hold nothing of the trace's content and are "
              "left out on purpose (display hints, the host's idle processes and threads, tracing "
              "markers, NVTX naming rows); false for data that could not be converted "
              "(`convert --strict` fails on those)."),
        ),
    ),
    Table(
        "devices",
        "GPUs (or other accelerators) the source describes.",
        (
            SOURCE_ID,
            C("device_id", I32, "Device index as used by `kernels.device_id`.",
              "`deviceProperties[].id` (`computeProperties` before torch 1.9); where the kernels use "
              "other ids, as many as the properties no kernel uses and those of one GPU model, paired "
              "in order (the property's id in `args.deviceProperties_id`)", "`TARGET_INFO_GPU.id` (`deviceId` in 2020.5)", "`Device`"),
            C("name", STR, "Marketing name, e.g. `NVIDIA H200`.", "`name`", "`name`",
              "`device__attribute_display_name`"),
            C("vendor", STR, "`nvidia` or `amd` (from the name / runtime)."),
            C("compute_capability", STR, "`major.minor` (gfx arch on AMD).",
              "`computeMajor`.`computeMinor`", "`computeMajor`.`computeMinor`", "`CC`"),
            C("sm_count", I32, "Streaming multiprocessors (compute units on AMD).",
              "`numSms` (`multiProcessorCount`)", "`smCount`",
              "`device__attribute_multiprocessor_count`, else Launch Statistics' `# SMs` "
              "(`launch__sm_count`)"),
            C("total_memory_bytes", I64, "Device memory size.", "`totalGlobalMem`", "`totalMemory`",
              "`device__attribute_...`"),
            C("memory_bandwidth_bytes_per_s", I64, "Peak DRAM bandwidth.", "—",
              "`memoryBandwidth` (2020.5: `TARGET_INFO_CUDA_GPU.globalMemoryBandwidth` × 1000)"),
            C("clock_rate_hz", I64, "SM clock rate.", "—",
              "`clockRate` (Hz; 2020.5: `TARGET_INFO_CUDA_GPU.coreClockRate` kHz × 1000)"),
            C("max_threads_per_sm", I32, "Max resident threads per SM.",
              "`maxThreadsPerMultiprocessor`", "`maxWarpsPerSm × threadsPerWarp`"),
            C("warp_size", I32, "Threads per warp (64 on CDNA).", "`warpSize`", "`threadsPerWarp`"),
            C("uuid", STR, "Device UUID where known.", "—", "`uuid`"),
            ARGS,
        ),
    ),
    Table(
        "processes",
        "Host processes (OS pid) that appear in the source: one row per (source_id, pid).",
        (
            SOURCE_ID,
            C("pid", I64, "OS process id.", "host `pid` of `process_name` metadata",
              "`PROCESSES.pid` / `globalPid >> 24 & 0xFFFFFF`", "`Process ID`"),
            C("name", STR, "Process name (command).", "`process_name` M event",
              "`PROCESSES.name`", "`Process Name`"),
            C("labels", STR, "Extra labels, where the source has them.", "`process_labels`"),
        ),
    ),
    Table(
        "threads",
        "Host threads that appear in the source: one row per (source_id, pid, tid).",
        (
            SOURCE_ID,
            C("pid", I64, "OS process id."),
            C("tid", I64, "OS thread id.", "`tid`", "`globalTid & 0xFFFFFF`"),
            C("name", STR, "Thread name, where known (renamed during the capture: its names in order, "
              "joined by ' / ').", "`thread_name` M event",
              "`ThreadNames` → `StringIds`"),
        ),
    ),
    Table(
        "kernels",
        "GPU kernel executions, one row per kernel instance.",
        (
            SOURCE_ID,
            C("device_id", I32, "GPU index.", "`args.device` (else `pid`)", "`deviceId`", "`Device`"),
            C("context_id", I64, "CUDA context id.", "`args.context`", "`contextId`"),
            C("stream_id", I64, "Stream id.", "`args.stream` (else `tid`)", "`streamId`"),
            *_interval("kernel", "`ts` (µs → ns)", "`start`"),
            C("name", STR, "Full (demangled) kernel name.", "`name`",
              "`demangledName` → `StringIds`; whole-graph rows: `[CUDA graph <graphId>]`"),
            C("short_name", STR,
              "Base function name: no return type, namespaces, template args or parameters "
              "(`tracekit.names.short_kernel_name`); the key for matching across tools.",
              "derived from `name`", "`shortName` → `StringIds`"),
            C("mangled_name", STR, "Mangled symbol, where known.", "—",
              "`mangledName` → `StringIds` (≥ 2022.1)"),
            C("pid", I64, "Host process that launched it (the correlation scope).",
              LAUNCH_PID, "`globalPid >> 24 & 0xFFFFFF`"),
            C("correlation_id", I64, "Links the kernel to its launching API call "
              "(`api_calls.correlation_id`, same source and pid). One graph launch → many kernels.",
              "`args.correlation`", "`correlationId`"),
            C("external_id", I64, "Kineto External id: links to the enclosing `cpu_op` event.",
              "`args[\"External id\"]`", "—"),
            C("grid_x", I32, "Grid size x.", "`args.grid[0]`", "`gridX`"),
            C("grid_y", I32, "Grid size y.", "`args.grid[1]`", "`gridY`"),
            C("grid_z", I32, "Grid size z.", "`args.grid[2]`", "`gridZ`"),
            C("block_x", I32, "Block size x.", "`args.block[0]`", "`blockX`"),
            C("block_y", I32, "Block size y.", "`args.block[1]`", "`blockY`"),
            C("block_z", I32, "Block size z.", "`args.block[2]`", "`blockZ`"),
            C("registers_per_thread", I32, "Registers per thread.", "`args[\"registers per thread\"]`",
              "`registersPerThread`"),
            C("static_shared_bytes", I64, "Static shared memory per block.", "—",
              "`staticSharedMemory`"),
            C("dynamic_shared_bytes", I64, "Dynamic shared memory per block.", "—",
              "`dynamicSharedMemory`"),
            C("shared_bytes", I64, "Total shared memory per block.", "`args[\"shared memory\"]`",
              "`staticSharedMemory + dynamicSharedMemory`"),
            C("graph_id", I64, "CUDA graph id, where the kernel ran as a graph node. Set with "
              "graph_node_id NULL: a whole-graph row (one row per graph launch, the graph's kernels "
              "not listed; `hotspots` leaves these out, `gpu_activity` keeps them).", "—",
              "`graphId` (≥ 2026.1); `CUPTI_ACTIVITY_KIND_GRAPH_TRACE.graphId` (`--cuda-graph-trace=graph`)"),
            C("graph_node_id", I64, "CUDA graph node id.", "—", "`graphNodeId`"),
            C("launch_type", I32, "Launch type as the source codes it.", "—",
              "`launchType` (ENUM_CUDA_KERNEL_LAUNCH_TYPE: 0 unknown, 1 regular, 2 cooperative "
              "single-device, 3 cooperative multi-device)"),
            ARGS,
        ),
    ),
    Table(
        "memops",
        "GPU memory operations: memcpy and memset, one row per operation.",
        (
            SOURCE_ID,
            C("device_id", I32, "GPU index that ran the operation.", "`args.device` (else `pid`)",
              "`deviceId`"),
            C("context_id", I64, "CUDA context id.", "`args.context`", "`contextId`"),
            C("stream_id", I64, "Stream id.", "`args.stream` (else `tid`)", "`streamId`"),
            *_interval("operation", "`ts` (µs → ns)", "`start`"),
            C("kind", STR, "`memcpy` or `memset`.", "cat `gpu_memcpy` / `gpu_memset`",
              "MEMCPY / MEMSET table"),
            C("copy_kind", STR, "Copy direction: `HtoD`, `DtoH`, `DtoD`, `HtoH`, `PtoP`, `HtoA`, "
              "`AtoH`, `AtoA`, `AtoD`, `DtoA`, `uvm_HtoD`, `uvm_DtoH`, `uvm_DtoD`, `unknown`; NULL for memset.",
              "parsed from the name `Memcpy HtoD (...)` or ROCm `args.kind`",
              "`copyKind` (ENUM_CUDA_MEMCPY_OPER)"),
            C("src_kind", STR, "Source memory kind: `pageable`, `pinned`, `device`, `array`, "
              "`managed`, ... (NULL if unknown).", "parsed from the name `(Pinned -> Device)`",
              "`srcKind` (ENUM_CUDA_MEM_KIND)"),
            C("dst_kind", STR, "Destination memory kind (memset: the memory kind set).",
              "parsed from the name", "`dstKind` / `memKind`"),
            C("bytes", I64, "Bytes copied or set.", "`args.bytes`", "`bytes`"),
            C("name", STR, "Display name, e.g. `Memcpy HtoD (Pinned -> Device)`.", "`name`",
              "built from copy and memory kinds (`Memset (Device)` for memsets)"),
            C("pid", I64, "Host process that issued it.", LAUNCH_PID,
              "`globalPid >> 24 & 0xFFFFFF`"),
            C("correlation_id", I64, "Links to the issuing API call.", "`args.correlation`",
              "`correlationId`"),
            C("external_id", I64, "Kineto External id.", "`args[\"External id\"]`", "—"),
            C("graph_node_id", I64, "CUDA graph node id.", "—", "`graphNodeId`"),
            ARGS,
        ),
    ),
    Table(
        "syncs",
        "GPU-side synchronization records (stream/event/context sync, stream wait event): what the "
        "device shows for a host call that waited.",
        (
            SOURCE_ID,
            C("device_id", I32, "GPU index.", "`args.device` (else `pid`)", "`deviceId`"),
            C("context_id", I64, "CUDA context id.", "`args.context`", "`contextId`"),
            C("stream_id", I64, "Stream id (NULL for context-wide syncs).",
              "`args.stream` (4294967295 → NULL)", "`streamId` (4294967295 → NULL)"),
            *_interval("synchronization", "`ts` (µs → ns)", "`start`"),
            C("sync_type", STR, "`stream_sync`, `event_sync`, `context_sync`, `stream_wait_event` "
              "or `unknown`.", "`name` / `args.cuda_sync_kind`", "`syncType` (ENUM_CUPTI_SYNC_TYPE)"),
            C("pid", I64, "Host process of the sync call.", LAUNCH_PID,
              "`globalPid >> 24 & 0xFFFFFF`"),
            C("correlation_id", I64, "Links to the host API call that synchronized.",
              "`args.correlation`", "`correlationId`"),
            C("event_id", I64, "CUDA event waited on, where applicable.",
              "`args.wait_on_cuda_event_id`", "`eventId` (4294967295 → NULL)"),
            ARGS,
        ),
    ),
    Table(
        "api_calls",
        "CUDA / HIP runtime and driver API calls on host threads.",
        (
            SOURCE_ID,
            C("pid", I64, "OS process id.", "`pid`", "`globalTid >> 24 & 0xFFFFFF`"),
            C("tid", I64, "OS thread id.", "`tid`", "`globalTid & 0xFFFFFF`"),
            *_interval("call", "`ts` (µs → ns)", "`start`"),
            C("name", STR, "API name without version suffix (`cudaLaunchKernel`).", "`name`",
              "`nameId` → `StringIds`, `_v7000`-style suffix removed"),
            C("raw_name", STR, "API name as recorded.", "`name`", "`nameId` → `StringIds`"),
            C("api", STR, "`cuda_runtime`, `cuda_driver`, `hip_runtime`, or another API family.",
              "cat `cuda_runtime` / `cuda_driver` / `Runtime` (hip* names → `hip_runtime`)",
              "`eventClass` 0 → runtime, 1 → driver"),
            C("correlation_id", I64, "Links the call to the GPU work it launched.",
              "`args.correlation`", "`correlationId`"),
            C("external_id", I64, "Kineto External id of the enclosing op.",
              "`args[\"External id\"]` / `args[\"external id\"]`", "—"),
            C("return_value", I64, "Return code, where recorded.", "—", "`returnValue`"),
            ARGS,
        ),
    ),
    Table(
        "events",
        "Every other host-side (or annotation) range or instant: torch ops, user annotations, "
        "Python functions, NVTX, OS runtime calls, profiler spans, instants.",
        (
            SOURCE_ID,
            C("event_id", I64, "Row id, unique within the source (input order).", "input order",
              "input order"),
            C("pid", I64, "OS process id (NULL for device-side annotations and global spans).",
              "`pid` (non-numeric → NULL)", "`globalTid >> 24 & 0xFFFFFF`"),
            C("tid", I64, "OS thread id.", "`tid`", "`globalTid & 0xFFFFFF`"),
            C("device_id", I32, "GPU index, for annotations projected onto a GPU stream.",
              "`pid` of `gpu_user_annotation`", "—"),
            C("stream_id", I64, "Stream, for annotations projected onto a GPU stream.",
              "`tid` of `gpu_user_annotation`", "—"),
            C("start_ns", I64, "Start (or instant time), ns on the source clock.", "`ts`", "`start`"),
            C("end_ns", I64, "End; equals start_ns for instants.", "`ts + dur`",
              "`end` (unclosed NVTX → max time of the table)"),
            C("dur_ns", I64, "end_ns - start_ns.", "`dur`", "`end - start`"),
            C("name", STR, "Event name.", "`name`", "NVTX `coalesce(textId→StringIds, text)`; OSRT `nameId`"),
            C("category", STR, "Normalized category: `cpu_op`, `user_annotation`, "
              "`gpu_user_annotation`, `python_function`, `nvtx`, `nvtx_mark`, `osrt`, `instant`, "
              "`overhead`, `profiler`, or the lower-cased source category for anything else.",
              "`cat` through an alias table (`Operator` → `cpu_op`, ...); `ProfilerStep#N` is "
              "`user_annotation` whatever its cat (torch < 1.10 wrote `cpu_op`)",
              "NVTX_EVENTS ranges (eventType 59/60/70/71) → `nvtx`, marks (34) → `nvtx_mark`; "
              "OSRT_API (eventClass 27) → `osrt`; PROFILER_OVERHEAD and "
              "CUPTI_ACTIVITY_KIND_OVERHEAD → `overhead`; RUNTIME eventClass 67 → `cuda_backtrace`"),
            C("domain", STR, "NVTX domain name, where applicable.", "—",
              "eventType-75 row with the same `domainId` in the process (NULL for the default "
              "domain 0 and when that row is missing: `args.domainId` keeps the id)"),
            C("depth", I32, "Nesting depth on its thread (0 = outermost), where derivable.",
              "from the interval nesting per thread (by the reader, chunk by chunk; the store completes "
              "tracks whose events came out of order)", "NVTX nesting per thread"),
            C("parent_id", I64, "`event_id` of the enclosing event on the same thread, where derivable.",
              "from the interval nesting per thread", "from the interval nesting per thread"),
            C("external_id", I64, "Kineto External id (links a `cpu_op` to its launches).",
              "`args[\"External id\"]`", "—"),
            C("correlation_id", I64, "Correlation id where the event carries one.", "`args.correlation`",
              "—"),
            C("is_instant", BOOL, "True for instants (no duration).", "`ph` `i`/`I`", "NVTX marks"),
            ARGS,
        ),
    ),
    Table(
        "memory_events",
        "Device (and host) memory allocations and frees, one row each: what an allocator took or "
        "gave back, with its running totals where the source records them.",
        (
            SOURCE_ID,
            C("device_id", I32, "GPU index (NULL for host memory).",
              "`args[\"Device Id\"]` when `Device Type` is 1 (CUDA/HIP)", "`deviceId`"),
            C("ts_ns", I64, "Time of the allocation or free, ns on the source clock.", "`ts`", "`start`"),
            C("kind", STR, "`alloc` or `free`.", "sign of `args.Bytes`",
              "`memoryOperationType` (0 allocation, 1 deallocation)"),
            C("address", I64, "Address of the block.", "`args.Addr`", "`address`"),
            C("bytes", I64, "Bytes allocated or freed (> 0 for both kinds).", "`abs(args.Bytes)`",
              "`bytes`"),
            C("allocated_bytes", I64, "The allocator's bytes in use after this event, where the "
              "source records it (NULL: derive the running sum, `memory_timeline` does).",
              "`args[\"Total Allocated\"]`", "—"),
            C("reserved_bytes", I64, "Bytes the allocator holds from the driver after this event "
              "(in use or cached), where recorded.", "`args[\"Total Reserved\"]`", "—"),
            C("allocator", STR, "Who allocated: `pytorch` (the caching allocator's blocks, carved "
              "out of its reserved segments) or `cuda` (the driver: cudaMalloc / cuMemAlloc / "
              "cudaHostAlloc / static device variables, whoever called them: the framework's "
              "allocator and the libraries that allocate on their own, e.g. cuBLAS workspaces).",
              "`pytorch`", "`cuda`"),
            C("memory_kind", STR, "`device`, `host` (Kineto: CPU memory), `pinned`, `pageable`, "
              "`managed`, `array`, `device_static`, `managed_static` or `unknown`.",
              "`device` / `host` from `args[\"Device Type\"]` (1 / 0)", "`memKind` (ENUM_CUDA_MEM_KIND)"),
            C("pid", I64, "Process.", "`pid`", "`globalPid >> 24 & 0xFFFFFF`"),
            C("tid", I64, "Thread, where known.", "`tid`", "—"),
            C("correlation_id", I64, "The API call that allocated (`api_calls.correlation_id`).", "—",
              "`correlationId`"),
            C("name", STR, "Variable name, for static allocations.", "—", "`name`"),
            ARGS,
        ),
        kineto="instant events named `[memory]` (torch.profiler `profile_memory=True`)",
        nsys="`CUDA_GPU_MEMORY_USAGE_EVENTS` (`nsys profile --cuda-memory-usage=true`)",
    ),
    Table(
        "counters",
        "Sampled values over time (hardware or software counters).",
        (
            SOURCE_ID,
            C("pid", I64, "Process the counter belongs to, where applicable.", "`pid`"),
            C("device_id", I32, "GPU the counter belongs to, where applicable.", "—",
              "`GPU_METRICS.typeId & 0xFF`"),
            C("name", STR, "Counter name (`<event name>.<arg key>` for Chrome `C` events).",
              "`name` + each key of `args`", "`TARGET_INFO_GPU_METRICS.metricName`"),
            C("ts_ns", I64, "Sample time, ns on the source clock.", "`ts`", "`timestamp`"),
            C("value", F64, "Sample value.", "`args[key]`", "`value`"),
        ),
    ),
    Table(
        "flows",
        "Explicit links between two events drawn as arrows (Kineto `s`/`f` pairs).",
        (
            SOURCE_ID,
            C("flow_id", I64, "The flow id from the source (unique per kind).", "`id`"),
            C("kind", STR, "`ac2g` (API call → GPU), `fwdbwd` (forward → backward op), or the source cat.",
              "`cat`"),
            C("start_pid", I64, "pid of the flow start (NULL if the start is missing).", "`s` event `pid`"),
            C("start_tid", I64, "tid of the flow start.", "`s` event `tid`"),
            C("start_ns", I64, "Time of the flow start.", "`s` event `ts`"),
            C("end_pid", I64, "pid of the flow end (NULL if the end is missing).", "`f` event `pid`"),
            C("end_tid", I64, "tid of the flow end.", "`f` event `tid`"),
            C("end_ns", I64, "Time of the flow end.", "`f` event `ts`"),
        ),
    ),
    Table(
        "ncu_kernels",
        "Nsight Compute: one row per profiled kernel launch (result).",
        (
            SOURCE_ID,
            C("id", I64, "ncu's own launch ID (0-based over profiled results).", ncu="`ID`"),
            C("pid", I64, "Process id.", ncu="`Process ID`"),
            C("process_name", STR, "Process name.", ncu="`Process Name`"),
            C("name", STR, "Kernel name as ncu printed it.", ncu="`Kernel Name`"),
            C("short_name", STR, "Base function name (`tracekit.names.short_kernel_name`).",
              ncu="derived from `Kernel Name`"),
            C("device_id", I32, "GPU index.", ncu="`Device`"),
            C("context_id", I64, "CUDA context id.", ncu="`Context`"),
            C("stream_id", I64, "Stream id.", ncu="`Stream`"),
            C("grid_x", I32, "Grid x.", ncu="`Grid Size` / `launch__grid_dim_x`"),
            C("grid_y", I32, "Grid y.", ncu="`Grid Size`"),
            C("grid_z", I32, "Grid z.", ncu="`Grid Size`"),
            C("block_x", I32, "Block x.", ncu="`Block Size` / `launch__block_dim_x`"),
            C("block_y", I32, "Block y.", ncu="`Block Size`"),
            C("block_z", I32, "Block z.", ncu="`Block Size`"),
            C("dur_ns", I64, "Duration under ncu replay (not the timeline's).",
              ncu="`gpu__time_duration.sum`"),
            C("sm_throughput_pct", F64, "Compute (SM) throughput, % of peak.",
              ncu="`sm__throughput.avg.pct_of_peak_sustained_elapsed`"),
            C("memory_throughput_pct", F64, "Memory throughput, % of peak.",
              ncu="`gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed`"),
            C("dram_throughput_pct", F64, "DRAM throughput, % of peak.",
              ncu="`gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed`"),
            C("achieved_occupancy_pct", F64, "Achieved occupancy %.",
              ncu="`sm__warps_active.avg.pct_of_peak_sustained_active`"),
            C("theoretical_occupancy_pct", F64, "Theoretical occupancy %.",
              ncu="`sm__maximum_warps_per_active_cycle_pct`"),
            C("registers_per_thread", I32, "Registers per thread.",
              ncu="`launch__registers_per_thread`"),
            C("l1_sectors_per_request", F64, "Global load sectors per request, where collected.",
              ncu="`l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_...`"),
            C("nvtx", STR, "NVTX range stack at launch, where collected.", ncu="NVTX columns"),
            C("bottleneck_rule", STR, "ncu's own Speed-of-Light bottleneck rule text, when present.",
              ncu="rule row `SOLBottleneck` (`.ncu-rep`: `title: message`)"),
        ),
    ),
    Table(
        "ncu_metrics",
        "Nsight Compute: one row per profiled launch × metric.",
        (
            SOURCE_ID,
            C("id", I64, "ncu launch ID (`ncu_kernels.id`).", ncu="`ID`"),
            C("section", STR, "Section name.", ncu="`Section Name`"),
            C("body_item", STR, "Body item of the section the row belongs to (display labels repeat "
              "across body items, so the label alone is ambiguous); NULL when none.",
              ncu="`Body Item Label` (2025 `--print-details`)"),
            C("name", STR, "Metric name (id or display label).", ncu="`Metric Name` / raw column"),
            C("unit", STR, "Unit after normalization to base units (ns, byte, byte/s, hz, %, ...).",
              ncu="`Metric Unit`"),
            C("value", F64, "Numeric value in `unit`; NULL for text or `n/a`.", ncu="`Metric Value`"),
            C("raw_value", STR, "The value text as written.", ncu="`Metric Value`"),
            C("raw_unit", STR, "The unit as written.", ncu="`Metric Unit`"),
        ),
    ),
    Table(
        "ncu_rules",
        "Nsight Compute: one row per profiled launch × rule result (ncu's guided-analysis findings).",
        (
            SOURCE_ID,
            C("id", I64, "ncu launch ID (`ncu_kernels.id`).", ncu="`ID`"),
            C("section", STR, "Section identifier the rule belongs to (`SpeedOfLight`, `Occupancy`, ...).",
              ncu="`Section Name` of the rule row / `section_identifier`"),
            C("rule", STR, "Rule identifier (`SOLBottleneck`, `AchievedOccupancy`, ...).",
              ncu="`Rule Name` / `rule_identifier`"),
            C("type", STR, "`INF`, `OPT`, `WRN` or `ERR`.", ncu="`Rule Type` / `rule_message.type`"),
            C("title", STR, "Rule title (`Small Grid`, ...); only `.ncu-rep` reports carry it.",
              ncu="`rule_message.title`"),
            C("description", STR, "The rule's message text.",
              ncu="`Rule Description` / `rule_message.message`"),
            C("speedup_type", STR, "`local` or `global` (NULL when the rule gives no estimate).",
              ncu="`Estimated Speedup Type`"),
            C("speedup_pct", F64, "Estimated speedup, % of the kernel's duration.",
              ncu="`Estimated Speedup`"),
        ),
    ),
)

BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
#: the tables of GPU work whose pid is that of the API call that launched it (same correlation_id):
#: Kineto gives GPU rows none (the reader fills it, kineto/gpu_pid.py; the store completes it)
GPU_TABLES: tuple[str, ...] = ("kernels", "memops", "syncs")


def table(name: str) -> Table:
    return BY_NAME[name]


def pid_from_launch(fmt: str) -> bool:
    """True when the GPU rows of format ``fmt`` carry no pid of their own: theirs is that of the
    launching API call (LAUNCH_PID), which the store checks where a reader filled it."""
    return all(getattr(c, fmt, "") == LAUNCH_PID for t in GPU_TABLES for c in table(t).columns
               if c.name == "pid")


def to_markdown() -> str:
    """The schema documentation (docs/schema.md is this text; `schema_doc.markdown`)."""
    from .schema_doc import markdown

    return markdown()
