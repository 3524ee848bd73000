"""The daily reports of `nsys stats` and HTA (issue 23).

* cuda_kern_exec_sum, cuda_gpu_sum against nsys's own `nsys stats` CSV output of every nsys
  fixture (fixtures/*/oracle/, nsys 2025.3.1, fixtures/gen/run_stats_reports.sh): every cell, to
  the nanosecond (nsys prints avg / med / stddev with 1 decimal, rounded half up), and the order.
* kernel_type_breakdown, temporal_breakdown, queue_length(_summary), kernel_sequences against
  independent computations from the raw Kineto JSON (stdlib json with exact decimals), and the
  figures HTA 0.5 itself gave on the same traces (bench/hta_compare.py; HTA is not needed here).
"""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise
from pathlib import Path

import pytest
from conftest import FIXTURES, realworld
from intervals import union

ORACLED = sorted(p for p in FIXTURES.glob("*/*.sqlite")
                 if (p.parent / "oracle" / f"{p.stem}_cuda_gpu_sum.csv").exists())
DDP = [FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz"]


def d1(x) -> str:
    """nsys's 1-decimal figures: the exact double rounded half up."""
    return "" if x is None else str(Decimal(x).quantize(Decimal("0.1"), ROUND_HALF_UP))


def oracle(path: Path, report: str) -> list[dict]:
    with open(path.parent / "oracle" / f"{path.stem}_{report}.csv", newline="") as f:
        return list(csv.DictReader(f))


def dicts(st, q):
    rel = st.sql(q)
    return [dict(zip(rel.columns, r)) for r in rel.fetchall()]


def test_every_nsys_fixture_has_its_oracle():
    assert len(ORACLED) >= 17  # every nsys fixture of 2026-12-01 (labelled/, nsys/, roofline/)


# the nsys/ fixtures by default, the labelled/ and roofline/ ones under -m slow (the same views)
@pytest.mark.parametrize("path", [p if p.parent.name == "nsys" else pytest.param(p, marks=pytest.mark.slow)
                                  for p in ORACLED], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_views_equal_nsys_stats(path, convert):
    st = convert(path)
    # cuda_kern_exec_sum: one row per (PID, TID, DevId, API, kernel), in nsys's order
    want = oracle(path, "cuda_kern_exec_sum")
    got = dicts(st, "select * from cuda_kern_exec_sum")
    assert len(got) == len(want) > 0
    for w, g in zip(want, got):
        assert (w["PID"], w["TID"], w["DevId"], w["Count"], w["QCount"], w["API Name"], w["Kernel Name"]) == (
            str(g["pid"]), str(g["tid"]), str(g["device_id"]), str(g["count"]), str(g["queue_count"]),
            g["api_name"], g["kernel_name"])
        for letter, p in (("T", "t"), ("A", "a"), ("Q", "q"), ("K", "k")):
            for stat in ("Avg", "Med", "StdDev"):
                assert w[f"{letter}{stat} (ns)"] == d1(g[f"{p}_{stat.lower()}_ns"]), (w["Kernel Name"], letter, stat)
            for stat in ("Min", "Max"):
                v = g[f"{p}_{stat.lower()}_ns"]
                assert w[f"{letter}{stat} (ns)"] == ("" if v is None else str(v)), (w["Kernel Name"], letter, stat)
    # cuda_gpu_sum: kernels and memory operations in one list
    want = oracle(path, "cuda_gpu_sum")
    got = dicts(st, "select * from cuda_gpu_sum")
    assert len(got) == len(want) > 0
    for w, g in zip(want, got):
        assert (w["Category"], w["Operation"], w["Total Time (ns)"], w["Instances"], w["Min (ns)"], w["Max (ns)"]) == (
            g["category"], g["operation"], str(g["total_ns"]), str(g["instances"]), str(g["min_ns"]),
            str(g["max_ns"]))
        assert (w["Time (%)"], w["Avg (ns)"], w["Med (ns)"], w["StdDev (ns)"]) == (
            d1(g["time_pct"]), d1(g["avg_ns"]), d1(g["med_ns"]), d1(g["stddev_ns"])), w["Operation"]


def test_kern_exec_sum_on_a_graph_launch_and_its_definition(convert):
    # graphs.sqlite (node-level graph trace): the graph's kernels come from one cudaGraphLaunch_v10000
    # call each replay, so their API figures are that call's; total = max(call end, kernel end) - call start
    st = convert(FIXTURES / "nsys" / "graphs.sqlite")
    rows = dicts(st, "select * from cuda_kern_exec_sum where api_name = 'cudaGraphLaunch_v10000'")
    assert len(rows) == 3 and {r["count"] for r in rows} == {128}
    assert len({(r["a_avg_ns"], r["a_min_ns"], r["a_max_ns"]) for r in rows}) == 1
    one = st.sql("select count(*) from cuda_kern_exec_sum where raw_api_name = 'cudaLaunchKernel_v7000' "
                 "and api_name = 'cudaLaunchKernel'").fetchall()[0][0]
    assert one > 0  # the display rule of sql/lib/summaries.sql


# -- Kineto, exact from the JSON text ------------------------------------------------------------------
def load_exact(path: Path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def ns(v) -> int:
    return int((Decimal(v) * 1000).to_integral_value(ROUND_HALF_UP))


def gpu_ops(trace):
    """(type, stream, start, end, correlation, name) of every kernel / memcpy / memset."""
    for e in trace["traceEvents"]:
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") == "X" and cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            s = ns(e["ts"])
            if cat != "kernel":
                t = "memory"
            elif "nccl" in e["name"].lower():
                t = "communication"
            else:
                t = "compute"
            yield t, int(e["args"]["stream"]), s, s + ns(e["dur"]), e["args"].get("correlation"), e["name"]



@pytest.mark.parametrize("path", DDP, ids=lambda p: p.name)
def test_kernel_type_breakdown_equals_a_sweep_of_the_json(path, convert):
    ops = list(gpu_ops(load_exact(path)))
    by_type = defaultdict(list)
    for t, _, s, e, _, _ in ops:
        by_type[t].append((s, e))
    edges = []
    for bit, t in enumerate(("compute", "communication", "memory")):
        for s, e in union(by_type[t]):
            edges += [(s, 1 << bit), (e, -(1 << bit))]
    edges.sort()
    excl, mask, prev = defaultdict(int), 0, None
    for ts, d in edges:
        if prev is not None and ts > prev and mask in (1, 2, 4):
            excl[{1: "compute", 2: "communication", 4: "memory"}[mask]] += ts - prev
        mask += d
        prev = ts
    allu = union([(s, e) for _, _, s, e, _, _ in ops])
    busy = sum(e - s for s, e in allu)
    span = allu[-1][1] - allu[0][0]
    st = convert(path)
    got = {r["kernel_type"]: r for r in dicts(st, "select * from kernel_type_breakdown")}
    assert set(got) == {"compute", "communication", "memory", "other"}
    for t in ("compute", "communication", "memory"):
        u = sum(e - s for s, e in union(by_type[t]))
        g = got[t]
        assert (g["ops"], g["total_ns"], g["union_ns"], g["exclusive_ns"], g["overlapped_ns"]) == (
            len(by_type[t]), sum(e - s for s, e in by_type[t]), u, excl[t], u - excl[t])
        assert (g["busy_ns"], g["span_ns"]) == (busy, span)
    assert got["other"]["ops"] == 0
    tb = dicts(st, "select * from temporal_breakdown")
    assert len(tb) == 1
    cu = sum(e - s for s, e in union(by_type["compute"]))
    assert (tb[0]["span_ns"], tb[0]["idle_ns"], tb[0]["compute_ns"], tb[0]["non_compute_ns"]) == (
        span, span - busy, cu, busy - cu)
    assert tb[0]["rank"] == int(path.name[8])  # distributedInfo.rank
    assert tb[0]["idle_pct"] + tb[0]["compute_pct"] + tb[0]["non_compute_pct"] == pytest.approx(100)


def test_breakdowns_equal_hta(convert):
    # HTA 0.5 get_temporal_breakdown on ddp_rank0/1 (HTA_DISABLE_NS_ROUNDING=1, bench/hta_compare.py):
    # rank 1 idle 14239.687 us, compute 6628.370 us, non-compute 33060.020 us, span 53928.077 us
    st = convert(*DDP)
    r = dicts(st, "select * from temporal_breakdown where rank = 1")[0]
    assert (r["span_ns"], r["idle_ns"], r["compute_ns"], r["non_compute_ns"]) == (
        53928077, 14239687, 6628370, 33060020)
    # rank 1's all-reduces wait for rank 0: 94 % of their time overlaps nothing (comm exclusive)
    c = dicts(st, "select * from kernel_type_breakdown where rank = 1 and kernel_type = 'communication'")[0]
    assert (c["ops"], c["total_ns"]) == (8, 36165118)
    assert c["overlapped_ns"] > 0 and c["exclusive_ns"] > 0.9 * c["union_ns"]


@pytest.mark.parametrize("path", DDP, ids=lambda p: p.name)
def test_queue_length_equals_the_json(path, convert):
    trace = load_exact(path)
    launch = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            c = e["args"]["correlation"]
            launch[c] = min(launch.get(c, ns(e["ts"])), ns(e["ts"]))
    per_stream = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # ts -> [d queued, d outstanding]
    n_ops = defaultdict(int)
    for _, stream, s, e, corr, _ in gpu_ops(trace):
        if corr not in launch:
            continue
        n_ops[stream] += 1
        ev = per_stream[stream]
        ev[launch[corr]][0] += 1
        ev[launch[corr]][1] += 1
        ev[s][0] -= 1
        ev[e][1] -= 1
    st = convert(path)
    summary = {r["stream_id"]: r for r in dicts(st, "select * from queue_length_summary")}
    assert set(summary) == set(per_stream)
    for stream, ev in per_stream.items():
        q = o = 0
        series = []
        for ts in sorted(ev):
            q += ev[ts][0]
            o += ev[ts][1]
            series.append((ts, q, o))
        got = st.sql(f"select ts_ns, queued, outstanding from queue_length where stream_id = {stream} "
                     "order by ts_ns").fetchall()
        assert got == series
        window = series[-1][0] - series[0][0]
        area_q = sum(q * (b[0] - a[0]) for a, b in pairwise(series) for q in [a[1]])
        empty = sum(b[0] - a[0] for a, b in pairwise(series) if a[2] == 0)
        s = summary[stream]
        assert (s["ops"], s["window_ns"], s["max_queued"], s["max_outstanding"], s["empty_ns"]) == (
            n_ops[stream], window, max(x[1] for x in series), max(x[2] for x in series), empty)
        assert s["avg_queued"] == pytest.approx(area_q / window)


def test_queue_length_equals_hta(convert):
    # HTA 0.5 get_queue_length_summary, rank 1 stream 7: 824 changes, mean 4.303398, max 38 (HTA
    # counts cudaLaunchKernel / cudaMemcpyAsync / cudaMemsetAsync launches only, 412 of them; with
    # cuLaunchKernelEx too the stream has 482 operations and the same maximum)
    st = convert(DDP[1])
    s = dicts(st, "select * from queue_length_summary where stream_id = 7")[0]
    assert (s["ops"], s["max_queued"]) == (482, 38)


def test_kernel_sequences_of_an_operator_equal_the_json_and_hta(convert):
    # HTA 0.5 get_frequent_cuda_kernel_sequences('aten::linear', rank 0 of the DDP job): 4 patterns
    # seen 8, 4, 4 and 2 times (bench/hta_compare.py: patterns, counts and durations equal)
    trace = load_exact(DDP[0])
    ev = trace["traceEvents"]
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "aten::linear" in e["name"]]
    calls = {e["args"]["correlation"]: e for e in ev if e.get("ph") == "X"
             and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def inside(a, b):  # a within b on b's thread
        return a["tid"] == b["tid"] and ns(b["ts"]) <= ns(a["ts"]) and ns(a["ts"]) < ns(b["ts"]) + ns(b["dur"])

    roots = [o for o in ops if not any(p is not o and inside(o, p) and ns(p["dur"]) > ns(o["dur"]) for p in ops)]
    patterns = defaultdict(lambda: [0, 0])
    for r in roots:
        ks = sorted((ns(k["ts"]), k["name"], ns(k["dur"])) for k in gpu
                    if k["args"].get("correlation") in calls and inside(calls[k["args"]["correlation"]], r))
        if len(ks) >= 3:
            key = "|".join([r["name"]] + [k[1] for k in ks])
            patterns[key][0] += 1
            patterns[key][1] += sum(k[2] for k in ks)
    st = convert(DDP[0])
    st.sql("set variable sequence_op = 'aten::linear'")
    got = {r["pattern"]: (r["count"], r["gpu_ns"]) for r in dicts(st, "select * from kernel_sequences")}
    assert got == {k: tuple(v) for k, v in patterns.items()}
    assert sorted((c for c, _ in got.values()), reverse=True) == [8, 4, 4, 2]


@pytest.mark.parametrize("path", [FIXTURES / "kineto" / "decode_b1.json.gz", FIXTURES / "nsys" / "decode_b1.sqlite"],
                         ids=lambda p: p.name)
def test_kernel_sequences_default_finds_the_repeated_steps(path, convert):
    # the decode generator runs 8 identical decode steps (352 kernels each) after one prefill (360)
    st = convert(path)
    rows = dicts(st, "select op_name, ops, count from kernel_sequences")
    assert rows == [{"op_name": "decode_step", "ops": 352, "count": 8},
                    {"op_name": "prefill", "ops": 360, "count": 1}]
    st.sql("set variable min_pattern_len = 361")
    assert dicts(st, "select op_name, ops, count from kernel_sequences") == []


def test_kern_exec_sum_links_per_process_on_a_real_two_process_capture(convert):
    # shared/reference/nsys-sqlite.md: on mfu_2gpu_before (two processes, one GPU each) the
    # PID-scoped correlation join links 3,986 of the 4,010 kernels (24 launched before the window);
    # correlationId alone would give 4,280 matches
    hits = [p for p in realworld("nsys") if p.name == "GindaChen__nsys-ai__mfu_2gpu_before.sqlite"]
    if not hits:
        pytest.skip("realworld corpus absent")
    st = convert(hits[0])
    assert st.sql("select sum(count)::BIGINT, count(distinct pid) from cuda_kern_exec_sum").fetchall() == [(3986, 2)]
    assert st.sql("select rank, device_id from temporal_breakdown order by 1").fetchall() == [(0, 0), (1, 1)]
