"""The HTML report of `tracekit diagnose --format html`: one self-contained file with plots.

Plots (plotly; its JavaScript is embedded once, so the page needs no network when viewed):

* GPU utilization over time, per device (`gpu_utilization_timeline`)
* top kernels by GPU time, per source (`hotspots`)
* idle-gap length histogram by cause, per source (`idle_gaps`, scope 'device')
* time per phase: GPU busy and idle by cause, per source (`phase_idle`)
* roofline from operator shapes, per source (`roofline`: a point per operator and shape;
  `phase_roofline`: a diamond per phase), against the GPU's roofs (`tk_device_peaks()`)
* roofline of the ncu-profiled kernels (`kernel_bounds`), or their Speed-of-Light chart
  (compute vs memory throughput) when the roofline counters were not collected

then the findings of the diagnosis with their evidence tables. Every plot is a
``<div class="tk-plot" data-plot="...">``; tests count them in the DOM after the JS ran.

plotly is the optional extra ``report`` (``pip install 'tracekit-gpu[report]'``; in a clone
``pip install -e '.[report]'``).
"""

from __future__ import annotations

import html
import math

from . import __version__, queries
from .diagnose import IDLE_CAUSES, Diagnosis, Query, cell, command, fmt_ns, fmt_pct
from .names import plural

CAUSE_COLORS = {"host_wait": "#d62728", "sync_wait": "#9467bd", "runtime_compile": "#8c564b", "kernel_wait": "#ff7f0e",
                "other": "#7f7f7f", "outside": "#c7c7c7", "busy": "#2ca02c"}
SEV_COLORS = {"high": "#c62828", "medium": "#ef6c00", "low": "#f9a825", "info": "#1565c0"}
BOUND_COLORS = {"memory": "#1f77b4", "compute": "#d62728", "latency": "#ff7f0e", "balanced": "#7f7f7f"}


class ReportError(Exception):
    pass


def check_available() -> None:
    try:
        import plotly  # noqa: F401
    except ImportError:
        from . import install_hint

        raise ReportError(f"the HTML report needs plotly: {install_hint('report')}") from None


def _e(s) -> str:
    return html.escape("" if s is None else str(s))


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


class _Plots:
    def __init__(self):
        import plotly.graph_objects as go

        self.go = go
        self.parts: list[str] = []
        self.n = 0

    def add(self, kind: str, title: str, fig, height: int = 380) -> None:
        self.n += 1
        fig.update_layout(title=dict(text=title, x=0.01), height=height, template="plotly_white",
                          margin=dict(l=60, r=20, t=50, b=50), legend=dict(orientation="h", y=-0.2))
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"tk-plot-{self.n}",
                          config={"displaylogo": False, "responsive": True})
        self.parts.append(f'<div class="tk-plot" data-plot="{_e(kind)}">{div}</div>')


def _label(src: dict) -> str:
    name = src["path"].rsplit("/", 1)[-1]
    return f"[{src['source_id']}] {name}" + (f" rank {src['rank']}" if src.get("rank") is not None else "")


def _utilization(p: _Plots, q: Query, srcs: dict, sids: list[int]) -> None:
    go = p.go
    fig = go.Figure()
    title = "GPU utilization over time (per device)"
    if len(sids) == 1:
        title += f" — {_label(srcs[sids[0]])}"
    for sid in sids:
        rows = queries.dicts(q.store, "report", "utilization", sid=sid)
        for dev in sorted({r["device_id"] for r in rows}):
            rr = [r for r in rows if r["device_id"] == dev]
            xs = [r["t_ns"] / 1e6 for r in rr] + [rr[-1]["e_ns"] / 1e6]
            ys = [r["utilization_pct"] for r in rr] + [rr[-1]["utilization_pct"]]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line_shape="hv",
                                     name=f"{_label(srcs[sid])} GPU {dev}",
                                     hovertemplate="%{x:.2f} ms: %{y:.1f} % busy<extra></extra>"))
    fig.update_xaxes(title="time since the device's first operation (ms)")
    fig.update_yaxes(title="GPU busy (%)", range=[0, 105])
    p.add("utilization", title, fig)


