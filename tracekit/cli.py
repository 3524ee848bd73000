"""The `tracekit` command line: click options over the Python API (tracekit/api.py,
tracekit/api_sql.py); each command parses its options, calls the API and prints."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__, api
from .adapters.detect import NAMES as FORMAT_NAMES
from .cli_common import DB_OPTION, OUTPUT_OPTION, fail, one_line_errors
from .names import shown
from .render import TIME_UNITS
from .store import DEFAULT_DB


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
def main():
    """tracekit: convert Nsight Systems, Nsight Compute and torch.profiler traces into one
    schema and ask them questions in SQL.

    \b
    Typical use:
      tracekit convert trace.json.gz            # -> ./tracekit.duckdb
      tracekit sql "select * from hotspots limit 10"
      tracekit views                            # what you can query
    """


def entry():
    """The CLI in a process of its own (the `tracekit` command: tracekit._command, which also sets
    pyarrow's pool before pyarrow loads), so a conversion may tune it (tracekit.own_process)."""
    from . import own_process

    own_process()
    main()


def _spark_options(f):
    """--master and --spark-conf, the Spark engine's options of convert and sql."""
    f = click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
                     help="With --engine spark: a Spark setting, e.g. --spark-conf spark.executor.memory=2g "
                          "(repeatable; over tracekit's own and spark-defaults.conf).")(f)
    return click.option("--master", metavar="URL", help="With --engine spark: Spark's master (default local[*]; "
                                                         "a cluster's spark://host:7077, yarn, ...).")(f)


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@click.option("--replace", is_flag=True, help="Start the store afresh instead of adding sources to it.")
@click.option("--parquet", "parquet_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every table as DIR/<table>.parquet (query it with tracekit sql --db DIR); "
                   "DIR is replaced whole at the end, and may hold nothing but an export.")
@click.option("--partitioned", is_flag=True,
              help="With --parquet: write the Hive-partitioned dataset DIR/<table>/source_id=<n>/ "
                   "instead (docs/scaling.md; query it with tracekit sql --db DIR).")
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES),
              help="Input format (default: detected from the content).")
@click.option("--rank", type=int, help="Distributed rank of the input(s), when the trace does not say.")
@click.option("--strict", is_flag=True, help="Fail an input when any of its rows would be skipped.")
@click.option("--allow-duplicate", is_flag=True,
              help="Add an input even when the store already has a source with the same content "
                   "(or it is given twice); by default that is refused and nothing is converted.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Convert up to N inputs at once, each in its own process (default: the number "
                   "of CPUs; 1: one after the other in this process). The store is the same either "
                   "way: same source ids, rows and order.")
@click.option("--memory-budget", "memory_budget", metavar="SIZE",
              help="Peak memory of the conversion, per process (with --jobs N: each worker and "
                   "this process), e.g. 400MB or 1.5GB; what does not fit is spilled to disk next "
                   "to the store (default: $TRACEKIT_MEMORY_BUDGET, else 400MB).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="spark: convert each input as a Spark task straight into the partitioned Parquet "
                   "dataset --parquet DIR (written afresh; no store), on --master (docs/scaling.md).")
@_spark_options
def convert(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, allow_duplicate, jobs, quiet,
            engine, master, spark_conf, memory_budget):
    """Convert trace files into a store (one source per file).

    INPUTS are Kineto/torch.profiler JSON (.json, .json.gz), Nsight Systems exports (.sqlite,
    .nsys-rep) or Nsight Compute results (CSV, .ncu-rep); the format is detected from the
    content. A directory stands for the trace files directly inside it (e.g. HTA's trace_dir of
    rank files), in name order; each other file in it is skipped with a line saying why.
    Converting into an existing store adds sources: that is how traces are merged.
    Prints one line per source: rows per table, rows skipped and why. The store is replaced
    atomically at the end, so readers never see a half-written store; an input that fails
    adds nothing (exit status 2). An input whose content is already a source of the store (or
    given twice) is refused and nothing is converted: --replace starts afresh, --allow-duplicate
    adds it anyway.

    Several inputs (e.g. the ranks of a job) convert in parallel, up to --jobs at once, each in
    its own process; they are merged into the store in input order, so source ids follow the
    order of INPUTS whatever --jobs is.
    """
    from .native import missing_notice

    if partitioned and not parquet_dir:
        fail("--partitioned needs --parquet DIR")
    with one_line_errors():  # the budget is checked before any work
        budget = api.memory_budget(memory_budget, "--memory-budget")
        inputs = api.expand_directories(
            inputs, skipped=lambda p, why: click.echo(f"tracekit: skipped {shown(p)}: {why}", err=True))
        api.check_not_store(inputs, db)
    note = missing_notice()
    if note:  # pip install -q hid hatch_build.py's warning
        click.echo(note, err=True)
    if engine == "spark":
        _convert_spark(inputs, parquet_dir, master, spark_conf, fmt, rank, strict, replace, budget)
        return
    bars = _Bars(quiet)
    with one_line_errors():
        api.spark_only(master, spark_conf)
        try:
            done = api.convert(inputs, db, format=fmt, rank=rank, strict=strict, replace=replace,
                               allow_duplicate=allow_duplicate, jobs=jobs, memory_budget=budget,
                               parquet=parquet_dir, partitioned=partitioned, keep_going=True,
                               on_result=bars.result, progress=bars.progress if bars.shown else None,
                               flags=("--replace", "--allow-duplicate"))
        finally:
            bars.close()
    if done.note:
        click.echo(f"tracekit: {done.note}", err=True)
    if done.exported is not None:
        what = "tables as a partitioned Parquet dataset" if partitioned else "Parquet files"
        click.echo(f"wrote {len(done.exported)} {what} to {shown(parquet_dir)}")
    if done.failed:
        sys.exit(2)


