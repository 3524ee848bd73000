"""`tracekit diagnose` and `tracekit diff`: the click commands (registered by tracekit/cli.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .cli_common import DB_OPTION, OUTPUT_OPTION, fail, one_line_errors
from .names import printable
from .outputs import atomic_output, refuse_store
from .store import os_error_line


def _write(text: str, output: Path | None) -> None:
    """The text into -o FILE (whole or not at all: `outputs.atomic_output`) or standard output;
    a file that cannot be written ends the command with one line."""
    try:
        if output:
            with atomic_output(output, "w", encoding="utf-8") as f:
                f.write(text)
            click.echo(f"wrote {printable(str(output))}", err=True)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as e:
        fail(os_error_line(e, output or "standard output"))


def _thresholds_epilog() -> str:
    from .diagnose import THRESHOLDS

    lines = ["\b", "Thresholds (--threshold NAME=VALUE; defaults shown; docs/diagnose.md explains each):"]
    w = max(len(n) for n in THRESHOLDS)
    for n, t in THRESHOLDS.items():
        lines.append(f"  {n.ljust(w)} {t.default:>6g}  {t.doc}")
    lines += ["", "\b", "Finding codes: low_utilization, launch_bound, host_bound, sync_stall, transfer_bound, "
              "hot_kernel, memory_bound, compute_bound, latency_bound, low_overlap, rank_imbalance, no_gpu_data."]
    return "\n".join(lines)


@click.command("diagnose", epilog=_thresholds_epilog(),
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@DB_OPTION
@click.option("--source", "source_id", type=int, metavar="ID", help="Diagnose only this source (default: every source).")
@click.option("--phase", metavar="NAME", help="Diagnose only the time inside the instances of this phase "
                              "(NVTX range / record_function name, '#N' suffix dropped).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown", "html"]), default="text",
              show_default=True, help="Output format; html is a self-contained report with plots "
                                      "(needs the 'report' extra: pip install 'tracekit-gpu[report]', in a clone pip install -e '.[report]').")
@OUTPUT_OPTION
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Override a threshold (repeatable); the list is below.")
@click.option("--evidence", "evidence_rows", default=5, show_default=True, metavar="N",
              help="Evidence rows shown per view in text / markdown (json keeps up to 20; 0 = none).")
@click.option("--fail-on", type=click.Choice(["high", "medium", "low"]),
              help="Exit with status 1 when a finding of this severity or worse is found (for CI).")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), metavar="TFLOPS",
              help="Compute roof of the roofline (dense TFLOP/s) instead of the device table's "
                   "(`tracekit sql \"FROM tk_device_peaks()\"`): for a GPU it lacks, or clocks you set.")
@click.option("--peak-tbps", type=click.FloatRange(min=0, min_open=True), metavar="TB/S",
              help="Memory roof of the roofline (DRAM TB/s) instead of the device table's.")
def diagnose_cmd(db, source_id, phase, fmt, output, thresholds, evidence_rows, fail_on, peak_tflops, peak_tbps):
    """Run the GPU profiling decision tree over a store: findings with a stable code, a
    severity, the share of time at stake, the evidence (view rows, with the query that gave
    them) and a one-sentence remedy.

    \b
    Examples:
      tracekit diagnose                              # every source of ./tracekit.duckdb
      tracekit diagnose --phase decode_step          # only the time inside decode_step ranges
      tracekit diagnose --format json -o diag.json   # for scripts and CI
      tracekit diagnose --format html -o report.html # the report with plots
      tracekit diagnose --threshold launch_wait_pct=40 --fail-on high
    """
    from .api_report import diagnose, parse_thresholds

    with one_line_errors():
        refuse_store(output, db)
        th = parse_thresholds(thresholds)
        if fmt == "html" and not output:
            fail("--format html needs -o FILE")
        d, text = diagnose(db, source_id=source_id, phase=phase, thresholds=th, fmt=fmt, evidence_rows=evidence_rows,
                           peak_tflops=peak_tflops, peak_tbps=peak_tbps)
    _write(text, output)
    if fail_on:
        rank = {"high": 0, "medium": 1, "low": 2, "info": 3}
        if any(rank[f.severity] <= rank[fail_on] for f in d.findings):
            sys.exit(1)


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.argument("base_db", type=click.Path(dir_okay=False))
@click.argument("new_db", required=False, type=click.Path(dir_okay=False))
@click.option("--base-source", type=int, metavar="ID", help="Source of BASE_DB (needed when it has several with GPU work).")
@click.option("--new-source", type=int, metavar="ID", help="Source of NEW_DB (default: NEW_DB's only one; with one "
                                              "store, the same as --base-source).")
@click.option("--base-phase", metavar="NAME", help="Compare only the work launched inside this phase of the base side.")
@click.option("--new-phase", metavar="NAME", help="... and inside this phase of the new side (e.g. eager_step vs graph_step).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True)
@OUTPUT_OPTION
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Override a diagnose threshold for the finding comparison (see `tracekit diagnose -h`).")
@click.option("--max-rows", "--max-kernels", "max_rows", default=25, show_default=True, metavar="N",
              type=click.IntRange(min=1),
              help="Rows shown per section (kernels, phases, findings) by text / markdown, largest "
                   "changes first; then 'and K more' (json lists all).")
def diff_cmd(base_db, new_db, base_source, new_source, base_phase, new_phase, fmt, output, thresholds,
             max_rows):
    """Before/after of two captures: per kernel (base name) and per phase, count and time changes,
    new and vanished kernels, and the change of each diagnose finding.

    \b
    NEW_DB defaults to BASE_DB: then compare two sources (--base-source / --new-source) or two
    phases (--base-phase / --new-phase) of one store.
    Examples:
      tracekit diff before.duckdb after.duckdb
      tracekit diff run.duckdb --base-source 0 --new-source 1
      tracekit diff graphs.duckdb --base-phase eager_step --new-phase graph_step
    """
    from .api_report import diff

    with one_line_errors():
        for db in (base_db, new_db):
            refuse_store(output, db)
        _, text = diff(base_db, new_db, base_source=base_source, new_source=new_source, base_phase=base_phase,
                       new_phase=new_phase, thresholds=thresholds, fmt=fmt, max_rows=max_rows)
    _write(text, output)
