"""The memory budget (tracekit/budget.py): parsed in one place, applied to the conversion (DuckDB's
memory_limit, the readers' pieces, the nesting's pieces), a bad value a one-line error, and a tiny
budget spills to disk and converts exactly the same rows.  Peak memory itself is measured by
bench/memory.py, not here."""

from __future__ import annotations

import importlib.util
import os

import pytest
from click.testing import CliRunner

import tracekit
import tracekit.store.convert as store_convert
from conftest import FIXTURES, REPO
from tracekit import budget
from tracekit.cli import main

MB = 1 << 20


def _same_rows():
    spec = importlib.util.spec_from_file_location("same_rows", REPO / "bench" / "same_rows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fingerprint


@pytest.mark.parametrize("text, n", [("400MB", 400 * MB), ("1.5GB", 1536 * MB), ("250M", 250 * MB),
                                     ("1gib", 1 << 30), (str(300 * MB), 300 * MB), (200 * MB, 200 * MB)])
def test_parse(text, n):
    assert budget.parse(text) == n


@pytest.mark.parametrize("text", ["lots", "", "12", "400 parsecs", "-5MB", True])
def test_parse_refuses(text):
    with pytest.raises(budget.BudgetError) as e:
        budget.parse(text)
    assert "\n" not in str(e.value)


def test_default_plan_and_env(monkeypatch):
    monkeypatch.delenv(budget.ENV, raising=False)
    p = budget.plan()
    assert p.budget == 400 * MB and p.duckdb_limit == 128 * MB and p.insert_threads == 2
    assert p.duckdb_serial_limit == 64 * MB
    assert (p.nsys_chunk_rows, p.nest_rows, p.kineto_block, p.insert_bytes) == (8192, 262144, 4 * MB, 8 * MB)
    monkeypatch.setenv(budget.ENV, "1GB")
    assert budget.current() == 1 << 30 and budget.plan().duckdb_limit > 300 * MB
    with budget.using("250MB"):  # the API / CLI setting wins over the environment
        assert budget.current() == 250 * MB
    assert budget.current() == 1 << 30


def _spy_limit(monkeypatch) -> list:
    """What DuckDB's memory_limit and temporary files are while a source's rows are nested."""
    seen = []
    orig = store_convert.nest_source

    def spy(con, source_id, *rest):
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        spilled = con.execute("SELECT count(*), coalesce(sum(size), 0) FROM duckdb_temporary_files()").fetchall()[0]
        seen.append((limit, spilled))
        return orig(con, source_id, *rest)

    monkeypatch.setattr(store_convert, "nest_source", spy)
    return seen


@pytest.mark.parametrize("value, want", [("400MB", "64.0 MiB"), ("1GB", "64.0 MiB"), ("200MB", "42.0 MiB")])
def test_memory_limit_follows_the_budget(tmp_path, monkeypatch, value, want):
    seen = _spy_limit(monkeypatch)
    tracekit.convert(FIXTURES / "kineto" / "matmul.json.gz", db=tmp_path / "s.duckdb", memory_budget=value)
    assert seen[0][0] == want
    seen.clear()
    monkeypatch.setenv(budget.ENV, value)
    r = CliRunner().invoke(main, ["convert", str(FIXTURES / "kineto" / "kernels.json.gz"),
                                  "--db", str(tmp_path / "c.duckdb"), "-q"])
    assert r.exit_code == 0, r.output
    assert seen[0][0] == want


@pytest.mark.parametrize("value, want", [("400MB", "128.0 MiB"), ("1GB", "394.0 MiB")])
def test_parallel_inserts_get_the_whole_duckdb_share(tmp_path, monkeypatch, value, want):
    """nsys rows go in by parallel inserts, each thread filling its own row groups: DuckDB gets
    the budget's whole share (Kineto and ncu, one inserting thread: one thread's 64 MiB, above)."""
    seen = _spy_limit(monkeypatch)
    tracekit.convert(FIXTURES / "nsys" / "decode_b1.sqlite", db=tmp_path / "s.duckdb", memory_budget=value)
    assert seen and seen[0][0] == want


@pytest.mark.parametrize("args, env", [(["--memory-budget", "lots"], None), (["--memory-budget", "10MB"], None),
                                       ([], "1x")])
def test_bad_budget_is_one_line(tmp_path, monkeypatch, args, env):
    if env:
        monkeypatch.setenv(budget.ENV, env)
    db = tmp_path / "s.duckdb"
    r = CliRunner().invoke(main, ["convert", str(FIXTURES / "kineto" / "matmul.json.gz"), "--db", str(db), "-q", *args])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracekit: error: ") and "budget" in lines[0].lower()
    assert "Traceback" not in r.output and not db.exists()
    with pytest.raises(budget.BudgetError):
        tracekit.convert(FIXTURES / "kineto" / "matmul.json.gz", db=tmp_path / "p.duckdb",
                         memory_budget=args[1] if args else None)
    assert not (tmp_path / "p.duckdb").exists()


@pytest.mark.parametrize("trace, spills", [("kineto/decode_b32.json.gz", True), ("nsys/decode_b1.sqlite", False)])
def test_tiny_budget_spills_and_gives_the_same_rows(tmp_path, monkeypatch, trace, spills):
    """An 8 MB budget: DuckDB's cap 8 MiB (the Kineto fixture's open transaction then goes to
    spill files; the nsys one fits), nsys ranges of 4,096 rows, Kineto blocks of 1 MiB, nesting in
    pieces of 16,384 events: the same rows as under the default budget."""
    fingerprint = _same_rows()
    path = FIXTURES / trace
    tracekit.convert(path, db=tmp_path / "default.duckdb")
    monkeypatch.setattr(budget, "MIN_BYTES", 1 * MB)  # below what a real conversion needs: to force spilling
    seen = _spy_limit(monkeypatch)
    tracekit.convert(path, db=tmp_path / "tiny.duckdb", memory_budget="8MB")
    limit, (files, size) = seen[0]
    assert limit == "8.0 MiB"
    assert (files >= 1 and size > 0) == spills  # DuckDB spilled the open transaction
    a, b = fingerprint(str(tmp_path / "default.duckdb")), fingerprint(str(tmp_path / "tiny.duckdb"))
    assert a == b
    assert sum(t["rows"] for t in a["tables"].values()) > 10_000
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # spill folder removed


def test_workers_get_the_budget(tmp_path, monkeypatch):
    """--jobs N: each worker converts under the parent's budget (per process)."""
    from tracekit import parallel

    seen = {}
    real_popen = parallel.subprocess.Popen

    def popen(cmd, *a, env=None, **k):
        seen["env"] = (env or {}).get(budget.ENV)
        return real_popen(cmd, *a, env=env, **k)

    monkeypatch.setattr(parallel.subprocess, "Popen", popen)
    ranks = [FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz"]
    tracekit.convert(ranks, db=tmp_path / "s.duckdb", jobs=2, memory_budget="300MB")
    assert seen.get("env") == str(300 * MB)


def test_duckdb_threads_follow_the_cpu_affinity(tmp_path):
    """DuckDB sizes its thread pool by the machine's cores; tracekit's connections take the CPUs
    the process may run on (taskset, cpusets): a process pinned to one CPU converts and queries
    on one DuckDB thread, with the same rows."""
    import subprocess
    import sys

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    code = """
import os, sys
from pathlib import Path
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
import tracekit
from tracekit import budget, render
from tracekit.store import Store, writing
assert budget.usable_cpus() == 1
db = Path(sys.argv[1]) / "one.duckdb"
with writing(db) as st:
    print(st._con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    st.convert(sys.argv[2])
with Store(db, read_only=True) as st:
    print(st._con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    print(st.one("SELECT count(*) FROM kernels"))
print(render._engine().execute("SELECT current_setting('threads')").fetchall()[0][0])
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(FIXTURES / "kineto/decode_b1.json.gz")],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1] == out[3] == "1"
    assert int(out[2]) > 0
    # unpinned, the cap is the CPUs this process has (DuckDB's default where that is all of them)
    from tracekit import budget
    from tracekit.store import Store, writing

    with writing(tmp_path / "all.duckdb") as st:
        assert st._con.execute("SELECT current_setting('threads')").fetchall()[0][0] <= budget.usable_cpus()
    with Store(tmp_path / "all.duckdb", read_only=True) as st:
        assert st._con.execute("SELECT current_setting('threads')").fetchall()[0][0] <= budget.usable_cpus()
