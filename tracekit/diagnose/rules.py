"""The rules of `tracekit diagnose` that judge one scope's idle time (a device's steady window,
or one phase on one device: `registry.RULES` says which rule runs where), and `Rules`, what
every rule is given: the query helper, the thresholds and the finding constructor. Their SQL is
in ``sql/diagnose/<rule>.sql``; a rule compares its rows with the thresholds and writes the
finding."""

from __future__ import annotations

from .model import (REMEDIES, SEVERITIES, Evidence, Finding, fmt_names, fmt_ns, fmt_pct, pct, plural,
                    rounded)
from .scopes import Query, Scope, phase_rows, phase_scope
from .statements import statement


def _severity(share: float | None, th: dict[str, float]) -> str:
    if share is None:
        return "info"
    if share >= th["sev_high_pct"]:
        return "high"
    if share >= th["sev_medium_pct"]:
        return "medium"
    return "low"


class Rules:
    """What each rule is given: the query helper, the thresholds, the finding constructor and the
    judgements several rules share."""

    def __init__(self, q: Query, th: dict[str, float]):
        self.q = q
        self.th = th

    def finding(self, code, share, time_ns, of_ns, scope: Scope | None, summary, remedy_key=None,
                of="GPU window", severity=None, **kw) -> Finding:
        return Finding(
            code=code, severity=severity or (_severity(share, self.th) if code != "no_gpu_data" else "info"),
            share_pct=share, time_ns=None if time_ns is None else int(time_ns),
            of_ns=None if of_ns is None else int(of_ns), of=of,
            source_id=kw.pop("source_id", scope.source_id if scope else None),
            device_id=kw.pop("device_id", scope.device_id if scope else None),
            phase=kw.pop("phase", scope.phase if scope else None),
            summary=summary, remedy=" ".join(REMEDIES[k] for k in _keys(remedy_key or code)), **kw)

    def evidence(self, view: str, file: str, name: str, /, **values) -> Evidence:
        """Statement ``name`` of sql/diagnose/<file>.sql, run, as the evidence of view ``view``."""
        return self.q.evidence(view, statement(file, name, **values))

    def rows(self, file: str, name: str, /, **values) -> list[dict]:
        return self.q.dicts(statement(file, name, **values))

    def phase_verdicts(self, s: Scope, test) -> dict[str, dict] | None:
        """Per phase of a source scope's device: its figures and whether it meets ``test``."""
        if s.phase is not None:
            return None
        rows = phase_rows(self.q, s.source_id, device=s.device_id)
        if not rows:
            return None
        out = {}
        for r in rows:
            ps = phase_scope(r)
            out[r["phase"]] = {
                "instances": r["instances"], "span_ns": r["span_ns"], "busy_ns": r["busy_ns"],
                "utilization_pct": rounded(ps.utilization_pct),
                "host_wait_pct": rounded(pct(ps.idle["host_wait"], ps.window_ns)),
                "short_pct": rounded(ps.short_pct), "meets_rule": bool(test(ps)),
            }
        return out

    @staticmethod
    def phases_line(phases, what) -> str:
        if not phases:
            return ""
        yes = [p for p, v in phases.items() if v["meets_rule"]]
        no = [p for p, v in phases.items() if not v["meets_rule"]]
        parts = []
        if yes:
            parts.append(f"{what} in phase {fmt_names(yes)}")
        if no:
            parts.append(f"not in {fmt_names(no)}")
        return "; " + "; ".join(parts)

    def launch_not_host(self, s: Scope) -> bool:
        """The host_wait time is launch overhead (short kernels, short gaps), not host work."""
        short_gaps = s.short_gap_host_ns is None or 2 * s.short_gap_host_ns >= s.idle["host_wait"]
        return (s.short_pct or 0) >= self.th["launch_short_pct"] and short_gaps

    def is_launch_bound(self, s: Scope) -> bool:
        hw = pct(s.idle["host_wait"], s.window_ns) or 0
        return hw >= self.th["launch_wait_pct"] and self.launch_not_host(s)

    def is_low_util(self, s: Scope) -> bool:
        return (s.utilization_pct or 0) < self.th["util_low_pct"]

    def phase_evidence(self, s: Scope) -> Evidence:
        """A phase scope's phase_idle row."""
        return self.evidence("phase_idle", "scopes", "phase_idle", sid=s.source_id, dev=s.device_id, phase=s.phase)


