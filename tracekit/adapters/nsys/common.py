"""What the nsys modules share: nsys's enum copies and table names, the globalTid / globalPid
decoding, and small value helpers."""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..detect import NSYS_REP_MAGIC  # noqa: F401 (one definition, in the format registry)

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



def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def decode_pid(g: pa.Array) -> pa.Array:
    """globalTid / globalPid → OS pid (bits 47–24)."""
    return pc.bit_wise_and(pc.shift_right(g, 24), 0xFFFFFF)


def decode_tid(g: pa.Array) -> pa.Array:
    """globalTid → OS tid (bits 23–0)."""
    return pc.bit_wise_and(g, 0xFFFFFF)



def seq(v):
    """A column as a Python sequence (Arrow arrays of the columnar reader become lists)."""
    return v.to_pylist() if isinstance(v, (pa.Array, pa.ChunkedArray)) else v


def utf8_text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def is_int64(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63


def int_or_none(v):
    return v if is_int64(v) else None


def int32_or_none(v):
    return v if is_int64(v) and -2**31 <= v < 2**31 else None


def str_or_none(v) -> str | None:
    """A text value of a description table (another type written out, bytes decoded)."""
    if v is None or isinstance(v, str):
        return v
    return utf8_text(v) if isinstance(v, bytes) else str(v)


def json_text(d: dict) -> str | None:
    return orjson.dumps(d, default=str).decode() if d else None


def memcpy_name(ck, sk, dk) -> str:
    kind = COPY_KINDS.get(ck, "unknown")
    if sk is None and dk is None:
        return f"Memcpy {kind}"
    return f"Memcpy {kind} ({MEM_KIND_LABELS.get(sk, 'Unknown')} -> {MEM_KIND_LABELS.get(dk, 'Unknown')})"


def merge_unknown_enums(args: tuple, checks) -> list:
    """Keep raw codes that the enum copies do not know in args (so nothing is lost)."""
    out = list(args)
    for key, vals, known in checks:
        for i, v in enumerate(vals):
            if v is not None and v not in known:
                d = orjson.loads(out[i]) if out[i] else {}
                d[key] = v
                out[i] = orjson.dumps(d, default=str_or_none).decode()
    return out


def nvtx_skip_reason(x) -> str:
    label = NVTX_TYPE_LABELS.get(x, "unknown type")
    if x == NVTX_DOMAIN_CREATE:
        return ("NVTX_EVENTS: eventType 75 (NvtxDomainCreate) row, used as the domain name of the "
                "process's ranges, not kept as an event")
    return f"NVTX_EVENTS: eventType {x} ({label}) row, not a range or mark"