def _source_rows(q: Query, src: dict, query: str, needs: tuple[str, ...] = ()) -> list[dict]:
    """The rows of report query `query` for this source; none when the store lacks a view in `needs`."""
    if not all(q.has(v) for v in needs):
        return []
    return queries.dicts(q.store, "report", query, sid=src["source_id"])


def _top_kernels(p: _Plots, q: Query, src: dict) -> None:
    go = p.go
    rows = _source_rows(q, src, "top_kernels")
    if not rows:
        return
    rows = rows[::-1]
    labels = [f"{_short(r['short_name'] or r['name'], 50)} #{i}" if sum(
        1 for x in rows if x["short_name"] == r["short_name"]) > 1 else _short(r["short_name"] or r["name"], 50)
        for i, r in enumerate(rows)]
    fig = go.Figure(go.Bar(
        x=[r["total_ns"] / 1e6 for r in rows], y=labels, orientation="h", marker_color="#1f77b4",
        text=[f"{r['time_pct']:.1f} %" for r in rows], textposition="auto",
        customdata=[[r["instances"], (r["med_ns"] or 0) / 1e3, _short(r["name"], 120)] for r in rows],
        hovertemplate="%{customdata[2]}<br>%{x:.3f} ms in %{customdata[0]} launches, median %{customdata[1]:.1f} µs"
                      "<extra></extra>"))
    fig.update_xaxes(title="GPU time (ms)")
    p.add("top_kernels", f"Top kernels by GPU time — {_label(src)}", fig, height=max(320, 28 * len(rows) + 120))