def _window(s: Scope) -> tuple[int | None, int | None]:
    """A source scope's steady window (None, None: the whole device window)."""
    if not s.steady or s.steady["method"] == "whole":
        return None, None
    return s.steady["window_start_ns"], s.steady["window_end_ns"]


# --------------------------------------------------------------------------------------------
# the rules on one scope


def low_utilization(r: Rules, s: Scope) -> Finding | None:
    if not r.is_low_util(s):
        return None
    idle = s.idle_ns
    if s.phase is None and r.q.has("time_breakdown"):  # where the steady window's idle time went
        causes = [(x["category"], x["ns"]) for x in r.rows("low_utilization", "idle_causes",
                                                             sid=s.source_id, dev=s.device_id)]
    else:
        causes = sorted(((c, ns) for c, ns in s.idle.items() if ns), key=lambda x: -x[1])
    by = ", ".join(f"{c} {fmt_ns(ns)} ({fmt_pct(pct(ns, s.window_ns))})" for c, ns in causes)
    phases = r.phase_verdicts(s, r.is_low_util)
    if s.phase is None:
        w0, w1 = _window(s)
        ev = [r.evidence("steady_state", "low_utilization", "steady_state", sid=s.source_id, dev=s.device_id),
              r.evidence("idle_gaps", "low_utilization", "idle_gaps", sid=s.source_id, dev=s.device_id,
                         w0=w0, w1=w1)]
    else:
        ev = [r.phase_evidence(s)]
    return r.finding(
        "low_utilization", pct(idle, s.window_ns), idle, s.window_ns, s,
        f"GPU busy {fmt_ns(s.busy_ns)} of {fmt_ns(s.window_ns)} ({fmt_pct(s.utilization_pct)}); "
        f"idle {fmt_ns(idle)}: {by or 'no idle gaps'}" + r.phases_line(phases, "low"),
        metrics={"utilization_pct": s.utilization_pct, "busy_ns": s.busy_ns, "idle_ns": idle,
                 **{f"{c}_ns": ns for c, ns in s.idle.items()}},
        phases=phases, evidence=ev)


# -- the --phase rules, on one phase's idle_gaps causes (a source's steady window is judged from
# time_breakdown: attribution.py) ------------------------------------------------------------


def launch_or_host_bound(r: Rules, s: Scope) -> Finding | None:
    hw_ns = s.idle["host_wait"]
    hw = pct(hw_ns, s.window_ns) or 0
    if hw < r.th["launch_wait_pct"]:
        return None
    code = "launch_bound" if r.launch_not_host(s) else "host_bound"
    n, med = s.gaps.get("host_wait", (None, None))
    gaps_txt = f"{plural(n, 'gap')} where the GPU waited for a launch (median {fmt_ns(med)}), " if n else ""
    per_launch = ""
    if s.launch_calls:
        per_launch = f", {plural(s.launch_calls, 'launch call')} for {plural(s.kernels, 'kernel')}"
    med_k = f", median kernel {fmt_ns(s.med_kernel_ns)}" if s.med_kernel_ns is not None else ""
    summary = (f"{gaps_txt}{fmt_ns(hw_ns)} idle in all ({fmt_pct(hw)} of {fmt_ns(s.window_ns)}); "
               f"{s.short_kernels} of {plural(s.launched, 'kernel')} ({fmt_pct(s.short_pct)}) ran shorter "
               f"than their launch call{med_k}{per_launch}")
    return r.finding(code, hw, hw_ns, s.window_ns, s, summary,
                     metrics={"host_wait_ns": hw_ns, "host_wait_pct": hw, "short_pct": s.short_pct,
                              "short_kernels": s.short_kernels, "launched": s.launched,
                              "med_kernel_ns": s.med_kernel_ns, "med_latency_ns": s.med_latency_ns,
                              "launch_calls": s.launch_calls, "graph_launches": s.graph_launches},
                     evidence=[r.phase_evidence(s)])


