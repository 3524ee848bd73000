"""Analysis views on real captures, each against an independent Python computation from the raw JSON."""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from conftest import FIXTURES, load_json, need, realworld
from intervals import ns, union, length, intersect

DECODE = FIXTURES / "kineto" / "decode_b1.json.gz"
DDP = [FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz"]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SYNC_NAMES = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"}


class Trace:
    """Plain-Python view of a Kineto JSON: the test's own reading, independent of tracekit."""

    def __init__(self, path):
        self.raw = load_json(path)
        ev = [e for e in self.raw["traceEvents"] if e.get("ph") == "X"]
        self.gpu = [e for e in ev if e.get("cat") in GPU_CATS]
        self.runtime = {e["args"]["correlation"]: e for e in ev
                        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
        self.runtime_all = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        self.annotations = [e for e in ev if e.get("cat") == "user_annotation"]

    def intervals(self, pred=lambda e: True):
        out = defaultdict(list)
        for e in self.gpu:
            if pred(e):
                s = ns(e["ts"])
                out[e["args"]["device"]].append((s, s + ns(e["dur"])))
        return out


@pytest.fixture(scope="module")
def decode():
    return Trace(need(DECODE))


def test_gpu_utilization(decode, convert):
    st = convert(DECODE)
    for dev, iv in decode.intervals().items():
        u = union(iv)
        window = max(e for _, e in iv) - min(s for s, _ in iv)
        got = st.rows("select window_ns, busy_ns, utilization_pct from gpu_utilization where device_id = ?", [dev])[0]
        assert abs(got[0] - window) <= 2 and abs(got[1] - length(u)) <= len(u)
        assert got[2] == pytest.approx(100 * length(u) / window, rel=1e-4)
        # the timeline's buckets add up to the busy time
        assert abs(st.one("select sum(busy_ns) from gpu_utilization_timeline where device_id = ?", [dev])
                   - length(u)) <= len(u)
        assert st.one("select count(*) from gpu_utilization_timeline where device_id = ?", [dev]) == 100
    # decode at batch 1 is launch-bound: the GPU is idle most of the time
    assert st.one("select utilization_pct from gpu_utilization") < 30


def test_launch_latency(decode, convert):
    st = convert(DECODE)
    lat, short = [], 0
    for e in decode.gpu:
        r = decode.runtime.get(e["args"].get("correlation"))
        if r is not None:
            lat.append(ns(e["ts"]) - ns(r["ts"]))
            if e.get("cat") == "kernel" and e["dur"] < r["dur"]:
                short += 1
    assert st.one("select count(*) from launch_latency") == len(lat)
    assert st.one("select median(latency_ns) from launch_latency") == pytest.approx(statistics.median(lat), abs=2)
    got = st.rows("select launched, short_kernels from launch_summary")[0]
    assert got[0] == sum(1 for e in decode.gpu if e["cat"] == "kernel" and e["args"].get("correlation") in decode.runtime)
    assert abs(got[1] - short) <= 3  # float-µs rounding on equal durations
    assert st.one("select min(queue_ns) from launch_latency") >= 0


def test_idle_gap_causes(decode, convert):
    """Independent classification of every device gap of the decode capture."""
    st = convert(DECODE)
    syncs = [(ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in decode.runtime_all if e["name"] in SYNC_NAMES]
    pageable = {e["args"]["correlation"] for e in decode.gpu
                if e["cat"] == "gpu_memcpy" and "Pageable" in e["name"] and "DtoH" in e["name"]}
    syncs += [(ns(r["ts"]), ns(r["ts"] + r["dur"])) for c, r in decode.runtime.items() if c in pageable]
    ops = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e) for e in decode.gpu)
    want = defaultdict(int)
    want_sync = []
    busy_until = ops[0][1]
    for s, end, e in ops[1:]:
        if s > busy_until:
            r = decode.runtime.get(e["args"].get("correlation"))
            if r is not None and ns(r["ts"]) > busy_until:
                # the part put on a sync: at most the time the host was blocked in the sync
                # (started before the gap, the latest-ending one) that the GPU drained during
                before = [(b, a) for a, b in syncs if a < busy_until]
                sync_ns = 0
                if before and max(before)[0] >= busy_until:
                    b, a = max(before)
                    sync_ns = min(s - busy_until, b - a)
                    want_sync.append(sync_ns)
                cause = "sync_wait" if sync_ns and 2 * sync_ns >= s - busy_until else "host_wait"
            elif r is not None and s - busy_until < 30_000:
                cause = "kernel_wait"
            else:
                cause = "other"
            want[cause] += 1
        busy_until = max(busy_until, end)
    got = dict(st.rows("select cause, count(*) from idle_gaps where scope = 'device' group by cause"))
    assert sum(got.values()) == sum(want.values())
    for cause, n in want.items():
        assert abs(got.get(cause, 0) - n) <= 2, (cause, got, want)  # ns rounding at boundaries
    assert got["host_wait"] > 0.9 * sum(got.values())  # launch-bound decode
    # the per-step .item()/.cpu() round trip: 8 gaps begin while the host is blocked in it, but the
    # host was blocked only ~50 µs each, so their larger part is launching (host_wait)
    got_sync = sorted(r[0] for r in st.rows("select sync_ns from idle_gaps where scope = 'device' and sync_ns > 0"))
    assert len(got_sync) == len(want_sync) >= 8
    assert all(abs(x - y) <= 2 for x, y in zip(got_sync, sorted(want_sync)))
    assert "sync_wait" not in got