def _gap_histogram(p: _Plots, q: Query, src: dict) -> None:
    go = p.go
    rows = _source_rows(q, src, "gaps")
    if not rows:
        return
    edges = []
    for k in range(1, 11):  # 10 ns .. 10 s, 1-2-5 steps
        for m in (1, 2, 5):
            edges.append(m * 10 ** k)
    lo = max(0, max(i for i, e in enumerate(edges) if e <= max(1, min(r["dur_ns"] for r in rows))))
    hi = min(len(edges) - 1, min(i for i, e in enumerate(edges) if e > max(r["dur_ns"] for r in rows)))
    edges = edges[lo: hi + 1]
    labels = [f"{fmt_ns(a)}–{fmt_ns(b)}" for a, b in zip(edges, edges[1:])]
    fig = go.Figure()
    for cause in IDLE_CAUSES:
        durs = [r["dur_ns"] for r in rows if r["cause"] == cause]
        if not durs:
            continue
        counts = [0] * len(labels)
        tot = [0] * len(labels)
        for d in durs:
            i = max(0, min(len(labels) - 1, next((j for j in range(len(labels)) if d < edges[j + 1]), len(labels) - 1)))
            counts[i] += 1
            tot[i] += d
        fig.add_trace(go.Bar(x=labels, y=counts, name=cause, marker_color=CAUSE_COLORS[cause],
                             customdata=[t / 1e6 for t in tot],
                             hovertemplate=f"{cause}: %{{y}} gaps of %{{x}}, %{{customdata:.3f}} ms in all<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="gap length")
    fig.update_yaxes(title="idle gaps")
    p.add("gap_histogram", f"GPU idle gaps by length and cause — {_label(src)}", fig)


def _phase_time(p: _Plots, q: Query, src: dict) -> None:
    go = p.go
    rows = _source_rows(q, src, "phase_time", needs=("phase_idle",))
    if not rows:
        return
    fig = go.Figure()
    ylab = [f"{_short(r['phase'], 40)} ×{r['instances']}" for r in rows]
    for key in ("busy", *IDLE_CAUSES, "outside"):
        xs = [(r[f"{key}_ns"] or 0) / 1e6 for r in rows]
        if not any(xs):
            continue
        fig.add_trace(go.Bar(x=xs, y=ylab, orientation="h", name="GPU busy" if key == "busy" else f"idle: {key}",
                             marker_color=CAUSE_COLORS[key],
                             hovertemplate=f"%{{y}}: {key} %{{x:.3f}} ms<extra></extra>"))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="time in the phase, GPU busy and idle by cause (ms)")
    p.add("phases", f"Time per phase — {_label(src)}", fig, height=max(300, 40 * len(rows) + 150))


def _roofline(p: _Plots, q: Query, src: dict) -> None:
    go = p.go
    rows = _source_rows(q, src, "kernel_bounds", needs=("kernel_bounds",))
    if not rows:
        return
    roof = [r for r in rows if r.get("arithmetic_intensity") and r.get("flop_per_s")]
    fig = go.Figure()
    if roof:
        ais = [r["arithmetic_intensity"] for r in roof]
        x0, x1 = 10 ** math.floor(math.log10(min(ais) / 4)), 10 ** math.ceil(math.log10(max(ais) * 4))
        peaks: dict[str, tuple[list, list]] = {}  # one roof per compute class: the median of its peaks
        for r in roof:
            if r.get("peak_flop_per_s") and r.get("peak_dram_bytes_per_s"):
                pk = peaks.setdefault(r["compute_class"], ([], []))
                pk[0].append(r["peak_flop_per_s"])
                pk[1].append(r["peak_dram_bytes_per_s"])
        for cls, (pfs, pbs) in sorted(peaks.items()):
            pf, pb = sorted(pfs)[len(pfs) // 2], sorted(pbs)[len(pbs) // 2]
            ridge = pf / pb
            xs = [x0, ridge, x1]
            fig.add_trace(go.Scatter(x=xs, y=[min(pf, x * pb) / 1e12 for x in xs], mode="lines",
                                     line=dict(dash="dot"), name=f"roof {cls}",
                                     hovertemplate="%{x:.3g} FLOP/byte: %{y:.1f} TFLOP/s<extra></extra>"))
        for bound in sorted({r["bound"] or "unknown" for r in roof}):
            rr = [r for r in roof if (r["bound"] or "unknown") == bound]
            fig.add_trace(go.Scatter(
                x=[r["arithmetic_intensity"] for r in rr], y=[r["flop_per_s"] / 1e12 for r in rr], mode="markers",
                marker=dict(size=12, color=BOUND_COLORS.get(bound, "#000")), name=f"{bound}-bound (ncu rule)",
                text=[f"{r['id']}: {_short(r['short_name'], 50)}" for r in rr],
                hovertemplate="%{text}<br>%{x:.3g} FLOP/byte, %{y:.2f} TFLOP/s<extra></extra>"))
        fig.update_xaxes(type="log", title="arithmetic intensity (FLOP per DRAM byte)")
        fig.update_yaxes(type="log", title="achieved TFLOP/s")
        p.add("roofline", f"Roofline of the ncu-profiled kernels — {_label(src)}", fig, height=460)
        return
    sol = [r for r in rows if r.get("sm_pct") is not None and r.get("memory_pct") is not None]
    if not sol:
        return
    for bound in sorted({r["bound"] or "unknown" for r in sol}):
        rr = [r for r in sol if (r["bound"] or "unknown") == bound]
        fig.add_trace(go.Scatter(
            x=[r["memory_pct"] for r in rr], y=[r["sm_pct"] for r in rr], mode="markers",
            marker=dict(size=12, color=BOUND_COLORS.get(bound, "#000")), name=f"{bound}-bound",
            text=[f"{r['id']}: {_short(r['short_name'], 50)} ({r['bound_reason']})" for r in rr],
            hovertemplate="%{text}<br>memory %{x:.1f} %, SM %{y:.1f} %<extra></extra>"))
    for v, dash in ((60, "dot"), (80, "dash")):
        fig.add_shape(type="line", x0=v, x1=v, y0=0, y1=100, line=dict(color="#999", dash=dash))
        fig.add_shape(type="line", x0=0, x1=100, y0=v, y1=v, line=dict(color="#999", dash=dash))
    fig.update_xaxes(title="memory throughput (% of peak)", range=[0, 100])
    fig.update_yaxes(title="compute (SM) throughput (% of peak)", range=[0, 100])
    p.add("roofline", f"Speed of Light of the ncu-profiled kernels (no roofline counters) — {_label(src)}",
          fig, height=460)


def _shape_roofline(p: _Plots, q: Query, src: dict) -> None:
    """The roofline from shapes (`roofline`, `phase_roofline`): one point per operator and shape
    (size = GPU time, colour = bound), one diamond per phase, the roofs of the GPU."""
    go = p.go
    ops = _source_rows(q, src, "op_roofline", needs=("roofline", "phase_roofline"))
    if not ops:
        return
    phases = _source_rows(q, src, "phase_roofline")
    fig = go.Figure()
    pts = ops + phases
    ais = [r["intensity"] for r in pts]
    x0, x1 = 10 ** math.floor(math.log10(min(ais) / 4)), 10 ** math.ceil(math.log10(max(ais) * 4))
    roofs = {(r["pf"], r["pb"]) for r in pts if r["pf"] and r["pb"]}
    for pf, pb in sorted(roofs):
        ridge = pf / pb
        xs = [x0, ridge, x1] if x0 < ridge < x1 else [x0, x1]
        fig.add_trace(go.Scatter(x=xs, y=[min(pf, x * pb) / 1e12 for x in xs], mode="lines", line=dict(dash="dot"),
                                 name=f"roof {pf / 1e12:.4g} TFLOP/s, {pb / 1e12:.3g} TB/s",
                                 hovertemplate="%{x:.3g} FLOP/byte: %{y:.1f} TFLOP/s<extra></extra>"))
    top = max(r["gpu_ns"] for r in ops)
    for bound in sorted({r["bound"] or "unknown" for r in ops}):
        rr = [r for r in ops if (r["bound"] or "unknown") == bound]
        fig.add_trace(go.Scatter(
            x=[r["intensity"] for r in rr], y=[r["flops_per_s"] / 1e12 for r in rr], mode="markers",
            marker=dict(size=[6 + 24 * math.sqrt(r["gpu_ns"] / top) for r in rr], color=BOUND_COLORS.get(bound, "#000"),
                        opacity=0.7), name=f"ops: {bound}-bound",
            text=[f"{_e(r['op'])} {_e(_short(r['shapes'] or '', 70))} {r['dtype'] or ''} × {r['calls']}, "
                  f"{fmt_ns(r['gpu_ns'])}" for r in rr],
            hovertemplate="%{text}<br>%{x:.3g} FLOP/byte, %{y:.2f} TFLOP/s<extra></extra>"))
    if phases:
        fig.add_trace(go.Scatter(
            x=[r["intensity"] for r in phases], y=[r["flops_per_s"] / 1e12 for r in phases], mode="markers+text",
            marker=dict(size=16, symbol="diamond", color="#000"), name="phases", text=[r["phase"] for r in phases],
            textposition="top center",
            hovertemplate="%{text}: %{x:.3g} FLOP/byte, %{y:.2f} TFLOP/s<extra></extra>"))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP per byte, from shapes)")
    fig.update_yaxes(type="log", title="achieved TFLOP/s (FLOPs from shapes / GPU time)")
    p.add("shape_roofline", f"Roofline from operator shapes — {_label(src)}", fig, height=460)


def _evidence_html(e, db: str | None = None) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in e.columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell(v))}</td>" for v in r) + "</tr>" for r in e.rows)
    more = f" (first {len(e.rows)} of {plural(e.total_rows, 'row')})" if e.total_rows > len(e.rows) else ""
    return (f"<details><summary>evidence: <code>{_e(e.view)}</code>{more}</summary>"
            f"<pre>{_e(command(e.query, db))}</pre>"
            f"<div class='tbl'><table><tr>{head}</tr>{body}</table></div></details>")