def sync_stall(r: Rules, s: Scope) -> Finding | None:
    sw_ns = s.idle["sync_wait"]
    sw = pct(sw_ns, s.window_ns) or 0
    rows_q = statement("sync_stall", "host_syncs", sid=s.source_id, phase=s.phase)
    rows = r.q.dicts(rows_q)
    host_ns = sum(x["total_ns"] for x in rows)
    calls = sum(x["calls"] for x in rows)
    host_pct = pct(host_ns, s.window_ns) or 0
    if not calls or sw < r.th["sync_wait_pct"]:
        return None
    per = f" ({calls / s.instances:.1f} per instance of {s.phase})" if s.instances else ""
    site = ""
    if rows[0].get("call_site"):
        site = f"; most in {rows[0]['name']} ({rows[0]['kind']}) at {rows[0]['call_site']}"
    n, _ = s.gaps.get("sync_wait", (None, None))
    gaps_txt = f"{plural(n, 'gap')}, " if n else ""
    return r.finding(
        "sync_stall", sw, sw_ns, s.window_ns, s,
        f"{plural(calls, 'synchronizing call')}{per} blocked the host {fmt_ns(host_ns)}{site}; "
        f"the GPU sat idle {fmt_ns(sw_ns)} ({gaps_txt}{fmt_pct(sw)} of the window) while the host waited",
        metrics={"sync_wait_ns": sw_ns, "sync_wait_pct": sw, "host_blocked_ns": host_ns,
                 "host_blocked_pct": host_pct, "calls": calls},
        evidence=[r.q.evidence("host_syncs", rows_q), r.phase_evidence(s)])


def transfer_bound(r: Rules, s: Scope) -> Finding | None:
    exposed = s.exposed_memcpy_ns if s.exposed_memcpy_ns is not None else s.memcpy_ns
    share = pct(exposed, s.window_ns) or 0
    if not exposed or share < r.th["transfer_pct"]:
        return None
    ev = [r.evidence("memop_time_summary", "transfer_bound", "memop_time_summary", sid=s.source_id),
          r.evidence("memop_size_summary", "transfer_bound", "memop_size_summary", sid=s.source_id)]
    return r.finding(
        "transfer_bound", share, exposed, s.window_ns, s,
        f"memcpy {fmt_ns(s.memcpy_ns)}, of which {fmt_ns(exposed)} not overlapped by compute "
        f"({fmt_pct(share)} of the window)",
        metrics={"memcpy_ns": s.memcpy_ns, "exposed_ns": exposed}, evidence=ev)


def runtime_compile(r: Rules, s: Scope) -> Finding | None:
    c_ns = s.idle.get("runtime_compile") or 0
    share = pct(c_ns, s.window_ns) or 0
    if not c_ns or share < r.th["compile_pct"]:
        return None
    cq = statement("runtime_compile", "compile_calls", sid=s.source_id)
    calls = r.q.dicts(cq)
    n_calls = sum(x["calls"] for x in calls)
    n, med = s.gaps.get("runtime_compile", (None, None))
    gaps_txt = f"{plural(n, 'gap')}, median {fmt_ns(med)}, " if n else ""
    per = f", {plural(s.instances, 'instance')} of {s.phase}" if s.instances else ""
    return r.finding(
        "runtime_compile", share, c_ns, s.window_ns, s,
        f"the GPU sat idle {fmt_ns(c_ns)} ({gaps_txt}{fmt_pct(share)} of the window{per}) while the host "
        f"loaded or compiled GPU code: {plural(n_calls, 'code-loading call')}"
        + (f", most {calls[0]['name']} ({plural(calls[0]['calls'], 'call')}, {fmt_ns(calls[0]['total_ns'])})" if calls else "")
        + "; a new kernel built at run time (e.g. one per new shape), not launch overhead",
        metrics={"runtime_compile_ns": c_ns, "compile_calls": n_calls,
                 "compile_call_ns": sum(x["total_ns"] or 0 for x in calls)},
        evidence=[r.q.evidence("api_calls", cq), r.phase_evidence(s)])


