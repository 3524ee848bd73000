"""Text and Markdown renderings of a Diagnosis (the HTML report is tracekit/report.py)."""

from __future__ import annotations

import os
import re
import shlex
import textwrap

from ..names import printable
from ..store import DEFAULT_DB
from .model import SEVERITIES, Diagnosis, Finding, fmt_ns, fmt_pct, plural

# --------------------------------------------------------------------------------------------
# text and markdown


def db_option(db: str | None) -> str:
    """`` --db STORE`` for a store that is not the default ``./tracekit.duckdb`` (the path
    shell-quoted: spaces, quotes, ``$`` stay part of it), else nothing."""
    if not db or os.path.normpath(db) == DEFAULT_DB:
        return ""
    return f" --db {shlex.quote(db)}"


def command(query: str, db: str | None = None) -> str:
    """The shell command that runs an evidence query, safe to paste into a POSIX shell: with
    ``--db`` when the store is not the default one (``db_option``), the query in double quotes
    when nothing in it is special there (the usual case: SQL's own quotes are single), else
    single-quoted (shlex), so a name inside it (backticks, $(...), quotes) never runs."""
    head = "tracekit sql" + db_option(db)
    if not any(c in query for c in '"`$\\!'):
        return f'{head} "{query}"'
    return f"{head} {shlex.quote(query)}"


WIDTH = 100  # the text report's lines are at most this many columns