def _findings_html(d: Diagnosis) -> str:
    if not d.findings:
        return "<p>No findings.</p>"
    out = []
    for f in d.findings:
        scope = f"source {f.source_id}" + (f", GPU {f.device_id}" if f.device_id is not None else "") + \
            (f", phase {f.phase}" if f.phase else "") + (f", {f.subject}" if f.subject else "")
        share = f"{fmt_pct(f.share_pct)} of {f.of} ({fmt_ns(f.time_ns)})" if f.share_pct is not None else ""
        out.append(
            f"<div class='finding' data-code='{_e(f.code)}' style='border-left-color:{SEV_COLORS[f.severity]}'>"
            f"<div class='fhead'><span class='sev' style='background:{SEV_COLORS[f.severity]}'>{_e(f.severity)}</span>"
            f"<code>{_e(f.code)}</code> <b>{_e(f.title)}</b>"
            f"<span class='share'>{_e(share)}</span></div>"
            f"<div class='scope'>{_e(scope)}</div><p>{_e(f.summary)}</p>"
            f"<p class='remedy'><b>Remedy:</b> {_e(f.remedy)}</p>"
            + "".join(_evidence_html(e, d.db) for e in f.evidence) + "</div>")
    return "\n".join(out)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:1.5em;margin-bottom:4px} h2{margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:.9em} table{border-collapse:collapse;font-size:.82em}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;white-space:nowrap;max-width:420px;overflow:hidden;text-overflow:ellipsis}
