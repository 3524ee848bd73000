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
columns by ``args_arrow`` (templates per combination of the low-cardinality columns, joined by
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


# the package's public names (tests, bench and the registry import them from here)
# ruff: noqa: F401
from __future__ import annotations

from .adapter import NsysAdapter, sniff
from .args import args_arrow, args_joined, args_sql
from .common import (CUPTI_OVERHEAD, GRAPH_TRACE, KERNEL, MEM_USAGE, MEMCPY, MEMSET, RUNTIME, SYNC, decode_pid,
                     decode_tid)
from .reader import (  # tuning: patch them on nsys.reader, where they are read
                     CHUNK_ROWS,
                     FAST_READERS,
)
from .report import export_report, find_nsys, is_report

__all__ = ["NsysAdapter", "export_report", "find_nsys", "is_report", "decode_pid", "decode_tid",
           "CHUNK_ROWS", "FAST_READERS", "KERNEL", "RUNTIME", "GRAPH_TRACE", "MEMCPY", "MEMSET", "SYNC",
           "CUPTI_OVERHEAD", "MEM_USAGE"]
