"""The `tracekit` command line: a thin layer over tracekit.store, tracekit.views and tracekit.schema."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click
import duckdb
import pyarrow as pa

from . import __version__, schema, views
from .adapters.base import TraceError
from .adapters.detect import NAMES as FORMAT_NAMES
from .names import shown
from .outputs import OutputError, atomic_output, refuse_store
from .render import TIME_UNITS, convert_timeunit, error_text, json_ready, table_text
from .store import DEFAULT_DB, Rollback, Store, StoreError, head_of, os_error_line, writing
from .store import open as open_store

DB_OPTION = click.option("--db", "db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False),
                         help="The tracekit store (a DuckDB file).")


def _fail(msg: str) -> None:
    # names in it with their control characters escaped (a DuckDB error's hint lines kept)
    click.echo(f"tracekit: error: {shown(msg, keep_newlines=True)}", err=True)
    sys.exit(2)


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


def _spark_only(master, spark_conf) -> None:
    """One line, exit 2, when a Spark option is given without --engine spark."""
    if master or spark_conf:
        _fail(("--master" if master else "--spark-conf") + " needs --engine spark")


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
    from . import budget
    from .parallel import default_jobs, error_line

    if partitioned and not parquet_dir:
        _fail("--partitioned needs --parquet DIR")
    try:  # checked before any work; the workers of --jobs get it through the environment
        if memory_budget is not None:
            os.environ[budget.ENV] = str(budget.parse(memory_budget, "--memory-budget"))
        budget.current()
    except budget.BudgetError as e:
        _fail(str(e))
    inputs = _expand_directories(inputs)
    for p in inputs:
        if Path(db).exists() and p.exists() and os.path.samefile(p, db):
            _fail(f"{db}: is also an input; the store would overwrite it: choose another --db")
    from .native import missing_notice

    note = missing_notice()
    if note:  # pip install -q hid hatch_build.py's warning
        click.echo(note, err=True)
    if engine == "spark":
        _convert_spark(inputs, parquet_dir, master, _spark_conf(spark_conf), fmt, rank, strict, replace)
        return
    _spark_only(master, spark_conf)
    jobs = jobs or default_jobs()
    if jobs > 1 and len(inputs) > 1:
        _convert_parallel(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, jobs, quiet,
                          allow_duplicate)
        return
    from .fingerprint import check_inputs, record

    failed = 0
    try:
        with writing(db, replace=replace) as store:
            fps = check_inputs(store, inputs, allow_duplicate)
            for p, fp in zip(inputs, fps):
                try:
                    summary = _convert_one(store, p, fmt, rank, strict, quiet)
                except TraceError as e:
                    click.echo(f"tracekit: error: {e.one_line()}", err=True)
                    failed += 1
                    continue
                except Exception as e:  # a bug, not bad input: still one line, and say so
                    if os.environ.get("TRACEKIT_DEBUG"):
                        raise
                    # (the store's hidden working copy named as the store)
                    click.echo(f"tracekit: error: {error_line(p, e).replace(store.path, str(db))}", err=True)
                    failed += 1
                    continue
                record(store, summary.source_id, fp)
                click.echo(summary.one_line())
            _keep_or_roll_back(db, replace, failed, len(inputs))
            if parquet_dir:
                _export(store, parquet_dir, partitioned)
    except StoreError as e:
        _fail(str(e))
    except OSError as e:
        _fail(os_error_line(_as_store(e, db), db))
    if failed:
        sys.exit(2)


def _as_store(e: OSError, db) -> OSError:
    """An error about the store's hidden working copy (``.NAME.tmp-PID``) said of the store."""
    if e.filename is not None and Path(str(e.filename)).name.startswith(f".{Path(db).name}.tmp-"):
        e.filename = str(db)
    return e


