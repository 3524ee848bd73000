"""The `tracekit` command line: a thin layer over tracekit.store, tracekit.views and tracekit.schema."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click
import duckdb

from . import __version__, schema, views
from .adapters.base import TraceError
from .adapters.detect import NAMES as FORMAT_NAMES
from .names import printable
from .store import DEFAULT_DB, Rollback, Store, StoreError, os_error_line, writing

DB_OPTION = click.option("--db", "db", default=DEFAULT_DB, show_default=True, type=click.Path(dir_okay=False),
                         help="The tracekit store (a DuckDB file).")


def _fail(msg: str) -> None:
    click.echo(f"tracekit: error: {msg}", err=True)
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
    """The `tracekit` command: it owns its process, so a conversion may tune it (store.OWN_PROCESS)."""
    from . import store

    store.OWN_PROCESS = True
    main()


@main.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@click.option("--replace", is_flag=True, help="Start the store afresh instead of adding sources to it.")
@click.option("--parquet", "parquet_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every table as DIR/<table>.parquet.")
@click.option("--partitioned", is_flag=True,
              help="With --parquet: write the Hive-partitioned dataset DIR/<table>/source_id=<n>/ "
                   "instead (docs/scaling.md; read it back with tracekit.store.open_parquet).")
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES),
              help="Input format (default: detected from the content).")
@click.option("--rank", type=int, help="Distributed rank of the input(s), when the trace does not say.")
@click.option("--strict", is_flag=True, help="Fail an input when any of its rows would be skipped.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
              help="Convert up to N inputs at once, each in its own process (default: the number "
                   "of CPUs; 1: one after the other in this process). The store is the same either "
                   "way: same source ids, rows and order.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def convert(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, jobs, quiet):
    """Convert trace files into a store (one source per file).

    INPUTS are Kineto/torch.profiler JSON (.json, .json.gz), Nsight Systems exports (.sqlite,
    .nsys-rep) or Nsight Compute results (CSV, .ncu-rep); the format is detected from the
    content. Converting into an existing store adds sources: that is how traces are merged.
    Prints one line per source: rows per table, rows skipped and why. The store is replaced
    atomically at the end, so readers never see a half-written store; an input that fails
    adds nothing (exit status 2).

    Several inputs (e.g. the ranks of a job) convert in parallel, up to --jobs at once, each in
    its own process; they are merged into the store in input order, so source ids follow the
    order of INPUTS whatever --jobs is.
    """
    from .parallel import default_jobs, error_line

    if partitioned and not parquet_dir:
        _fail("--partitioned needs --parquet DIR")
    for p in inputs:
        if Path(db).exists() and p.exists() and os.path.samefile(p, db):
            _fail(f"{db}: is also an input; the store would overwrite it: choose another --db")
    jobs = jobs or default_jobs()
    if jobs > 1 and len(inputs) > 1:
        _convert_parallel(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, jobs, quiet)
        return
    failed = 0
    try:
        with writing(db, replace=replace) as store:
            for p in inputs:
                try:
                    summary = _convert_one(store, p, fmt, rank, strict, quiet)
                except TraceError as e:
                    click.echo(f"tracekit: error: {e.one_line()}", err=True)
                    failed += 1
                    continue
                except Exception as e:  # a bug, not bad input: still one line, and say so
                    if os.environ.get("TRACEKIT_DEBUG"):
                        raise
                    click.echo(f"tracekit: error: {error_line(p, e)}", err=True)
                    failed += 1
                    continue
                click.echo(summary.one_line())
            _keep_or_roll_back(db, replace, failed, len(inputs))
            if parquet_dir:
                _export(store, parquet_dir, partitioned)
    except StoreError as e:
        _fail(str(e))
    except OSError as e:
        _fail(os_error_line(e, db))
    if failed:
        sys.exit(2)


def _keep_or_roll_back(db: Path, replace: bool, failed: int, total: int) -> None:
    """After the inputs: with --replace, a failed input keeps the old store whole (it is not
    replaced by a part of what was asked); without, a run that converted nothing writes nothing
    (no new empty store)."""
    if failed and (replace or failed == total):
        if replace and failed < total and Path(db).exists():
            click.echo(f"tracekit: {failed} of {total} inputs failed; the store was not replaced", err=True)
        raise Rollback()


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
        click.echo(f"wrote {len(paths)} tables as a partitioned Parquet dataset to {parquet_dir}")
    else:
        click.echo(f"wrote {len(paths)} Parquet files to {parquet_dir}")


def _convert_parallel(inputs, db, replace, parquet_dir, partitioned, fmt, rank, strict, jobs, quiet):
    """`convert` with a process pool (tracekit/parallel.py): the same lines, errors and store."""
    from .parallel import convert_inputs, error_line

    failed = 0
    show = not quiet and sys.stderr.isatty() and sum(
        p.stat().st_size for p in inputs if p.is_file()) > 20_000_000
    try:
        with writing(db, replace=replace) as store:
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

                for out in convert_inputs(store, inputs, jobs=jobs, format=fmt, rank=rank, strict=strict,
                                          progress=progress if show else None):
                    if bar is not None:  # the line goes where the bar was; the bar is drawn again below
                        sys.stderr.write("\r\x1b[K")
                        sys.stderr.flush()
                    if out.error is not None:
                        click.echo(f"tracekit: error: {error_line(out.path, out.error)}", err=True)
                        failed += 1
                    else:
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
        _fail(os_error_line(e, db))
    if failed:
        sys.exit(2)


def _convert_one(store: Store, path: Path, fmt, rank, strict, quiet):
    show = not quiet and sys.stderr.isatty() and path.exists() and path.stat().st_size > 20_000_000
    if not show:
        return store.convert(path, format=fmt, rank=rank, strict=strict)
    with click.progressbar(length=1000, label=f"converting {path.name}", file=sys.stderr) as bar:
        def progress(done, total, _last=[0]):
            pos = int(1000 * done / total) if total else 1000
            if pos > _last[0]:
                bar.update(pos - _last[0])
                _last[0] = pos
        return store.convert(path, progress=progress, format=fmt, rank=rank, strict=strict)


@main.command()
@click.argument("query")
@DB_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "parquet"]), default="table",
              show_default=True, help="Output format (parquet needs -o).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Set a view parameter (a DuckDB variable read by the views), e.g. --param bucket_ns=1000000.")
@click.option("--max-rows", default=100, show_default=True, help="Rows shown by --format table (0 = all).")
@click.option("--unsafe", is_flag=True,
              help="Lift the sandbox: let the SQL read and write files, attach databases, load extensions.")
def sql(query, db, fmt, output, params, max_rows, unsafe):
    """Run a SQL QUERY against the store (read-only); every view of `tracekit views` is available.

    The query runs sandboxed: it cannot read or write other files (COPY, read_text, glob,
    ATTACH), reach the network or load extensions, and cannot turn that off; -o is written by
    tracekit. --unsafe lifts the sandbox (for SQL you wrote yourself).

    \b
    Examples:
      tracekit sql "select name, total_ns, time_pct from hotspots limit 5"
      tracekit sql "select * from idle_gaps order by dur_ns desc" --format csv -o gaps.csv
    """
    try:
        store = Store(db, read_only=True, sandbox=not unsafe)
    except StoreError as e:
        _fail(str(e))
    with store:
        try:
            for p in params:
                name, sep, value = p.partition("=")
                if not sep or not name.isidentifier():
                    _fail(f"--param {p!r}: expected NAME=VALUE")
                store.con.execute(f"SET VARIABLE {name} = ?", [_param_value(value)])
            rel = store.sql(query)
            if rel is not None:
                _emit(rel, fmt, output, max_rows)
        except duckdb.Error as e:  # when binding, or while the query runs (results are lazy)
            if output and isinstance(e, duckdb.IOException):
                _fail(f"{output}: cannot write ({str(e).splitlines()[0]}); check the path and the free space")
            _fail(f"query failed: {str(e).splitlines()[0]}")
        except OSError as e:
            _fail(os_error_line(e, output))


def _param_value(v: str):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def _writer(rel: duckdb.DuckDBPyRelation):
    """The result as a relation of a private in-memory connection that may write files: the
    user's query ran on the (sandboxed) store; only its rows reach the writer."""
    con = duckdb.connect()
    return con, con.from_arrow(rel.to_arrow_table())


