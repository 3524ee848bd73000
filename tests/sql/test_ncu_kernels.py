"""The seed's experiment under Nsight Compute on an H200 (fixtures/ncu/mm_* and kn_*): each decode
building block gets the bound its own counters say, computed here independently from the raw page."""

from __future__ import annotations

import csv

import pytest

from conftest import FIXTURES, need

SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"


def raw_page(path):
    """{(nvtx range, ID): {metric: float}} from the wide raw CSV (row 2 holds the units)."""
    with open(need(path), newline="") as f:
        rows = list(csv.reader(f))
    head, data = rows[0], rows[2:]
    nvtx_col = head.index(next(h for h in head if h.startswith("thread Domain")))
    out = {}
    for r in data:
        vals = {}
        for h, v in zip(head, r):
            try:
                vals[h] = float(v.replace(",", ""))
            except ValueError:
                pass
        rng = r[nvtx_col].split('"')[-2].split(":")[1]  # innermost pushed range
        out[(rng, int(r[0]))] = vals
    return out


def sol(sm, mem):
    """ncu's Speed-of-Light bottleneck rule (80 / 60 / 10 points), written out independently."""
    if sm >= 80 or mem >= 80:
        return "memory" if mem > sm else "compute"
    if sm < 60 and mem < 60:
        return "latency"
    if abs(sm - mem) >= 10:
        return "memory" if mem > sm else "compute"
    return "balanced"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pytest.importorskip("tracekit.adapters.ncu")
    import tracekit
    from tracekit.store import Store

    db = tmp_path_factory.mktemp("ncu") / "k.duckdb"
    with Store(db) as st:
        st.convert(need(FIXTURES / "ncu" / "mm_raw.csv"))
        st.convert(need(FIXTURES / "ncu" / "kn_raw.csv"))
    st = tracekit.open(db)
    yield st
    st.close()


@pytest.mark.parametrize("source_id, csv_name", [(0, "mm_raw.csv"), (1, "kn_raw.csv")])
def test_bounds_follow_the_counters(store, source_id, csv_name):
    want = raw_page(FIXTURES / "ncu" / csv_name)
    got = dict(((r[0], r[1])) for r in store.rows(
        "select id, bound from kernel_bounds where source_id = ?", [source_id]))
    assert len(got) == len(want)
    for (rng, i), m in want.items():
        assert got[i] == sol(m[SM], m[MEM]), (rng, i)


def test_decode_building_blocks(store):
    kn = raw_page(FIXTURES / "ncu" / "kn_raw.csv")
    mm = raw_page(FIXTURES / "ncu" / "mm_raw.csv")
    bound = {(sid, i): b for sid, i, b in store.rows("select source_id, id, bound from kernel_bounds")}
    by_range = {}
    for sid, page in ((0, mm), (1, kn)):
        for (rng, i) in page:
            by_range.setdefault(rng, set()).add(bound[(sid, i)])
    # a 70B-shaped batch-1 GEMV (470 MB of weights) streams its weights: memory-bound
    assert by_range["gemv_b1_large"] == {"memory"}
    big = next(m for (r, _), m in kn.items() if r == "gemv_b1_large")
    assert big["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"] > 80
    # the same product at batch 4096 is compute-bound
    assert by_range["gemm_b4096"] == {"compute"}
    # a 4096x4096 batch-1 GEMV fills less than one wave: latency-bound (the seed's "small models
    # at batch 1 are latency-limited"), though memory is its busier unit
    # (the range holds the splitK GEMV and its small reduce kernel, both latency-bound)
    gemv = max((m for (r, _), m in mm.items() if r == "gemv_b1"), key=lambda m: m[MEM])
    assert by_range["gemv_b1"] == {"latency"} and gemv[MEM] > 50 > 10 > gemv[SM]
    # elementwise kernels stream: memory-bound
    assert by_range["elementwise"] == {"memory"}
    # the transpose copy is memory-bound with uncoalesced loads: 32 sectors per request (one per
    # thread) against 16 for the vectorized elementwise kernels
    assert by_range["strided_copy"] == {"memory"}
    spr = {r: m[SECTORS] / m[REQUESTS] for (r, _), m in kn.items() if m.get(REQUESTS)}
    assert spr["strided_copy"] == 32 and spr["elementwise"] == 16
    got = dict(store.rows("""select k.id, k.l1_sectors_per_request from ncu_kernels k
                             where source_id = 1 and l1_sectors_per_request is not null"""))
    assert sorted(got.values()) == sorted(m[SECTORS] / m[REQUESTS] for m in kn.values() if m.get(REQUESTS))


@pytest.mark.slow  # (diagnose of ncu sources: tests/diagnose/test_diagnose.py)
def test_diagnose_says_memory_bound_for_the_big_gemv(tmp_path):
    pytest.importorskip("tracekit.adapters.ncu")
    from tracekit.store import Store
    from tracekit import diagnose as dg
    import tracekit

    db = tmp_path / "d.duckdb"
    with Store(db) as st:
        st.convert(need(FIXTURES / "ncu" / "kn_raw.csv"))
        st.convert(need(FIXTURES / "kineto" / "kernels.json.gz"))
    st = tracekit.open(db)
    report = dg.diagnose(st)
    codes = {(f.code, f.subject) for f in report.findings}
    assert ("memory_bound", "nvjet_sm90_tst_128x8_64x12_2x1_v_bz_NNT") in codes
    assert not any(c == "compute_bound" for c, _ in codes)
    st.close()
