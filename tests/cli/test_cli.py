"""CLI behaviour: conversion summaries, queries, and one-line errors (never a traceback)."""

from __future__ import annotations

import gzip
import re
import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, realworld
from tracekit.cli import main


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def small_kineto():
    own = sorted((FIXTURES / "kineto").glob("decode_b1*.json.gz"))
    if own:
        return own[0]
    rw = [p for p in realworld("kineto") if "alexnet" in p.name]
    if not rw:
        pytest.skip("no Kineto fixture")
    return rw[0]


def assert_one_line_error(code, err, *needles):
    assert code == 2
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_convert_then_sql(tmp_path):
    db = tmp_path / "t.duckdb"
    src = small_kineto()
    code, out, err = run("convert", src, "--db", db)
    assert code == 0, err
    assert out.startswith("[0] ") and "kernels" in out and "skipped" in out
    code, out, err = run("sql", "select count(*) as n from kernels", "--db", db, "--format", "csv")
    assert code == 0
    trace = json.load(gzip.open(src))
    want = sum(1 for e in trace["traceEvents"] if str(e.get("cat", "")).lower() == "kernel")
    assert out.splitlines() == ["n", str(want)]
    # the same file again: refused in one line naming the source, the store untouched (issue 23)
    before = db.read_bytes()
    code, out, err = run("convert", src, "--db", db)
    assert_one_line_error(code, err, f"{src}: already in {db} as source 0", "--replace", "--allow-duplicate")
    assert out == "" and db.read_bytes() == before
    copy = tmp_path / "copy.json.gz"  # same content under another name, and twice in one command
    copy.write_bytes(src.read_bytes())
    code, out, err = run("convert", copy, "--db", db)
    assert_one_line_error(code, err, "as source 0")
    for jobs in ("1", "2"):
        code, out, err = run("convert", small_kineto(), copy, "--db", tmp_path / "two.duckdb", "--jobs", jobs)
        assert_one_line_error(code, err, f"{copy}: same content as the input", "--allow-duplicate")
    assert not (tmp_path / "two.duckdb").exists()
    # merging: a second convert adds a source (here the same file, asked for)
    code, out, _ = run("convert", src, "--db", db, "--allow-duplicate")
    assert out.startswith("[1] ")
    code, out, _ = run("sql", "select count(distinct source_id) from kernels", "--db", db, "--format", "json")
    assert json.loads(out)[0] == {"count(DISTINCT source_id)": 2}
    # --replace starts afresh
    run("convert", src, "--db", db, "--replace")
    code, out, _ = run("sql", "select count(*) n from sources", "--db", db, "--format", "csv")
    assert out.splitlines()[1] == "1"


def test_sql_is_read_only_and_errors_are_one_line(tmp_path):
    db = tmp_path / "t.duckdb"
    run("convert", small_kineto(), "--db", db)
    code, _, err = run("sql", "delete from kernels", "--db", db)
    assert_one_line_error(code, err, "query failed")
    code, _, err = run("sql", "select * from no_such_view", "--db", db)
    assert code == 2 and "Traceback" not in err
    first, *hints = err.strip().splitlines()  # one message: DuckDB's hints follow, indented
    assert first.startswith("tracekit: error: query failed") and "no_such_view" in first
    assert all(h.startswith("  ") for h in hints), err
    code, _, err = run("sql", "select 1", "--db", tmp_path / "missing.duckdb")
    assert_one_line_error(code, err, "missing.duckdb", "tracekit convert")


def test_parquet_export(tmp_path):
    import pyarrow.parquet as pq

    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", small_kineto(), "--db", db, "--parquet", tmp_path / "pq")
    assert code == 0, err
    n = pq.read_table(tmp_path / "pq" / "kernels.parquet").num_rows
    code, out, _ = run("sql", "select count(*) from kernels", "--db", db, "--format", "csv")
    assert int(out.splitlines()[1]) == n > 0


@pytest.mark.parametrize("case", ["empty", "truncated", "not_json", "wrong_json", "bad_gzip",
                                  "missing", "directory"])