def _emit(rel: duckdb.DuckDBPyRelation, fmt: str, output: Path | None, max_rows: int) -> None:
    if fmt == "parquet":
        if not output:
            _fail("--format parquet needs -o FILE")
        con, w = _writer(rel)
        with con:
            w.write_parquet(str(output))
        return
    if fmt == "csv":
        con, w = _writer(rel)
        with con:
            _write_csv(w, output)
        return
    tbl = rel.to_arrow_table()
    if fmt == "json":
        import orjson

        data = orjson.dumps(tbl.to_pylist(), option=orjson.OPT_INDENT_2, default=str).decode() + "\n"
        if output:
            output.write_text(data)
        else:
            sys.stdout.write(data)
        return
    text = _table_text(tbl, max_rows)
    if output:
        output.write_text(text)
    else:
        click.echo(text)


def _write_csv(rel: duckdb.DuckDBPyRelation, output: Path | None) -> None:
    """CSV by DuckDB's writer (C++, parallel): a header line, `,`, `"` quoting only where needed
    (doubled inside), `\n` line ends, NULL as an empty field (an empty string is `""`); booleans
    as `True` / `False`, as before. Standard output gets the file through a temporary file."""
    import io
    import shutil
    import tempfile

    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    if any(str(t) == "BOOLEAN" for t in rel.types):
        rel = rel.project(", ".join(
            f"CASE WHEN {q(c)} THEN 'True' WHEN NOT {q(c)} THEN 'False' END AS {q(c)}"
            if str(t) == "BOOLEAN" else q(c) for c, t in zip(rel.columns, rel.types)))
    if output:
        rel.write_csv(str(output), header=True)
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-csv-") as d:
        tmp = os.path.join(d, "out.csv")
        rel.write_csv(tmp, header=True)
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        with open(tmp, "rb") as f:
            if out is None:  # a text-only stream
                shutil.copyfileobj(io.TextIOWrapper(f, encoding="utf-8", newline=""), sys.stdout, 1 << 20)
            else:
                shutil.copyfileobj(f, out, 1 << 20)
                out.flush()


