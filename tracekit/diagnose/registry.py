"""The registry of the diagnose rules and the entry point that runs them over a store.

`RULES` is the decision tree as a table: per rule its finding codes (each code's title is
``CODES[code]``), the statements of ``sql/diagnose/`` that decide and measure it and those that
give its evidence, where it runs, how its remedy is chosen, and the function that compares the
statements' rows with the thresholds and writes the finding (the only Python of a rule). `diagnose` walks the sources and their
scopes and runs, in table order, every rule registered for that kind of scope; the order is
the order of findings of equal rank (they are then sorted by source, severity and share)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import attribution, comm, kernels, rules
from .model import CODES, SEVERITIES, DiagnoseError, Diagnosis, Finding, apply_view_params, resolve_thresholds, rounded
from .scopes import Query, Scope, phase_rows, phase_scope, source_scopes
from .statements import statement


@dataclass(frozen=True)
class Rule:
    """One row of the rule table."""
    codes: tuple[str, ...]     # the finding codes it gives; each one's title is model.CODES[code]
    measure: tuple[str, ...]   # the statements ('<file>.<name>' of sql/diagnose/) whose rows decide and measure it
    evidence: tuple[str, ...]  # the statements whose rows it shows as evidence
    runs_on: str               # 'steady': each device's steady window; 'phase': each device's time in
    #                            the --phase phase; 'source': each timeline source (its devices'
    #                            scopes); 'ncu': each ncu source; 'jobs': the store's jobs (no --phase)
    remedy: str                # how its remedy (a model.REMEDIES key) is chosen
    judge: Callable            # (Rules, scope) -> Finding | list[Finding] | None: compares, writes

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(CODES[c] for c in self.codes)


@dataclass(frozen=True)
class SourceScope:
    """What a 'source' rule is given: a timeline source's id, its window (the sum of its scopes'
    windows), the --phase phase, and its scopes."""
    source_id: int
    window_ns: int
    phase: str | None
    scopes: list[Scope]


def _hot_kernel(r: rules.Rules, src: SourceScope) -> Finding | None:
    f = kernels.hot_kernel(r, src.scopes[0], src.window_ns)
    if f:
        f.device_id = src.scopes[0].device_id if len(src.scopes) == 1 else None
    return f


def _bounds(r: rules.Rules, src: SourceScope) -> list[Finding]:
    return kernels.bounds(r, src.source_id, src.window_ns, src.phase, src.scopes[0] if len(src.scopes) == 1 else None)


def _roofline(r: rules.Rules, src: SourceScope) -> Finding | None:
    return kernels.roofline(r, src.source_id, src.phase)


_PHASE = "scopes.phase_scopes"  # per phase of the device: does it meet the rule too
_BOUND_EVIDENCE = ("bounds.kernel_bounds", "bounds.kernel_latency")

RULES: tuple[Rule, ...] = (
    Rule(("low_utilization",), ("low_utilization.idle_causes", _PHASE),
         ("low_utilization.steady_state", "low_utilization.idle_gaps", "scopes.phase_idle"),
         "steady phase", "its code", rules.low_utilization),
    Rule(("launch_bound", "sync_stall", "runtime_compile", "transfer_bound", "input_bound", "host_bound",
          "host_untraced", "rank_wait", "gpu_wait", "unattributed"),
         ("attribution.breakdown", "attribution.queued", "attribution.host_ops", "attribution.gap_stats",
          "attribution.alloc_share", _PHASE),
         ("attribution.host_ops", "attribution.gaps", "attribution.launch_summary", "attribution.sync_stalls",
          "transfer_bound.memop_time_summary", "attribution.time_breakdown"),
         "steady", "the category's code; from the names of the host operations in the gaps: "
         "runtime_compile:torch_compile / :library, input_bound:named (no DataLoader), host_bound:named "
         "(host_bound:allocator when driver allocator calls hold most of its time)",
         attribution.attribution_findings),
    Rule(("launch_bound", "host_bound"), (), ("scopes.phase_idle",), "phase", "its code", rules.launch_or_host_bound),
    Rule(("sync_stall",), ("sync_stall.host_syncs",), ("sync_stall.host_syncs", "scopes.phase_idle"),
         "phase", "its code", rules.sync_stall),
    Rule(("runtime_compile",), ("runtime_compile.compile_calls",),
         ("runtime_compile.compile_calls", "scopes.phase_idle"), "phase", "its code", rules.runtime_compile),
    Rule(("transfer_bound",), (), ("transfer_bound.memop_time_summary", "transfer_bound.memop_size_summary"),
         "phase", "its code", rules.transfer_bound),
    Rule(("low_overlap",), ("low_overlap.overlap", "low_overlap.rank_wait"),
         ("low_overlap.overlap", "low_overlap.rank_wait"), "steady",
         "low_overlap:waiting when waiting for other ranks is most of the exposed time, else low_overlap",
         comm.low_overlap),
    Rule(("startup",), ("startup.outside_phases",), ("startup.steady_state",), "steady phase", "its code",
         rules.startup),
    Rule(("memory_pressure",), ("memory_pressure.device_peaks", "memory_pressure.allocator_calls"),
         ("memory_pressure.memory_peaks", "memory_pressure.allocator_calls"), "steady",
         "made of its parts found: memory_pressure:peak, :fragmentation, :churn", rules.memory_pressure),
    Rule(("hot_kernel",), ("hot_kernel.hotspots", "hot_kernel.phase_ops"),
         ("hot_kernel.hotspots", "hot_kernel.phase_ops"), "source", "its code", _hot_kernel),
    Rule(("memory_bound", "compute_bound", "latency_bound"),
         ("bounds.hotspots_bound", "bounds.phase_bound", "bounds.ncu_results", "bounds.kernel_latency"),
         ("bounds.kernel", *_BOUND_EVIDENCE), "source",
         "its code; the remedy of the latency cause kernel_latency names for most of the results, if any",
         _bounds),
    Rule(("roofline",), ("roofline.phase_roofline", "roofline.whole_trace", "roofline.latency_matmuls"),
         ("roofline.phase_roofline", "roofline.whole_trace", "roofline.latency_matmuls"), "source",
         "roofline:<the bound of the phase with the most GPU time>", _roofline),
    Rule(("memory_bound", "compute_bound", "latency_bound"),
         ("bounds.ncu_kernels", "bounds.ncu_kernel", "bounds.kernel_latency"), _BOUND_EVIDENCE, "ncu",
         "as the timeline's bounds", kernels.ncu_only_bounds),
    Rule(("rank_imbalance",), ("rank_imbalance.steady_collectives", "rank_imbalance.ranks",
                               "rank_imbalance.slow_rank_path"),
         ("rank_imbalance.job_ranks", "rank_imbalance.top_skew", "rank_imbalance.slow_rank_path"), "jobs",
         "its code", comm.rank_imbalance),
)

#: the statements the entry point and the scopes run (the rest are the rules')
SCOPES = ("scopes.views", "scopes.sources", "scopes.timeline_sources", "scopes.phase_sources", "scopes.phase_names",
          "scopes.source_windows", "scopes.device_windows", "scopes.steady_scopes", "scopes.steady_gaps",
          "scopes.launch_latency", "scopes.phase_scopes")


def _run(r: rules.Rules, where: str, *args) -> list[Finding]:
    out: list[Finding] = []
    for rule in RULES:
        if where in rule.runs_on.split():
            found = rule.judge(r, *args)
            out += found if isinstance(found, list) else [found] if found is not None else []
    return out


def diagnose(store, source_id: int | None = None, phase: str | None = None,
             thresholds: dict[str, float] | None = None, evidence_rows: int = 20) -> Diagnosis:
    """Run the decision tree over a store (a ``tracekit.store.Store``); returns a Diagnosis.

    ``source_id`` restricts to one source (a rank_imbalance finding is kept when that source is a
    rank of the job); ``phase`` diagnoses only the time inside the instances of that phase;
    ``thresholds`` overrides defaults (names of ``THRESHOLDS``).
    """
    th = resolve_thresholds(thresholds)
    apply_view_params(store, th, thresholds)
    q = Query(store, evidence_rows)
    if source_id is None and q.has("time_breakdown"):
        store.keep("time_breakdown")  # several rules read it: the shared views under it computed once
    r = rules.Rules(q, th)
    srcs = q.dicts(statement("scopes", "sources"))
    if source_id is not None:
        if not any(s["source_id"] == source_id for s in srcs):
            raise DiagnoseError(f"no source {source_id} in {store.path} "
                                f"(sources: {', '.join(str(s['source_id']) for s in srcs) or 'none'})")
        srcs = [s for s in srcs if s["source_id"] == source_id]
    timeline = {x["source_id"] for x in q.dicts(statement("scopes", "timeline_sources"))}
    findings: list[Finding] = []
    devices: list[dict] = []
    if phase is not None:
        have = q.dicts(statement("scopes", "phase_sources", phase=phase)) if q.has("phase_instances") else []
        if not have:
            known = [x["phase"] for x in q.dicts(statement("scopes", "phase_names"))] \
                if q.has("phase_instances") else []
            raise DiagnoseError(f"no phase {phase!r} in {store.path}"
                                + (f" (phases: {', '.join(known[:20])})" if known else " (no NVTX ranges or "
                                   "record_function annotations)"))
    for src in srcs:
        sid = src["source_id"]
        if src["format"] == "ncu":
            # without a timeline: every result by ncu's own time; beside one: the results that no
            # timeline kernel matched (the matched ones come with the timeline's kernels; with
            # --phase only those, as ncu's results have no phase of the timeline)
            if not timeline or phase is None:
                findings += _run(r, "ncu", sid, bool(timeline))
            continue
        if sid not in timeline:
            findings.append(r.finding(
                "no_gpu_data", None, None, None, None,
                f"{src['path']}: no kernels, memcpy or memset in this {src['format']} source",
                source_id=sid, device_id=None, phase=phase))
            continue
        if phase is None:
            scopes = source_scopes(q, sid, th["launch_gap_ns"])
        else:
            scopes = [phase_scope(x) for x in phase_rows(q, sid, phase)]
        for s in scopes:
            devices.append({"source_id": sid, "device_id": s.device_id, "phase": s.phase,
                            "window_ns": s.window_ns, "busy_ns": s.busy_ns,
                            "utilization_pct": rounded(s.utilization_pct), "kernels": s.kernels,
                            "kernel_ns": s.kernel_ns, "memcpy_ns": s.memcpy_ns,
                            "idle_ns": {c: ns for c, ns in s.idle.items()}, "instances": s.instances})
            findings += _run(r, "steady" if phase is None else "phase", s)
        if scopes:
            findings += _run(r, "source", SourceScope(sid, sum(s.window_ns for s in scopes), phase, scopes))
    if phase is None:
        all_windows: dict = {x["source_id"]: x["w"] for x in q.dicts(statement("scopes", "source_windows"))}
        all_windows.update({(x["source_id"], x["device_id"]): x["window_ns"]
                            for x in q.dicts(statement("scopes", "device_windows"))})
        findings += _run(r, "jobs", all_windows, None if source_id is None else {source_id})
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: (f.source_id if f.source_id is not None else -1,
                                 order[f.severity], -(f.share_pct or 0), f.code))
    return Diagnosis(db=store.path, thresholds=th, phase=phase,
                     sources=[{k: src[k] for k in ("source_id", "path", "format", "rank", "world_size")}
                              for src in srcs],
                     devices=devices, findings=findings)