def _expand_directories(inputs) -> list[Path]:
    """A directory input stands for the trace files directly inside it (HTA's trace_dir), in name
    order, one source each; every other file in it is skipped with a line saying why: not a
    format tracekit reads (by content), a JSON file that is not a trace, a subdirectory (not
    searched), an .nsys-rep / .qdrep whose .sqlite export lies beside it (the same capture)."""
    from .adapters.base import TraceError
    from .adapters.detect import _head, sniff

    out: list[Path] = []
    for d in inputs:
        if not d.is_dir():
            out.append(d)
            continue
        try:
            entries = sorted(d.iterdir(), key=lambda p: p.name)
        except OSError as e:
            _fail(os_error_line(e, d))
        names = {p.name for p in entries}
        found = 0
        for p in entries:
            why = None
            if p.is_dir():
                why = "a directory (not searched: pass it as an input)"
            elif p.suffix.lower() in (".nsys-rep", ".qdrep") and p.stem + ".sqlite" in names:
                why = f"the same capture as {p.stem}.sqlite beside it, which is converted"
            else:
                try:
                    fmt = sniff(p)
                    head = _head(p) if fmt == "kineto" else b""
                    if fmt == "kineto" and b'"traceEvents"' not in head and b'"ph"' not in head:
                        why = "JSON without 'traceEvents' or 'ph' in its first 64 KiB: not a trace"
                except TraceError as e:
                    why = e.what
                except OSError as e:
                    why = os_error_line(e, p)
            if why:
                click.echo(f"tracekit: skipped {shown(p)}: {why}", err=True)
            else:
                out.append(p)
                found += 1
        if not found:
            _fail(f"{d}: no trace files in it (Kineto .json / .json.gz, nsys .sqlite / .nsys-rep, ncu "
                  "CSV / .ncu-rep, detected by content); pass a folder holding traces, or the files")
    return out


def _keep_or_roll_back(db: Path, replace: bool, failed: int, total: int) -> None:
    """After the inputs: with --replace, a failed input keeps the old store whole (it is not
    replaced by a part of what was asked); without, a run that converted nothing writes nothing
    (no new empty store)."""
    if failed and (replace or failed == total):
        if replace and failed < total and Path(db).exists():
            click.echo(f"tracekit: {failed} of {total} inputs failed; the store was not replaced", err=True)
        raise Rollback()


def _spark_conf(pairs) -> dict:
    """--spark-conf KEY=VALUE ... as a dict (a pair without '=' or a key: one-line error)."""
    conf = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            _fail(f"--spark-conf {p!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g")
        conf[key.strip()] = value
    return conf


def _convert_spark(inputs, parquet_dir, master, conf, fmt, rank, strict, replace) -> None:
    """convert --engine spark: one Spark task per input, each writing its partitions of the dataset."""
    if not parquet_dir:
        _fail("--engine spark writes the partitioned Parquet dataset: give --parquet DIR")
    from .spark.convert import DatasetError, convert_dataset
    from .spark.engine import SparkUnavailable

    try:
        results = convert_dataset(inputs, parquet_dir, master=master, fmt=fmt, rank=rank, strict=strict,
                                  replace=replace, conf=conf)
    except (DatasetError, SparkUnavailable) as e:
        _fail(str(e))
    for r in results:
        click.echo(r.line if r.ok else f"tracekit: error: {r.line}", err=not r.ok)
    done = sum(r.ok for r in results)
    click.echo(f"wrote {done} of {len(results)} inputs as a partitioned Parquet dataset to {parquet_dir} "
               f"(query it with tracekit sql --db {parquet_dir} [--engine spark])")
    if done < len(results):
        sys.exit(2)


def _export(store: Store, parquet_dir: Path, partitioned: bool) -> None:
    """--parquet DIR, inside the conversion: a failure here leaves the store as it was too."""
    try:
        paths = store.export_parquet(parquet_dir, partitioned=partitioned)
    except OSError as e:
        raise StoreError(f"--parquet: {os_error_line(e, parquet_dir)}; nothing was converted") from None
    except duckdb.Error as e:
        raise StoreError(f"--parquet {parquet_dir}: cannot write ({str(e).splitlines()[0]}); "
                         "nothing was converted") from None
    if partitioned:
        click.echo(f"wrote {len(paths)} tables as a partitioned Parquet dataset to {shown(parquet_dir)}")
    else:
        click.echo(f"wrote {len(paths)} Parquet files to {shown(parquet_dir)}")


