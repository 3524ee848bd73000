"""`tracekit sql` and `tracekit views --doc` (issue 23): DuckDB's hints kept in the error, the SQL
from a file or standard input, several statements, the text table (escapes, plain integers,
intervals, JSON for nested values, the final newline), --timeunit, the views' documentation
and SQL as written.

The store is the bundled real capture (decode_b1: a Llama-shaped decoder on an H200); the few
literal values (a text with a line break, an interval) are synthetic edge cases, said so where
they appear."""

from __future__ import annotations

import gzip
import json
import os
import pty
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, need

from tracekit import views
from tracekit.cli import main

SRC = FIXTURES / "kineto" / "decode_b1.json.gz"


def run(*args, input=None):
    r = CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    p = tmp_path_factory.mktemp("sqlcli") / "d.duckdb"
    code, _, err = run("convert", need(SRC), "--db", p)
    assert code == 0, err
    return p


@pytest.fixture(scope="module")
def trace():
    return json.load(gzip.open(need(SRC)))


def kernel_count(trace) -> int:
    return sum(1 for e in trace["traceEvents"] if str(e.get("cat", "")).lower() == "kernel")


def error_lines(code, err) -> list[str]:
    """One error message: exit 2, no traceback, a first line `tracekit: error: ...`, and any
    further lines DuckDB's hints, indented."""
    assert code == 2 and "Traceback" not in err, err
    lines = err.rstrip("\n").split("\n")
    assert lines[0].startswith("tracekit: error: "), err
    assert all(line.startswith("  ") for line in lines[1:]), err
    return lines


# -- errors keep DuckDB's hints ------------------------------------------------------------------

def test_error_keeps_did_you_mean_and_candidates(db):
    lines = error_lines(*run("sql", "select * from kernel", "--db", db)[::2])
    assert lines == ["tracekit: error: query failed: Catalog Error: Table with name kernel does not exist!",
                     '  Did you mean "kernels"?']
    lines = error_lines(*run("sql", "select nme from kernels", "--db", db)[::2])
    assert len(lines) == 2 and lines[1].startswith("  Candidate bindings: ") and '"name"' in lines[1]
    lines = error_lines(*run("sql", "select * from hotspot", "--db", db)[::2])
    assert lines[1] == '  Did you mean "hotspots"?'  # a view: registered before the query binds
    lines = error_lines(*run("sql", "select 1 from kernels where selec 1", "--db", db)[::2])
    assert len(lines) == 3 and lines[1].startswith("  LINE 1: ")  # the excerpt and its caret, aligned
    caret = lines[2].index("^")
    assert lines[1][caret:].startswith("1") and set(lines[2].strip()) == {"^"}


def test_a_failing_statement_is_named_and_earlier_results_shown(db, trace):
    code, out, err = run("sql", "select count(*) as n from kernels; select * from kernel", "--db", db)
    lines = error_lines(code, err)
    assert lines[0].startswith("tracekit: error: query failed (statement 2 of 2): Catalog Error")
    assert out.splitlines()[:3] == ["   n", "----", f"{kernel_count(trace):4d}"]


# -- where the SQL comes from --------------------------------------------------------------------

def test_query_from_file_and_standard_input(db, tmp_path, trace):
    want = ["n", str(kernel_count(trace))]
    q = "select count(*) as n from kernels"
    f = tmp_path / "q.sql"
    f.write_text("-- how many kernels\n" + q + ";\n")
    assert run("sql", "-f", f, "--db", db, "--format", "csv")[1].splitlines() == want
    bom = tmp_path / "bom.sql"
    bom.write_bytes(b"\xef\xbb\xbf" + q.encode())  # Windows editors write one
    assert run("sql", "--file", bom, "--db", db, "--format", "csv")[1].splitlines() == want
    for args in (("-",), (), ("-f", "-")):  # QUERY '-', no QUERY (stdin not a terminal), -f -
        code, out, err = run("sql", *args, "--db", db, "--format", "csv", input=q)
        assert code == 0 and out.splitlines() == want, (args, err)


