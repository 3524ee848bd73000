"""The data model of `tracekit diagnose`: thresholds, codes and remedies, findings and their
evidence, and the formatting helpers the rules and renderers share."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .. import __version__, views
from ..names import plural as _plural

# --------------------------------------------------------------------------------------------
# thresholds


@dataclass(frozen=True)
class Threshold:
    default: float
    doc: str
    view_param: bool = False  # a DuckDB variable read by a view (set on the connection)


def _view_param(name: str, doc: str) -> Threshold:
    """A threshold that is a view parameter: its default is the one its owning view declares
    (sql/, `views.parameter_defaults`), never a second copy here."""
    lit = views.parameter_defaults()[name]
    return Threshold(int(lit) if re.fullmatch(r"-?[0-9]+", lit) else float(lit), doc, view_param=True)


THRESHOLDS: dict[str, Threshold] = {
    "util_low_pct": Threshold(
        50, "low_utilization when the GPU is busy less than this % of its window"),
    "launch_wait_pct": Threshold(
        25, "--phase: launch_bound / host_bound when idle gaps of cause host_wait (the GPU waited for the "
            "CPU to launch) cover at least this % of the window"),
    "launch_short_pct": Threshold(
        50, "... launch_bound (rather than host_bound) when at least this % of the launched kernels "
            "ran shorter than their launch call (launch_summary.short_pct) ..."),
    "launch_gap_ns": Threshold(
        1_000_000, "... and at least half of the host_wait time is in gaps shorter than this (launch "
                   "overhead is many short gaps; a few long ones are host work: host_bound)"),
    "sync_wait_pct": Threshold(
        1, "--phase: sync_stall when idle gaps of cause sync_wait (the GPU drained while the host was "
           "blocked in a synchronizing call) cover at least this % of the window"),
    "compile_pct": Threshold(
        5, "--phase: runtime_compile when idle gaps of cause runtime_compile (the host was loading or "
           "compiling GPU code) cover at least this % of the window"),
    "transfer_pct": Threshold(
        10, "--phase: transfer_bound when memcpy time not overlapped by compute (overlap.exposed_ns of "
            "kind memcpy) is at least this % of the window"),
    "hot_kernel_pct": Threshold(
        80, "hot_kernel when one kernel name (not a collective) has at least this % of the "
            "source's kernel time (hotspots.time_pct)"),
    "bound_min_pct": Threshold(
        1, "memory_bound / compute_bound / latency_bound only for ncu-profiled kernels with at "
           "least this % of the kernel time"),
    "overlap_low_pct": Threshold(
        50, "low_overlap when less than this % of the communication time overlaps compute ..."),
    "overlap_min_pct": Threshold(
        1, "... and the exposed communication time is at least this % of the window"),
    "imbalance_pct": Threshold(
        5, "rank_imbalance when a rank's kernels wait for later ranks in collectives "
           "(rank_imbalance.wait_ns) for at least this % of its steady window"),
    "cause_min_pct": Threshold(
        5, "a finding for an idle category of time_breakdown (launch, sync, compile, copy, data, cpu_op, "
           "untraced, rank_wait, queued, unknown) when it holds at least this % of the steady window"),
    "plan_min_ns": _view_param(
        "plan_min_ns", "view parameter of idle_attribution: a cuDNN / cuBLAS operator at least this long is "
                   "building a plan (compile)"),
    "dispatch_max_ns": _view_param(
        "dispatch_max_ns", "view parameter of idle_attribution: in gaps shorter than this, the host's time "
                 "between launches is launch overhead"),
    "sev_high_pct": Threshold(25, "severity 'high' when the share at stake is at least this %"),
    "sev_medium_pct": Threshold(5, "severity 'medium' when at least this % (else 'low')"),
    "kernel_wait_ns": _view_param(
        "kernel_wait_ns", "view parameter of idle_gaps: gaps shorter than this after an already launched "
               "op are kernel_wait"),
    "min_step_repeats": _view_param(
        "min_step_repeats", "view parameter of steady_state: a phase with at least this many instances is a repeated "
           "step (libraries' own ranges are not; without such a phase, a kernel sequence repeated this "
           "many times); the window judged is from the first steady step to the last (start-up and tear-down "
           "apart)"),
    "warmup_step_factor": _view_param(
        "warmup_step_factor", "view parameter of steady_state: the lead repeated phase's (the outermost step's) first "
           "instances whose host time is more than this many times its median are warm-up (start-up), not "
           "steady state"),
    "warmup_min_pct": _view_param(
        "warmup_min_pct", "view parameter of steady_state: ... when those warm-up instances' host time over "
           "the median adds up to at least this % of the phase's span"),
    "tiny_kernel_ns": _view_param(
        "tiny_kernel_ns", "view parameter of launch_summary: kernels shorter than this are tiny"),
    "bound_high_pct": _view_param(
        "bound_high_pct", "view parameter of kernel_bounds (ncu's SOL 'high throughput')"),
    "bound_low_pct": _view_param(
        "bound_low_pct", "view parameter of kernel_bounds (both SOL units below: latency)"),
    "bound_gap_pct": _view_param(
        "bound_gap_pct", "view parameter of kernel_bounds (SOL difference for a verdict)"),
    "bound_waves": _view_param(
        "bound_waves", "view parameter of kernel_bounds (fewer waves: 'small grid')"),
    "mem_peak_pct": Threshold(
        85, "memory_pressure when a GPU's memory peak (memory_peaks, scope 'device': the higher of "
            "reserved and allocated) reaches this % of its memory (severity medium) ..."),
    "mem_peak_high_pct": Threshold(95, "... and severity high from this %"),
    "mem_alloc_pct": Threshold(
        1, "memory_pressure for driver allocator calls (cudaMalloc / cudaFree ...) inside the repeated "
           "steps only when their host time is at least this % of the steady window"),
    "mem_frag_gib": Threshold(
        2, "memory_pressure (low) when torch's caching allocator reserved at least this many GiB "
           "(and a quarter of its reserve) more than it ever had in use"),
    "latency_pct": _view_param(
        "latency_pct", "view parameter of roofline / phase_roofline: below this % of both the peak FLOP/s and "
            "the peak DRAM bandwidth an operator or phase is latency-bound (fixed costs, not a roof)"),
}

CODES = {
    "low_utilization": "The GPU sits idle most of the time",
    "launch_bound": "The GPU waits while the CPU launches kernels",
    "host_bound": "The GPU waits for the CPU between kernels",
    "sync_stall": "The host blocks in synchronizing calls and the GPU drains",
    "runtime_compile": "The GPU waits while the host loads or compiles GPU code",
    "startup": "Start-up and tear-down outside the repeated steps (not judged)",
    "input_bound": "The GPU waits for the input pipeline",
    "host_untraced": "The GPU waits while the host runs code no profiler traced",
    "gpu_wait": "Work was queued, yet the GPU waited (stream dependencies, events, launch latency)",
    "rank_wait": "The GPU waits while the host waits for other ranks",
    "unattributed": "The GPU idles, and the launches after the gaps are not in the trace",
    "transfer_bound": "Memory copies take GPU time that compute does not hide",
    "hot_kernel": "One kernel takes most of the kernel time",
    "memory_bound": "An ncu-profiled kernel is memory-bound",
    "compute_bound": "An ncu-profiled kernel is compute-bound",
    "latency_bound": "An ncu-profiled kernel is latency-bound: neither memory nor compute is busy",
    "roofline": "Where each phase sits against the GPU's roofs, from the shapes of its operators",
    "memory_pressure": "GPU memory: a peak near the device's size, an allocator reserve much larger than its use, "
                       "or driver allocations inside the repeated steps (each finding's title says which)",
    "low_overlap": "Communication is mostly not overlapped with compute",
    "rank_imbalance": "Ranks arrive at collectives at different times; the others wait",
    "no_gpu_data": "The trace has no GPU activity",
}

REMEDIES = {
    "launch_bound": "Launch less often: capture the repeated step in a CUDA graph (torch.cuda.CUDAGraph, "
                    "torch.compile mode='reduce-overhead') or fuse the small kernels (torch.compile, "
                    "fused ops) so one launch does the work of many.",
    "host_bound": "Take the host work off the critical path: profile the CPU side between the kernels "
                  "(data loading, Python, logging) and move it to DataLoader workers, pinned memory "
                  "and background threads.",
    "sync_stall": "Remove the implicit host syncs in the loop (.item(), .cpu(), print(tensor), "
                  "copies into pageable memory): keep values on the GPU, copy with non_blocking=True "
                  "into pinned memory, or sync once every N steps.",
    "runtime_compile": "Compile once, outside the loop: warm up every shape the loop will see (or pad "
                       "inputs to a few fixed shapes / bucket sequence lengths), pin the attention "
                       "backend (torch.nn.attention.sdpa_kernel) to one that does not build a kernel per "
                       "shape, keep cuDNN / cuBLASLt plan caches and the CUDA JIT cache "
                       "(CUDA_CACHE_MAXSIZE) warm, mark dynamic dimensions for torch.compile. CUDA graphs "
                       "or fusion do not help here: the time is compilation, not launches.",
    "startup": "Judge the steady state, not the start-up: profile only the repeated steps "
               "(torch.profiler schedule(wait, warmup, active), nsys --capture-range=cudaProfilerApi "
               "around the loop). Start-up itself matters only for short jobs or cold starts.",
    "transfer_bound": "Hide or avoid the copies: keep data resident on the GPU, use pinned host "
                      "memory with non_blocking=True, and overlap copies with compute on a side stream.",
    "hot_kernel": "Profile this kernel with Nsight Compute (ncu --kernel-name regex:NAME --launch-count 1 "
                  "--set full) to learn whether it is memory-, compute- or latency-bound.",
    "memory_bound": "Move fewer bytes: fuse it with its neighbours, make accesses coalesced and "
                    "vectorized, use a lower precision or a larger batch to raise arithmetic intensity.",
    "compute_bound": "Do the math faster: use tensor cores (bf16/fp8 with aligned shapes), better tiling, "
                     "or less work (an algorithmic change).",
    "latency_bound": "Give the SMs more parallel work: more blocks (split-K, smaller tiles, batch the "
                     "calls), higher occupancy (block size, launch bounds, registers), fewer stalls.",
    # memory_pressure's remedy is made of the parts it found, in this order
    "memory_pressure:peak": "Lower the peak: free what the step no longer needs before the peak op (the "
                            "live allocations at the peak name who holds it), activation checkpointing, "
                            "smaller micro-batches, a paged / preallocated KV cache.",
    "memory_pressure:fragmentation": "Against fragmentation set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                     "and keep shapes steady (bucket them) so that cached blocks are reused.",
    "memory_pressure:churn": "Keep device memory across steps: no torch.cuda.empty_cache() in the loop, reuse "
                             "or preallocate buffers whose size changes every step, "
                             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; outside PyTorch allocate "
                             "once before the loop or use a stream-ordered pool (cudaMallocAsync).",
    "roofline:memory": "The phase streams bytes at close to the DRAM roof: move fewer bytes per token -- "
                       "batch more requests per step (the weights are read once per step whatever the "
                       "batch), quantize weights / KV cache (fp8, int4), fuse element-wise ops into their "
                       "producers (torch.compile).",
    "roofline:compute": "The phase is limited by math throughput: use the fastest dtype the model "
                        "tolerates (bf16 -> fp8 tensor cores), shapes that are multiples of 64/128, "
                        "fused attention (SDPA flash / cuDNN); past that, scale out.",
    "roofline:latency": "The phase is far below both roofs: its kernels are too small to fill the GPU "
                        "(batch 1 decode GEMVs, tiny element-wise ops). Batch more work per kernel "
                        "(requests, tokens), fuse small ops (torch.compile), and remove launch gaps with "
                        "CUDA graphs; ncu on the top kernels names which latency (`kernel_latency`).",
    "low_overlap": "Overlap communication with compute: launch collectives while independent compute "
                   "runs (DDP bucket_cap_mb, FSDP prefetch, async collectives on a side stream).",
    "low_overlap:waiting": "Most exposed communication time is waiting for other ranks: fix the "
                           "rank imbalance first, then overlap the rest with compute.",
    "rank_imbalance": "Balance the work across ranks: look at what the slowest rank does before each "
                      "collective (uneven batches or sequence lengths, data loading, host overhead).",
    "low_utilization": "Find what the GPU waits for and fix that first (the findings below say which).",
    "host_bound:named": "Take these host operations off the critical path: run them on another thread or "
                        "process, overlap them with the GPU's work (launch the next step's kernels first), "
                        "make them cheaper, or batch them.",
    "input_bound": "Load data off the training thread: DataLoader(num_workers>0, pin_memory=True, "
                   "prefetch_factor, persistent_workers=True), and copy batches with non_blocking=True.",
    "input_bound:named": "The data stage runs on the thread that launches the GPU work: move it to a "
                         "worker thread or process and prefetch the next batch while the GPU computes.",
    "host_untraced": "Find the untraced host code (torch.profiler with_stack=True, py-spy, nsys "
                     "--sample=cpu), then take it off the critical path: launch the next step's GPU work "
                     "before it, move it to another thread, or capture the step as a CUDA graph.",
    "runtime_compile:torch_compile": "torch.compile recompiles inside the loop: warm up every input shape "
                                     "before the loop, mark the varying dimensions dynamic "
                                     "(torch._dynamo.mark_dynamic / dynamic=True), or pad inputs to a few "
                                     "shapes; check TORCH_LOGS=recompiles for the guard that fails.",
    "runtime_compile:library": "A library builds a kernel or plan per new shape (cuDNN / cuBLASLt): pad or "
                               "bucket the varying dimension, warm up the shapes before the loop, or pin "
                               "a backend that does not (torch.nn.attention.sdpa_kernel). CUDA graphs or "
                               "fusion do not help: the time is compilation, not launches.",
    "gpu_wait": "The host was ahead, yet the GPU waited: look for cross-stream waits (wait_stream, "
                "events) and serialised streams (queue_length, kernel_sequences); these gaps are not "
                "the host's.",
    "rank_wait": "The host blocks in collectives or barriers for slower ranks: balance the ranks' work "
                 "(rank_imbalance, collectives) before tuning this one.",
    "unattributed": "Capture the host side too (torch.profiler activities=[CPU, CUDA]; nsys --trace=cuda): "
                    "without the launch calls the idle time cannot be attributed.",
    "no_gpu_data": "Capture GPU activity: torch.profiler with activities=[CPU, CUDA] (under nsys "
                   "torch.profiler cannot get CUPTI: take the GPU side from the nsys capture).",
}
# host_bound whose host time is mostly driver allocator calls: the churn remedy of memory_pressure
REMEDIES["host_bound:allocator"] = ("The host is mostly in the driver's allocator (cudaMalloc / cudaFree ...). "
                                    + REMEDIES["memory_pressure:churn"])

SEVERITIES = ("high", "medium", "low", "info")


class DiagnoseError(Exception):
    pass


def parse_thresholds(items) -> dict[str, float]:
    """['name=value', ...] -> {name: value}; unknown names or bad values raise DiagnoseError."""
    out = {}
    for it in items or ():
        name, sep, value = it.partition("=")
        name = name.strip()
        if not sep:
            raise DiagnoseError(f"--threshold {it!r}: expected NAME=VALUE")
        if name not in THRESHOLDS:
            raise DiagnoseError(f"--threshold {name!r}: no such threshold; known: {', '.join(THRESHOLDS)}")
        try:
            v = float(value)
        except ValueError:
            raise DiagnoseError(f"--threshold {it!r}: VALUE must be a number") from None
        if not math.isfinite(v):
            raise DiagnoseError(f"--threshold {it!r}: VALUE must be finite")
        out[name] = v
    return out


def thresholds_help() -> str:
    w = max(len(n) for n in THRESHOLDS)
    return "\n".join(f"{n.ljust(w)}  {t.default:g}  {t.doc}" for n, t in THRESHOLDS.items())


# --------------------------------------------------------------------------------------------
# results


@dataclass
class Evidence:
    view: str
    query: str
    columns: list[str]
    rows: list[list[Any]]
    total_rows: int

    def to_dict(self) -> dict:
        return {"view": self.view, "query": self.query, "columns": self.columns, "rows": self.rows,
                "total_rows": self.total_rows}


@dataclass
class Finding:
    code: str
    severity: str
    share_pct: float | None
    time_ns: int | None
    of_ns: int | None
    of: str
    source_id: int | None
    device_id: int | None
    phase: str | None
    summary: str
    remedy: str
    subject: str | None = None  # the kernel / job the finding is about
    metrics: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, dict[str, Any]] | None = None
    evidence: list[Evidence] = field(default_factory=list)
    headline: str | None = None  # what this finding's evidence shows, where the code's title says more

    @property
    def title(self) -> str:
        return self.headline or CODES.get(self.code, self.code)

    @property
    def key(self) -> tuple:
        """Identity across two diagnoses (for diff): code + what it is about."""
        return (self.code, self.device_id, self.phase, self.subject)

    def to_dict(self) -> dict:
        return {
            "code": self.code, "severity": self.severity, "title": self.title,
            "share_pct": rounded(self.share_pct), "time_ns": self.time_ns, "of_ns": self.of_ns,
            "of": self.of, "source_id": self.source_id, "device_id": self.device_id,
            "phase": self.phase, "subject": self.subject, "summary": self.summary,
            "remedy": self.remedy, "metrics": {k: rounded(v) for k, v in self.metrics.items()},
            "phases": self.phases, "evidence": [e.to_dict() for e in self.evidence],
        }


@dataclass
class Diagnosis:
    db: str
    thresholds: dict[str, float]
    phase: str | None
    sources: list[dict[str, Any]]
    devices: list[dict[str, Any]]
    findings: list[Finding]

    def to_dict(self) -> dict:
        return {
            "tracekit_version": __version__, "db": self.db, "phase": self.phase,
            "thresholds": self.thresholds, "sources": self.sources, "devices": self.devices,
            "findings": [f.to_dict() for f in self.findings],
        }

    def codes(self, source_id: int | None = None) -> set[str]:
        return {f.code for f in self.findings if source_id is None or f.source_id == source_id}

    def find(self, code: str, source_id: int | None = None) -> list[Finding]:
        return [f for f in self.findings
                if f.code == code and (source_id is None or f.source_id == source_id)]


def rounded(v):
    if isinstance(v, float):
        return round(v, 4)
    return v


# --------------------------------------------------------------------------------------------
# helpers


def lit(v) -> str:
    """A SQL literal for the evidence queries (so they can be pasted into `tracekit sql`)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def pct(a, b) -> float | None:
    if a is None or not b:
        return None
    return 100.0 * a / b