def startup(r: Rules, s: Scope) -> Finding | None:
    st = s.steady
    if s.phase is not None or not st or st["method"] == "whole":
        return None
    out_ns = (st["startup_ns"] or 0) + (st["teardown_ns"] or 0)
    dev_ns = st["device_end_ns"] - st["device_start_ns"]
    if out_ns <= 0:
        return None
    steps = set((st["step_phases"] or "").split(","))
    other = [x["phase"] for x in r.rows("startup", "outside_phases", sid=s.source_id, w0=st["window_start_ns"],
                                        w1=st["window_end_ns"]) if x["phase"] not in steps]
    ranges = f" (ranges there: {fmt_names(other)})" if other else ""
    comp = ""
    if st["startup_compile_calls"]:
        comp = (f"; {plural(st['startup_compile_calls'], 'code-loading call')} before the first step "
                f"({fmt_ns(st['startup_compile_ns'])})")
    warm = st.get("warmup_steps") or 0
    among = (f"; {plural(warm, 'warm-up step')} among it, each over {r.th['warmup_step_factor']:g} x the "
             f"median step's host time" if warm else "")
    return r.finding(
        "startup", pct(out_ns, dev_ns), out_ns, dev_ns, s, severity="low", of="captured GPU window",
        summary=(f"the findings judge the steady state: {plural(st['steps'], 'repeated step')} "
                 f"({st['step_phases']}), {fmt_ns(st['window_ns'])}; {fmt_ns(st['startup_ns'])} before the "
                 f"first {'steady ' if warm else ''}step (GPU busy {fmt_ns(st['startup_busy_ns'])} of it{among}) and "
                 f"{fmt_ns(st['teardown_ns'])} after the last are start-up and tear-down{ranges}{comp}"),
        metrics={"startup_ns": st["startup_ns"], "teardown_ns": st["teardown_ns"],
                 "startup_busy_ns": st["startup_busy_ns"], "steps": st["steps"], "warmup_steps": warm,
                 "step_phases": st["step_phases"], "steady_window_ns": st["window_ns"],
                 "startup_compile_calls": st["startup_compile_calls"]},
        evidence=[r.evidence("steady_state", "startup", "steady_state", sid=s.source_id, dev=s.device_id)])


def _keys(key) -> tuple[str, ...]:
    """A remedy key, or several (a remedy made of parts, in order)."""
    return (key,) if isinstance(key, str) else tuple(key)