def _convert_parallel(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, jobs, quiet,
                      allow_duplicate=False):
    """`convert` with a process pool (tracekit/parallel.py): the same lines, errors and store."""
    from .fingerprint import check_inputs, record
    from .parallel import convert_inputs, error_line

    failed = 0
    show = not quiet and sys.stderr.isatty() and sum(
        p.stat().st_size for p in inputs if p.is_file()) > 20_000_000
    try:
        with writing(db, replace=replace) as store:
            fps = check_inputs(store, inputs, allow_duplicate)
            bar = None
            if show:
                bar = click.progressbar(length=1000, label=f"converting {len(inputs)} inputs "
                                        f"({min(jobs, len(inputs))} at once)", file=sys.stderr)
                bar.__enter__()
            try:
                pos = [0]

                def progress(frac):
                    p = int(1000 * frac)
                    if bar is not None and p > pos[0]:
                        bar.update(p - pos[0])
                        pos[0] = p

                for out, fp in zip(convert_inputs(store, inputs, jobs=jobs, format=fmt, rank=rank, strict=strict,
                                                  progress=progress if show else None), fps):
                    if bar is not None:  # the line goes where the bar was; the bar is drawn again below
                        sys.stderr.write("\r\x1b[K")
                        sys.stderr.flush()
                    if out.error is not None:
                        click.echo(f"tracekit: error: {error_line(out.path, out.error)}", err=True)
                        failed += 1
                    else:
                        record(store, out.summary.source_id, fp)
                        click.echo(out.summary.one_line())
                    if bar is not None:
                        bar.render_progress()
            finally:
                if bar is not None:
                    bar.__exit__(None, None, None)
            _keep_or_roll_back(db, replace, failed, len(inputs))
            if parquet_dir:
                _export(store, parquet_dir, partitioned)
    except StoreError as e:
        _fail(str(e))
    except OSError as e:
        _fail(os_error_line(_as_store(e, db), db))
    if failed:
        sys.exit(2)


def _convert_one(store: Store, path: Path, fmt, rank, strict, quiet):
    show = not quiet and sys.stderr.isatty() and path.exists() and path.stat().st_size > 20_000_000
    if not show:
        return store.convert(path, format=fmt, rank=rank, strict=strict)
    with click.progressbar(length=1000, label=f"converting {path.name}", file=sys.stderr) as bar:
        def progress(done, total, _last=[0]):  # noqa: B006 (the last position, kept across calls)
            pos = int(1000 * done / total) if total else 1000
            if pos > _last[0]:
                bar.update(pos - _last[0])
                _last[0] = pos
        return store.convert(path, progress=progress, format=fmt, rank=rank, strict=strict)


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
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
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
    try:
        refuse_store(output, db)
    except OutputError as e:
        _fail(str(e))
    text, where = _read_query(query, query_file)
    try:
        stmts = duckdb.extract_statements(text)  # parses only: nothing runs yet
    except duckdb.Error as e:
        _fail(f"query failed: {error_text(e)}")
    if not stmts:
        _fail(f"{where}: no SQL statement in it (only blanks or comments)")
    if engine == "spark":
        _sql_spark(db, stmts, fmt, output, params, timeunit, max_rows, master, _spark_conf(spark_conf))
        return
    _spark_only(master, spark_conf)
    values = _params(params)
    try:
        store = open_store(db, read_only=True, sandbox=not unsafe)
    except StoreError as e:
        _fail(str(e))
    with store:
        try:
            for name, value in values.items():
                store.con.execute(f"SET VARIABLE {name} = ?", [value])
        except duckdb.Error as e:
            _fail(f"--param: {error_text(e)}")
        _run_statements(store, stmts, fmt, output, timeunit, max_rows)


def _params(params) -> dict:
    """The --param NAME=VALUE options as {name: value}; a name no view reads is refused (it
    would change nothing), naming the parameters the views read."""
    out = {}
    for p in params:
        name, sep, value = p.partition("=")
        if not sep or not name.isidentifier():
            _fail(f"--param {p!r}: expected NAME=VALUE")
        if name not in views.all_parameters():
            _fail(f"--param {name}: no view reads a parameter of that name; the parameters are "
                  f"{', '.join(views.all_parameters())} (`tracekit views --doc VIEW` says which view reads which)")
        out[name] = _param_value(value)
    return out