def test_sync_stalls_find_per_step_sync(decode, convert):
    st = convert(DECODE)
    want = sum(1 for e in decode.runtime_all if e["name"] == "cudaStreamSynchronize")
    assert want >= 9
    assert st.one("select sum(calls) from sync_stalls where name = 'cudaStreamSynchronize'") == want
    total = st.rows("select calls, total_ns from sync_stalls where name is null")[0]
    rows = st.rows("select calls, total_ns from sync_stalls where name is not null")
    assert total == (sum(r[0] for r in rows), sum(r[1] for r in rows))


def test_phases(decode, convert):
    st = convert(DECODE)
    by_phase = defaultdict(lambda: [0, 0, 0])  # instances, kernels, kernel_ns
    runtime_by_tid = defaultdict(list)
    for r in decode.runtime.values():
        runtime_by_tid[r["tid"]].append(r)
    kernels_by_corr = defaultdict(list)
    for e in decode.gpu:
        if e["cat"] == "kernel":
            kernels_by_corr[e["args"].get("correlation")].append(e)
    for a in decode.annotations:
        p = by_phase[a["name"]]
        p[0] += 1
        for r in runtime_by_tid[a["tid"]]:
            if ns(a["ts"]) <= ns(r["ts"]) < ns(a["ts"] + a["dur"]):
                for k in kernels_by_corr[r["args"]["correlation"]]:
                    p[1] += 1
                    p[2] += ns(k["dur"])
    got = {r[0]: r[1:] for r in st.rows("select phase, instances, kernels, kernel_ns from phases")}
    assert set(got) == set(by_phase)
    for name, (n, k, kns) in by_phase.items():
        assert got[name][:2] == (n, k)
        assert abs(got[name][2] - kns) <= k
    assert got["decode_step"][0] == 8 and got["prefill"][0] == 1


@pytest.fixture(scope="module")
def ddp():
    return [Trace(need(p)) for p in DDP]


def test_overlap_two_rank_nccl(ddp, convert):
    st = convert(*DDP)
    for sid, t in enumerate(ddp):
        comm = t.intervals(lambda e: e["cat"] == "kernel" and "nccl" in e["name"].lower())
        comp = t.intervals(lambda e: e["cat"] == "kernel" and "nccl" not in e["name"].lower())
        mcpy = t.intervals(lambda e: e["cat"] == "gpu_memcpy")
        for dev in comp:
            cu, cm, mu = union(comp[dev]), union(comm.get(dev, [])), union(mcpy.get(dev, []))
            rows = {r[0]: r[1:] for r in st.rows(
                "select kind, kind_ns, compute_ns, overlap_ns, overlap_pct from overlap"
                " where source_id = ? and device_id = ?", [sid, dev])}
            assert abs(rows["comm"][0] - length(cm)) <= len(cm)
            assert abs(rows["comm"][1] - length(cu)) <= len(cu)
            assert abs(rows["comm"][2] - intersect(cu, cm)) <= 2 * len(cm)
            assert abs(rows["memcpy"][2] - intersect(cu, mu)) <= 2 * len(mu)
            if length(cm):
                assert rows["comm"][3] == pytest.approx(100 * intersect(cu, cm) / length(cm), abs=0.01)


def test_rank_imbalance_two_ranks(ddp, convert):
    st = convert(*DDP)
    arrivals = defaultdict(dict)  # (name, seq) -> rank -> (start on common clock, dur)
    for t in ddp:
        rank, base = t.raw["distributedInfo"]["rank"], t.raw["baseTimeNanoseconds"]
        seen = defaultdict(int)
        for e in sorted((e for e in t.gpu if e["cat"] == "kernel" and "nccl" in e["name"].lower()),
                        key=lambda e: e["ts"]):
            seen[e["name"]] += 1
            arrivals[(e["name"], seen[e["name"]])][rank] = (ns(e["ts"]) + base, ns(e["dur"]))
    assert len(arrivals) == 8  # 4 buckets x 2 steps
    got = st.rows("select name, seq, rank, wait_ns, skew_ns, slowest_rank, comm_ns from rank_imbalance")
    assert len(got) == 2 * len(arrivals)
    for name, seq, rank, wait, skew, slowest, comm in got:
        a = arrivals[(name, seq)]
        last = max(v[0] for v in a.values())
        assert abs(wait - (last - a[rank][0])) <= 2
        assert abs(skew - (last - min(v[0] for v in a.values()))) <= 2
        assert slowest == max(a, key=lambda r: (a[r][0], r))
        assert abs(comm - min(v[1] for v in a.values())) <= 1


def test_views_empty_without_data(convert):
    cpu_only = [p for p in realworld("kineto") if "cpu_only" in p.name]
    from tracekit import views

    st = convert(*(cpu_only or []))  # an empty store when the corpus is absent
    gpu_views = {"hotspots", "idle_gaps", "gpu_activity", "gpu_busy", "gpu_launches", "gpu_utilization",
                 "gpu_utilization_timeline", "launch_latency", "launch_summary", "overlap",
                 "rank_imbalance", "host_syncs", "sync_stalls"}
    for v in views.all_views():  # every view runs; those about GPU work are empty
        rows = st.rows(f"select * from {v.name}")
        if v.name in gpu_views:
            assert rows == [], v.name
