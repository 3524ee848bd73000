"""Export a tracekit store (or a selection of it) as one merged Perfetto timeline.

Two formats, the same content and the same track layout:

* Chrome JSON (``.json``, ``.json.gz``): Perfetto's legacy importer (and chrome://tracing).
* Perfetto protobuf (``.pftrace``): TrackEvent packets, hand-encoded (tracekit.export.protowire:
  27 % less CPU than Perfetto's own perfetto_trace_pb2 classes, bench/proto_writers.py; the tests
  decode every export with those classes).

**Clocks.**  Every ``*_ns`` value of source ``S`` is mapped to the common clock (Unix-epoch ns) as
``common = ts + offset(S)``, where ``offset(S)`` is, in order of preference:

1. ``--align S=OFFSET_NS`` given by the user;
2. ``sources.clock_offset_ns`` (Kineto: ``baseTimeNanoseconds``, or 0 for epoch-µs traces;
   nsys: the session start time ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``);
3. unknown (NULL): the source is placed so that its first event coincides with the earliest
   first event of the sources whose offset is known (or with ts 0 when none is), and a
   warning names the source so that ``--align`` can fix it.

The written timestamps are rebased: ts 0 of the file is ``t0_ns`` = the earliest common-clock
start among the exported rows (JSON: top-level ``baseTimeNanoseconds`` and ``metadata.t0_ns``), so
JSON's µs values keep exact ns (Perfetto parses them through a double).

**Layout** (top to bottom): sources ordered by (rank, host, source_id), ranks without a number
last; within a source its host processes (ordered by pid; threads: main thread first, then by tid),
then one process per GPU ("GPU 0 · NVIDIA H200 [rank 0 · kineto #3]") with one thread per stream
("Stream 7").  pids are made unique across sources (a pid seen in an earlier source gets a synthetic
one; the real pid stays in the process name); pids/tids outside [1, 2^31) (Kineto's -1, pthread
ids) get synthetic ids.

**Content**: API calls, torch ops, user annotations, NVTX ranges and instants on their host
threads; kernels, memcpy and memset on their stream; GPU-side annotations ("Stream 7 ·
annotations") and sync records ("Stream 7 · sync") next to the stream; counters of the store, GPU
memory (`tk_memory_series()`, sql/lib/memory.sql), GPU utilization (% of each bucket covered by
the `gpu_busy` view's busy periods, clipped to the exported window) and launch-queue depth
(kernels launched and not finished, maximum per bucket) per GPU.

**Lanes.**  Perfetto requires the slices of one thread to nest.  On host threads a slice that only
partially overlaps an earlier one is moved to an extra lane thread ("python · lane 2"); on GPU
streams any two overlapping operations go to different lanes ("Stream 7 · lane 2"), first-fit in
start order (the minimum number of lanes).  Nothing is dropped.

**Flows** (arrows): from each launching API call to each kernel/memop by the launch rule of the
views (sql/lib/host_calls.sql): the launch call is `tk_launch_calls()`'s (the earliest call of the
(source, pid, correlation id); of several rows with its start and end, the first), linked by
`tk_launch_link` (same pid; a GPU row without pid links when exactly one pid issued that
correlation).  An arrow is written when both ends are exported and the GPU work does not start
before its launch call (Perfetto would drop the arrow; counted in ``skipped``).
JSON: flow v2, ``bind_id`` = the launch's first link id with ``flow_out`` on the call and
``flow_in`` on each of its GPU ops (a graph launch fans out to all its kernels; the engine keeps a
v2 flow open after a ``flow_in``).  Proto: one id per link, all in the call's ``flow_ids``, each in
its op's ``terminating_flow_ids``.

The package, one responsibility a module:

* ``options``      ExportOptions / ExportResult / ExportError, the output format from the name
* ``selection``    the selected sources, their clock offsets and labels, the time window, t0
* ``flows``        launch -> GPU work links (the arrows) from the launch rule of sql/lib/host_calls.sql
* ``slices``       host and GPU slices: the SQL per track kind, the args text, lane placement
* ``counters``     the store's counters, GPU memory, utilization (from `gpu_busy`), launch queue
* ``tracks``       track layout: pids / tids, names, sort order, lanes (``Layout``, ``Lanes``)
* ``json_writer``  Chrome JSON writer (and the int64 guards of the args text)
* ``proto_writer`` Perfetto TrackEvent protobuf writer
* ``sink``         the output file: background writer thread, gzip, atomic replace
* ``export``       ``export_perfetto``: runs the above in order
"""

from .export import export_perfetto
from .options import ExportError, ExportOptions, ExportResult, output_format

__all__ = ["ExportError", "ExportOptions", "ExportResult", "export_perfetto", "output_format"]