def _read_query(query: str | None, query_file: str | None) -> tuple[str, str]:
    """The SQL text and where it came from (for errors): QUERY, -f FILE, or standard input."""
    if query is not None and query_file is not None:
        _fail("give the SQL either as QUERY or with -f FILE, not both")
    if query is not None and query != "-":
        return query, "QUERY"
    src = query_file if query_file is not None else "-"
    if src == "-":
        if query is None and query_file is None and sys.stdin.isatty():
            _fail("no query: give it as QUERY, with -f FILE, or on standard input (QUERY '-')")
        where = "standard input"
        try:
            stdin = getattr(sys.stdin, "buffer", None)
            data = stdin.read() if stdin is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        except OSError as e:
            _fail(f"{where}: cannot read ({e.strerror or e})")
    else:
        where = src
        try:
            data = Path(src).read_bytes()
        except IsADirectoryError:
            _fail(f"{src}: is a folder; -f takes a file of SQL")
        except OSError as e:
            _fail(f"{src}: {e.strerror or e}; check the path")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        _fail(f"{where}: not UTF-8 text (byte {e.start}); save the SQL as UTF-8")
    if not text.strip():
        _fail(f"{where}: empty; give the SQL to run")
    return text, where


def _sql_spark(db, stmts, fmt, output, params, timeunit, max_rows, master, conf) -> None:
    """sql --engine spark: each statement translated and run on Spark over the dataset DIR."""
    from .spark.engine import SparkEngine, SparkQueryError, SparkUnavailable

    values = _params(params)
    try:
        eng = SparkEngine(db, master=master, params=values, conf=conf)
    except SparkUnavailable as e:
        _fail(str(e))
    except StoreError as e:
        _fail(str(e))

    def fetch(query: str):
        try:
            return eng.query(query)
        except SparkQueryError as e:
            raise _QueryFailed(str(e)) from None

    with eng:
        _run_statements(None, stmts, fmt, output, timeunit, max_rows, fetch=fetch)


class _QueryFailed(Exception):
    """A statement failed on another engine (its one-line reason)."""


def _run_statements(store: Store | None, stmts, fmt: str, output: Path | None, timeunit: str, max_rows: int,
                    fetch=None) -> None:
    """Run the statements in turn. Table output shows each result as it comes (a blank line
    between two): its first ``max_rows`` rows, the others counted as they stream past. csv /
    json / parquet write the one result, batch by batch as it streams from DuckDB, into a
    spool file in the system's temporary folder, copied into -o FILE or to standard output at
    the end: a second result is an error, and nothing is written.  ``fetch(query) -> Arrow
    table or None``: another engine's results (raising _QueryFailed) instead of the store's."""
    if fmt == "parquet" and not output:
        _fail("--format parquet needs -o FILE")
    n = len(stmts)
    held = None  # (statement number, spool file) for csv / json / parquet
    texts: list[str] = []  # table output for -o
    spool_dir = None
    try:
        for i, stmt in enumerate(stmts, 1):
            at = f" (statement {i} of {n})" if n > 1 else ""
            try:
                if fetch is not None:
                    tbl = fetch(stmt.query)
                    rows = None if tbl is None else _in_unit(tbl.to_reader(), timeunit)
                else:
                    try:
                        rows = store.stream(stmt.query)
                    except duckdb.CatalogException:
                        # only the views the query names are registered: with all of them, DuckDB's
                        # "Did you mean" can name a view too (a failed bind ran nothing)
                        _ = store.con
                        rows = store.stream(stmt.query)
                    rows = None if rows is None else _in_unit(rows, timeunit)
                if rows is None:
                    continue
                if stmt.type != duckdb.StatementType.SELECT and rows.schema.names in (["Success"], ["Count"]):
                    tbl = rows.read_all()  # a status, not rows (tiny)
                    if not _returns_rows(stmt, tbl):
                        continue
                    rows = tbl.to_reader()
                if fmt == "table":
                    tbl, total = head_of(rows, max_rows)
                    out = table_text(tbl, max_rows, total)
                    if not output:
                        click.echo(("\n" if texts else "") + out, nl=False)
                    texts.append(out if output else "")
                    continue
                if held is not None:
                    _fail(f"--format {fmt} writes one result, and statements {held[0]} and {i} both return "
                          "rows: run them apart, or use --format table")
                if spool_dir is None:
                    spool_dir = _spool_dir()
                spool = Path(spool_dir) / f"result.{fmt}"
                try:
                    _write(rows, fmt, spool)
                except duckdb.IOException as e:
                    _fail(f"{output or 'the result'}: cannot write ({str(e).splitlines()[0]}); check the path "
                          "and the free space")
                held = (i, spool)
            except duckdb.Error as e:
                _fail(f"query failed{at}: {error_text(e)}")
            except pa.ArrowException as e:  # an error of the query, as the writer read its rows
                _fail(f"query failed{at}: {str(e).splitlines()[0]}")
            except _QueryFailed as e:
                _fail(f"query failed{at}: {e}")
            except OSError as e:
                _fail(os_error_line(e, output))
        try:
            if fmt == "table":
                if output:
                    with atomic_output(output, "w", encoding="utf-8") as f:
                        f.write("\n".join(texts))
            elif held is not None:
                _deliver(held[1], output)
        except OSError as e:
            _fail(os_error_line(e, output or "standard output"))
    finally:
        if spool_dir is not None:
            import shutil

            shutil.rmtree(spool_dir, ignore_errors=True)