@pytest.mark.parametrize("case", ["both", "missing", "folder", "binary", "empty", "comments"])
def test_bad_query_sources_are_one_line(db, tmp_path, case):
    f = tmp_path / "q.sql"
    args, stdin, needle = ("-f", f), None, str(f)
    if case == "both":
        f.write_text("select 1")
        args, needle = ("select 1", "-f", f), "not both"
    elif case == "folder":
        args, needle = ("-f", tmp_path), "folder"
    elif case == "binary":
        f.write_bytes(b"select '\xff\xfe'")
        needle = "not UTF-8"
    elif case == "empty":
        args, stdin, needle = ("-",), "  \n", "standard input: empty"
    elif case == "comments":
        f.write_text("-- nothing to run\n")
        needle = "no SQL statement"
    code, out, err = run("sql", *args, "--db", db, input=stdin)
    assert error_lines(code, err) == [err.strip()] and needle in err, err
    assert out == ""


def test_no_query_on_a_terminal_is_an_error(db):
    """Without QUERY and with a terminal on standard input there is nothing to read: say so at
    once instead of waiting for input (a real pseudo-terminal)."""
    master, slave = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "tracekit.cli", "sql", "--db", str(db)], stdin=slave,
                           capture_output=True, text=True, timeout=60, check=False,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 2 and r.stderr.startswith("tracekit: error: no query: ") and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1


# -- several statements --------------------------------------------------------------------------