def fmt_ns(ns) -> str:
    if ns is None:
        return "?"
    ns = float(ns)
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def plural(n, noun: str, spec: str = "", nouns: str | None = None) -> str:
    """names.plural in the reports' one number format: integers without thousands separators."""
    return _plural(n, noun, spec, nouns)


def fmt_names(names, n: int = 5) -> str:
    """The first n of a list of names, then 'and K more' (a phase list of 35 names stays short)."""
    names = list(names)
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def fmt_pct(p) -> str:
    if p is None:
        return "?"
    return f"{p:.1f} %" if abs(p) >= 0.1 or p == 0 else f"{p:.2g} %"


def jsonable(v):
    import datetime
    import decimal

    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return v



def resolve_thresholds(overrides: dict[str, float] | None) -> dict[str, float]:
    th = {n: float(t.default) for n, t in THRESHOLDS.items()}
    for k, v in (overrides or {}).items():
        if k not in THRESHOLDS:
            raise DiagnoseError(f"no threshold named {k!r}; known: {', '.join(THRESHOLDS)}")
        th[k] = float(v)
    return th


def apply_view_params(store, th: dict[str, float], overrides: dict[str, float] | None) -> None:
    """Set the view parameters that were overridden as DuckDB variables on the connection."""
    for k, v in (overrides or {}).items():
        if THRESHOLDS[k].view_param:
            store.con.execute(f"SET VARIABLE {k} = ?", [int(v) if float(v).is_integer() else float(v)])