def _in_unit(rows: pa.RecordBatchReader, timeunit: str) -> pa.RecordBatchReader:
    """The batches with their *_ns columns in the time unit (render.convert_timeunit), as they come."""
    if timeunit == "ns":
        return rows
    schema = convert_timeunit(rows.schema.empty_table(), timeunit).schema

    def batches():
        for b in rows:
            yield from convert_timeunit(pa.Table.from_batches([b]), timeunit).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _spool_dir() -> str:
    """A private folder in the system's temporary folder for the result file being written."""
    import tempfile

    return tempfile.mkdtemp(prefix="tracekit-sql-")


def _write(rows: pa.RecordBatchReader, fmt: str, path: Path) -> None:
    """The result, as it streams, into ``path`` as csv, json or parquet. csv and parquet by a
    private in-memory DuckDB connection that may write files (the user's query ran on the
    sandboxed store; only its rows reach the writer)."""
    if fmt == "json":
        _write_json(rows, path)
        return
    with duckdb.connect(config={"threads": 1}) as con:  # one stream feeds it: more threads held
        rel = con.from_arrow(rows)                        # more (parquet 456 MB against 348) for no gain
        if fmt == "parquet":
            rel.write_parquet(str(path))
        else:
            _write_csv(rel, path)


def _write_json(rows: pa.RecordBatchReader, path: Path) -> None:
    """A JSON array of one object per row, indented by 2 (as orjson's OPT_INDENT_2 writes the
    whole list), written a batch at a time; values JSON has no form for as DuckDB's text."""
    import orjson

    first = True
    with open(path, "wb") as f:
        f.write(b"[")
        for batch in rows:
            if not batch.num_rows:
                continue
            text = orjson.dumps(json_ready(pa.Table.from_batches([batch])).to_pylist(),
                                option=orjson.OPT_INDENT_2, default=str)
            f.write((b"" if first else b",") + text[1:-2])  # "\n  {...},\n  {...}" of "[...\n]"
            first = False
        f.write(b"]\n" if first else b"\n]\n")


def _deliver(spool: Path, output: Path | None) -> None:
    """The written result copied into -o FILE (whole or not at all: `outputs.atomic_output`; a
    link is followed, a device or a pipe written to as it is) or to standard output."""
    import io
    import shutil

    if output is not None:
        with open(spool, "rb") as f, atomic_output(output) as out:
            shutil.copyfileobj(f, out, 1 << 20)
        return
    sys.stdout.flush()
    out = getattr(sys.stdout, "buffer", None)
    with open(spool, "rb") as f:
        if out is None:  # a text-only stream
            shutil.copyfileobj(io.TextIOWrapper(f, encoding="utf-8", newline=""), sys.stdout, 1 << 20)
        else:
            shutil.copyfileobj(f, out, 1 << 20)
            out.flush()