def test_bad_input_one_line_error(tmp_path, case):
    src = small_kineto()
    p = tmp_path / f"{case}.json"
    raw = gzip.open(src).read()
    if case == "empty":
        p.write_bytes(b"")
    elif case == "truncated":
        p.write_bytes(raw[: len(raw) // 2])
    elif case == "not_json":
        p.write_bytes(b"{ this is not json at all")
    elif case == "wrong_json":
        p.write_bytes(b'{"foo": [1, 2, 3]}')
    elif case == "bad_gzip":
        p = tmp_path / "bad.json.gz"
        p.write_bytes(gzip.compress(raw)[: 5000])
    elif case == "directory":
        p = tmp_path / "adir"
        p.mkdir()
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", p, "--db", db)
    assert_one_line_error(code, err, p.name)
    # the failed input left no partial source behind
    if db.exists():
        code, out, _ = run("sql", "select count(*) from sources", "--db", db, "--format", "csv")
        assert out.splitlines()[1] == "0"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_convert_a_directory(tmp_path, jobs):
    # HTA's trace_dir: the traces inside, by content, one source each in name order; a line for
    # every other file (the rank files are real captures; the others are made here)
    d = tmp_path / "traces"
    (d / "sub").mkdir(parents=True)
    for name in ("ddp_rank1.json.gz", "ddp_rank0.json.gz"):
        shutil.copy(FIXTURES / "kineto" / name, d / name)
    shutil.copy(FIXTURES / "nsys" / "matmul.sqlite", d / "matmul.sqlite")
    shutil.copy(FIXTURES / "nsys" / "matmul.nsys-rep", d / "matmul.nsys-rep")
    shutil.copy(FIXTURES / "labelled" / "labels.json", d / "labels.json")
    (d / "notes.txt").write_text("not a trace\n")
    (d / "empty.json").write_bytes(b"")
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", d, "--db", db, "--jobs", jobs)
    assert code == 0, err
    assert [l.split(" ", 2)[1] for l in out.splitlines()] == [
        str(d / "ddp_rank0.json.gz"), str(d / "ddp_rank1.json.gz"), str(d / "matmul.sqlite")]
    skipped = sorted(l for l in err.splitlines() if l.startswith("tracekit: skipped "))
    assert skipped == sorted(err.splitlines())  # nothing else on stderr
    assert [l.split(": ", 2)[1].removeprefix("skipped ") for l in skipped] == [
        str(d / n) for n in ("empty.json", "labels.json", "matmul.nsys-rep", "notes.txt", "sub")]
    assert "empty file" in skipped[0] and "not a trace" in skipped[1] and "matmul.sqlite" in skipped[2]
    assert "unrecognized format" in skipped[3] and "not searched" in skipped[4]
    code, out, _ = run("sql", "select source_id, rank, format from sources order by 1", "--db", db, "--format", "csv")
    assert out.splitlines()[1:] == ["0,0,kineto", "1,1,kineto", "2,,nsys"]
    # a directory without traces: one line, nothing converted
    code, out, err = run("convert", d / "sub", "--db", tmp_path / "u.duckdb")
    assert_one_line_error(code, err, "sub: no trace files in it")
    assert not (tmp_path / "u.duckdb").exists()


def test_trace_without_gpu_events_gives_empty_views(tmp_path):
    cpu_only = [p for p in realworld("kineto") if "cpu_only" in p.name]
    if not cpu_only:
        pytest.skip("realworld corpus absent")
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", cpu_only[0], "--db", db)
    assert code == 0, err
    for view in ("hotspots", "idle_gaps"):
        code, out, err = run("sql", f"select * from {view}", "--db", db, "--format", "csv")
        assert code == 0 and len(out.splitlines()) == 1  # header only


def test_views_and_schema_commands():
    from tracekit import schema, views

    code, out, _ = run("views")
    assert code == 0
    assert {l.split()[0] for l in out.splitlines()} == {v.name for v in views.all_views()}
    code, out, _ = run("schema", "kernels")
    assert code == 0 and "correlation_id" in out
    code, out, _ = run("schema", "--markdown")
    assert out.strip() == schema.to_markdown().strip()


def test_schema_doc_is_current():
    from tracekit import schema

    doc = (FIXTURES.parent / "docs" / "schema.md").read_text()
    assert doc.strip() == schema.to_markdown().strip(), "regenerate: tracekit schema --markdown > docs/schema.md"


def test_store_of_another_version_or_not_tracekit(tmp_path):
    import duckdb

    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("create table users(id int)")
    con.close()
    for cmd in (("convert", small_kineto(), "--db", other), ("sql", "select 1", "--db", other)):
        code, _, err = run(*cmd)
        assert_one_line_error(code, err, "other.duckdb", "not a tracekit store")
    old = tmp_path / "old.duckdb"
    run("convert", small_kineto(), "--db", old)
    con = duckdb.connect(str(old))
    con.execute("update tracekit_meta set value = '1' where key = 'schema_version'")
    con.close()
    code, _, err = run("convert", small_kineto(), "--db", old)
    assert_one_line_error(code, err, "old.duckdb", "--replace")
    code, out, err = run("convert", small_kineto(), "--db", old, "--replace")
    assert code == 0, err
    con = duckdb.connect(str(old))  # a table without one of its columns: damaged
    con.execute("drop view if exists hotspots")  # (views read the column)
    con.execute("alter table kernels drop column short_name")
    con.close()
    code, _, err = run("sql", "select 1", "--db", old)
    assert_one_line_error(code, err, "old.duckdb", "damaged store: table kernels lacks column short_name")


def test_utf16_ncu_csv_is_detected(tmp_path):
    src = FIXTURES / "ncu" / "kn_details.csv"
    if not src.exists():
        pytest.skip("fixture absent")
    p = tmp_path / "powershell.csv"
    p.write_text(src.read_text(encoding="utf-8"), encoding="utf-16")
    code, out, err = run("convert", p, "--db", tmp_path / "u.duckdb")
    assert code == 0, err
    code, out8, _ = run("convert", src, "--db", tmp_path / "u8.duckdb")
    assert out.split("(ncu)")[1] == out8.split("(ncu)")[1]  # same rows per table


def test_views_lib_lists_and_documents_the_sql_library():
    from tracekit import views
    from tracekit.cli import main

    r = CliRunner().invoke(main, ["views", "--lib"])
    assert r.exit_code == 0
    listed = {line.strip() for line in r.output.splitlines() if line.startswith("  ")}
    made = set()
    for _, text in views.library():
        made |= set(re.findall(r"CREATE OR REPLACE TEMP MACRO (\w+)\(", text))
    assert listed == made and {"tk_sync_calls", "tk_launch_calls", "tk_launch_link", "tk_phase"} <= made
    r = CliRunner().invoke(main, ["views", "--doc", "lib/host_calls"])
    assert r.exit_code == 0 and "tk_launch_link(op_pid, call_pid, n_pids) -> BOOLEAN" in r.output
    for m in made:  # every macro is documented in its file's header
        assert any(f"{m}(" in line for _, text in views.library() for line in text.splitlines()
                   if line.startswith("--")), m


def test_missing_compiled_module_is_said(tmp_path):
    """pip install -q hides hatch_build.py's warning (issue 23): without tracekit._native,
    `tracekit convert` says so in one line on standard error, and still converts; not when
    TRACEKIT_NO_EXTENSION=1 (left out on purpose), nor when the module is there."""
    import os
    import subprocess
    import sys

    from tracekit.native import native

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['tracekit._native'] = None  # an import that fails\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("TRACEKIT_NO_EXTENSION", None)

    def convert(db, **extra):
        r = subprocess.run([sys.executable, "-m", "tracekit.cli", "convert", "-q", str(small_kineto()),
                            "--db", str(tmp_path / db)], env={**env, **extra}, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("[0] ")
        return r.stderr

    err = convert("a.duckdb")
    assert err.count("\n") == 1 and err.startswith("tracekit: note: the compiled module tracekit._native is missing")
    assert "TRACEKIT_NO_EXTENSION=1" in err and "C compiler" in err
    assert convert("b.duckdb", TRACEKIT_NO_EXTENSION="1") == ""
    if native is not None:  # the module as installed: no note
        r = subprocess.run([sys.executable, "-m", "tracekit.cli", "convert", "-q", str(small_kineto()),
                            "--db", str(tmp_path / "c.duckdb")], env={**os.environ, "TRACEKIT_NO_EXTENSION": ""},
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stderr == ""


def test_missing_compiled_module_warns_in_the_api(tmp_path, monkeypatch):
    import tracekit
    import tracekit.native

    monkeypatch.setattr(tracekit.native, "native", None)
    monkeypatch.delenv("TRACEKIT_NO_EXTENSION", raising=False)
    with pytest.warns(RuntimeWarning, match="compiled module tracekit._native is missing"):
        [s] = tracekit.convert([small_kineto()], db=tmp_path / "w.duckdb")
    assert s.converted["kernels"] > 0


def test_profile_without_torch_says_how_to_install(tmp_path, monkeypatch):
    """tracekit.profile() without torch (issue 23): one line with the install hint, not a bare
    ModuleNotFoundError (torch is hidden here where it is installed)."""
    import sys

    import tracekit

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails as when not installed
    with pytest.raises(ModuleNotFoundError) as e:
        with tracekit.profile(tmp_path / "p.duckdb"):
            pass
    msg = str(e.value)
    assert msg == ("tracekit.profile() needs PyTorch, which is not installed: pip install 'tracekit-gpu[capture]' "
                   "(in a clone: pip install -e '.[capture]') (or PyTorch for your CUDA version from pytorch.org)")
    assert e.value.name == "torch" and e.value.__suppress_context__
    assert not (tmp_path / "p.duckdb").exists()
