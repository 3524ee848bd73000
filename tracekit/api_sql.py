"""The `tracekit sql` operation: read the SQL, run its statements on a store, a Parquet export
or Spark, and write each result as a table, csv, json or parquet (streamed).  Errors are
StoreError in one line; tracekit/cli.py only parses the options and calls `run_sql`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa

from .api import open_store, parse_pairs, parse_params, set_params, spark_only
from .outputs import atomic_output, refuse_store
from .render import convert_timeunit, error_text, json_ready, table_text
from .store import DEFAULT_DB, Store, StoreError, head_of, os_error_line


def _fail(msg: str):
    raise StoreError(msg)


def run_sql(text: str, where: str, db=DEFAULT_DB, *, fmt: str = "table", output: Path | None = None,
            params=(), timeunit: str = "ns", max_rows: int = 100, unsafe: bool = False, engine: str = "duckdb",
            master: str | None = None, conf=(), echo: Callable[[str], None] | None = None) -> None:
    """Run the SQL ``text`` (read from ``where``) on the store ``db`` (or the Parquet export, or
    Spark over it), read-only and sandboxed unless ``unsafe``; ``params``: the --param
    NAME=VALUE items, ``conf`` the --spark-conf KEY=VALUE ones.  Table output goes to ``echo`` (default: standard output) or -o
    ``output``; csv / json / parquet to ``output`` or standard output (`run_statements`)."""
    refuse_store(output, db)
    try:
        stmts = duckdb.extract_statements(text)  # parses only: nothing runs yet
    except duckdb.Error as e:
        _fail(f"query failed: {error_text(e)}")
    if not stmts:
        _fail(f"{where}: no SQL statement in it (only blanks or comments)")
    if engine == "spark":
        conf = parse_pairs(conf, "--spark-conf", "spark.executor.memory=2g")
        _sql_spark(db, stmts, fmt, output, params, timeunit, max_rows, master, conf, echo)
        return
    spark_only(master, conf)
    values = parse_params(params)
    store = open_store(db, read_only=True, sandbox=not unsafe)
    with store:
        try:
            set_params(store, values)
        except duckdb.Error as e:
            _fail(f"--param: {error_text(e)}")
        run_statements(store, stmts, fmt, output, timeunit, max_rows, echo=echo)


def _sql_spark(db, stmts, fmt, output, params, timeunit, max_rows, master, conf, echo) -> None:
    """sql --engine spark: each statement translated and run on Spark over the dataset DIR."""
    from .spark.engine import SparkEngine, SparkQueryError, SparkUnavailable

    values = parse_params(params)
    try:
        eng = SparkEngine(db, master=master, params=values, conf=conf)
    except SparkUnavailable as e:
        _fail(str(e))

    def fetch(query: str):
        try:
            return eng.query(query)
        except SparkQueryError as e:
            raise _QueryFailed(str(e)) from None

    with eng:
        run_statements(None, stmts, fmt, output, timeunit, max_rows, fetch=fetch, echo=echo)


def read_query(query: str | None, query_file: str | None) -> tuple[str, str]:
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


class _QueryFailed(Exception):
    """A statement failed on another engine (its one-line reason)."""


def run_statements(store: Store | None, stmts, fmt: str, output: Path | None, timeunit: str, max_rows: int,
                   fetch=None, echo: Callable[[str], None] | None = None) -> None:
    """Run the statements in turn. Table output shows each result as it comes (a blank line
    between two): its first ``max_rows`` rows, the others counted as they stream past. csv /
    json / parquet write the one result, batch by batch as it streams from DuckDB, into a
    spool file in the system's temporary folder, copied into -o FILE or to standard output at
    the end: a second result is an error, and nothing is written.  ``fetch(query) -> Arrow
    table or None``: another engine's results (raising _QueryFailed) instead of the store's;
    ``echo(text)`` shows a table (default: standard output)."""
    if echo is None:
        def echo(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()
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
                        echo(("\n" if texts else "") + out)
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


