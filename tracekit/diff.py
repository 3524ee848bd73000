"""`tracekit diff`: before/after of two captures (or two sources of one store, or two phases).

A *side* is (store, source_id, phase): the GPU work of one timeline source, or only the work
launched inside the instances of one phase of it (e.g. ``eager_step`` vs ``graph_step`` of one
capture). For each side the numbers come from the views:

* summary  — GPU window, busy time, utilization, idle time by cause (`gpu_utilization`,
  `idle_gaps`; for a phase `phase_idle`), kernels and kernel time, launch calls, host syncs;
  per instance too when the side is a phase (or the source has a phase in common with the other);
* kernels  — per kernel base name (`kernels.short_name`): launches, total and mean time, from
  `hotspots` (for a phase: `phase_ops`); `status` is 'new' (only in NEW), 'vanished' (only in
  BASE), 'changed'/'same', or 'in_graphs' (only on one side, and the other side is a graph-level
  trace: its graphs are whole-graph rows, `tk_is_graph_span`, whose kernels were not traced one
  by one); kernel counts and time never include whole-graph rows (they are reported apart);
* phases   — per phase name present on either side (`phases`, `phase_idle`; names matched
  without '#N' and without emit_nvtx's per-call ids, `tk_phase`): instances, time per instance,
  GPU busy and host_wait idle per instance; largest change of wall time per instance first;
* findings — the findings of `tracekit diagnose` on each side, matched by code and subject:
  'resolved', 'new', 'better' / 'worse' (share at stake down / up by more than 1 point), 'same';
  largest change of share first.

Changes are NEW - BASE; ``change_pct`` = 100 * (NEW - BASE) / BASE. The text and Markdown show
at most ``max_rows`` rows per section (then "and K more"); JSON has every row.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import __version__, queries
from .names import printable
from .diagnose import (IDLE_CAUSES, DiagnoseError, Diagnosis, Query, apply_view_params, cell, diagnose, jsonable, table,
                       fmt_ns, fmt_pct, resolve_thresholds)


@dataclass
class Side:
    store: object
    source_id: int | None
    phase: str | None
    label: str


def _q(q: Query, name: str, **params) -> list[dict]:
    return queries.dicts(q.store, "diff", name, **params)


def _q1(q: Query, name: str, **params) -> dict:
    return queries.one(q.store, "diff", name, **params) or {}


def _timeline_sources(q: Query) -> list[int]:
    return [r["source_id"] for r in _q(q, "timeline_sources")]


def resolve_source(store, source_id: int | None, which: str) -> int:
    q = Query(store)
    tl = _timeline_sources(q)
    if source_id is not None:
        if source_id not in tl:
            raise DiagnoseError(f"{which}: source {source_id} of {store.path} has no GPU activity "
                                f"(sources with GPU work: {', '.join(map(str, tl)) or 'none'})")
        return source_id
    if len(tl) == 1:
        return tl[0]
    if not tl:
        raise DiagnoseError(f"{which}: {store.path} has no source with GPU activity")
    raise DiagnoseError(f"{which}: {store.path} has {len(tl)} sources with GPU work "
                        f"({', '.join(map(str, tl))}); pick one with --{which}-source")


def _summary(q: Query, sid: int, phase: str | None) -> dict:
    if phase is None:
        u = _q(q, "utilization", sid=sid)
        gaps = {r["cause"]: r for r in _q(q, "device_gaps", sid=sid)}
        ls = _q(q, "launch_summary", sid=sid)
        launches = _q1(q, "launches", sid=sid)
        ks = _q1(q, "kernels", sid=sid)  # kernel executions apart from whole-graph rows
        sync = _q1(q, "syncs", sid=sid)
        window = sum(r["window_ns"] for r in u)
        busy = sum(r["busy_ns"] for r in u)
        out = {
            "window_ns": window, "busy_ns": busy, "utilization_pct": 100.0 * busy / window if window else None,
            "kernels": ks.get("kernels") or 0, "kernel_ns": ks.get("kernel_ns") or 0,
            "graph_spans": ks.get("spans") or 0, "graph_span_ns": ks.get("span_ns") or 0,
            "memcpy_ns": sum(r["memcpy_ns"] for r in u),
            "launch_calls": launches.get("n"), "graph_launches": launches.get("g"),
            "short_kernels": sum(r["short_kernels"] for r in ls),
            "host_syncs": sync.get("calls") or 0, "host_sync_ns": sync.get("total_ns") or 0,
            "instances": None,
        }
        for c in IDLE_CAUSES:
            out[f"{c}_ns"] = gaps[c]["ns"] if c in gaps else 0
            out[f"{c}_gaps"] = gaps[c]["n"] if c in gaps else 0
        return out
    rows = _q(q, "phase_idle", sid=sid, phase=phase)
    if not rows:
        raise DiagnoseError(f"no phase {phase!r} with GPU work in source {sid}")
    sync = _q1(q, "phase_syncs", sid=sid, phase=phase)
    window = sum(r["span_ns"] for r in rows)
    busy = sum(r["busy_ns"] for r in rows)
    ks = _q1(q, "phase_kernels", sid=sid, phase=phase)
    out = {
        "window_ns": window, "busy_ns": busy, "utilization_pct": 100.0 * busy / window if window else None,
        "kernels": ks.get("kernels") or 0, "kernel_ns": ks.get("kernel_ns") or 0,
        "graph_spans": ks.get("spans") or 0, "graph_span_ns": ks.get("span_ns") or 0,
        "memcpy_ns": sum(r["memcpy_ns"] or 0 for r in rows),
        "launch_calls": sum(r["launch_calls"] or 0 for r in rows),
        "graph_launches": sum(r["graph_launches"] or 0 for r in rows),
        "short_kernels": sum(r["short_kernels"] or 0 for r in rows),
        "host_syncs": sync.get("calls") or 0, "host_sync_ns": sync.get("total_ns") or 0,
        "instances": rows[0]["instances"],
    }
    for c in IDLE_CAUSES:
        out[f"{c}_ns"] = sum(r[f"{c}_ns"] or 0 for r in rows)
    return out


SUMMARY_METRICS = (
    ("window_ns", "GPU window", "ns"), ("busy_ns", "GPU busy", "ns"), ("utilization_pct", "utilization", "pct"),
    ("kernels", "kernels", "n"), ("kernel_ns", "kernel time", "ns"),
    ("graph_spans", "whole-graph rows (kernels not traced one by one)", "n"),
    ("graph_span_ns", "whole-graph rows' time", "ns"), ("memcpy_ns", "memcpy time", "ns"),
    ("launch_calls", "launch calls", "n"), ("graph_launches", "graph launches", "n"),
    ("short_kernels", "kernels shorter than their launch", "n"),
    ("host_wait_ns", "idle: host_wait (launch gaps)", "ns"), ("sync_wait_ns", "idle: sync_wait", "ns"),
    ("runtime_compile_ns", "idle: runtime_compile", "ns"),
    ("kernel_wait_ns", "idle: kernel_wait", "ns"), ("other_ns", "idle: other", "ns"),
    ("host_syncs", "host sync calls", "n"), ("host_sync_ns", "host blocked in syncs", "ns"),
    ("instances", "phase instances", "n"),
)


def _kernels(q: Query, sid: int, phase: str | None) -> dict[str, dict]:
    if phase is None:
        rows = _q(q, "kernel_names", sid=sid)
    else:
        rows = _q(q, "phase_kernel_names", sid=sid, phase=phase)
    return {r["short_name"]: r for r in rows}


def _phases(q: Query, sid: int) -> dict[str, dict]:
    if not q.has("phase_idle"):
        return {}
    out = {}
    for r in _q(q, "phases", sid=sid):
        out.setdefault(r["phase"], r)
    return out


def _change(a, b):
    if a is None or b is None:
        return None, None
    d = b - a
    return d, (100.0 * d / a if a else None)


def diff(base: Side, new: Side, thresholds: dict[str, float] | None = None, evidence_rows: int = 5) -> dict:
    th = resolve_thresholds(thresholds)
    for side in (base, new):
        apply_view_params(side.store, th, thresholds)
    qb, qn = Query(base.store, evidence_rows), Query(new.store, evidence_rows)
    sb, sn = _summary(qb, base.source_id, base.phase), _summary(qn, new.source_id, new.phase)
    summary = []
    for key, label, unit in SUMMARY_METRICS:
        a, b = sb.get(key), sn.get(key)
        if a is None and b is None:
            continue
        d, pct = _change(a, b)
        summary.append({"metric": key, "label": label, "unit": unit, "base": a, "new": b, "change": d,
                        "change_pct": pct})
    # per instance, when both sides are phases
    if sb.get("instances") and sn.get("instances"):
        for key in ("window_ns", "busy_ns", "host_wait_ns", "kernels", "launch_calls"):
            a, b = sb[key] / sb["instances"], sn[key] / sn["instances"]
            d, pct = _change(a, b)
            summary.append({"metric": f"{key}_per_instance", "label": f"{dict((k, l) for k, l, _ in SUMMARY_METRICS)[key]} per instance",
                            "unit": "ns" if key.endswith("_ns") else "n", "base": a, "new": b, "change": d,
                            "change_pct": pct})

    kb, kn = _kernels(qb, base.source_id, base.phase), _kernels(qn, new.source_id, new.phase)
    kernels = []
    for name in set(kb) | set(kn):
        a, b = kb.get(name), kn.get(name)
        ca, cb = (a or {}).get("count", 0), (b or {}).get("count", 0)
        ta, tb = (a or {}).get("total_ns", 0), (b or {}).get("total_ns", 0)
        status = "new" if a is None else "vanished" if b is None else ("same" if (ca, ta) == (cb, tb) else "changed")
        if (status == "vanished" and sn["graph_spans"]) or (status == "new" and sb["graph_spans"]):
            status = "in_graphs"  # the other side traced whole graphs, not their kernels
        kernels.append({
            "short_name": name, "status": status, "base_count": ca, "new_count": cb, "count_change": cb - ca,
            "base_ns": ta, "new_ns": tb, "time_change_ns": tb - ta,
            "time_change_pct": 100.0 * (tb - ta) / ta if ta else None,
            "base_avg_ns": ta / ca if ca else None, "new_avg_ns": tb / cb if cb else None,
        })
    kernels.sort(key=lambda k: (-abs(k["time_change_ns"]), k["short_name"]))

    phases = []
    if base.phase is None and new.phase is None:
        pb, pn = _phases(qb, base.source_id), _phases(qn, new.source_id)
        for name in sorted(set(pb) | set(pn), key=lambda p: -max((pb.get(p) or {}).get("wall_ns") or 0,
                                                                  (pn.get(p) or {}).get("wall_ns") or 0)):
            a, b = pb.get(name) or {}, pn.get(name) or {}
            row = {"phase": name, "status": "new" if not a else "vanished" if not b else "both"}
            for key in ("instances", "wall_ns", "span_ns", "busy_ns", "host_wait_ns", "kernels", "kernel_ns",
                        "launch_calls"):
                row[f"base_{key}"], row[f"new_{key}"] = a.get(key), b.get(key)
            for key in ("wall_ns", "busy_ns", "host_wait_ns", "kernels"):
                va = a[key] / a["instances"] if a.get(key) is not None and a.get("instances") else None
                vb = b[key] / b["instances"] if b.get(key) is not None and b.get("instances") else None
                row[f"base_{key}_per_instance"], row[f"new_{key}_per_instance"] = va, vb
                row[f"{key}_per_instance_change_pct"] = _change(va, vb)[1]
            phases.append(row)
        phases.sort(key=lambda p: -_phase_change(p))

    db_ = diagnose(base.store, base.source_id, base.phase, thresholds, evidence_rows)
    dn_ = diagnose(new.store, new.source_id, new.phase, thresholds, evidence_rows)
    findings = _finding_changes(db_, dn_, base.source_id, new.source_id)
    return {
        "tracekit_version": __version__,
        "base": {"db": base.store.path, "source_id": base.source_id, "phase": base.phase, "label": base.label},
        "new": {"db": new.store.path, "source_id": new.source_id, "phase": new.phase, "label": new.label},
        "summary": [{k: jsonable(v) for k, v in r.items()} for r in summary],
        "kernels": kernels, "phases": phases, "findings": findings,
        "thresholds": th,
    }


def _phase_change(p: dict) -> float:
    """How much a phase changed: |new - base| wall time per instance (a phase on one side only:
    its wall time per instance)."""
    a, b = p["base_wall_ns_per_instance"], p["new_wall_ns_per_instance"]
    return abs((b or 0) - (a or 0))


def _finding_changes(db_: Diagnosis, dn_: Diagnosis, sb: int, sn: int) -> list[dict]:
    def keyed(d: Diagnosis, sid):
        out = {}
        for f in d.findings:
            if f.source_id != sid and f.code != "rank_imbalance":
                continue
            out.setdefault((f.code, f.subject), f)
        return out
    fb, fn = keyed(db_, sb), keyed(dn_, sn)
    rows = []
    for k in sorted(set(fb) | set(fn), key=lambda k: (k[0], k[1] or "")):
        a, b = fb.get(k), fn.get(k)
        if a is None:
            status = "new"
        elif b is None:
            status = "resolved"
        else:
            d = (b.share_pct or 0) - (a.share_pct or 0)
            status = "worse" if d > 1 else "better" if d < -1 else "same"
        rows.append({
            "code": k[0], "subject": k[1], "status": status,
            "base_severity": a.severity if a else None, "new_severity": b.severity if b else None,
            "base_share_pct": a.share_pct if a else None, "new_share_pct": b.share_pct if b else None,
            "base_time_ns": a.time_ns if a else None, "new_time_ns": b.time_ns if b else None,
            "base_summary": a.summary if a else None, "new_summary": b.summary if b else None,
        })
    rows.sort(key=lambda r: -abs((r["new_share_pct"] or 0) - (r["base_share_pct"] or 0)))
    return rows


# --------------------------------------------------------------------------------------------
# rendering


def _fmt(v, unit):
    if v is None:
        return "—"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "pct":
        return fmt_pct(v)
    return f"{v:,.1f}" if isinstance(v, float) and not float(v).is_integer() else f"{int(v):,}"


def _chg(d, pct, unit):
    if d is None:
        return "—"
    if unit == "pct":
        s = f"{d:+.1f} pts"
    else:
        s = ("+" if d > 0 else "") + _fmt(d, unit)
    if pct is not None and unit != "pct":
        s += f" ({pct:+.1f} %)"
    return s


def _rows(r: dict, max_rows: int):
    summ = [[x["label"], _fmt(x["base"], x["unit"]), _fmt(x["new"], x["unit"]),
             _chg(x["change"], x["change_pct"], x["unit"])] for x in r["summary"]]
    kern = [[k["status"], k["short_name"], f"{k['base_count']:,}", f"{k['new_count']:,}",
             fmt_ns(k["base_ns"]), fmt_ns(k["new_ns"]), _chg(k["time_change_ns"], k["time_change_pct"], "ns")]
            for k in r["kernels"][:max_rows]]
    ph = [[p["phase"], p["status"], cell(p["base_instances"]), cell(p["new_instances"]),
           _fmt(p["base_wall_ns_per_instance"], "ns"), _fmt(p["new_wall_ns_per_instance"], "ns"),
           _fmt(p["base_busy_ns_per_instance"], "ns"), _fmt(p["new_busy_ns_per_instance"], "ns"),
           _fmt(p["base_host_wait_ns_per_instance"], "ns"), _fmt(p["new_host_wait_ns_per_instance"], "ns")]
          for p in r["phases"][:max_rows]]
    fnd = [[f["code"], f["subject"] or "", f["status"],
            f"{f['base_severity']} {fmt_pct(f['base_share_pct'])}" if f["base_severity"] else "—",
            f"{f['new_severity']} {fmt_pct(f['new_share_pct'])}" if f["new_severity"] else "—"]
           for f in r["findings"][:max_rows]]
    return summ, kern, ph, fnd


def _more(r: dict, section: str, max_rows: int) -> list[str]:
    """The line after a capped section: how many rows it left out."""
    k = len(r[section]) - max_rows
    return [f"... and {k:,} more {section[:-1] if k == 1 else section} (--format json lists all)"] if k > 0 else []


SUMMARY_COLS = ["metric", "base", "new", "change"]
KERNEL_COLS = ["status", "kernel", "base n", "new n", "base time", "new time", "change"]
PHASE_COLS = ["phase", "on", "base n", "new n", "base wall/inst", "new wall/inst", "base busy/inst",
              "new busy/inst", "base host_wait/inst", "new host_wait/inst"]
FINDING_COLS = ["finding", "subject", "change", "base", "new"]


def _side_label(s: dict) -> str:
    return (f"{s['db']} source {s['source_id']}" + (f" phase {s['phase']}" if s["phase"] else ""))


def to_text(r: dict, max_rows: int = 25) -> str:
    """The report as text: at most ``max_rows`` rows per section (largest changes first)."""
    summ, kern, ph, fnd = _rows(r, max_rows)
    nk = {s: sum(1 for k in r["kernels"] if k["status"] == s)
          for s in ("new", "vanished", "changed", "same", "in_graphs")}
    out = ["tracekit diff", f"  base: {_side_label(r['base'])}", f"  new:  {_side_label(r['new'])}", ""]
    out += table(SUMMARY_COLS, summ, 52)
    out += ["", f"kernels (by base name): {nk['new']} new, {nk['vanished']} vanished, {nk['changed']} changed, "
                f"{nk['same']} same" + (f", {nk['in_graphs']} inside whole-graph rows of the other side "
                                        "(traced per graph, not per kernel)" if nk["in_graphs"] else "")
             + "; largest time changes first"]
    out += table(KERNEL_COLS, kern, 44) + _more(r, "kernels", max_rows)
    if ph:
        out += (["", "phases (per instance; largest changes first)"] + table(PHASE_COLS, ph, 32)
                + _more(r, "phases", max_rows))
    out += ["", "findings"] + (table(FINDING_COLS, fnd, 44) + _more(r, "findings", max_rows) if fnd
                               else ["  none on either side"])
    return "\n".join(printable(line) for line in out) + "\n"  # (kernel and phase names: control characters escaped)


def to_markdown(r: dict, max_rows: int = 50) -> str:
    """The report as Markdown: at most ``max_rows`` rows per section (largest changes first)."""
    summ, kern, ph, fnd = _rows(r, max_rows)

    def md(cols, rows):
        esc = [[str(c).replace("|", "\\|") for c in row] for row in rows]
        return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(x) + " |" for x in esc]
    out = ["# tracekit diff", "", f"- base: `{_side_label(r['base'])}`", f"- new: `{_side_label(r['new'])}`", "",
           "## Summary", ""] + md(SUMMARY_COLS, summ)
    more = lambda sec: ["", *_more(r, sec, max_rows)] if len(r[sec]) > max_rows else []  # noqa: E731
    out += ["", "## Kernels", ""] + md(KERNEL_COLS, kern) + more("kernels")
    if ph:
        out += ["", "## Phases (per instance)", ""] + md(PHASE_COLS, ph) + more("phases")
    out += ["", "## Findings", ""] + (md(FINDING_COLS, fnd) + more("findings") if fnd else ["none on either side"])
    return "\n".join(printable(line) for line in out) + "\n"