class _Bars:
    """The progress bar of a conversion on a terminal (not with --quiet): one per input of more
    than 20 MB, or one for all inputs (with --jobs) when they hold more; each input's line is
    printed where the bar was, and the bar drawn again below."""

    def __init__(self, quiet: bool):
        self.shown = not quiet and sys.stderr.isatty()
        self.bar, self.label, self.pos = None, None, 0

    def progress(self, label: str, size: int, fraction: float) -> None:
        if label != self.label:
            self.close()
            self.label = label
            if size > 20_000_000:
                self.bar = click.progressbar(length=1000, label=label, file=sys.stderr)
                self.bar.__enter__()
        pos = int(1000 * fraction)
        if self.bar is not None and pos > self.pos:
            self.bar.update(pos - self.pos)
            self.pos = pos

    def result(self, out: api.Outcome) -> None:
        all_inputs = self.label not in (None, f"converting {out.path.name}")
        if not all_inputs:
            self.close()
        elif self.bar is not None:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
        if out.error is not None:
            click.echo(f"tracekit: error: {out.error}", err=True)
        else:
            click.echo(out.summary.one_line())
        if all_inputs and self.bar is not None:
            self.bar.render_progress()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
        self.bar, self.label, self.pos = None, None, 0


def _convert_spark(inputs, parquet_dir, master, spark_conf, fmt, rank, strict, replace, budget) -> None:
    """convert --engine spark: one Spark task per input, each writing its partitions of the dataset."""
    with one_line_errors():
        conf = api.parse_pairs(spark_conf, "--spark-conf", "spark.executor.memory=2g")
        results = api.convert_spark(inputs, parquet_dir, master=master, conf=conf, format=fmt, rank=rank,
                                    strict=strict, replace=replace, memory_budget=budget)
    for r in results:
        click.echo(r.line if r.ok else f"tracekit: error: {r.line}", err=not r.ok)
    done = sum(r.ok for r in results)
    click.echo(f"wrote {done} of {len(results)} inputs as a partitioned Parquet dataset to {parquet_dir} "
               f"(query it with tracekit sql --db {parquet_dir} [--engine spark])")
    if done < len(results):
        sys.exit(2)


@main.command()
@click.argument("query", required=False)
@click.option("-f", "--file", "query_file", metavar="FILE",
              help="Read the SQL from FILE ('-': standard input) instead of QUERY.")
@click.option("--db", "db", default=DEFAULT_DB, show_default=True, type=click.Path(),
              help="The tracekit store (a DuckDB file), or the folder of a Parquet export "
                   "(convert --parquet DIR, flat or --partitioned).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]), default="table",
              show_default=True, help="Output format (parquet needs -o). csv, json and parquet write one "
                                      "result: of several statements, one only may return rows.")
@OUTPUT_OPTION
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Set a view parameter (a DuckDB variable read by the views), e.g. --param bucket_ns=1000000; "
                   "a NAME no view reads is refused.")
@click.option("--timeunit", type=click.Choice(list(TIME_UNITS)), default="ns", show_default=True,
              help="Show the result's *_ns columns (durations, times) in this unit, as DOUBLE, renamed "
                   "*_us, *_ms, *_s (like nsys stats --timeunit); every --format.")
