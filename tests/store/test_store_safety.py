"""Store safety: `tracekit sql` cannot modify a store; a conversion that fails leaves the store as it
was; readers querying while another process converts into the same store never fail, and see the
new sources afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, need
from tracekit.adapters.base import TraceError
from tracekit.adapters.nsys import NsysAdapter
from tracekit.store import Store, writing

pytestmark = pytest.mark.slow  # concurrent and killed conversions

NSYS = FIXTURES / "nsys" / "matmul.sqlite"
NSYS2 = FIXTURES / "nsys" / "graphs.sqlite"
NCU = FIXTURES / "ncu" / "mm_raw.csv"
TABLES = ["sources", "kernels", "api_calls", "memops", "events", "skipped_rows", "ncu_metrics"]


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "tracekit.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def counts(db: Path) -> dict:
    with Store(db, read_only=True) as st:
        return {t: st.one(f"select count(*) from {t}") for t in TABLES}


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "s.duckdb"
    with writing(db) as st:
        st.convert(need(NSYS))
        st.convert(need(NCU))
    return db


# -- tracekit sql is read-only -------------------------------------------------------------------
WRITES = [
    "drop table kernels", "delete from kernels", "update kernels set name = 'x'",
    "insert into sources (source_id) values (99)", "create table t (a int)", "alter table kernels add column x int",
    "create view v as select 1", "truncate kernels", "drop view if exists hotspots",
    "create or replace table sources as select 1", "checkpoint", "vacuum",
    "delete from kernels; select 1", "select 1; drop table kernels",
]


@pytest.mark.parametrize("query", WRITES)
def test_sql_cannot_modify_store(store, query):
    before, rows = digest(store), counts(store)
    r = cli("sql", query, "--db", store)
    if r.returncode == 0:  # a statement DuckDB accepts on a read-only store must change nothing
        assert query in ("checkpoint", "vacuum", "drop view if exists hotspots"), r.stdout
    else:
        assert r.returncode == 2 and "Traceback" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), r.stderr
    assert digest(store) == before and counts(store) == rows


# -- failed conversions leave the store as it was ---------------------------------------------------
def test_failed_cli_convert_keeps_store(store, tmp_path):
    before, rows = digest(store), counts(store)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(need(NSYS2).read_bytes()[:50_000])  # truncated
    r = cli("convert", "-q", bad, "--db", store)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert digest(store) == before and counts(store) == rows


def test_exception_mid_conversion_rolls_back(store, monkeypatch):
    """An adapter that fails after yielding batches (TraceError or a bug) adds nothing."""
    rows = counts(store)
    real = NsysAdapter._memcpy

    def boom(self):
        yield from real(self)
        raise RuntimeError("injected failure after the kernel batches")

    monkeypatch.setattr(NsysAdapter, "_memcpy", boom)
    with Store(store) as st:
        with pytest.raises(RuntimeError):
            st.convert(NSYS2)
        assert {t: st.one(f"select count(*) from {t}") for t in TABLES} == rows
    monkeypatch.setattr(NsysAdapter, "_memcpy", lambda self: (_ for _ in ()).throw(
        TraceError(NSYS2, "injected")))
    with Store(store) as st:
        with pytest.raises(TraceError):
            st.convert(NSYS2)
        assert {t: st.one(f"select count(*) from {t}") for t in TABLES} == rows
    assert counts(store) == rows


def test_writing_block_that_fails_keeps_store_bytes(store, tmp_path):
    """A conversion that fails mid-way (good inputs first, then an exception) leaves the store
    byte-identical: writing() works on a copy and only replaces the store on success."""
    before = digest(store)
    with pytest.raises(KeyboardInterrupt):
        with writing(store) as st:
            st.convert(NSYS2)  # good
            raise KeyboardInterrupt  # e.g. Ctrl-C during the next input
    assert digest(store) == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # no temp copy left behind


def test_cli_internal_error_is_one_line(store, tmp_path):
    """A bug in an adapter (injected through sitecustomize in the child) is one line, exit 2,
    and the good inputs of the same command are kept."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import tracekit.adapters.ncu as n\n"
        "def boom(self, *a, **k):\n"
        "    raise ZeroDivisionError('injected')\n"
        "    yield\n"
        "n.NcuAdapter._finish = boom\n")
    before = counts(store)
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = subprocess.run([sys.executable, "-m", "tracekit.cli", "convert", "-q", str(NCU), str(NSYS2),
                        "--db", str(store)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2, r.stderr
    err = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(err) == 1 and "internal error" in err[0] and str(NCU) in err[0], r.stderr
    after = counts(store)
    assert after["sources"] == before["sources"] + 1 and after["ncu_metrics"] == before["ncu_metrics"]


# -- concurrent readers while converting ----------------------------------------------------------
READER = """
import sys, time
import tracekit
from tracekit.store import StoreError
db, n = sys.argv[1], int(sys.argv[2])
seen = set()
for i in range(n):
    st = tracekit.open(db)
    try:
        k = st.one("select count(*) from sources")
        st.one("select count(*) from hotspots")
        st.one("select sum(dur_ns) from kernels")
    finally:
        st.close()
    seen.add(k)
    time.sleep(0.01)
print(sorted(seen))
"""


def test_readers_while_converting(store, tmp_path):
    n0 = counts(store)["sources"]
    script = tmp_path / "reader.py"
    script.write_text(READER)
    readers = [subprocess.Popen([sys.executable, str(script), str(store), "150"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(0.5)
    for _ in range(3):  # several conversions into the same store while the readers run
        w = cli("convert", "-q", NSYS2, "--db", store, "--allow-duplicate", timeout=300)
        assert w.returncode == 0, w.stderr
    # the CLI as a reader too
    r = cli("sql", "select count(*) as n from sources", "--db", store, "--format", "csv")
    assert r.returncode == 0 and r.stdout.split() == ["n", str(n0 + 3)], r.stderr
    for p in readers:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        seen = eval(out.strip().splitlines()[-1])
        assert min(seen) >= n0 and max(seen) <= n0 + 3
    # a fresh reader sees every new source
    assert counts(store)["sources"] == n0 + 3


def test_convert_restores_process_settings_and_keeps_rows_across_arrow_pools(tmp_path, monkeypatch):
    """convert() switches pyarrow's default memory pool (store.CONVERT_ARROW_POOL) and pauses the
    cyclic GC only while it runs: both are as before afterwards, also after a failed input, and
    the rows are the same whichever pool the readers allocated from."""
    import gc

    import pyarrow as pa

    from tracekit import store as store_mod

    kineto = FIXTURES / "kineto" / "decode_b1.json.gz"
    before = pa.default_memory_pool().backend_name
    monkeypatch.setattr(store_mod, "OWN_PROCESS", True)  # as the `tracekit` command
    got = {}
    for pool in ("system", None):
        monkeypatch.setattr(store_mod, "CONVERT_ARROW_POOL", pool)
        with Store(tmp_path / f"{pool}.duckdb", replace=True) as st:
            st.convert(kineto)
            assert pa.default_memory_pool().backend_name == before
            assert gc.isenabled()
            bad = tmp_path / "truncated.json"
            bad.write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, ')
            with pytest.raises(TraceError):
                st.convert(bad)
            assert pa.default_memory_pool().backend_name == before
            got[pool] = st.rows("select count(*), sum(dur_ns), count(distinct name) from kernels")[0] + \
                st.rows("select count(*), sum(depth), count(parent_id) from events")[0]
    assert got["system"] == got[None]
    assert got["system"][0] == 3159  # the fixture's kernels


def test_a_library_call_changes_nothing_process_wide(tmp_path, monkeypatch):
    """tracekit inside someone else's program (OWN_PROCESS false, the default of the API): the
    garbage collector stays on and pyarrow's pool stays the caller's while converting; with
    own_process=True (or in the `tracekit` command) both are tuned, and restored after."""
    import gc

    import pyarrow as pa

    import tracekit
    from tracekit import store as store_mod
    from tracekit.store import convert as store_convert

    seen = []
    real = store_convert.convert_once

    def spy(*a, **kw):
        seen.append((gc.isenabled(), pa.default_memory_pool().backend_name))
        return real(*a, **kw)

    monkeypatch.setattr(store_convert, "convert_once", spy)
    before = pa.default_memory_pool().backend_name
    kineto = FIXTURES / "kineto" / "decode_b1.json.gz"
    tracekit.convert([kineto], db=str(tmp_path / "lib.duckdb"))
    tracekit.convert([kineto], db=str(tmp_path / "own.duckdb"), own_process=True)
    assert seen[0] == (True, before)
    assert seen[1] == (False, "system") or (seen[1][0] is False and before == "system")
    assert gc.isenabled() and pa.default_memory_pool().backend_name == before
    assert store_mod.OWN_PROCESS is False


def test_own_process_imports_without_the_collector_then_freezes_them():
    """own_process() pauses Python's collector while DuckDB, pyarrow and tracekit import, then
    freezes what they made (`gc.freeze`) and turns it back on: no collection went over them.
    Importing tracekit as a library changes none of it. Each case in a fresh interpreter."""
    def run(code: str) -> list:
        r = subprocess.run([sys.executable, "-c", "import gc, json; n = []; "
                            "gc.callbacks.append(lambda p, i: p == 'start' and n.append(i['generation'])); "
                            + code + "; print(json.dumps([gc.isenabled(), gc.get_freeze_count(), len(n)]))"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    enabled, frozen, passes = run("import tracekit; tracekit.own_process(); import tracekit.store")
    assert enabled and frozen > 10_000 and passes < 10  # (the imports: 46 k objects, 0-5 passes)
    enabled, frozen, passes = run("import tracekit, tracekit.store")
    assert enabled and frozen == 0 and passes > 30  # (~70 passes)


def test_own_process_sets_the_arrow_pool_before_pyarrow_loads(tmp_path):
    """tracekit.own_process() (the `tracekit` command, its workers, bench jobs) makes pyarrow's
    pool OWN_ARROW_POOL when it runs before pyarrow loads, and leaves a pool the user chose, or
    one already loaded; importing tracekit alone changes nothing. Each case in a fresh
    interpreter (pyarrow reads the setting once)."""
    def pool(code: str, **env) -> str:
        e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
        r = subprocess.run([sys.executable, "-c", code + "; import pyarrow as pa; "
                            "print(pa.default_memory_pool().backend_name)"], capture_output=True, text=True, env=e)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    import pyarrow as pa

    default = pa.default_memory_pool().backend_name if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ else None
    assert pool("import tracekit; tracekit.own_process()") == "system"
    assert pool("import tracekit; tracekit.own_process()", ARROW_DEFAULT_MEMORY_POOL="jemalloc") in ("jemalloc", default)
    if default:
        assert pool("import tracekit") == default
        assert pool("import pyarrow, tracekit; tracekit.own_process()") == default
    # `python -m tracekit` is the command, here with two conversion workers (started with the pool
    # in their environment: parallel.py)
    got = subprocess.run([sys.executable, "-m", "tracekit", "convert", "-q", "--jobs", "2",
                          str(FIXTURES / "kineto" / "matmul.json.gz"), str(FIXTURES / "kineto" / "kernels.json.gz"),
                          "--db", str(tmp_path / "s.duckdb")], capture_output=True, text=True)
    assert got.returncode == 0, got.stderr


def test_row_group_size_of_written_stores_changes_layout_not_rows(tmp_path, monkeypatch):
    """A store opened for writing is attached with store.ROW_GROUP_SIZE (so DuckDB writes full row
    groups while converting instead of logging small tables to the WAL at COMMIT); its spill files
    go beside the store, not into the working directory; the rows are the same as with DuckDB's
    default layout, and the store opens read-only as usual."""
    from tracekit import store as store_mod

    kineto = FIXTURES / "kineto" / "decode_b1.json.gz"
    monkeypatch.chdir(tmp_path)
    got = {}
    for size in (2048, None):
        monkeypatch.setattr(store_mod, "ROW_GROUP_SIZE", size)
        db = tmp_path / f"rg{size}.duckdb"
        with writing(db) as st:
            assert st.one("select current_setting('temp_directory')") == f"{st.path}.tmp"
            st.convert(kineto)
        with Store(db, read_only=True) as st:
            groups, largest = st.rows("select count(distinct row_group_id), max(count) "
                                      "from pragma_storage_info('events')")[0]
            if size:
                assert groups >= -(-st.one("select count(*) from events") // size) and largest <= size
            else:
                assert groups == 1
            got[size] = [st.rows(f"select count(*), sum(hash(columns(*))) from {t}")[0]
                         for t in ("events", "kernels", "api_calls", "flows", "memops")]
    assert got[2048] == got[None]
    assert got[None][0][0] == 11250  # the fixture's events
    assert not (tmp_path / ".tmp").exists()


def test_every_stored_json_value_is_valid_json(tmp_path):
    """The readers hand their JSON columns (args, metadata, ...) to DuckDB as Arrow's JSON type, so
    DuckDB stores the text without parsing it (store.db._json_typed): every value of every real
    fixture (Kineto, nsys, ncu) and of the real-world Kineto and nsys traces must then be valid
    JSON as written, which DuckDB's json_valid checks here."""
    from conftest import realworld
    from tracekit import schema

    inputs = (sorted((FIXTURES / "kineto").glob("*.json.gz")) + sorted((FIXTURES / "nsys").glob("*.sqlite"))
              + [FIXTURES / "ncu" / n for n in ("mm_raw.csv", "mm_details.csv", "lat_details.csv.gz")]
              + realworld("kineto") + [p for p in realworld("nsys") if p.suffix == ".sqlite"][:4])
    db = tmp_path / "all.duckdb"
    with writing(db) as st:
        for p in inputs:
            st.convert(p)
    with Store(db, read_only=True) as st:
        checked = 0
        for t in schema.TABLES:
            for c in t.columns:
                if c.json:
                    bad, n = st.rows(f'select count(*) filter (where not json_valid("{c.name}")), '
                                     f'count("{c.name}") from {t.name}')[0]
                    assert bad == 0, (t.name, c.name)
                    checked += n
        assert st.one("select count(*) from sources") == len(inputs)
    assert checked > 100_000