def memory_pressure(r: Rules, s: Scope) -> Finding | None:
    """Device memory: the peak near the GPU's size, memory the allocator holds but does not use,
    and the allocator calling the driver (cudaMalloc / cudaFree) inside the repeated steps.
    Each part needs its own evidence over its threshold; the finding's title names only the
    parts found."""
    q, th = r.q, r.th
    sid, dev = s.source_id, s.device_id
    parts, heads, sev, metrics, evidence, fixes = [], [], [], {}, [], []
    share = time_ns = of_ns = None
    gib = 2 ** 30
    torch_alloc = False
    if q.has("memory_peaks"):
        pk = r.rows("memory_pressure", "device_peaks", sid=sid, dev=dev)
    else:
        pk = []
    if pk:
        p = pk[0]
        dev_pct = p["pct_of_device"]
        torch_alloc = p["allocator"] == "pytorch"
        metrics.update({"allocator": p["allocator"], "peak_allocated_bytes": p["peak_allocated_bytes"],
                        "peak_reserved_bytes": p["peak_reserved_bytes"], "pct_of_device": dev_pct})
        if dev_pct is not None and dev_pct >= th["mem_peak_pct"]:
            top = ", ".join(f"{t['op']} {t['bytes'] / gib:.3g} GiB" for t in (p["top_ops"] or [])[:3])
            parts.append(f"peak {max(p['peak_reserved_bytes'] or 0, p['peak_allocated_bytes'] or 0) / gib:.4g} GiB = "
                         f"{fmt_pct(dev_pct)} of the GPU's memory ({p['allocator']} allocator)"
                         + (f"; allocated inside the trace and live at the peak: {top}" if top else ""))
            heads.append(f"GPU memory peak at {fmt_pct(dev_pct)} of the device's size")
            fixes.append("memory_pressure:peak")
            sev.append("high" if dev_pct >= th["mem_peak_high_pct"] else "medium")
        frag = (p["peak_reserved_bytes"] or 0) - (p["peak_allocated_bytes"] or 0)
        if torch_alloc and frag >= th["mem_frag_gib"] * gib \
                and frag >= 0.25 * (p["peak_reserved_bytes"] or 1):
            parts.append(f"the caching allocator reserved {frag / gib:.3g} GiB more than it ever had in use "
                         f"({fmt_pct(100 * frag / p['peak_reserved_bytes'])} of its peak reserve: fragmentation "
                         "or a cache kept from earlier shapes)")
            heads.append("the caching allocator reserves much more memory than it uses")
            fixes.append("memory_pressure:fragmentation")
            sev.append("low")
        evidence.append(r.evidence("memory_peaks", "memory_pressure", "memory_peaks", sid=sid, dev=dev))
    st = s.steady
    if st and st.get("method") != "whole" and st.get("steps"):
        w0, w1 = st["window_start_ns"], st["window_end_ns"]
        aq = statement("memory_pressure", "allocator_calls", sid=sid, w0=w0, w1=w1)
        calls = q.dicts(aq)
        n = sum(c["calls"] for c in calls)
        host = sum(c["host_ns"] or 0 for c in calls)
        frees = sum(c["calls"] for c in calls if "Free" in c["name"])
        churn_share = pct(host, s.window_ns)
        # churn: the pool gives memory back (a free), or grows again and again (a call per
        # step); one growth while the first steps find their working set is not churn; and
        # only when its host time is a share of the window worth a finding
        if (frees or n >= st["steps"]) and (churn_share or 0) >= th["mem_alloc_pct"]:
            names = ", ".join(f"{c['calls']} {c['name']}" for c in calls)
            who = ("the caching allocator gives memory back and takes it again on the hot path" if torch_alloc
                   else "device memory is allocated or freed through the driver on the hot path")
            parts.append(f"{plural(n, 'driver allocator call')} ({names}) "
                         f"inside the {st['steps']} repeated steps, {fmt_ns(host)} of host time "
                         f"({fmt_pct(churn_share)} of the window): {who}")
            heads.append(f"{plural(n, 'driver allocator call')} inside the repeated steps "
                         f"({fmt_pct(churn_share)} of the window)")
            sev.append(_severity(churn_share, th))
            fixes.append("memory_pressure:churn")
            share, time_ns, of_ns = churn_share, host, s.window_ns
            metrics.update({"steady_allocator_calls": n, "steady_allocator_ns": host})
            evidence.append(q.evidence("api_calls", aq))
    if not parts:
        return None
    order = {x: i for i, x in enumerate(SEVERITIES)}
    head = "; ".join(heads)
    return r.finding(
        "memory_pressure", share, time_ns, of_ns, s, "; ".join(parts), remedy_key=fixes,
        severity=min(sev, key=order.get), source_id=sid, device_id=dev, phase=None,
        metrics=metrics, evidence=evidence, headline=head[:1].upper() + head[1:])