def _table_text(tbl, max_rows: int) -> str:
    names = tbl.column_names
    n = tbl.num_rows
    shown = tbl if not max_rows or n <= max_rows else tbl.slice(0, max_rows)
    rows = [[_cell(v) for v in r.values()] for r in shown.to_pylist()]
    widths = [min(max([len(c)] + [len(r[i]) for r in rows]), 60) for i, c in enumerate(names)]
    def line(cells):
        return "  ".join((c if len(c) <= w else c[: w - 1] + "…").ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [line(names), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if shown.num_rows < n:
        out.append(f"... {n - shown.num_rows:,} more rows (use --max-rows 0 or --format csv)")
    out.append(f"({n:,} row{'s' if n != 1 else ''})")
    return "\n".join(out)


def _cell(v) -> str:
    import decimal

    if v is None:
        return "NULL"
    if isinstance(v, decimal.Decimal):
        v = int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 1000 else f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    return printable(str(v))


@main.command("views")
@click.option("--doc", "doc_of", metavar="VIEW",
              help="Print the full documentation of one view (or of a file of the SQL library, lib/NAME).")
@click.option("--lib", is_flag=True, help="List the SQL library: the macros the views share (sql/lib/).")
def views_cmd(doc_of, lib):
    """List the SQL views with one-line descriptions (or the full doc of one)."""
    all_v = views.all_views()
    libs = {f"lib/{p.stem}": text for p, text in views.library()}
    if doc_of:
        for v in all_v:
            if v.name == doc_of:
                click.echo(v.header)
                return
        if doc_of in libs:
            click.echo("\n".join(line[3:] if line.startswith("-- ") else line[2:]
                                 for line in libs[doc_of].split("\n") if line.startswith("--")))
            return
        _fail(f"no view named {doc_of!r}; `tracekit views` lists them (`--lib`: the library)")
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