def cell(v) -> str:
    """One value as the reports print it, in one number format: integers digit for digit (no
    thousands separators, so ids and timestamps paste back into `tracekit sql`), a float that
    holds an integer as that integer, other floats with 2 decimals (2 significant digits under
    0.01)."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        if v == v and v not in (float("inf"), float("-inf")) and v == int(v) and abs(v) < 1e18:
            return str(int(v))
        return f"{v:.2f}" if abs(v) >= 0.01 else f"{v:.2g}"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


def _cut(c: str, w: int) -> str:
    return c if len(c) <= w else c[: w - 1] + "…"


def table(cols, rows, width=48) -> list[str]:
    cells = [[cell(v) for v in r] for r in rows]
    w = [min(max([len(c)] + [len(r[i]) for r in cells]), width) for i, c in enumerate(cols)]

    def line(cs):
        return "  ".join(_cut(c, wi).ljust(wi) for c, wi in zip(cs, w)).rstrip()
    return [line(cols), line(["-" * x for x in w])] + [line(r) for r in cells]


def _pack(items: list[str], width: int, sep: str = "  ") -> list[str]:
    """Items side by side, as many to a line as fit in width."""
    out, cur = [], ""
    for it in items:
        if cur and len(cur) + len(sep) + len(it) > width:
            out.append(cur)
            cur = it
        else:
            cur = f"{cur}{sep}{it}" if cur else it
    return out + ([cur] if cur else [])


def fit_table(cols, rows, width: int, cut: int = 28) -> list[str]:
    """An evidence table at most `width` columns wide: the whole table when it fits; one row as
    `name=value` pairs; else the columns that fit, and a line naming the others."""
    lines = table(cols, rows, cut)
    if max(len(line) for line in lines) <= width:
        return lines
    if len(rows) == 1:
        return _pack([f"{c}={_cut(cell(v), cut)}" for c, v in zip(cols, rows[0])], width, "   ")
    for k in range(len(cols) - 1, 0, -1):
        lines = table(cols[:k], [r[:k] for r in rows], cut)
        if max(len(line) for line in lines) <= width:
            break
    return lines + textwrap.wrap(f"(not shown: {', '.join(cols[k:])})", width, break_on_hyphens=False)


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


def _sql_words(query: str) -> list[str]:
    """The query split at the spaces outside quotes: where a line may break without changing it."""
    words, cur, quote = [], "", None
    for ch in query:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            cur += ch
        elif ch == " ":
            if cur:
                words.append(cur)
            cur = ""
        else:
            cur += ch
    return words + ([cur] if cur else [])


def command_lines(query: str, width: int, indent: str, db: str | None = None) -> list[str]:
    """The shell command of an evidence query (`command`), broken at the spaces outside SQL
    quotes into lines of at most `width` columns where it can be (the line breaks fall inside
    the shell's double quotes, or after a long ``--db PATH`` as a backslash-newline: pasted
    into a shell, it is the same command)."""
    cmd, opt = command(query, db), db_option(db)
    if not cmd.startswith(f'tracekit sql{opt} "'):  # single-quoted for the shell: kept on one line
        return [indent + cmd]
    # the command up to the opening quote is one word: a line break outside the quotes would
    # end the command in a shell; after a long --db it is a backslash-newline (the shell's own)
    words = _sql_words(query)
    words = ['"' + words[0], *words[1:-1], words[-1] + '"'] if len(words) > 1 else [f'"{query}"']
    head = f"tracekit sql{opt}"
    if opt and len(indent) + len(head) + 1 + len(words[0]) > width:
        return [indent + head + " \\"] + [indent + line for line in _pack(words, width - len(indent), " ")]
    words[0] = f"{head} {words[0]}"
    return [indent + line for line in _pack(words, width - len(indent), " ")]


_UNIT = re.compile(r"(\d) (ns|µs|ms|s|%|GB|GiB|TB/s|TFLOP/s)(?![\w/])")


def _wrap(text: str, indent: str, first: str | None = None) -> list[str]:
    """Text wrapped at WIDTH columns, a number never parted from its unit."""
    lines = textwrap.wrap(_UNIT.sub("\\1\u00a0\\2", text), WIDTH, initial_indent=indent if first is None else first,
                          subsequent_indent=indent, break_long_words=True, break_on_hyphens=False)
    return [line.replace("\u00a0", " ") for line in lines]


# low_utilization says the GPU idles; these say on what: one block when they are about one time
_IDLE_CODES = {"launch_bound", "host_bound", "sync_stall", "runtime_compile", "transfer_bound", "input_bound",
               "host_untraced", "gpu_wait", "rank_wait", "unattributed"}
MERGE_SHARE = 0.8  # a cause finding takes this share of low_utilization's idle time or more: merged


def merged(fs: list[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """The findings as the text report shows them: (finding, the findings merged into its block).
    A low_utilization finding is merged into the block of the cause finding of its scope (source,
    device, phase) whose time is at least MERGE_SHARE of its idle time: both are about that time."""
    into = {}
    for lu in (f for f in fs if f.code == "low_utilization" and f.time_ns):
        for c in sorted((f for f in fs if f.code in _IDLE_CODES and f.time_ns), key=lambda f: -f.time_ns):
            if ((c.source_id, c.device_id, c.phase) == (lu.source_id, lu.device_id, lu.phase)
                    and c.time_ns >= MERGE_SHARE * lu.time_ns):
                into[id(lu)] = c
                break
    out = [(f, [lu for lu in fs if into.get(id(lu)) is f]) for f in fs if id(f) not in into]
    return out


def _head(f: Finding) -> str:
    share = f", {fmt_pct(f.share_pct)} of {f.of}" if f.share_pct is not None else ""
    time = f" ({fmt_ns(f.time_ns)})" if f.time_ns is not None and f.share_pct is not None else ""
    label = _scope_label(f)
    return f"{f.severity.upper()} {f.code}{share}{time}" + (f"  [{label}]" if label else "")


def _block(f: Finding, also: list[Finding], evidence: int, shown: dict, db: str | None = None) -> list[str]:
    out = _wrap(_head(f), "    ", "")
    out += _wrap(f"{f.title}: {f.summary}", "  ")
    for a in also:
        out += _wrap(f"with {a.severity.upper()} {a.code}, {fmt_pct(a.share_pct)} of {a.of} "
                     f"({fmt_ns(a.time_ns)}), about the same time: {a.summary}", "    ", "  ")
    out += _wrap(f"remedy: {f.remedy}", "    ", "  ")
    if evidence:
        for e in [*f.evidence, *(e for a in also for e in a.evidence)]:
            if e.query in shown:  # the same query's rows, printed for a finding above
                out.append(f"  evidence ({e.view}): as for {shown[e.query]} above")
                continue
            shown[e.query] = f.code
            n = min(evidence, len(e.rows))  # what is printed below, of what the query gave
            more = f", first {n} of {plural(e.total_rows, 'row', '')}" if e.total_rows > n else ""
            out.append(f"  evidence ({e.view}{more}):")
            out += command_lines(e.query, WIDTH, "    ", db)
            if e.rows:
                out += ["      " + line for line in fit_table(e.columns, e.rows[:evidence], WIDTH - 6)]
    return out


def _device_lines(d: Diagnosis, sid) -> list[str]:
    out = []
    for dv in d.devices:
        if dv["source_id"] == sid:
            out += _wrap(f"GPU {dv['device_id']}{' phase ' + dv['phase'] if dv['phase'] else ''}: "
                         f"window {fmt_ns(dv['window_ns'])}, busy {fmt_ns(dv['busy_ns'])} "
                         f"({fmt_pct(dv['utilization_pct'])}), {plural(dv['kernels'], 'kernel', '')} "
                         f"({fmt_ns(dv['kernel_ns'])})", "    ", "  ")
    return out


def to_text(d: Diagnosis, evidence: int = 5) -> str:
    """The text report: per source its GPUs, then one block per finding (severity, code, share
    and time at stake; what it found; the remedy; the evidence queries, each runnable with
    `tracekit sql`, and their first rows), lines of at most WIDTH columns."""
    out = _wrap(f"tracekit diagnose: {d.db}" + (f" (phase {d.phase})" if d.phase else ""), "  ", "")
    sids = _source_ids(d)
    for sid in sids:
        fs = [f for f in d.findings if f.source_id == sid]
        dev = [x for x in d.devices if x["source_id"] == sid]
        if not fs and not dev:
            continue
        out += [""] + _wrap(_source_header(d, sid).split("\n")[0], "  ", "") + _device_lines(d, sid)
        if not fs:
            out.append("  no findings")
        shown = {}
        for f, also in merged(fs):
            out += [""] + _block(f, also, evidence, shown, d.db)
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

