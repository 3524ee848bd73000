"""The kernel rules of `tracekit diagnose`: hot_kernel, the ncu verdicts (memory_bound /
compute_bound / latency_bound) and the roofline note. Their SQL is in sql/diagnose/hot_kernel.sql,
bounds.sql and roofline.sql."""

from __future__ import annotations

from .model import Finding, fmt_ns, fmt_pct, pct, plural
from .rules import Rules
from .scopes import Scope
from .statements import Sql, statement


def hot_kernel(rules: Rules, s: Scope, window_ns: int) -> Finding | None:
    q = rules.q
    if s.phase is None:
        view, hq = "hotspots", statement("hot_kernel", "hotspots", sid=s.source_id)
    else:
        view, hq = "phase_ops", statement("hot_kernel", "phase_ops", sid=s.source_id, phase=s.phase)
    rows = q.dicts(hq)
    cand = [r for r in rows if not r["comm"]]  # collectives: their time is mostly waiting
    if not cand or (cand[0]["time_pct"] or 0) < rules.th["hot_kernel_pct"]:
        return None
    k = cand[0]
    share = pct(k["total_ns"], window_ns)
    return rules.finding(  # a pointer to the next step (ncu), not a defect: severity 'info'
        "hot_kernel", share, k["total_ns"], window_ns, s,
        f"{k['short_name']} takes {fmt_pct(k['time_pct'])} of the kernel time "
        f"({fmt_ns(k['total_ns'])} in {plural(k['instances'], 'launch', nouns='launches')}, median {fmt_ns(k['med_ns'])})",
        severity="info", subject=k["short_name"], device_id=None,
        metrics={"time_pct": k["time_pct"], "total_ns": k["total_ns"], "instances": k["instances"]},
        evidence=[q.evidence(view, hq)])

def bounds(rules: Rules, sid: int, window_ns: int, phase: str | None, scope: Scope | None) -> list[Finding]:
    q = rules.q
    if not (q.has("hotspots_bound") and q.has("kernel_bounds")):
        return []
    if phase is None:
        hq = statement("bounds", "hotspots_bound", sid=sid)
    else:
        hq = statement("bounds", "phase_bound", sid=sid, phase=phase)
    out = []
    for r in q.dicts(hq):
        if (r["time_pct"] or 0) < rules.th["bound_min_pct"] or r["bound"] == "balanced":
            continue
        ids = ", ".join(f"({x.replace(':', ', ')})" for x in (r["ncu_results"] or "").split(",") if x)
        out.append(bound_finding(rules, r, sid, window_ns, phase, scope,
                                       Sql(statement("bounds", "ncu_results", ids=Sql(ids or "(NULL, NULL)"))), "GPU window",
                                       [rules.evidence("hotspots_bound", "bounds", "kernel", sid=sid, name=r["name"])]))
    return out


def roofline(rules: Rules, sid: int, phase: str | None) -> Finding | None:
    """The phases' verdicts against the device's roofs, from the shapes of their operators
    (`phase_roofline`; the whole source from `roofline` when it has no phases), and the
    matmul shapes that run latency-bound."""
    q = rules.q
    if not (q.has("phase_roofline") and q.has("roofline")):
        return None
    q.store.keep("roofline")  # read by both queries below: computed once
    pq = statement("roofline", "phase_roofline", sid=sid, phase=phase or None)
    rows = q.dicts(pq)
    if not rows and phase is None:
        pq = statement("roofline", "whole_trace", sid=sid, latency_pct=rules.th["latency_pct"])
        rows = q.dicts(pq)
    if not rows:
        return None
    parts = []
    for r in rows:
        if r["bound"] == "compute":
            what = f"compute-bound at {fmt_pct(r['pct_peak_flops'])} of peak FLOP/s"
        elif r["bound"] == "memory":
            what = f"memory-bound at {fmt_pct(r['pct_peak_bytes'])} of DRAM bandwidth"
        else:
            what = (f"latency-bound: {fmt_pct(r['pct_peak_flops'])} of peak FLOP/s and "
                    f"{fmt_pct(r['pct_peak_bytes'])} of DRAM bandwidth ({r['roof']} roof)")
        per = ""
        if r["instances"] and r["instances"] > 1 and r["bytes"]:
            per = f", {r['bytes'] / r['instances'] / 1e9:.3g} GB and {fmt_ns(r['gpu_ns'] / r['instances'])} GPU per instance"
        parts.append(f"{r['phase']} {what}{per}")
    lq = statement("roofline", "latency_matmuls", sid=sid)
    lat = q.dicts(lq)
    tot = sum(r["pct_of_matmul_ns"] or 0 for r in lat)
    if lat and tot >= 10:
        x = lat[0]
        parts.append(f"latency-bound matmuls take {fmt_pct(tot)} of the matmul GPU time, the largest "
                     f"{x['op']} {x['shapes']} at {fmt_pct(x['pct_peak_bytes'])} of DRAM bandwidth "
                     f"({plural(x['calls'], 'call')})")
    top = rows[0]
    pk = top.get("peak_flops_per_s"), top.get("peak_bytes_per_s")
    peaks = (f" (roofs: {pk[0] / 1e12:.4g} TFLOP/s {top.get('dtype') or ''}, {pk[1] / 1e12:.3g} TB/s)"
             if pk[0] and pk[1] else "")
    return rules.finding(
        "roofline", None, None, None, None, "; ".join(parts) + peaks,
        remedy_key=f"roofline:{top['bound']}", severity="info", source_id=sid, device_id=None, phase=phase,
        subject=top["phase"],
        metrics={"phases": {r["phase"]: {k: r.get(k) for k in (
            "bound", "roof", "pct_peak_flops", "pct_peak_bytes", "mfu_pct", "instances", "flops", "bytes",
            "gpu_ns", "tokens", "coverage_pct")} for r in rows},
            "latency_matmuls": lat, "latency_matmul_pct": tot},
        evidence=[q.evidence("phase_roofline", pq)] + ([q.evidence("roofline", lq)] if lat else []))

