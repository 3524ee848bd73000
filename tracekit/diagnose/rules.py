"""The rules of `tracekit diagnose` (the decision tree of the package docstring) and the entry
point that runs them over a store."""

from __future__ import annotations

from .model import (REMEDIES, fmt_names, SEVERITIES, DiagnoseError, Diagnosis, Evidence, Finding, _pct, _round,
                    apply_view_params, fmt_ns, fmt_pct, lit, resolve_thresholds)
from .model import plural
from .scopes import Query, Scope, _phase_rows, _phase_scope, _source_scopes
from .attribution import attribution_findings

def _severity(share: float | None, th: dict[str, float]) -> str:
    if share is None:
        return "info"
    if share >= th["sev_high_pct"]:
        return "high"
    if share >= th["sev_medium_pct"]:
        return "medium"
    return "low"



# --------------------------------------------------------------------------------------------
# the rules


class _Rules:
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
            summary=summary, remedy=REMEDIES[remedy_key or code], **kw)

    # -- where is the scope's time spent -----------------------------------------------------
    def _where(self, s: Scope) -> str:
        if s.phase is None:
            return f"source_id = {s.source_id} AND device_id = {s.device_id}"
        return f"source_id = {s.source_id} AND device_id = {s.device_id} AND phase = {lit(s.phase)}"

    def _in_window(self, s: Scope) -> str:
        """The idle_gaps rows inside a source scope's steady window."""
        if not s.steady or s.steady["method"] == "whole":
            return ""
        return f" AND start_ns >= {s.steady['window_start_ns']} AND end_ns <= {s.steady['window_end_ns']}"

    def _phase_verdicts(self, s: Scope, test) -> dict[str, dict] | None:
        if s.phase is not None:
            return None
        rows = _phase_rows(self.q, s.source_id, device=s.device_id)
        if not rows:
            return None
        out = {}
        for r in rows:
            ps = _phase_scope(r)
            out[r["phase"]] = {
                "instances": r["instances"], "span_ns": r["span_ns"], "busy_ns": r["busy_ns"],
                "utilization_pct": _round(ps.utilization_pct),
                "host_wait_pct": _round(_pct(ps.idle["host_wait"], ps.window_ns)),
                "short_pct": _round(ps.short_pct), "meets_rule": bool(test(ps)),
            }
        return out

    def _phases_line(self, phases, what) -> str:
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

    # -- rules on one scope --------------------------------------------------------------------
    def _launch_not_host(self, s: Scope) -> bool:
        """The host_wait time is launch overhead (short kernels, short gaps), not host work."""
        short_gaps = s.short_gap_host_ns is None or 2 * s.short_gap_host_ns >= s.idle["host_wait"]
        return (s.short_pct or 0) >= self.th["launch_short_pct"] and short_gaps

    def _is_launch_bound(self, s: Scope) -> bool:
        hw = _pct(s.idle["host_wait"], s.window_ns) or 0
        return hw >= self.th["launch_wait_pct"] and self._launch_not_host(s)

    def _is_low_util(self, s: Scope) -> bool:
        return (s.utilization_pct or 0) < self.th["util_low_pct"]

    def low_utilization(self, s: Scope) -> Finding | None:
        if not self._is_low_util(s):
            return None
        idle = s.idle_ns
        if s.phase is None and self.q.has("time_breakdown"):  # where the steady window's idle time went
            causes = [(r["category"], r["ns"]) for r in self.q.dicts(
                f"""SELECT category, ns FROM time_breakdown WHERE {self._where(s)} AND part = 'steady'
                    AND state = 'idle' ORDER BY ns DESC, category""")]
        else:
            causes = sorted(((c, ns) for c, ns in s.idle.items() if ns), key=lambda x: -x[1])
        by = ", ".join(f"{c} {fmt_ns(ns)} ({fmt_pct(_pct(ns, s.window_ns))})" for c, ns in causes)
        phases = self._phase_verdicts(s, self._is_low_util)
        ev = [self.q.evidence("steady_state", f"""
                SELECT method, step_phases, steps, window_start_ns, window_end_ns, window_ns, busy_ns,
                       utilization_pct, host_wait_ns, sync_wait_ns, runtime_compile_ns, kernel_wait_ns, other_ns,
                       startup_ns, teardown_ns
                FROM steady_state WHERE {self._where(s)}""")
              if s.phase is None else
              self.q.evidence("phase_idle", f"SELECT * FROM phase_idle WHERE {self._where(s)}")]
        if s.phase is None:
            ev.append(self.q.evidence("idle_gaps", f"""
                SELECT cause, count(*) AS gaps, sum(dur_ns)::BIGINT AS total_ns, median(dur_ns) AS med_ns,
                       max(dur_ns) AS max_ns, sum(sync_ns)::BIGINT AS sync_ns, sum(compile_ns)::BIGINT AS compile_ns
                FROM idle_gaps WHERE scope = 'device' AND {self._where(s)}{self._in_window(s)}
                GROUP BY cause ORDER BY total_ns DESC"""))
        return self.finding(
            "low_utilization", _pct(idle, s.window_ns), idle, s.window_ns, s,
            f"GPU busy {fmt_ns(s.busy_ns)} of {fmt_ns(s.window_ns)} ({fmt_pct(s.utilization_pct)}); "
            f"idle {fmt_ns(idle)}: {by or 'no idle gaps'}" + self._phases_line(phases, "low"),
            metrics={"utilization_pct": s.utilization_pct, "busy_ns": s.busy_ns, "idle_ns": idle,
                     **{f"{c}_ns": ns for c, ns in s.idle.items()}},
            phases=phases, evidence=ev)

    # -- the older rules, on one phase's idle_gaps causes (`diagnose --phase`; a source's steady
    # window is judged from time_breakdown: attribution.py) -------------------------------------
    def _phase_evidence(self, s: Scope) -> Evidence:
        return self.q.evidence("phase_idle", f"SELECT * FROM phase_idle WHERE {self._where(s)}")

    def launch_or_host_bound(self, s: Scope) -> Finding | None:
        hw_ns = s.idle["host_wait"]
        hw = _pct(hw_ns, s.window_ns) or 0
        if hw < self.th["launch_wait_pct"]:
            return None
        code = "launch_bound" if self._launch_not_host(s) else "host_bound"
        n, med = s.gaps.get("host_wait", (None, None))
        gaps_txt = f"{plural(n, 'gap')} where the GPU waited for a launch (median {fmt_ns(med)}), " if n else ""
        per_launch = ""
        if s.launch_calls:
            per_launch = f", {plural(s.launch_calls, 'launch call')} for {plural(s.kernels, 'kernel')}"
        med_k = f", median kernel {fmt_ns(s.med_kernel_ns)}" if s.med_kernel_ns is not None else ""
        summary = (f"{gaps_txt}{fmt_ns(hw_ns)} idle in all ({fmt_pct(hw)} of {fmt_ns(s.window_ns)}); "
                   f"{s.short_kernels} of {plural(s.launched, 'kernel')} ({fmt_pct(s.short_pct)}) ran shorter "
                   f"than their launch call{med_k}{per_launch}")
        return self.finding(code, hw, hw_ns, s.window_ns, s, summary,
                            metrics={"host_wait_ns": hw_ns, "host_wait_pct": hw, "short_pct": s.short_pct,
                                     "short_kernels": s.short_kernels, "launched": s.launched,
                                     "med_kernel_ns": s.med_kernel_ns, "med_latency_ns": s.med_latency_ns,
                                     "launch_calls": s.launch_calls, "graph_launches": s.graph_launches},
                            evidence=[self._phase_evidence(s)])

    def sync_stall(self, s: Scope) -> Finding | None:
        sw_ns = s.idle["sync_wait"]
        sw = _pct(sw_ns, s.window_ns) or 0
        q = self.q
        rows_q = f"""SELECT h.name, h.kind, h.call_site, count(*) AS calls, sum(h.dur_ns)::BIGINT AS total_ns,
                            max(h.dur_ns) AS max_ns, sum(h.gpu_ops_waited)::BIGINT AS gpu_ops_waited
                     FROM host_syncs h JOIN phase_instances i
                       ON i.source_id = h.source_id AND i.pid = h.pid AND i.tid = h.tid
                      AND h.start_ns >= i.start_ns AND h.start_ns < i.end_ns
                     WHERE h.source_id = {s.source_id} AND i.phase = {lit(s.phase)}
                     GROUP BY ALL ORDER BY total_ns DESC"""
        rows = q.dicts(rows_q)
        host_ns = sum(r["total_ns"] for r in rows)
        calls = sum(r["calls"] for r in rows)
        host_pct = _pct(host_ns, s.window_ns) or 0
        if not calls or sw < self.th["sync_wait_pct"]:
            return None
        per = f" ({calls / s.instances:.1f} per instance of {s.phase})" if s.instances else ""
        site = ""
        if rows[0].get("call_site"):
            site = f"; most in {rows[0]['name']} ({rows[0]['kind']}) at {rows[0]['call_site']}"
        n, _ = s.gaps.get("sync_wait", (None, None))
        gaps_txt = f"{plural(n, 'gap')}, " if n else ""
        return self.finding(
            "sync_stall", sw, sw_ns, s.window_ns, s,
            f"{plural(calls, 'synchronizing call')}{per} blocked the host {fmt_ns(host_ns)}{site}; "
            f"the GPU sat idle {fmt_ns(sw_ns)} ({gaps_txt}{fmt_pct(sw)} of the window) while the host waited",
            metrics={"sync_wait_ns": sw_ns, "sync_wait_pct": sw, "host_blocked_ns": host_ns,
                     "host_blocked_pct": host_pct, "calls": calls},
            evidence=[q.evidence("host_syncs", rows_q), self._phase_evidence(s)])

    def transfer_bound(self, s: Scope) -> Finding | None:
        exposed = s.exposed_memcpy_ns if s.exposed_memcpy_ns is not None else s.memcpy_ns
        share = _pct(exposed, s.window_ns) or 0
        if not exposed or share < self.th["transfer_pct"]:
            return None
        ev = [self.q.evidence("memop_time_summary", f"SELECT * FROM memop_time_summary WHERE source_id = {s.source_id}"),
              self.q.evidence("memop_size_summary", f"SELECT * FROM memop_size_summary WHERE source_id = {s.source_id}")]
        return self.finding(
            "transfer_bound", share, exposed, s.window_ns, s,
            f"memcpy {fmt_ns(s.memcpy_ns)}, of which {fmt_ns(exposed)} not overlapped by compute "
            f"({fmt_pct(share)} of the window)",
            metrics={"memcpy_ns": s.memcpy_ns, "exposed_ns": exposed}, evidence=ev)

    def runtime_compile(self, s: Scope) -> Finding | None:
        c_ns = s.idle.get("runtime_compile") or 0
        share = _pct(c_ns, s.window_ns) or 0
        if not c_ns or share < self.th["compile_pct"]:
            return None
        q = self.q
        cq = f"""SELECT name, count(*) AS calls, sum(dur_ns)::BIGINT AS total_ns, max(dur_ns) AS max_ns
                 FROM api_calls WHERE source_id = {s.source_id} AND tk_is_compile_call(name)
                 GROUP BY name ORDER BY total_ns DESC"""
        calls = q.dicts(cq)
        n_calls = sum(r["calls"] for r in calls)
        n, med = s.gaps.get("runtime_compile", (None, None))
        gaps_txt = f"{plural(n, 'gap')}, median {fmt_ns(med)}, " if n else ""
        per = f", {plural(s.instances, 'instance')} of {s.phase}" if s.instances else ""
        return self.finding(
            "runtime_compile", share, c_ns, s.window_ns, s,
            f"the GPU sat idle {fmt_ns(c_ns)} ({gaps_txt}{fmt_pct(share)} of the window{per}) while the host "
            f"loaded or compiled GPU code: {plural(n_calls, 'code-loading call')}"
            + (f", most {calls[0]['name']} ({plural(calls[0]['calls'], 'call')}, {fmt_ns(calls[0]['total_ns'])})" if calls else "")
            + "; a new kernel built at run time (e.g. one per new shape), not launch overhead",
            metrics={"runtime_compile_ns": c_ns, "compile_calls": n_calls,
                     "compile_call_ns": sum(r["total_ns"] or 0 for r in calls)},
            evidence=[q.evidence("api_calls", cq), self._phase_evidence(s)])

    def startup(self, s: Scope) -> Finding | None:
        st = s.steady
        if s.phase is not None or not st or st["method"] == "whole":
            return None
        out_ns = (st["startup_ns"] or 0) + (st["teardown_ns"] or 0)
        dev_ns = st["device_end_ns"] - st["device_start_ns"]
        if out_ns <= 0:
            return None
        steps = set((st["step_phases"] or "").split(","))
        other = [r["phase"] for r in self.q.dicts(
            f"""SELECT phase, min(start_ns) AS s FROM phase_instances
                WHERE source_id = {s.source_id} AND gpu_ops > 0
                  AND (start_ns < {st['window_start_ns']} OR start_ns >= {st['window_end_ns']})
                GROUP BY phase ORDER BY s""") if r["phase"] not in steps]
        ranges = f" (ranges there: {fmt_names(other)})" if other else ""
        comp = ""
        if st["startup_compile_calls"]:
            comp = (f"; {plural(st['startup_compile_calls'], 'code-loading call')} before the first step "
                    f"({fmt_ns(st['startup_compile_ns'])})")
        return self.finding(
            "startup", _pct(out_ns, dev_ns), out_ns, dev_ns, s, severity="low", of="captured GPU window",
            summary=(f"the findings judge the steady state: {plural(st['steps'], 'repeated step')} "
                     f"({st['step_phases']}), {fmt_ns(st['window_ns'])}; {fmt_ns(st['startup_ns'])} before the "
                     f"first step (GPU busy {fmt_ns(st['startup_busy_ns'])} of it) and "
                     f"{fmt_ns(st['teardown_ns'])} after the last are start-up and tear-down{ranges}{comp}"),
            metrics={"startup_ns": st["startup_ns"], "teardown_ns": st["teardown_ns"],
                     "startup_busy_ns": st["startup_busy_ns"], "steps": st["steps"],
                     "step_phases": st["step_phases"], "steady_window_ns": st["window_ns"],
                     "startup_compile_calls": st["startup_compile_calls"]},
            evidence=[self.q.evidence("steady_state", f"SELECT * FROM steady_state WHERE {self._where(s)}")])

    def hot_kernel(self, s: Scope, window_ns: int) -> Finding | None:
        q = self.q
        if s.phase is None:
            hq = f"""SELECT time_pct, total_ns, instances, avg_ns, med_ns, short_name, name,
                            tk_is_comm_kernel(name) AS comm
                     FROM hotspots WHERE source_id = {s.source_id} ORDER BY total_ns DESC LIMIT 10"""
            view = "hotspots"
        else:
            hq = f"""SELECT 100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER () AS time_pct, sum(dur_ns)::BIGINT AS total_ns,
                            count(*) AS instances, avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns,
                            any_value(short_name) AS short_name, name, tk_is_comm_kernel(name) AS comm
                     FROM phase_ops WHERE source_id = {s.source_id} AND phase = {lit(s.phase)} AND kind = 'kernel'
                       AND short_name IS NOT NULL
                     GROUP BY name ORDER BY total_ns DESC LIMIT 10"""
            view = "phase_ops"
        rows = q.dicts(hq)
        cand = [r for r in rows if not r["comm"]]  # collectives: their time is mostly waiting
        if not cand or (cand[0]["time_pct"] or 0) < self.th["hot_kernel_pct"]:
            return None
        k = cand[0]
        share = _pct(k["total_ns"], window_ns)
        return self.finding(  # a pointer to the next step (ncu), not a defect: severity 'info'
            "hot_kernel", share, k["total_ns"], window_ns, s,
            f"{k['short_name']} takes {fmt_pct(k['time_pct'])} of the kernel time "
            f"({fmt_ns(k['total_ns'])} in {plural(k['instances'], 'launch', nouns='launches')}, median {fmt_ns(k['med_ns'])})",
            severity="info", subject=k["short_name"], device_id=None,
            metrics={"time_pct": k["time_pct"], "total_ns": k["total_ns"], "instances": k["instances"]},
            evidence=[q.evidence(view, hq)])

    def bounds(self, sid: int, window_ns: int, phase: str | None, scope: Scope | None) -> list[Finding]:
        q = self.q
        if not (q.has("hotspots_bound") and q.has("kernel_bounds")):
            return []
        if phase is None:
            hq = f"""SELECT * FROM hotspots_bound WHERE source_id = {sid} AND ncu_launches > 0
                     AND bound IS NOT NULL ORDER BY total_ns DESC"""
        else:
            hq = f"""SELECT h.* EXCLUDE (total_ns, instances, time_pct),
                            p.total_ns, p.instances, 100.0 * p.total_ns / p.all_ns AS time_pct
                     FROM hotspots_bound h JOIN (
                         SELECT name, sum(dur_ns)::BIGINT AS total_ns, count(*) AS instances,
                                sum(sum(dur_ns)) OVER () AS all_ns
                         FROM phase_ops WHERE source_id = {sid} AND phase = {lit(phase)} AND kind = 'kernel'
                           AND short_name IS NOT NULL
                         GROUP BY name) p USING (name)
                     WHERE h.source_id = {sid} AND h.ncu_launches > 0 AND h.bound IS NOT NULL
                     ORDER BY p.total_ns DESC"""
        out = []
        for r in q.dicts(hq):
            if (r["time_pct"] or 0) < self.th["bound_min_pct"] or r["bound"] == "balanced":
                continue
            ids = ", ".join(f"({x.replace(':', ', ')})" for x in (r["ncu_results"] or "").split(",") if x)
            out.append(self._bound_finding(r, sid, window_ns, phase, scope,
                                           f"(source_id, id) IN ({ids or '(NULL, NULL)'})", "GPU window",
                                           [q.evidence("hotspots_bound", f"""
                SELECT time_pct, total_ns, instances, short_name, ncu_launches, bound, bound_reason, bounds,
                       sm_pct, memory_pct, dram_pct, arithmetic_intensity, roofline_bound, match_quality,
                       latency_cause, ncu_results
                FROM hotspots_bound WHERE source_id = {sid} AND name = {lit(r['name'])}""")]))
        return out

    def roofline(self, sid: int, phase: str | None) -> Finding | None:
        """The phases' verdicts against the device's roofs, from the shapes of their operators
        (`phase_roofline`; the whole source from `roofline` when it has no phases), and the
        matmul shapes that run latency-bound."""
        q = self.q
        if not (q.has("phase_roofline") and q.has("roofline")):
            return None
        q.store.keep("roofline")  # read by both queries below: computed once
        cond = f"source_id = {sid}" + (f" AND phase = {lit(phase)}" if phase else "")
        pq = f"""SELECT phase, instances, bound, roof, dtype, pct_peak_flops, pct_peak_bytes, mfu_pct,
                        coverage_pct, flops, bytes, gpu_ns, intensity, tokens, bytes_per_token, flops_per_token,
                        peak_flops_per_s, peak_bytes_per_s
                 FROM phase_roofline
                 WHERE {cond} AND bound IS NOT NULL AND coverage_pct >= 50 ORDER BY gpu_ns DESC LIMIT 6"""
        rows = q.dicts(pq)
        if not rows and phase is None:
            pq = f"""SELECT '(whole trace)' AS phase, 1 AS instances, NULL AS bound, sum(flops) AS flops,
                            sum(bytes) AS bytes, sum(gpu_ns) AS gpu_ns, NULL AS tokens,
                            arg_max(peak_flops_per_s, flops) AS peak_flops_per_s, max(peak_bytes_per_s) AS peak_bytes_per_s
                     FROM roofline WHERE source_id = {sid} HAVING count(*) > 0"""
            rows = [r for r in q.dicts(pq) if r["peak_flops_per_s"] and r["peak_bytes_per_s"] and r["gpu_ns"]]
            for r in rows:
                r["pct_peak_flops"] = 100 * r["flops"] / (r["gpu_ns"] * 1e-9) / r["peak_flops_per_s"]
                r["pct_peak_bytes"] = 100 * (r["bytes"] or 0) / (r["gpu_ns"] * 1e-9) / r["peak_bytes_per_s"]
                ridge = r["peak_flops_per_s"] / r["peak_bytes_per_s"]
                r["roof"] = "compute" if r["bytes"] and r["flops"] / r["bytes"] >= ridge else "memory"
                r["bound"] = ("latency" if max(r["pct_peak_flops"], r["pct_peak_bytes"]) < self.th["latency_pct"]
                              else r["roof"])
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
        # the means summed in one order (a parallel avg() of thousands of calls differed in the
        # last digits from run to run on the 179 MB capture, so the report's JSON did too)
        lq = f"""SELECT op, shapes, dtype, count(*) AS calls, sum(gpu_ns)::BIGINT AS gpu_ns,
                        list_avg(list(pct_peak_bytes ORDER BY pct_peak_bytes)) AS pct_peak_bytes,
                        list_avg(list(pct_peak_flops ORDER BY pct_peak_flops)) AS pct_peak_flops,
                        100.0 * sum(gpu_ns) / (SELECT sum(gpu_ns) FROM roofline WHERE source_id = {sid} AND model = 'matmul')
                            AS pct_of_matmul_ns
                 FROM roofline WHERE source_id = {sid} AND model = 'matmul' AND bound = 'latency'
                 GROUP BY ALL ORDER BY gpu_ns DESC LIMIT 5"""
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
        return self.finding(
            "roofline", None, None, None, None, "; ".join(parts) + peaks,
            remedy_key=f"roofline:{top['bound']}", severity="info", source_id=sid, device_id=None, phase=phase,
            subject=top["phase"],
            metrics={"phases": {r["phase"]: {k: r.get(k) for k in (
                "bound", "roof", "pct_peak_flops", "pct_peak_bytes", "mfu_pct", "instances", "flops", "bytes",
                "gpu_ns", "tokens", "coverage_pct")} for r in rows},
                "latency_matmuls": lat, "latency_matmul_pct": tot},
            evidence=[q.evidence("phase_roofline", pq)] + ([q.evidence("roofline", lq)] if lat else []))

    def memory_pressure(self, s: Scope) -> Finding | None:
        """Device memory: the peak near the GPU's size, memory the allocator holds but does not use,
        and the allocator calling the driver (cudaMalloc / cudaFree) inside the repeated steps.
        Each part needs its own evidence over its threshold; the finding's title names only the
        parts found."""
        q, th = self.q, self.th
        sid, dev = s.source_id, s.device_id
        parts, heads, sev, metrics, evidence = [], [], [], {}, []
        share = time_ns = of_ns = None
        gib = 2 ** 30
        torch_alloc = False
        if q.has("memory_peaks"):
            pk = q.dicts(f"""SELECT allocator, peak_allocated_bytes, peak_reserved_bytes, pct_of_device, peak_ns, top_ops
                             FROM memory_peaks WHERE scope = 'device' AND source_id = {sid} AND device_id = {dev}
                             ORDER BY allocator = 'pytorch' DESC""")
        else:
            pk = []
        if pk:
            p = pk[0]
            pct = p["pct_of_device"]
            torch_alloc = p["allocator"] == "pytorch"
            metrics.update({"allocator": p["allocator"], "peak_allocated_bytes": p["peak_allocated_bytes"],
                            "peak_reserved_bytes": p["peak_reserved_bytes"], "pct_of_device": pct})
            if pct is not None and pct >= th["mem_peak_pct"]:
                top = ", ".join(f"{t['op']} {t['bytes'] / gib:.3g} GiB" for t in (p["top_ops"] or [])[:3])
                parts.append(f"peak {max(p['peak_reserved_bytes'] or 0, p['peak_allocated_bytes'] or 0) / gib:.4g} GiB = "
                             f"{fmt_pct(pct)} of the GPU's memory ({p['allocator']} allocator)"
                             + (f"; allocated inside the trace and live at the peak: {top}" if top else ""))
                heads.append(f"GPU memory peak at {fmt_pct(pct)} of the device's size")
                sev.append("high" if pct >= th["mem_peak_high_pct"] else "medium")
            frag = (p["peak_reserved_bytes"] or 0) - (p["peak_allocated_bytes"] or 0)
            if torch_alloc and frag >= th["mem_frag_gib"] * gib \
                    and frag >= 0.25 * (p["peak_reserved_bytes"] or 1):
                parts.append(f"the caching allocator reserved {frag / gib:.3g} GiB more than it ever had in use "
                             f"({fmt_pct(100 * frag / p['peak_reserved_bytes'])} of its peak reserve: fragmentation "
                             "or a cache kept from earlier shapes)")
                heads.append("the caching allocator reserves much more memory than it uses")
                sev.append("low")
            evidence.append(q.evidence("memory_peaks", f"""
                SELECT scope, phase, allocator, allocated_at_start, allocated_at_end, peak_allocated_bytes,
                       peak_reserved_bytes, pct_of_device, top_ops
                FROM memory_peaks WHERE source_id = {sid} AND device_id = {dev}
                ORDER BY peak_allocated_bytes DESC NULLS LAST"""))
        st = s.steady
        if st and st.get("method") != "whole" and st.get("steps"):
            w0, w1 = st["window_start_ns"], st["window_end_ns"]
            aq = f"""SELECT name, count(*) AS calls, sum(dur_ns)::BIGINT AS host_ns
                     FROM api_calls WHERE source_id = {sid} AND start_ns >= {w0} AND start_ns < {w1}
                       AND regexp_matches(name, '^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|hipMalloc|hipFree)')
                       AND NOT regexp_matches(name, 'Host|Async')
                     GROUP BY name ORDER BY host_ns DESC"""
            calls = q.dicts(aq)
            n = sum(c["calls"] for c in calls)
            host = sum(c["host_ns"] or 0 for c in calls)
            frees = sum(c["calls"] for c in calls if "Free" in c["name"])
            churn_share = _pct(host, s.window_ns)
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
                share, time_ns, of_ns = churn_share, host, s.window_ns
                metrics.update({"steady_allocator_calls": n, "steady_allocator_ns": host})
                evidence.append(q.evidence("api_calls", aq))
        if not parts:
            return None
        order = {x: i for i, x in enumerate(SEVERITIES)}
        head = "; ".join(heads)
        return self.finding(
            "memory_pressure", share, time_ns, of_ns, s, "; ".join(parts),
            severity=min(sev, key=order.get), source_id=sid, device_id=dev, phase=None,
            metrics=metrics, evidence=evidence, headline=head[:1].upper() + head[1:])

    def ncu_only_bounds(self, sid: int, unmatched: bool = False) -> list[Finding]:
        """An ncu source with no timeline in the store: classify its kernels by ncu's own time.
        ``unmatched``: the store has timeline sources; only the results of this source that no
        timeline kernel matched (`ncu_timeline_match`; the matched ones are reported with the
        timeline's kernels, `bounds`), shares of the time of those results."""
        q = self.q
        if not q.has("kernel_bounds"):
            return []
        cond = f"source_id = {sid}"
        of = "ncu-profiled time"
        if unmatched:
            if not q.has("ncu_timeline_match"):
                return []
            cond += (f" AND id NOT IN (SELECT ncu_id FROM ncu_timeline_match WHERE ncu_source_id = {sid}"
                     " AND match_quality <> 'unmatched')")
        hq = f"""SELECT short_name, count(*) AS ncu_launches, sum(dur_ns)::BIGINT AS total_ns,
                        100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER () AS time_pct,
                        mode(bound) AS bound, mode(bound_reason) AS bound_reason,
                        string_agg(DISTINCT bound, ',' ORDER BY bound) AS bounds,
                        avg(sm_pct) AS sm_pct, avg(memory_pct) AS memory_pct, avg(dram_pct) AS dram_pct,
                        mode(roofline_bound) AS roofline_bound, any_value(name) AS name
                 FROM kernel_bounds WHERE {cond} GROUP BY short_name ORDER BY total_ns DESC"""
        rows = q.dicts(hq)
        total = sum(r["total_ns"] or 0 for r in rows)
        out = []
        for r in rows:
            if r["bound"] is None or r["bound"] == "balanced" or (r["time_pct"] or 0) < self.th["bound_min_pct"]:
                continue
            f = self._bound_finding(r, sid, total, None, None,
                                    f"{cond} AND short_name = {lit(r['short_name'])}", of, [])
            if unmatched:
                f.summary += ("; no timeline kernel in the store matched these ncu results "
                              "(ncu_timeline_match), so the share is of this source's unmatched ncu time")
            out.append(f)
        return out

    def _bound_finding(self, r, sid, window_ns, phase, scope, kcond, of, evidence) -> Finding:
        """A memory/compute/latency_bound finding for the ncu results `kcond` selects, with which
        latency (`kernel_latency`: the cause named for most of them, its evidence and remedy)."""
        bound, reason = r["bound"], r["bound_reason"]
        code = f"{bound}_bound"
        kq = f"""SELECT source_id, id, short_name, dur_ns, bound, bound_reason, dominant, sm_pct, memory_pct,
                        dram_pct, memory_level, waves, achieved_occupancy_pct, arithmetic_intensity, ridge,
                        roofline_bound, ncu_bottleneck
                 FROM kernel_bounds WHERE {kcond} ORDER BY source_id, id"""
        lq = f"""SELECT source_id, id, short_name, cause, cause_evidence, top_stall, top_stall_pct, stall_breakdown,
                        threads_per_inst, sectors_ratio, theoretical_occupancy_pct, occupancy_limiter, missing, remedy
                 FROM kernel_latency WHERE {kcond} ORDER BY source_id, id"""
        evidence = [*evidence, self.q.evidence("kernel_bounds", kq)]
        krows = self.q.dicts(kq)
        lrows = self.q.dicts(lq) if self.q.has("kernel_latency") else []
        causes = [x["cause"] for x in lrows if x["cause"]]
        cause = max(sorted(set(causes)), key=causes.count) if causes else None
        lat = ""
        if cause:
            x = next(x for x in lrows if x["cause"] == cause)
            lat = f"; which latency: {cause} ({x['cause_evidence']})"
            evidence.append(self.q.evidence("kernel_latency", lq))
        elif bound == "latency" and lrows and lrows[0]["missing"]:
            lat = f"; to name the latency, collect: {lrows[0]['missing']}"
            evidence.append(self.q.evidence("kernel_latency", lq))
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
        f = self.finding(
            code, _pct(r["total_ns"], window_ns), r["total_ns"], window_ns, scope,
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

    def low_overlap(self, s: Scope) -> Finding | None:
        q = self.q
        oq = f"SELECT * FROM overlap WHERE {self._where(s)} AND kind = 'comm'"
        o = q.one(oq)
        if not o or not o["kind_ns"]:
            return None
        share = _pct(o["exposed_ns"], s.window_ns) or 0
        if (o["overlap_pct"] or 0) >= self.th["overlap_low_pct"] or share < self.th["overlap_min_pct"]:
            return None
        ev = [q.evidence("overlap", oq)]
        wait_ns = 0
        if q.has("rank_imbalance"):
            wq = f"""SELECT rank, count(*) AS collectives, sum(dur_ns)::BIGINT AS comm_kernel_ns,
                            sum(wait_ns)::BIGINT AS wait_ns, sum(comm_ns)::BIGINT AS transfer_ns
                     FROM rank_imbalance WHERE source_id = {s.source_id} AND device_id = {s.device_id}
                     GROUP BY rank"""
            w = q.one(wq)
            if w:
                wait_ns = w["wait_ns"] or 0
                ev.append(q.evidence("rank_imbalance", wq))
        waiting = min(wait_ns, o["exposed_ns"])
        key = "low_overlap:waiting" if waiting > o["exposed_ns"] / 2 else "low_overlap"
        wtxt = (f"; {fmt_ns(wait_ns)} of the collectives' time is waiting for other ranks "
                f"(rank_imbalance)") if wait_ns else ""
        return self.finding(
            "low_overlap", share, o["exposed_ns"], s.window_ns, s,
            f"communication {fmt_ns(o['kind_ns'])}, {fmt_pct(o['overlap_pct'])} overlapped with compute: "
            f"{fmt_ns(o['exposed_ns'])} exposed ({fmt_pct(share)} of the window){wtxt}",
            remedy_key=key,
            metrics={"comm_ns": o["kind_ns"], "overlap_pct": o["overlap_pct"], "exposed_ns": o["exposed_ns"],
                     "wait_ns": wait_ns},
            evidence=ev)

    def rank_imbalance(self, windows: dict, sources: set[int] | None) -> list[Finding]:
        """windows: GPU window per source_id (a source per rank) and per (source_id, device_id)
        (a process per rank: its GPU's window)."""
        q = self.q
        if not q.has("rank_imbalance"):
            return []

        def win_of(r):
            return windows.get((r["source_id"], r["device_id"]) if r["pid"] is not None else r["source_id"])

        # the collectives inside the steady window of the rank's GPU (start-up apart: NCCL's
        # first collectives wait for every rank's initialisation, not for an imbalance)
        steady = """(SELECT r.* FROM rank_imbalance r
                     JOIN ranks k ON k.source_id = r.source_id AND k.pid IS NOT DISTINCT FROM r.pid
                     JOIN steady_state s ON s.source_id = r.source_id AND s.device_id = r.device_id
                     WHERE r.arrival_ns - coalesce(k.clock_offset_ns, 0) >= s.window_start_ns
                       AND r.arrival_ns - coalesce(k.clock_offset_ns, 0) < s.window_end_ns)"""
        pq = f"""SELECT job_id, rank, source_id, pid, device_id, count(*) AS collectives, sum(wait_ns)::BIGINT AS wait_ns,
                       sum(comm_ns)::BIGINT AS transfer_ns,
                       sum(dur_ns)::BIGINT AS comm_kernel_ns, max(skew_ns) AS max_skew_ns,
                       count(*) FILTER (WHERE slowest_rank = rank) AS times_slowest
                FROM {steady} GROUP BY ALL ORDER BY job_id, rank"""
        out = []
        by_job: dict[int, list[dict]] = {}
        for r in q.dicts(pq):
            by_job.setdefault(r["job_id"], []).append(r)
        for job, ranks in by_job.items():
            if sources is not None and not any(r["source_id"] in sources for r in ranks):
                continue
            waiter = max(ranks, key=lambda r: (_pct(r["wait_ns"], win_of(r)) or 0))
            win = win_of(waiter)
            share = _pct(waiter["wait_ns"], win) or 0
            if share < self.th["imbalance_pct"]:
                continue
            # the rank the waiter waited for: of the others, the one that arrived last most often
            slow = max((r for r in ranks if r is not waiter), key=lambda r: r["times_slowest"], default=waiter)
            n_coll = waiter["collectives"]
            jq = f"""SELECT job_id, rank, source_id, pid, device_id, count(*) AS collectives, sum(wait_ns)::BIGINT AS wait_ns,
                            sum(dur_ns)::BIGINT AS comm_kernel_ns, max(skew_ns) AS max_skew_ns,
                            count(*) FILTER (WHERE slowest_rank = rank) AS times_slowest
                     FROM {steady} WHERE job_id = {job} GROUP BY ALL ORDER BY rank"""
            tq = f"""SELECT name, seq, rank, arrival_ns, dur_ns, wait_ns, skew_ns, comm_ns, slowest_rank
                     FROM {steady} WHERE job_id = {job} ORDER BY skew_ns DESC, seq, rank LIMIT 10"""
            # what the slow rank was doing while it held the others back: its time on the steps'
            # critical path, by what it was doing (its compute, its host's idle causes)
            doing, doing_txt, cev = {}, "", []
            if q.has("critical_path"):
                cq = f"""SELECT kind, category, sum(ns)::BIGINT AS ns, count(DISTINCT step) AS steps,
                                100.0 * sum(ns) / (SELECT sum(ns) FROM critical_path WHERE job_id = {job}) AS path_pct
                         FROM critical_path WHERE job_id = {job} AND rank = {slow['rank']} AND kind <> 'communication'
                         GROUP BY ALL ORDER BY ns DESC, kind, category"""
                _c, crows = q.run(cq)
                doing = {(k if c is None else f"{k}:{c}"): n for k, c, n, _s, _p in crows}
                if crows:
                    k, c, n, _s, pct = crows[0]
                    what = "its GPU computing" if k == "compute" else f"its GPU idle while its host was in '{c}'"
                    doing_txt = (f"; on the steps' critical path (`critical_path`) it held {fmt_ns(sum(doing.values()))}, "
                                 f"most with {what}: {fmt_ns(n)} ({fmt_pct(pct)} of the path)")
                    cev = [q.evidence("critical_path", cq)]
            out.append(self.finding(
                "rank_imbalance", share, waiter["wait_ns"], win, None,
                f"rank {waiter['rank']} waited {fmt_ns(waiter['wait_ns'])} in {plural(n_coll, 'collective')} "
                f"({fmt_pct(share)} of its steady window) for rank {slow['rank']}, which arrived last in "
                f"{slow['times_slowest']} of {slow['collectives']}{doing_txt}; largest skew {fmt_ns(slow['max_skew_ns'])}; "
                f"the transfers themselves took {fmt_ns(waiter['transfer_ns'])} (`collectives` has each one's "
                f"bytes and bus bandwidth)",
                source_id=waiter["source_id"], device_id=waiter["device_id"] if waiter["pid"] is not None else None,
                phase=None, subject=f"job {job}",
                metrics={"job_id": job, "waiting_rank": waiter["rank"], "wait_ns": waiter["wait_ns"],
                         "transfer_ns": waiter["transfer_ns"],
                         "slowest_rank": slow["rank"], "times_slowest": slow["times_slowest"],
                         "collectives": n_coll, "max_skew_ns": slow["max_skew_ns"], "slowest_rank_doing_ns": doing,
                         "ranks": {str(r["rank"]): {"source_id": r["source_id"], "pid": r["pid"],
                                                    "device_id": r["device_id"], "wait_ns": r["wait_ns"],
                                                    "times_slowest": r["times_slowest"]} for r in ranks}},
                evidence=[q.evidence("rank_imbalance", jq), q.evidence("rank_imbalance", tq)] + cev))
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
    rules = _Rules(q, th)
    srcs = q.dicts("SELECT source_id, path, format, rank, world_size, start_ns, end_ns FROM sources ORDER BY source_id")
    if source_id is not None:
        if not any(s["source_id"] == source_id for s in srcs):
            raise DiagnoseError(f"no source {source_id} in {store.path} "
                                f"(sources: {', '.join(str(s['source_id']) for s in srcs) or 'none'})")
        srcs = [s for s in srcs if s["source_id"] == source_id]
    timeline = {r["source_id"] for r in q.dicts("SELECT DISTINCT source_id FROM gpu_activity")}
    findings: list[Finding] = []
    devices: list[dict] = []
    windows: dict[int, int] = {}
    if phase is not None:
        have = q.dicts(f"SELECT DISTINCT source_id FROM phase_instances WHERE phase = {lit(phase)}") \
            if q.has("phase_instances") else []
        if not have:
            known = [r["phase"] for r in q.dicts("SELECT DISTINCT phase FROM phase_instances ORDER BY phase")] \
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
                findings += rules.ncu_only_bounds(sid, unmatched=bool(timeline))
            continue
        if sid not in timeline:
            findings.append(rules.finding(
                "no_gpu_data", None, None, None, None,
                f"{src['path']}: no kernels, memcpy or memset in this {src['format']} source",
                source_id=sid, device_id=None, phase=phase))
            continue
        if phase is None:
            scopes = _source_scopes(q, sid, th["launch_gap_ns"])
        else:
            scopes = [_phase_scope(r) for r in _phase_rows(q, sid, phase)]
        windows[sid] = sum(s.window_ns for s in scopes)
        for s in scopes:
            devices.append({"source_id": sid, "device_id": s.device_id, "phase": s.phase,
                            "window_ns": s.window_ns, "busy_ns": s.busy_ns,
                            "utilization_pct": _round(s.utilization_pct), "kernels": s.kernels,
                            "kernel_ns": s.kernel_ns, "memcpy_ns": s.memcpy_ns,
                            "idle_ns": {c: ns for c, ns in s.idle.items()}, "instances": s.instances})
            if phase is None:  # the steady window: from where its idle time went
                found = [rules.low_utilization(s), *attribution_findings(rules, s), rules.low_overlap(s),
                         rules.startup(s), rules.memory_pressure(s)]
            else:
                found = [rules.low_utilization(s), rules.launch_or_host_bound(s), rules.sync_stall(s),
                         rules.runtime_compile(s), rules.transfer_bound(s), rules.startup(s)]
            findings += [f for f in found if f is not None]
        if not scopes:
            continue
        sc = scopes[0] if len(scopes) == 1 else None
        hk = rules.hot_kernel(scopes[0], windows[sid])
        if hk:
            hk.device_id = sc.device_id if sc else None
            findings.append(hk)
        findings += rules.bounds(sid, windows[sid], phase, sc)
        rf = rules.roofline(sid, phase)
        if rf:
            findings.append(rf)
    if phase is None:
        all_windows: dict = {r["source_id"]: r["w"] for r in q.dicts(
            "SELECT source_id, sum(window_ns)::BIGINT AS w FROM steady_state GROUP BY source_id")}
        all_windows.update({(r["source_id"], r["device_id"]): r["window_ns"] for r in q.dicts(
            "SELECT source_id, device_id, window_ns FROM steady_state")})
        findings += rules.rank_imbalance(all_windows, None if source_id is None else {source_id})
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: (f.source_id if f.source_id is not None else -1,
                                 order[f.severity], -(f.share_pct or 0), f.code))
    return Diagnosis(db=store.path, thresholds=th, phase=phase,
                     sources=[{k: src[k] for k in ("source_id", "path", "format", "rank", "world_size")}
                              for src in srcs],
                     devices=devices, findings=findings)