th{background:#f4f4f4} .tbl{overflow-x:auto}
.finding{border-left:6px solid #999;background:#fafafa;margin:12px 0;padding:8px 14px}
.fhead{display:flex;gap:10px;align-items:center;flex-wrap:wrap} .share{margin-left:auto;color:#444}
.sev{color:#fff;border-radius:3px;padding:1px 8px;font-size:.8em;text-transform:uppercase}
.scope{color:#666;font-size:.85em} .remedy{color:#1b5e20}
pre{white-space:pre-wrap;font-size:.8em;background:#f4f4f4;padding:6px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px} .grid .tk-plot{min-width:0}
@media (max-width:900px){.grid{grid-template-columns:1fr}}
"""


def render_html(store, d: Diagnosis) -> str:
    """The report page: plots of the store's views, then the findings of ``d``."""
    check_available()
    from plotly.offline import get_plotlyjs

    q = Query(store)
    p = _Plots()
    srcs = {s["source_id"]: s for s in d.sources}
    timeline = {r["source_id"] for r in queries.dicts(store, "diff", "timeline_sources")}
    tl = [sid for sid in srcs if sid in timeline]
    sections = []
    for sid in tl:
        start = len(p.parts)
        _utilization(p, q, srcs, [sid])
        _top_kernels(p, q, srcs[sid])
        _gap_histogram(p, q, srcs[sid])
        _phase_time(p, q, srcs[sid])
        _shape_roofline(p, q, srcs[sid])
        if len(p.parts) > start:
            sections.append((f"Source {_label(srcs[sid])}", p.parts[start:], False))
    for src in srcs.values():
        if src["format"] == "ncu":
            start = len(p.parts)
            _roofline(p, q, src)
            if len(p.parts) > start:
                sections.append((f"Nsight Compute {_label(src)}", p.parts[start:], False))
    n = {s: sum(1 for f in d.findings if f.severity == s) for s in ("high", "medium", "low", "info")}
    src_rows = "".join(
        f"<tr><td>{s['source_id']}</td><td>{_e(s['path'])}</td><td>{_e(s['format'])}</td>"
        f"<td>{_e(s['rank'])}</td></tr>" for s in d.sources)
    dev_rows = "".join(
        f"<tr><td>{x['source_id']}</td><td>{x['device_id']}</td><td>{_e(x['phase'] or '')}</td>"
        f"<td>{fmt_ns(x['window_ns'])}</td><td>{fmt_ns(x['busy_ns'])}</td><td>{fmt_pct(x['utilization_pct'])}</td>"
        f"<td>{x['kernels']:,}</td><td>{fmt_ns(x['kernel_ns'])}</td></tr>" for x in d.devices)
    body = [
        f"<h1>tracekit diagnose</h1><div class='meta'>{_e(d.db)}"
        + (f" — phase <b>{_e(d.phase)}</b>" if d.phase else "")
        + f" · tracekit {__version__} · findings: {n['high']} high, {n['medium']} medium, {n['low']} low, "
          f"{n['info']} info</div>",
        "<h2>Sources</h2><div class='tbl'><table><tr><th>source</th><th>path</th><th>format</th><th>rank</th></tr>"
        f"{src_rows}</table></div>",
    ]
    if dev_rows:
        body.append("<div class='tbl' style='margin-top:8px'><table><tr><th>source</th><th>GPU</th><th>phase</th>"
                    "<th>window</th><th>busy</th><th>utilization</th><th>kernels</th><th>kernel time</th></tr>"
                    f"{dev_rows}</table></div>")
    body.append("<h2>Findings</h2>" + _findings_html(d))
    for title, parts, grid in sections:
        body.append(f"<h2>{_e(title)}</h2>" + (f"<div class='grid'>{''.join(parts)}</div>" if grid and len(parts) > 1
                                                  else "".join(parts)))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>tracekit diagnose — {_e(d.db)}</title><style>{CSS}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + "\n".join(body) + f"<div class='meta' style='margin-top:32px'>{plural(p.n, 'plot')}</div></body></html>\n")