@click.option("--max-rows", default=100, show_default=True, help="Rows shown by --format table (0 = all).")
@click.option("--unsafe", is_flag=True,
              help="Lift the sandbox: let the SQL read and write files, attach databases, load extensions.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="spark: run on Apache Spark over the Parquet dataset --db DIR; the query and the views "
                   "are written in DuckDB's SQL and translated (docs/scaling.md).")
@_spark_options
def sql(query, query_file, db, fmt, output, params, timeunit, max_rows, unsafe, engine, master, spark_conf):
    """Run SQL against the store (read-only); every view of `tracekit views` is available.
    --db may also name a Parquet export (convert --parquet DIR): the same views over its files.

    The SQL is QUERY, or read from -f FILE, or from standard input (QUERY '-', or no QUERY when
    standard input is not a terminal). Several statements (separated by ';') run in turn, and
    --format table shows each result in turn; csv, json and parquet write one result, so
    of several statements one only may return rows (the others: e.g. SET VARIABLE).

    Results stream from DuckDB: the table holds only the rows it shows (--max-rows; the rest
    are counted), csv / json / parquet are written as the rows come (to a temporary file first,
    copied to -o FILE or standard output once every statement has run).

    Table output prints integers plainly, intervals as DuckDB writes them, STRUCT / LIST / MAP
    values as JSON, control characters and line breaks escaped (\\n), cells cut at 60
    characters. --timeunit us|ms|s converts every *_ns column of the result (csv, json and
    parquet too).

    The query runs sandboxed: it cannot read or write other files (COPY, read_text, glob,
    ATTACH), reach the network or load extensions, and cannot turn that off; -o is written by
    tracekit (a Parquet export is then read into memory first: its own files stay out of reach
    too). --unsafe lifts the sandbox (for SQL you wrote yourself).

    \b
    Examples:
      tracekit sql "select name, total_ns, time_pct from hotspots limit 5" --timeunit ms
      tracekit sql "select * from idle_gaps order by dur_ns desc" --format csv -o gaps.csv
      tracekit sql -f report.sql
      echo "select count(*) from kernels" | tracekit sql
      tracekit sql --engine spark --db dataset/ "select * from idle_gaps limit 5"

    --engine spark runs the same SQL (DuckDB's dialect, translated with the views by sqlglot) on
    Apache Spark over a Parquet export (--db DIR; local[*], or --master URL for a cluster).
    It needs pip install 'tracekit-gpu[spark]' and Java 17+.
    """
    from .api_sql import read_query, run_sql
    from .outputs import refuse_store

    with one_line_errors():
        refuse_store(output, db)  # before the SQL is read
        text, where = read_query(query, query_file)
        run_sql(text, where, db, fmt=fmt, output=output, params=params, timeunit=timeunit, max_rows=max_rows,
                unsafe=unsafe, engine=engine, master=master, conf=spark_conf,
                echo=lambda t: click.echo(t, nl=False))


@main.command("views")
@click.option("--doc", "doc_of", metavar="VIEW",
              help="Print the documentation of one view (its header as written: definition, "
                   "parameters, columns) and its SQL; lib/NAME: a file of the SQL library.")
@click.option("--sql", "sql_of", metavar="VIEW",
              help="Print only the SQL of one view (or of lib/NAME), as written in sql/.")
@click.option("--lib", is_flag=True, help="List the SQL library: the macros the views share (sql/lib/).")
def views_cmd(doc_of, sql_of, lib):
    """List the SQL views with one-line descriptions (or the documentation and SQL of one)."""
    if doc_of and sql_of:
        fail("give --doc VIEW or --sql VIEW, not both")
    name = doc_of or sql_of
    if name:
        with one_line_errors():
            text = api.view_source(name, sql_only=bool(sql_of))
        click.echo(text, nl=False)
        return
    for line in api.library_lines() if lib else api.view_lines():
        click.echo(line)


@main.command("schema")
@click.option("--markdown", is_flag=True, help="Print the full documentation (docs/schema.md).")
@click.argument("table", required=False)
def schema_cmd(markdown, table):
    """Print the unified schema: every table, column, type and meaning."""
    from . import schema

    if markdown:
        click.echo(schema.to_markdown())
        return
    with one_line_errors():
        lines = api.schema_lines(table)
    for line in lines:
        click.echo(line)


from .export.commands import export  # noqa: E402
main.add_command(export)
from .diagnose_commands import diagnose_cmd, diff_cmd  # noqa: E402
main.add_command(diagnose_cmd)
main.add_command(diff_cmd)

if __name__ == "__main__":
    main()
