"""Findings from where the steady state's GPU time went (`time_breakdown`, `idle_attribution`):
one finding per idle category that holds at least `cause_min_pct` % of the steady window, its
share that category's share, its evidence the gaps and host operations it was made of, and its
remedy chosen from what those operations are."""

from __future__ import annotations

import re

from .model import Finding, fmt_ns, fmt_pct, plural
from .statements import statement

# idle category -> finding code (transfer_bound also takes the exposed memcpy busy time)
CODE = {"launch": "launch_bound", "sync": "sync_stall", "compile": "runtime_compile", "copy": "transfer_bound",
        "data": "input_bound", "cpu_op": "host_bound", "untraced": "host_untraced", "rank_wait": "rank_wait",
        "queued": "gpu_wait", "unknown": "unattributed"}

WHAT = {"launch": "launching kernels (launch API calls and the framework's dispatch between them)",
        "sync": "blocked in a synchronizing call, or running its own code after a sync drained the GPU",
        "compile": "loading or compiling GPU code",
        "copy": "copying (blocking / pageable copies)",
        "data": "in the input pipeline",
        "cpu_op": "in named host operations",
        "untraced": "running code no profiler traced",
        "rank_wait": "waiting for other ranks",
        "queued": "ahead (the next operation was already queued)",
        "unknown": "untraced: the next operation's launch is not in the trace"}

_TORCH_COMPILE = re.compile(r"dynamo|inductor|aot_autograd|triton", re.IGNORECASE)
_LIBRARY = re.compile(r"cudnn|cublas|miopen|hipblas|nvrtc|cuLibraryLoad|cuModuleLoad", re.IGNORECASE)
_DATALOADER = re.compile(r"DataLoader|pin_memory", re.IGNORECASE)


def attribution_findings(rules, s) -> list[Finding]:
    """The findings of one source scope (a GPU's steady window) from its time_breakdown."""
    q, th = rules.q, rules.th
    if not q.has("time_breakdown"):
        return []
    sid, dev = s.source_id, s.device_id
    rows = q.dicts(statement("attribution", "breakdown", sid=sid, dev=dev))
    if not rows:
        return []
    w0, w1, win = rows[0]["part_start_ns"], rows[0]["part_end_ns"], rows[0]["part_ns"]
    idle = {r["category"]: r["ns"] for r in rows if r["state"] == "idle"}
    busy = {r["category"]: r["ns"] for r in rows if r["state"] == "busy"}
    where = {"sid": sid, "dev": dev, "w0": w0, "w1": w1}
    out = []
    if idle.get("queued"):  # queued work: only the waits of at least kernel_wait_ns (dependencies);
        # shorter ones are the GPU's own latency between queued kernels (e.g. inside a CUDA graph)
        idle["queued"] = q.one(statement("attribution", "queued", **where,
                                         kernel_wait_ns=int(th["kernel_wait_ns"])))["ns"]
    for cat, ns in idle.items():
        time_ns = ns + (busy.get("memcpy", 0) if cat == "copy" else 0)
        share = 100.0 * time_ns / win if win else None
        if share is None or share < th["cause_min_pct"]:
            continue
        out.append(_finding(rules, s, cat, time_ns, ns, share, win, where))
    if "copy" not in idle and busy.get("memcpy"):  # copies the host did not wait for, exposed
        share = 100.0 * busy["memcpy"] / win
        if share >= th["cause_min_pct"]:
            out.append(_finding(rules, s, "copy", busy["memcpy"], 0, share, win, where))
    return out


def _finding(rules, s, cat, time_ns, idle_ns, share, win, where) -> Finding:
    q = rules.q
    code = CODE[cat]
    ops_q = statement("attribution", "host_ops", **where, category=cat)
    gaps_q = statement("attribution", "gaps", **where, category=cat)
    ops = q.dicts(ops_q) if idle_ns else []
    stats = q.one(statement("attribution", "gap_stats", **where, category=cat)) if idle_ns else None
    named = [o for o in ops if o["host_op"]]
    top = ", ".join(f"{o['host_op']} {fmt_ns(o['ns'])}" for o in named[:3])
    n_gaps = (stats or {}).get("gaps") or 0
    med = (stats or {}).get("med_gap_ns")
    summary = (f"the GPU sat idle {fmt_ns(idle_ns)} ({fmt_pct(100.0 * idle_ns / win)} of the steady window) "
               f"while the launching thread was {WHAT[cat]}")
    if n_gaps:
        summary += f", in {plural(n_gaps, 'gap')} (median gap {fmt_ns(med)})"
    if cat == "copy":
        summary = (f"copies took {fmt_ns(time_ns)} ({fmt_pct(share)} of the steady window): "
                   f"{fmt_ns(time_ns - idle_ns)} of memcpy no kernel overlapped, and {fmt_ns(idle_ns)} of idle "
                   "time while the host was in blocking copies")
    if top:
        summary += f"; most in {top}"
    remedy_key = code
    names = " ".join(o["host_op"] for o in named)
    if cat == "compile":
        remedy_key = ("runtime_compile:torch_compile" if _TORCH_COMPILE.search(names)
                      else "runtime_compile:library" if _LIBRARY.search(names) else "runtime_compile")
    elif cat == "data":
        remedy_key = "input_bound" if _DATALOADER.search(names) else "input_bound:named"
    elif cat == "cpu_op":  # mostly in the driver's allocator: keep memory across steps
        alloc = q.one(statement("attribution", "alloc_share", **where, category=cat))["share"] if idle_ns else 0
        remedy_key = "host_bound:allocator" if alloc > 0.5 else "host_bound:named"
    ev = []
    if idle_ns:
        ev = [q.evidence("idle_attribution", ops_q), q.evidence("idle_attribution", gaps_q)]
    if cat == "launch" and q.has("launch_summary"):
        ev.append(rules.evidence("launch_summary", "attribution", "launch_summary", sid=s.source_id, dev=s.device_id))
    if cat == "sync" and q.has("sync_stalls"):
        ev.append(rules.evidence("sync_stalls", "attribution", "sync_stalls", sid=s.source_id))
    if cat == "copy" and q.has("memop_time_summary"):
        ev.append(rules.evidence("memop_time_summary", "transfer_bound", "memop_time_summary", sid=s.source_id))
    ev.append(rules.evidence("time_breakdown", "attribution", "time_breakdown", sid=s.source_id, dev=s.device_id))
    metrics = {"category": cat, "idle_ns": idle_ns, "gaps": n_gaps, "med_gap_ns": med,
               "top_host_ops": [{"host_op": o["host_op"], "ns": o["ns"], "gaps": o["gaps"]} for o in ops[:5]]}
    phases = None
    if cat == "launch":  # the launches' own figures, and which phases are launch-bound
        metrics.update({"short_pct": s.short_pct, "short_kernels": s.short_kernels, "launched": s.launched,
                        "med_kernel_ns": s.med_kernel_ns, "med_latency_ns": s.med_latency_ns,
                        "launch_calls": s.launch_calls, "graph_launches": s.graph_launches})
        phases = rules.phase_verdicts(s, rules.is_launch_bound)
        summary += rules.phases_line(phases, "launch-bound")
    return rules.finding(code, share, time_ns, win, s, summary, remedy_key=remedy_key, of="steady window",
                         metrics=metrics, phases=phases, evidence=ev)
