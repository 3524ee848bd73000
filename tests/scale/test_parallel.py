"""`tracekit convert --jobs N`: inputs converted in worker processes and merged in input order give
the store of the serial conversion (same source ids and rows), the same lines and the
same errors (tracekit/parallel.py)."""

from __future__ import annotations

import gzip
import os
import duckdb
import pytest
from click.testing import CliRunner

import tracekit
from conftest import FIXTURES, need
from tracekit import parallel, schema
from tracekit.adapters.base import TraceError
from tracekit.cli import main
from tracekit.store import StoreError

pytestmark = pytest.mark.slow  # conversions in worker processes

RANK0 = FIXTURES / "kineto" / "ddp_rank0.json.gz"
RANK1 = FIXTURES / "kineto" / "ddp_rank1.json.gz"
NSYS = FIXTURES / "nsys" / "decode_b1.sqlite"
NCU = FIXTURES / "ncu" / "mm_details.csv"
MIXED = [RANK0, RANK1, NSYS, NCU]
VOLATILE = {"converted_at", "tracekit_version"}


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def rows(db) -> dict[str, list[tuple]]:
    """Every table of the schema, its rows sorted (the stored order is not the input order:
    conversion inserts in parallel), volatile columns left out."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for t in schema.TABLES:
            cols = ", ".join(f'"{c}"' for c in t.column_names if c not in VOLATILE)
            out[t.name] = con.execute(f"SELECT {cols} FROM {t.name} ORDER BY ALL").fetchall()
        return out
    finally:
        con.close()


def one(db, q):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


@pytest.fixture(params=[0, parallel.MIN_CHUNK_BYTES], ids=["chunk-per-input", "shared-chunks"])
def chunking(request, monkeypatch):
    """Both ways of cutting the inputs into worker tasks: one input per worker store, and several
    inputs sharing one (the default for small inputs)."""
    monkeypatch.setattr(parallel, "MIN_CHUNK_BYTES", request.param)
    return request.param


def test_parallel_equals_serial_on_the_real_fixtures(tmp_path, chunking):
    for p in MIXED:
        need(p)
    serial, par = tmp_path / "serial.duckdb", tmp_path / "parallel.duckdb"
    code1, out1, err1 = run("convert", *MIXED, "--db", serial, "--jobs", 1)
    code2, out2, err2 = run("convert", *MIXED, "--db", par, "--jobs", 3)
    assert code1 == code2 == 0 and err1 == err2 == ""
    assert out2 == out1  # the same one-line summaries, in input order
    lines = out2.splitlines()
    assert [l.split(" ")[0] for l in lines] == ["[0]", "[1]", "[2]", "[3]"]
    assert all(str(p) in l for p, l in zip(MIXED, lines))
    a, b = rows(serial), rows(par)
    for t in schema.TABLES:
        assert a[t.name] == b[t.name], t.name
    # the numbers of the fixtures (fixtures/README.md): 388 kernels a DDP rank, 3159 in the nsys
    # decode, 6 ncu-profiled launches; ranks from distributedInfo
    assert one(par, "SELECT source_id, format, rank, world_size FROM sources ORDER BY source_id") == [
        (0, "kineto", 0, 2), (1, "kineto", 1, 2), (2, "nsys", None, None), (3, "ncu", None, None)]
    assert one(par, "SELECT source_id, count(*) FROM kernels GROUP BY ALL ORDER BY 1") == [
        (0, 388), (1, 388), (2, 3159)]
    assert one(par, "SELECT count(*) FROM kernels WHERE name LIKE 'ncclDevKernel_AllReduce%'") == [(16,)]
    assert one(par, "SELECT source_id, count(*) FROM ncu_kernels GROUP BY ALL") == [(3, 6)]
    # the views see one job of two ranks: 8 all-reduces a rank, matched across the ranks
    st = tracekit.open(par)
    try:
        assert st.one("SELECT count(*) FROM rank_imbalance") == 16
        assert st.one("SELECT count(DISTINCT seq) FROM rank_imbalance") == 8
    finally:
        st.close()
    # no worker store left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parallel.duckdb", "serial.duckdb"]


def test_bad_inputs_among_good_ones(tmp_path, chunking):
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(gzip.open(need(RANK1)).read()[:100_000])
    missing = tmp_path / "missing.json.gz"
    inputs = [truncated, RANK0, missing, NSYS, NCU]
    res = {}
    for jobs in (1, 2):
        db = tmp_path / f"j{jobs}.duckdb"
        res[jobs] = run("convert", *inputs, "--db", db, "--jobs", jobs), rows(db)
    (c1, o1, e1), r1 = res[1]
    (c2, o2, e2), r2 = res[2]
    assert c1 == c2 == 2  # some input failed
    assert o2 == o1 and e2 == e1 and r2 == r1
    errs = e2.splitlines()
    assert len(errs) == 2 and all(l.startswith("tracekit: error: ") for l in errs)
    assert str(truncated) in errs[0] and str(missing) in errs[1] and "no such file" in errs[1]
    # the good inputs are kept, numbered in input order as if the bad ones were not there
    assert [l.split(" ")[:2] for l in o2.splitlines()] == [["[0]", str(RANK0)], ["[1]", str(NSYS)],
                                                             ["[2]", str(NCU)]]


def test_strict_and_rank_apply_to_every_input(tmp_path):
    # --strict: the real captures lose nothing (their skipped rows are display hints and the
    # host's idle processes: by design); a rank with one event of negative duration loses a row
    import json

    bad = tmp_path / "rank0_bad.json"
    t = json.loads(gzip.open(RANK0).read())
    x = next(e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    x["dur"] = -5
    bad.write_text(json.dumps(t))
    for jobs in (1, 2):
        db = tmp_path / f"s{jobs}.duckdb"
        code, out, err = run("convert", RANK0, NSYS, bad, NCU, "--db", db, "--jobs", jobs, "--strict")
        assert code == 2 and len(out.splitlines()) == 3 and str(bad) not in out, err
        assert len(err.splitlines()) == 1 and "would be skipped" in err and "negative dur" in err
        assert all("[by design]" in line for line in out.splitlines() if "skipped 0" not in line)
    # --rank N on an input without distributedInfo
    db = tmp_path / "r.duckdb"
    code, out, err = run("convert", NSYS, NCU, "--db", db, "--jobs", 2, "--rank", 5)
    assert code == 0, err
    assert one(db, "SELECT source_id, rank FROM sources ORDER BY 1") == [(0, 5), (1, 5)]


def test_adding_to_an_existing_store_continues_the_source_ids(tmp_path):
    serial, par = tmp_path / "serial.duckdb", tmp_path / "parallel.duckdb"
    for db, jobs in ((serial, 1), (par, 2)):
        assert run("convert", NCU, "--db", db, "--jobs", 1)[0] == 0
        code, out, err = run("convert", RANK0, RANK1, "--db", db, "--jobs", jobs)
        assert code == 0, err
        assert [l.split(" ")[0] for l in out.splitlines()] == ["[1]", "[2]"]
    assert rows(serial) == rows(par)
    # --replace with workers starts afresh
    code, out, _ = run("convert", RANK1, RANK0, "--db", par, "--jobs", 2, "--replace")
    assert code == 0
    assert one(par, "SELECT source_id, rank FROM sources ORDER BY 1") == [(0, 1), (1, 0)]


def test_jobs_1_is_the_serial_path(tmp_path, monkeypatch):
    """--jobs 1 (and a single input, whatever --jobs) converts in this process: no worker."""
    def no_workers(*a, **k):
        raise AssertionError("worker processes started")

    monkeypatch.setattr(parallel, "_parallel", no_workers)
    monkeypatch.setattr(parallel._Worker, "__init__", no_workers)
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", RANK0, RANK1, NCU, "--db", db, "--jobs", 1)
    assert code == 0, err
    assert [l.split(" ")[0] for l in out.splitlines()] == ["[0]", "[1]", "[2]"]
    code, out, err = run("convert", RANK0, "--db", db, "--jobs", 8, "--allow-duplicate")
    assert code == 0 and out.startswith("[3] ")
    assert one(db, "SELECT count(*) FROM kernels") == [(388 * 3,)]


def test_default_jobs_is_the_cpus_and_parquet_export(tmp_path, monkeypatch):
    calls = []
    real = parallel._parallel

    def spy(store, paths, jobs, *a, **k):
        calls.append(jobs)
        return real(store, paths, jobs, *a, **k)

    monkeypatch.setattr(parallel, "_parallel", spy)
    monkeypatch.setattr(parallel, "default_jobs", lambda: 3)
    db = tmp_path / "t.duckdb"
    code, out, err = run("convert", RANK0, RANK1, NCU, NSYS, "--db", db, "--parquet", tmp_path / "pq")
    assert code == 0, err
    assert calls == [3]
    assert out.splitlines()[-1] == f"wrote {len(schema.TABLES)} Parquet files to {tmp_path / 'pq'}"
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pq" / "kernels.parquet").num_rows == 388 * 2 + 3159


def test_partitioned_parquet_gives_the_rows_of_the_store(tmp_path):
    from tracekit.store import open_parquet

    db, d = tmp_path / "t.duckdb", tmp_path / "ds"
    code, out, err = run("convert", RANK0, RANK1, NSYS, "--db", db, "--jobs", 2, "--parquet", d, "--partitioned")
    assert code == 0, err
    assert out.splitlines()[-1] == f"wrote {len(schema.TABLES)} tables as a partitioned Parquet dataset to {d}"
    assert sorted(p.name for p in (d / "kernels").iterdir()) == ["source_id=0", "source_id=1", "source_id=2"]
    st, pq = tracekit.open(db), open_parquet(d)
    try:
        for v in ("hotspots", "rank_imbalance", "overlap", "gpu_utilization"):
            q = f"SELECT * FROM {v} ORDER BY ALL"
            assert st.rows(q) == pq.rows(q), v
        assert pq.one("SELECT count(*) FROM kernels WHERE source_id = 2") == 3159
    finally:
        st.close()
        pq.close()
    code, _, err = run("convert", RANK0, "--db", db, "--partitioned")
    assert code == 2 and "--partitioned needs --parquet" in err


def test_python_api(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    s1 = tracekit.convert([RANK0, RANK1, NCU], db=a)
    s2 = tracekit.convert([RANK0, RANK1, NCU], db=b, jobs=2)
    assert [s.one_line() for s in s1] == [s.one_line() for s in s2]
    assert rows(a) == rows(b)
    # a bad input raises, and the store is left as it was
    before = rows(b)
    with pytest.raises(TraceError, match="no such file"):
        tracekit.convert([RANK0, tmp_path / "missing.json"], db=b, jobs=2, allow_duplicate=True)
    assert rows(b) == before
    # an input already in the store is refused before anything is converted
    with pytest.raises(StoreError, match=r"already in .* as source 1 .*allow_duplicate=True"):
        tracekit.convert([NSYS, RANK1], db=b, jobs=2)
    assert rows(b) == before


def test_worker_that_dies_is_replaced_by_the_serial_path(tmp_path, monkeypatch):
    """A worker process killed mid-way (here: os._exit on one input, as the OOM killer would)
    loses nothing: its inputs are converted in the parent, and the store is the serial one."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(  # loaded by the workers only (they start after setenv)
        "import os\n"
        "import tracekit.store as s\n"
        "real = s.Store.convert\n"
        "def convert(self, path, *a, **k):\n"
        "    if str(path).endswith('ddp_rank1.json.gz'):\n"
        "        os._exit(9)\n"
        "    return real(self, path, *a, **k)\n"
        "s.Store.convert = convert\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setattr(parallel, "MIN_CHUNK_BYTES", 0)  # one input a chunk
    here = []
    real_serial = parallel._serial

    def spy(store, paths, *a, **k):
        here.extend(paths)
        return real_serial(store, paths, *a, **k)

    monkeypatch.setattr(parallel, "_serial", spy)
    dbs = {jobs: tmp_path / f"j{jobs}.duckdb" for jobs in (1, 2)}
    for jobs, db in dbs.items():
        code, out, err = run("convert", "-q", RANK0, RANK1, NCU, "--db", db, "--jobs", jobs)
        assert code == 0 and err == "", err
        assert [l.split(" ")[0] for l in out.splitlines()] == ["[0]", "[1]", "[2]"]
    assert here == [RANK1]  # the input the worker died on (nothing else) was converted here
    assert rows(dbs[1]) == rows(dbs[2])


def test_merging_several_worker_stores_in_one_statement_keeps_the_order(tmp_path):
    """merge_parts: one INSERT ... UNION ALL per table over several worker stores gives the rows
    of the serial conversion, in its order."""
    from tracekit.store import writing

    p1, p2 = tmp_path / "p1.duckdb", tmp_path / "p2.duckdb"
    r1 = parallel._work([[0, str(RANK0)], [1, str(NCU)]], str(p1), None, None, False)
    r2 = parallel._work([[2, str(RANK1)]], str(p2), None, None, False)
    assert [r[:2] for r in r1 + r2] == [["ok", 0], ["ok", 1], ["ok", 0]]
    merged, serial = tmp_path / "m.duckdb", tmp_path / "s.duckdb"
    with writing(merged) as st:
        parallel.merge_parts(st, [(p1, 0), (p2, 2)])
    with writing(serial) as st:
        for p in (RANK0, NCU, RANK1):
            st.convert(p)
    assert rows(merged) == rows(serial)
    assert one(merged, "SELECT source_id, count(*) FROM kernels GROUP BY ALL ORDER BY 1") == [(0, 388), (2, 388)]