def test_several_statements_show_each_result(db, trace):
    apis = sum(1 for e in trace["traceEvents"] if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver"))
    code, out, err = run("sql", "select count(*) as n from kernels;\nset variable k = 3;\n"
                         "select count(*) as m, getvariable('k') as k from api_calls", "--db", db)
    assert code == 0, err
    assert out == (f"   n\n----\n{kernel_count(trace):4d}\n(1 row)\n\n"
                   f"   m  k\n----  -\n{apis:4d}  3\n(1 row)\n")
    # a statement's result is read before the next runs (the SET after it does not change it)
    code, out, _ = run("sql", "set variable v = 1; select getvariable('v') as v; set variable v = 2; "
                       "select getvariable('v') as v", "--db", db, "--format", "table")
    assert [l for l in out.splitlines() if l.strip().isdigit()] == ["1", "2"]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_one_result_formats(db, tmp_path, fmt, trace):
    o = tmp_path / f"out.{fmt}"
    code, _, err = run("sql", "select 1 as a; select 2 as b", "--db", db, "--format", fmt, "-o", o)
    assert error_lines(code, err) == [err.strip()]
    assert "statements 1 and 2 both return rows" in err and not o.exists()
    # statements that return no rows (SET VARIABLE) may come with the one that does
    code, _, err = run("sql", "set variable lim = 2; select count(*) as n from kernels limit getvariable('lim')",
                         "--db", db, "--format", fmt, "-o", o)
    assert code == 0, err
    got = {"csv": lambda: o.read_text().splitlines()[1], "json": lambda: json.loads(o.read_text())[0]["n"],
           "parquet": lambda: pq.read_table(o).column("n")[0].as_py()}[fmt]()
    assert str(got) == str(kernel_count(trace))


# -- the text table ------------------------------------------------------------------------------

def test_table_cells(db, tmp_path):
    # integers as they are: timestamps, ids, counts (no thousands separators)
    ts, corr, n = run("sql", "select min(start_ns), max(correlation_id), count(*) from api_calls", "--db", db,
                      "--format", "csv")[1].splitlines()[1].split(",")
    assert int(ts) > 10_000 and int(corr) > 10_000 and int(n) > 1_000
    out = run("sql", "select min(start_ns) ts, max(correlation_id) c, count(*) n from api_calls", "--db", db)[1]
    assert out.splitlines()[2].split() == [ts, corr, n]
    # a LIST (phases.top_kernels) and a JSON column (sources.rows_converted) as JSON
    out = run("sql", "select top_kernels, rows_converted from phases, sources where phase = 'prefill'",
              "--db", db, "--max-rows", 0)[1]
    row = out.splitlines()[2]
    assert row.startswith('["') and '{"api_calls":' in row
    want = run("sql", "select top_kernels from phases where phase = 'prefill'", "--db", db, "--format", "json")[1]
    top = json.loads(want)[0]["top_kernels"]
    text = json.dumps(top, separators=(",", ":"))
    assert row.split("  ")[0].rstrip() == (text if len(text) <= 60 else text[:59] + "…")
    # synthetic edge cases: a text with a line break and a tab, an interval, a STRUCT, NULL
    out = run("sql", "select E'two\\nlines\\there' as t, interval 90 minute + interval 1 day as iv, "
              "{'op': 'aten::mm', 'bytes': [1, 2]} as s, NULL as z", "--db", db)[1]
    assert out.splitlines() == ["t                 iv              s                                z",
                                "----------------  --------------  -------------------------------  ----",
                                "two\\nlines\\there  1 day 01:30:00  {\"op\":\"aten::mm\",\"bytes\":[1,2]}  NULL",
                                "(1 row)"]
    out = run("sql", "select 123456.789::double a, 0.000012345::double b, 1e300::double c, 12.5::float d",
              "--db", db)[1]
    assert out.splitlines()[2].split() == ["123456.8", "1.234e-05", "1e+300", "12.5"]
    out = run("sql", "select interval 90 minute as iv", "--db", db, "--format", "json")[1]
    assert json.loads(out) == [{"iv": "01:30:00"}]


def test_table_to_a_file_ends_with_a_newline(db, tmp_path):
    q = "select short_name, instances, total_ns from hotspots order by total_ns desc limit 5"
    o = tmp_path / "t.txt"
    code, out, err = run("sql", q, "--db", db, "-o", o)
    assert code == 0 and out == "", err
    text = o.read_text()
    assert text.endswith(" rows)\n") and not text.endswith("\n\n")
    assert text == run("sql", q, "--db", db)[1]  # the same as on standard output
    # the layout, rebuilt from the CSV of the same rows: text left-aligned, numbers right-aligned,
    # columns as wide as their widest cell (at most 60), two blanks apart, no trailing blanks
    rows = [line.split(",") for line in run("sql", q, "--db", db, "--format", "csv")[1].splitlines()]
    rows = [[c if len(c) <= 60 else c[:59] + "…" for c in r] for r in rows]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    want = [f"{rows[0][0]:<{w[0]}}  {rows[0][1]:>{w[1]}}  {rows[0][2]:>{w[2]}}", "  ".join("-" * x for x in w)]
    want += [f"{r[0]:<{w[0]}}  {int(r[1]):>{w[1]}}  {int(r[2]):>{w[2]}}" for r in rows[1:]]
    assert text.splitlines() == want + ["(5 rows)"]


# -- --timeunit ----------------------------------------------------------------------------------

@pytest.mark.parametrize("unit,factor", [("us", 1e3), ("ms", 1e6), ("s", 1e9)])
def test_timeunit_converts_ns_columns_in_every_format(db, tmp_path, unit, factor):
    q = "select short_name, instances, total_ns, avg_ns from hotspots order by total_ns desc, short_name limit 3"
    base = json.loads(run("sql", q, "--db", db, "--format", "json")[1])
    code, out, err = run("sql", q, "--db", db, "--format", "json", "--timeunit", unit)
    assert code == 0, err
    got = json.loads(out)
    assert list(got[0]) == ["short_name", "instances", f"total_{unit}", f"avg_{unit}"]
    for b, g in zip(base, got):
        assert g["instances"] == b["instances"]  # not a time: unchanged
        assert g[f"total_{unit}"] == pytest.approx(b["total_ns"] / factor, rel=1e-12)
        assert g[f"avg_{unit}"] == pytest.approx(b["avg_ns"] / factor, rel=1e-12)
    out = run("sql", q, "--db", db, "--format", "csv", "--timeunit", unit)[1]
    assert out.splitlines()[0] == f"short_name,instances,total_{unit},avg_{unit}"
    assert float(out.splitlines()[1].split(",")[2]) == pytest.approx(base[0]["total_ns"] / factor, rel=1e-12)
    o = tmp_path / "t.parquet"
    assert run("sql", q, "--db", db, "--format", "parquet", "-o", o, "--timeunit", unit)[0] == 0
    t = pq.read_table(o)
    assert t.column_names[2] == f"total_{unit}" and t.column(2)[0].as_py() == pytest.approx(base[0]["total_ns"] / factor)
    out = run("sql", q, "--db", db, "--timeunit", unit)[1]
    assert out.splitlines()[0].split() == ["short_name", "instances", f"total_{unit}", f"avg_{unit}"]


def test_timeunit_leaves_what_it_cannot_rename(db):
    # a column whose new name the result has already, and a *_ns column that is not a number
    code, out, err = run("sql", "select 1500 as dur_ns, 7 as dur_us, 'x' as name_ns", "--db", db,
                         "--format", "csv", "--timeunit", "us")
    assert code == 0 and out.splitlines() == ["dur_ns,dur_us,name_ns", "1500,7,x"], err
    code, out, err = run("sql", "select 1500 as dur_ns", "--db", db, "--format", "csv", "--timeunit", "us")
    assert out.splitlines() == ["dur_us", "1.5"]
    # a timestamp of the real capture, and (synthetic) a Unix-epoch one beyond 2^53, which a
    # DOUBLE rounds (to ~0.2 us in s) instead of refusing
    code, out, err = run("sql", "select 1733097600123456789 as ts_ns", "--db", db, "--format", "csv",
                         "--timeunit", "s")
    assert code == 0 and out.splitlines()[0] == "ts_s" and float(out.splitlines()[1]) == 1733097600.1234567, err
    code, out, err = run("sql", "select max(end_ns) as end_ns from kernels", "--db", db, "--format", "csv")
    end = int(out.splitlines()[1])
    code, out, err = run("sql", "select max(end_ns) as end_ns from kernels", "--db", db, "--format", "csv",
                         "--timeunit", "s")
    assert code == 0 and out.splitlines()[0] == "end_s", err
    assert float(out.splitlines()[1]) == pytest.approx(end / 1e9, abs=1e-6)
    code, out, err = run("sql", "select 1", "--db", db, "--timeunit", "h")
    assert code == 2 and "Traceback" not in err


# -- views --doc / --sql -------------------------------------------------------------------------

def _parts(path):
    lines = path.read_text().split("\n")
    n = next(i for i, line in enumerate(lines) if not line.startswith("--"))
    return lines[:n], "\n".join(lines[n:]).strip()


@pytest.mark.parametrize("name,file", [("hotspots", "stats/hotspots"), ("idle_gaps", "gpu/idle_gaps"),
                                       ("lib/host_calls", "lib/host_calls"), ("lib/intervals", "lib/intervals")])
def test_views_doc_prints_the_header_as_written_and_the_sql(name, file):
    path = views.sql_dir() / f"{file}.sql"
    header, statement = _parts(path)
    code, out, err = run("views", "--doc", name)
    assert code == 0, err
    doc = [line[3:] if line.startswith("-- ") else line[2:] for line in header]
    assert out == "\n".join(doc).rstrip() + "\n\n" + statement + "\n"
    assert any(line.startswith("  ") for line in doc)  # indentation is kept
    code, out, err = run("views", "--sql", name)
    assert code == 0 and out == statement + "\n"
    assert out.startswith("CREATE OR REPLACE " + ("MACRO" if name.startswith("lib/") else f"VIEW {name}"))


def test_views_doc_of_hotspots_reads_like_its_file():
    out = run("views", "--doc", "hotspots")[1]
    assert "\n  total_ns  = sum(end_ns - start_ns) of the kernels with this name in this source\n" in out
    assert "\n  source_id   INTEGER  the source (sources.source_id)\n" in out
    assert "\nCREATE OR REPLACE VIEW hotspots AS\n" in out
    code, _, err = run("views", "--doc", "hotspot")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no view named 'hotspot'" in err


# -- the README and --help say what the command does ---------------------------------------------

def test_cli_reference_and_help_name_every_option():
    """docs/cli.md (generated from the commands: tests/cli/test_docs.py) has a synopsis line per
    command naming each of its options, diff's included (issue 45)."""
    cli_md = (FIXTURES.parent / "docs" / "cli.md").read_text()
    for cmd in ("sql", "views", "convert", "diagnose", "diff", "schema"):
        synopsis = next(line for line in cli_md.splitlines() if line.startswith(f"tracekit {cmd} "))
        for param in main.commands[cmd].params:
            if param.param_type_name == "option":
                assert any(re.search(re.escape(o) + r"\b", synopsis) for o in param.opts), (cmd, param.opts)
        assert run(cmd, "--help")[0] == 0
    assert "--timeunit ns|us|ms|s" in cli_md and "-f, --file FILE" in cli_md


# -- table output streams: the first rows shown, every row counted ------------------------------

def test_table_output_shows_the_first_rows_and_counts_all(db):
    """`select * from idle_gaps` (a few thousand real gaps) as the table: the first --max-rows rows
    are the result's first rows (as csv gives them all), and the count lines count every row,
    though only the shown rows were kept (Store.head)."""
    rows = run("sql", "select start_ns, dur_ns, cause from idle_gaps", "--db", db, "--format", "csv")[1].splitlines()[1:]
    assert len(rows) > 1000
    out = run("sql", "select start_ns, dur_ns, cause from idle_gaps", "--db", db, "--max-rows", 7)[1].splitlines()
    assert [r.split() for r in out[2:9]] == [r.split(",") for r in rows[:7]]
    assert out[9:] == [f"... {len(rows) - 7:,} more rows (use --max-rows 0 or --format csv)", f"({len(rows):,} rows)"]
    # a result of fewer rows than --max-rows, and of none
    out = run("sql", "select * from idle_gaps limit 3", "--db", db, "--max-rows", 7)[1].splitlines()
    assert len(out) == 2 + 3 + 1 and out[-1] == "(3 rows)"
    assert run("sql", "select * from idle_gaps where false", "--db", db)[1].splitlines()[-1] == "(0 rows)"


def test_store_head_across_batches(db, monkeypatch):
    """Store.head: the first n rows of the whole result, the number of all, across batch bounds
    (batches of 7 rows here: n = 10 takes 7 + 3)."""
    import tracekit
    from tracekit import store as store_mod

    monkeypatch.setattr(store_mod, "STREAM_BATCH_ROWS", 7)
    q = "select start_ns, scope, before_name, sync_ns from idle_gaps"
    with tracekit.open(db) as st:
        whole = st.sql(q).to_arrow_table()
        for n in (1, 7, 10, whole.num_rows, whole.num_rows + 5):
            head, total = st.head(q, n)
            assert total == whole.num_rows and head.schema == whole.schema
            assert head.equals(whole.slice(0, n))
        head, total = st.head(q, 0)  # 0: all rows (as --max-rows 0)
        assert total == whole.num_rows and head.equals(whole)
        head, total = st.head(q + " where false", 5)
        assert total == 0 and head.num_rows == 0 and head.schema == whole.schema
        # a statement that returns no rows of its own runs all the same (DuckDB's empty `Success`)
        assert st.head("set variable tk_test_head = 41", 5)[1] == 0
        assert st.one("select getvariable('tk_test_head') + 1") == 42


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_file_output_streams_the_same_rows(db, tmp_path, monkeypatch, fmt):
    """csv / json / parquet are written batch by batch as the result streams (batches of 7 rows
    here, so a few hundred batches): the same rows and values as the result fetched whole, with
    --timeunit applied to each batch."""
    import tracekit
    from tracekit import store as store_mod

    q = "select start_ns, dur_ns, cause, before_name, scope = 'device' as dev from idle_gaps limit 1000"
    with tracekit.open(db) as st:
        whole = st.sql(q).to_arrow_table()
    monkeypatch.setattr(store_mod, "STREAM_BATCH_ROWS", 7)
    o = tmp_path / f"gaps.{fmt}"
    code, _, err = run("sql", q, "--db", db, "--format", fmt, "-o", o, "--timeunit", "us")
    assert code == 0, err
    if fmt == "parquet":
        got = pq.read_table(o)
        assert got.column_names == ["start_us", "dur_us", "cause", "before_name", "dev"]
        assert got.column("dur_us").to_pylist() == [d / 1000 for d in whole.column("dur_ns").to_pylist()]
        assert got.column("before_name").to_pylist() == whole.column("before_name").to_pylist()
    elif fmt == "json":
        rows = json.loads(o.read_text())
        assert len(rows) == whole.num_rows == 1000
        assert [r["dur_us"] for r in rows] == [d / 1000 for d in whole.column("dur_ns").to_pylist()]
        assert [r["dev"] for r in rows] == whole.column("dev").to_pylist()
        # laid out as one JSON document indented by 2, as orjson writes the whole list
        import orjson

        want = orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n"
        assert o.read_text() == want
    else:
        lines = o.read_text().splitlines()
        assert lines[0] == "start_us,dur_us,cause,before_name,dev" and len(lines) == 1001
        assert [line.rsplit(",", 1)[1] for line in lines[1:]] == [str(b) for b in whole.column("dev").to_pylist()]
    # an empty result: a header (csv), an empty list (json), a file of no rows (parquet)
    code, out, err = run("sql", q + " offset 100000", "--db", db, "--format", "json" if fmt == "parquet" else fmt)
    assert code == 0 and out == ("[]\n" if fmt != "csv" else "start_ns,dur_ns,cause,before_name,dev\n"), (out, err)


def test_file_output_follows_a_link_and_keeps_the_file_on_failure(db, tmp_path):
    """-o is opened for writing as it is: a symbolic link's target gets the rows (the link
    stays); a failing run leaves an existing file as it was."""
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    code, _, err = run("sql", "select 1 as a, 2 as b", "--db", db, "--format", "csv", "-o", link)
    assert code == 0, err
    assert link.is_symlink() and target.read_text() == "a,b\n1,2\n"
    code, _, err = run("sql", "select 1 as a; select 2 as b", "--db", db, "--format", "csv", "-o", target)
    assert code == 2 and target.read_text() == "a,b\n1,2\n"
    code, _, err = run("sql", "select error('boom') as a from kernels", "--db", db, "--format", "csv", "-o", target)
    assert code == 2 and "boom" in err and target.read_text() == "a,b\n1,2\n"


def test_a_parameter_no_view_reads_is_refused(db):
    """--param with a name no view reads would change nothing: exit 2, one line naming the
    parameters the views read (issue 45). A known one is set."""
    code, out, err = run("sql", "select 1", "--db", db, "--param", "nosuch=1")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("tracekit: error: --param nosuch: no view reads a parameter of that name; ")
    assert all(p in err for p in views.all_parameters()) and "bucket_ns, " in err and "latency_pct, " in err
    assert len(views.all_parameters()) >= 15
    code, out, err = run("sql", "select getvariable('bucket_ns') as b", "--db", db, "--param", "bucket_ns=5000",
                         "--format", "csv")
    assert code == 0 and out == "b\n5000\n", err


@pytest.mark.parametrize("trace, what", [
    (FIXTURES / "kineto" / "decode_b1.json.gz", "a Kineto/Chrome JSON trace"),
    (FIXTURES / "nsys" / "matmul.sqlite", "an SQLite file"),
    (FIXTURES / "nsys" / "matmul.nsys-rep", "an nsys SQLite or report"),
    (FIXTURES / "ncu" / "kn_details.csv", "an ncu CSV"),
], ids=lambda x: x.name if hasattr(x, "name") else None)
def test_a_trace_given_as_db_names_the_conversion(trace, what, tmp_path):
    """--db naming a trace (not the store converted from it): exit 2, one line saying what the
    file is and the command that converts it (before: DuckDB's 'Cannot launch in-memory
    database in read-only mode'). The file is left as it was."""
    before = trace.read_bytes()
    for args in (["sql", "select count(*) from kernels"], ["diagnose"]):
        code, out, err = run(*args, "--db", trace)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err == (f"tracekit: error: {trace}: {what}, not a tracekit store; convert it first: "
                       f"tracekit convert {trace} (then query the store it writes)\n")
    assert trace.read_bytes() == before
    # a file of no known kind: said so, without a conversion to run
    other = tmp_path / "notes.txt"
    other.write_text("not a store, not a trace\n")
    code, _, err = run("sql", "select 1", "--db", other)
    assert code == 2 and err == (f"tracekit: error: {other}: not a tracekit store (not a DuckDB file); "
                                 "--db takes the store that `tracekit convert TRACE` writes\n")