def ncu_only_bounds(rules: Rules, sid: int, unmatched: bool = False) -> list[Finding]:
    """An ncu source with no timeline in the store: classify its kernels by ncu's own time.
    ``unmatched``: the store has timeline sources; only the results of this source that no
    timeline kernel matched (`ncu_timeline_match`; the matched ones are reported with the
    timeline's kernels, `bounds`), shares of the time of those results."""
    q = rules.q
    if not q.has("kernel_bounds"):
        return []
    of = "ncu-profiled time"
    if unmatched and not q.has("ncu_timeline_match"):
        return []
    unmatched_sid = sid if unmatched else None
    hq = statement("bounds", "ncu_kernels", sid=sid, unmatched_sid=unmatched_sid)
    rows = q.dicts(hq)
    total = sum(r["total_ns"] or 0 for r in rows)
    out = []
    for r in rows:
        if r["bound"] is None or r["bound"] == "balanced" or (r["time_pct"] or 0) < rules.th["bound_min_pct"]:
            continue
        kcond = statement("bounds", "ncu_kernel", sid=sid, unmatched_sid=unmatched_sid, short_name=r["short_name"])
        f = bound_finding(rules, r, sid, total, None, None, Sql(kcond), of, [])
        if unmatched:
            f.summary += ("; no timeline kernel in the store matched these ncu results "
                          "(ncu_timeline_match), so the share is of this source's unmatched ncu time")
        out.append(f)
    return out


def bound_finding(rules: Rules, r, sid, window_ns, phase, scope, kcond, of, evidence) -> Finding:
    """A memory/compute/latency_bound finding for the ncu results `kcond` selects, with which
    latency (`kernel_latency`: the cause named for most of them, its evidence and remedy)."""
    bound, reason = r["bound"], r["bound_reason"]
    code = f"{bound}_bound"
    kq = statement("bounds", "kernel_bounds", kernels=kcond)
    lq = statement("bounds", "kernel_latency", kernels=kcond)
    evidence = [*evidence, rules.q.evidence("kernel_bounds", kq)]
    krows = rules.q.dicts(kq)
    lrows = rules.q.dicts(lq) if rules.q.has("kernel_latency") else []
    causes = [x["cause"] for x in lrows if x["cause"]]
    cause = max(sorted(set(causes)), key=causes.count) if causes else None
    lat = ""
    if cause:
        x = next(x for x in lrows if x["cause"] == cause)
        lat = f"; which latency: {cause} ({x['cause_evidence']})"
        evidence.append(rules.q.evidence("kernel_latency", lq))
    elif bound == "latency" and lrows and lrows[0]["missing"]:
        lat = f"; to name the latency, collect: {lrows[0]['missing']}"
        evidence.append(rules.q.evidence("kernel_latency", lq))
    waves = [k["waves"] for k in krows if k.get("waves") is not None]
    level = next((k["memory_level"] for k in krows if k.get("memory_level")), None)
    detail = (f"SM {fmt_pct(r['sm_pct'])}, memory {fmt_pct(r['memory_pct'])}"
              + (f" (busiest: {level})" if level else "")
              + (f", DRAM {fmt_pct(r['dram_pct'])}" if r.get("dram_pct") is not None else "")
              + (f", {plural(min(waves), 'wave', '.2g')}" if waves else ""))
    roof = f"; roofline: {r['roofline_bound']}-bound" if r.get("roofline_bound") else ""
    if r.get("arithmetic_intensity") is not None:
        roof += f" at {r['arithmetic_intensity']:.3g} FLOP/byte"
    mixed = f" (results disagree: {r['bounds']})" if r.get("bounds") and "," in r["bounds"] else ""
    f = rules.finding(
        code, pct(r["total_ns"], window_ns), r["total_ns"], window_ns, scope,
        f"{r['short_name']} ({fmt_pct(r['time_pct'])} of the kernel time, {plural(r['ncu_launches'], 'ncu result')}): {bound}-bound by ncu's rule ({reason}){mixed}: "
        f"{detail}{roof}{lat}",
        of=of, source_id=sid, device_id=None, phase=phase,
        subject=r["short_name"],
        metrics={"time_pct": r["time_pct"], "sm_pct": r["sm_pct"], "memory_pct": r["memory_pct"],
                 "dram_pct": r.get("dram_pct"), "bound_reason": reason,
                 "roofline_bound": r.get("roofline_bound"),
                 "arithmetic_intensity": r.get("arithmetic_intensity"), "ncu_launches": r["ncu_launches"],
                 "latency_cause": cause},
        evidence=evidence)
    if cause:  # the named cause's remedy is more precise than the bound's generic one
        f.remedy = next(x["remedy"] for x in lrows if x["cause"] == cause)
    return f

