"""Text and Markdown renderings of a Diagnosis (the HTML report is tracekit/report.py)."""

from __future__ import annotations

import shlex

from ..names import plural, printable
from .model import SEVERITIES, Diagnosis, Finding, fmt_ns, fmt_pct

# --------------------------------------------------------------------------------------------
# text and markdown


def command(query: str) -> str:
    """The shell command that runs an evidence query, safe to paste into a POSIX shell: in double
    quotes when nothing in it is special there (the usual case: SQL's own quotes are single),
    else single-quoted (shlex), so a name inside it (backticks, $(...), quotes) never runs."""
    if not any(c in query for c in '"`$\\!'):
        return f'tracekit sql "{query}"'
    return f"tracekit sql {shlex.quote(query)}"


def cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


def table(cols, rows, width=48) -> list[str]:
    cells = [[cell(v) for v in r] for r in rows]
    w = [min(max([len(c)] + [len(r[i]) for r in cells]), width) for i, c in enumerate(cols)]

    def line(cs):
        return "  ".join((c if len(c) <= wi else c[: wi - 1] + "…").ljust(wi) for c, wi in zip(cs, w)).rstrip()
    return [line(cols), line(["-" * x for x in w])] + [line(r) for r in cells]


def _scope_label(f: Finding) -> str:
    parts = []
    if f.device_id is not None:
        parts.append(f"GPU {f.device_id}")
    if f.phase:
        parts.append(f"phase {f.phase}")
    if f.subject:
        parts.append(f.subject)
    return ", ".join(parts)


def _source_header(d: Diagnosis, sid) -> str:
    src = next((s for s in d.sources if s["source_id"] == sid), None)
    if src is None:
        return f"source {sid}"
    name = src["path"].rsplit("/", 1)[-1]
    rank = f", rank {src['rank']}" if src.get("rank") is not None else ""
    head = f"source {sid}: {name} ({src['format']}{rank})"
    for dv in d.devices:
        if dv["source_id"] == sid:
            head += (f"\n  GPU {dv['device_id']}{' phase ' + dv['phase'] if dv['phase'] else ''}: "
                     f"window {fmt_ns(dv['window_ns'])}, busy {fmt_ns(dv['busy_ns'])} "
                     f"({fmt_pct(dv['utilization_pct'])}), {plural(dv['kernels'], 'kernel')} "
                     f"({fmt_ns(dv['kernel_ns'])})")
    return head


def _source_ids(d: Diagnosis) -> list:
    """The diagnosed sources, then any other a finding names (a rank of a job, with --source)."""
    ids = [s["source_id"] for s in d.sources]
    return ids + sorted({f.source_id for f in d.findings} - set(ids), key=lambda x: (x is None, x or 0))


def to_text(d: Diagnosis, evidence: int = 5) -> str:
    out = [f"tracekit diagnose: {d.db}" + (f" (phase {d.phase})" if d.phase else "")]
    sids = _source_ids(d)
    for sid in sids:
        fs = [f for f in d.findings if f.source_id == sid]
        dev = [x for x in d.devices if x["source_id"] == sid]
        if not fs and not dev:
            continue
        out += ["", _source_header(d, sid)]
        if not fs:
            out.append("  no findings")
        for f in fs:
            share = f"{fmt_pct(f.share_pct)} of {f.of}" if f.share_pct is not None else ""
            label = _scope_label(f)
            out.append("")
            out.append(f"  {f.severity.upper():<6}  {f.code:<16} {share:<22} {fmt_ns(f.time_ns) if f.time_ns is not None else ''}"
                       .rstrip() + (f"   [{label}]" if label else ""))
            out.append(f"          {f.title}: {f.summary}")
            out.append(f"          remedy: {f.remedy}")
            if evidence:
                for e in f.evidence:
                    shown = min(evidence, len(e.rows))  # what is printed below, of what the query gave
                    more = f", first {shown} of {plural(e.total_rows, 'row')}" if e.total_rows > shown else ""
                    out.append(f"          evidence ({e.view}{more}): {command(e.query)}")
                    for line in table(e.columns, e.rows[:evidence], 28):
                        out.append("            " + line)
    if not d.findings:
        out += ["", "no findings"]
    n = {s: sum(1 for f in d.findings if f.severity == s) for s in SEVERITIES}
    out += ["", "findings: " + ", ".join(f"{n[s]} {s}" for s in SEVERITIES)]
    return "\n".join(printable(line, keep_newlines=True) for line in out) + "\n"


def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_markdown(d: Diagnosis, evidence: int = 10) -> str:
    out = [f"# tracekit diagnose: `{d.db}`" + (f" — phase `{d.phase}`" if d.phase else ""), ""]
    out += ["| severity | code | scope | share | time | summary |", "|---|---|---|---|---|---|"]
    for f in d.findings:
        scope = f"source {f.source_id}" + (f", {_scope_label(f)}" if _scope_label(f) else "")
        share = f"{fmt_pct(f.share_pct)} of {f.of}" if f.share_pct is not None else ""
        out.append(f"| {f.severity} | `{f.code}` | {_md_escape(scope)} | {share} | "
                   f"{fmt_ns(f.time_ns) if f.time_ns is not None else ''} | {_md_escape(f.summary)} |")
    if not d.findings:
        out.append("| | | | | | no findings |")
    for sid in _source_ids(d):
        fs = [f for f in d.findings if f.source_id == sid]
        if not fs:
            continue
        out += ["", "## " + _source_header(d, sid).split("\n")[0], ""]
        out += ["- " + line.strip() for line in _source_header(d, sid).split("\n")[1:]]
        for f in fs:
            out += ["", f"### {f.severity}: `{f.code}` — {f.title}", "", f.summary + ".", "",
                    f"**Remedy:** {f.remedy}", ""]
            for e in f.evidence[:]:
                shown = min(evidence, len(e.rows))
                out += [f"Evidence from `{e.view}` ({plural(e.total_rows, 'row')}"
                        + (f", first {shown}" if e.total_rows > shown else "") + "):", "",
                        "```sql", e.query, "```", ""]
                if e.rows:
                    out.append("| " + " | ".join(e.columns) + " |")
                    out.append("|" + "---|" * len(e.columns))
                    for r in e.rows[:evidence]:
                        out.append("| " + " | ".join(_md_escape(cell(v)) for v in r) + " |")
                    out.append("")
    out += ["", "Thresholds: " + ", ".join(f"`{k}={v:g}`" for k, v in d.thresholds.items()), ""]
    return "\n".join(printable(line, keep_newlines=True) for line in out)