def _returns_rows(stmt, tbl: pa.Table) -> bool:
    """Whether a statement's result is rows to show: not the empty `Success` of SET, PREPARE,
    BEGIN, DROP, CHECKPOINT, nor the `Count` of an INSERT / UPDATE / DELETE / CREATE without
    RETURNING (the duckdb CLI shows neither)."""
    kinds = stmt.expected_result_type
    if kinds == [duckdb.ExpectedResultType.NOTHING]:
        return False
    if stmt.type != duckdb.StatementType.SELECT and tbl.column_names == ["Success"] and not tbl.num_rows:
        return False
    return not (duckdb.ExpectedResultType.CHANGED_ROWS in kinds and tbl.column_names == ["Count"])


def _param_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def _write_csv(rel: duckdb.DuckDBPyRelation, path: Path) -> None:
    """CSV by DuckDB's writer (C++): a header line, `,`, `"` quoting only where needed (doubled
    inside), `\n` line ends, NULL as an empty field (an empty string is `""`); booleans as
    `True` / `False`, as before."""

    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    if any(str(t) == "BOOLEAN" for t in rel.types):
        rel = rel.project(", ".join(
            f"CASE WHEN {q(c)} THEN 'True' WHEN NOT {q(c)} THEN 'False' END AS {q(c)}"
            if str(t) == "BOOLEAN" else q(c) for c, t in zip(rel.columns, rel.types)))
    rel.write_csv(str(path), header=True)


@main.command("views")
@click.option("--doc", "doc_of", metavar="VIEW",
              help="Print the documentation of one view (its header as written: definition, "
                   "parameters, columns) and its SQL; lib/NAME: a file of the SQL library.")
@click.option("--sql", "sql_of", metavar="VIEW",
              help="Print only the SQL of one view (or of lib/NAME), as written in sql/.")
@click.option("--lib", is_flag=True, help="List the SQL library: the macros the views share (sql/lib/).")
def views_cmd(doc_of, sql_of, lib):
    """List the SQL views with one-line descriptions (or the documentation and SQL of one)."""
    all_v = views.all_views()
    libs = {f"lib/{p.stem}": text for p, text in views.library()}
    if doc_of and sql_of:
        _fail("give --doc VIEW or --sql VIEW, not both")
    name = doc_of or sql_of
    if name:
        path = next((v.path for v in all_v if v.name == name), None)
        if path is None and name in libs:
            path = views.sql_dir() / "lib" / f"{name[4:]}.sql"
        if path is None:
            _fail(f"no view named {name!r}; `tracekit views` lists them (`--lib`: the library)")
        doc, statement = views.source_parts(path.read_text())
        click.echo(statement if sql_of else f"{doc}\n{statement}", nl=False)
        return
    if lib:
        for name, text in libs.items():
            click.echo(f"{name}: {text.splitlines()[0].split(':', 1)[1].strip()}")
            for m in re.findall(r"CREATE OR REPLACE TEMP MACRO (\w+)\(", text):
                click.echo(f"  {m}")
        return
    w = max(len(v.name) for v in all_v)
    for v in all_v:
        click.echo(f"{v.name.ljust(w)}  {v.description}")


@main.command("schema")
@click.option("--markdown", is_flag=True, help="Print the full documentation (docs/schema.md).")
@click.argument("table", required=False)
def schema_cmd(markdown, table):
    """Print the unified schema: every table, column, type and meaning."""
    if markdown:
        click.echo(schema.to_markdown())
        return
    tables = schema.TABLES
    if table:
        if table not in schema.BY_NAME:
            _fail(f"no table named {table!r}; tables: {', '.join(schema.BY_NAME)}")
        tables = (schema.BY_NAME[table],)
    for t in tables:
        click.echo(f"{t.name}: {t.doc}")
        w = max(len(c.name) for c in t.columns)
        for c in t.columns:
            click.echo(f"  {c.name.ljust(w)}  {c.sql_type.ljust(7)}  {c.doc}")
        click.echo()


from .export.commands import export  # noqa: E402
main.add_command(export)
from .diagnose_commands import diagnose_cmd, diff_cmd  # noqa: E402
main.add_command(diagnose_cmd)
main.add_command(diff_cmd)

if __name__ == "__main__":
    main()
