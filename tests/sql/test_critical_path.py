"""critical_path on real multi-rank captures: the 2-rank DDP Kineto fixture (H200, NCCL), HTA's two
sampled ranks of a 128-rank job, and GindaChen's 2-process torchrun nsys exports. Which rank arrived
last at each collective, where each job's steps begin and which rank finished last are computed here
from the raw JSON / SQLite, not from tracekit."""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import pytest

from conftest import FIXTURES, REALWORLD, load_json, need

DDP = [FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz"]
HTA = [REALWORLD / "kineto" / "hta__sampled_rank-0.json.gz", REALWORLD / "kineto" / "hta__sampled_rank-1.json.gz"]
NSYS = REALWORLD / "nsys"
COMM = ("nccl", "rccl")


def chain(st):
    """The view's rows by step, each step's segments checked to tile it: they follow one another
    without gap or overlap from step_start_ns to step_end_ns, and their times sum to the step."""
    rows = st.rows("""select job_id, step, step_start_ns, step_end_ns, step_ns, seg, rank, kind, category,
                             collective, seq, seg_start_ns, seg_end_ns, ns from critical_path
                      order by job_id, step, seg""")
    assert rows
    steps = defaultdict(list)
    for r in rows:
        steps[r[:5]].append(r)
    ranks = set(st.rows("select job_id, rank from ranks"))
    for (job, _step, s0, s1, sn), seg in steps.items():
        assert sn == s1 - s0 > 0
        assert abs(sum(r[13] for r in seg) - sn) <= 0.01 * sn
        bounds = sorted({(r[5], r[11], r[12]) for r in seg})
        assert bounds[0][1] == s0 and bounds[-1][2] == s1
        assert all(a[2] == b[1] for a, b in zip(bounds, bounds[1:]))  # contiguous, in seg order
        for _seg, x, y in bounds:  # a segment's kinds add up to its length
            assert sum(r[13] for r in seg if (r[11], r[12]) == (x, y)) == y - x
        assert all((job, r[6]) in ranks for r in seg)  # segments on real ranks
    return steps


def last_arrivals(starts):
    """{(name, seq): (latest start, its rank, margin over the next latest)} from {rank: [(name, start)]}:
    the n-th kernel of a name on each rank is the same collective."""
    per = defaultdict(list)
    for rank, ks in starts.items():
        seqs = defaultdict(int)
        for name, t in sorted(ks, key=lambda k: k[1]):
            seqs[name] += 1
            per[(name, seqs[name])].append((t, rank))
    out = {}
    for key, arr in per.items():
        if len(arr) >= 2:
            arr.sort()
            out[key] = (arr[-1][0], arr[-1][1], arr[-1][0] - arr[-2][0])
    return out


def check_jumps(steps, arrivals, tol_ns):
    """Every work segment that leads to a collective is on the rank that arrived last at it (where
    the raw trace tells the ranks apart by more than tol_ns); every collective whose last arrival
    lies inside a step is on the chain."""
    checked = set()
    for (job, step, s0, s1, _sn), seg in steps.items():
        on_chain = {(r[9], r[10]) for r in seg if r[9] is not None}
        inside = {k for k, (t, _r, _m) in arrivals.items() if s0 <= t < s1}
        assert inside <= on_chain, (job, step, sorted(inside - on_chain)[:3])
        for r in seg:
            if r[7] != "communication" and r[9] is not None:
                t, rank, margin = arrivals[(r[9], r[10])]
                if margin > tol_ns:
                    assert r[6] == rank, (step, r[9], r[10])
                    checked.add((r[9], r[10]))
    return len(checked)


def kineto_starts(paths):
    """{rank: [(comm kernel name, start ns on the common clock)]} and each rank's GPU op span."""
    starts, span = {}, {}
    for path in paths:
        raw = load_json(need(path))
        rank = raw["distributedInfo"]["rank"]
        base = raw.get("baseTimeNanoseconds", 0)
        ops = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        starts[rank] = [(e["name"], base + e["ts"] * 1000) for e in ops
                        if e["cat"] == "kernel" and any(c in e["name"].lower() for c in COMM)]
        span[rank] = (min(base + e["ts"] * 1000 for e in ops), max(base + (e["ts"] + e.get("dur", 0)) * 1000 for e in ops))
    return starts, span


def test_ddp_chain_runs_on_the_rank_that_arrived_last(convert):
    st = convert(*DDP)
    steps = chain(st)
    starts, span = kineto_starts(DDP)
    # two training steps, fewer than min_step_repeats: the job is one step, its GPUs' span
    (key,) = steps
    assert key[1] == 0
    assert key[2] == pytest.approx(min(s for s, _ in span.values()), abs=1000)
    assert key[3] == pytest.approx(max(e for _, e in span.values()), abs=1000)
    arrivals = last_arrivals(starts)
    assert len(arrivals) == 8 and {r for _t, r, _m in arrivals.values()} == {0}  # rank 1 waits for rank 0
    assert check_jumps(steps, arrivals, 1000) == 8
    seg = steps[key]
    # the chain never leaves rank 0, which finished last, and its 8 transfers are on it
    assert {r[6] for r in seg} == {0} and max(span, key=lambda k: span[k][1]) == 0
    assert sum(1 for r in seg if r[7] == "communication") == 8
    # rank 0's own host time between launches, not the all-reduces, is what would shorten it
    by = defaultdict(int)
    for r in seg:
        by[(r[7], r[8])] += r[13]
    top = max(by, key=by.get)
    assert top == ("idle", "launch") and by[("communication", None)] < 0.02 * key[4]


def test_hta_sampled_ranks_steps_and_jumps(convert):
    st = convert(*HTA)
    steps = chain(st)
    starts, _span = kineto_starts(HTA)
    # two ProfilerSteps only: the steps are those of steady_state's rule, the repeated range with
    # the most time (4 decoder passes a rank); step n starts where the earlier rank's n-th starts
    assert st.rows("select distinct step_phases from steady_state") == [("## decoder fp8 None ##,## encoder fp8 None ##",)]
    firsts = defaultdict(list)
    for path in HTA:
        raw = load_json(need(path))
        base = raw.get("baseTimeNanoseconds", 0)
        prof = sorted(base + e["ts"] * 1000 for e in raw["traceEvents"]
                      if e.get("ph") == "X" and e.get("name") == "## decoder fp8 None ##")
        for n, t in enumerate(prof, 1):
            firsts[n].append(t)
    assert sorted(k[1] for k in steps) == [1, 2, 3, 4] == sorted(firsts)
    for key in steps:
        assert key[2] == pytest.approx(min(firsts[key[1]]), abs=1000)
    arrivals = last_arrivals(starts)
    assert len(arrivals) == 10 and check_jumps(steps, arrivals, 1000) >= 3
    assert {r[6] for seg in steps.values() for r in seg} == {0, 1}  # the chain crosses ranks


def nsys_starts(path):
    """{rank: [(comm kernel name, start)]} and {rank: last GPU op end} from the raw export: a
    process's rank is its place among the GPU processes by lowest device id (torchrun's LOCAL_RANK)."""
    con = sqlite3.connect(f"file:{need(path)}?mode=ro", uri=True)
    ks = con.execute("""SELECT (k.globalPid >> 24) & 16777215, k.deviceId, s.value, k.start, k.end
                        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName""").fetchall()
    dev = defaultdict(lambda: 1 << 30)
    for pid, d, *_ in ks:
        dev[pid] = min(dev[pid], d)
    rank = {pid: i for i, pid in enumerate(sorted(dev, key=lambda p: (dev[p], p)))}
    starts, end = defaultdict(list), defaultdict(int)
    for pid, _d, name, s, e in ks:
        end[rank[pid]] = max(end[rank[pid]], e)
        if any(c in name.lower() for c in COMM):
            starts[rank[pid]].append((name, s))
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for pid, e in con.execute(f"SELECT (globalPid >> 24) & 16777215, max(end) FROM {table} GROUP BY 1"):
            if pid in rank:
                end[rank[pid]] = max(end[rank[pid]], e)
    return starts, end


@pytest.mark.parametrize("name", ["mfu_2gpu_before", "mfu_2gpu_after", "h100_2gpu_1s"])
def test_nsys_process_ranks(convert, name):
    path = NSYS / f"GindaChen__nsys-ai__{name}.sqlite"
    st = convert(need(path))
    steps = chain(st)
    starts, end = nsys_starts(path)
    off = st.one("select clock_offset_ns from sources")  # the export's own times onto the common clock
    arrivals = {k: (t + off, r, m) for k, (t, r, m) in last_arrivals(starts).items()}
    checked = check_jumps(steps, arrivals, 1000)
    (key,) = steps  # a 300 ms / 1 s window cut from a longer run: no repeated step ranges, one step
    seg = steps[key]
    last = max(seg, key=lambda r: r[5])
    assert last[6] == max(end, key=end.get)  # the chain ends on the rank whose GPU finished last
    if name == "h100_2gpu_1s":
        # no communication kernel in the window: the whole step is one work segment of that rank
        assert not arrivals and {r[5] for r in seg} == {1}
    else:
        # the send/recv pairs (one a rank outside the other's window), each on the chain and
        # jumped to the rank that arrived last where the ranks' starts differ by more than 1 µs
        clear = [k for k, (t, _r, m) in arrivals.items() if m > 1000]
        assert len(arrivals) >= 31 and checked == len(clear) >= 25
        assert {r[6] for r in seg} == {0, 1}


@pytest.mark.slow
def test_ranks_script_writes_its_oracle_on_cpu_ranks(convert, tmp_path):
    """fixtures/gen/ranks.py's logic on 2 CPU ranks (gloo, --cpu): the host straggler's oracle says
    the other rank waited for the slow one's Python in each all-reduce, and its figures are those of
    its own arrivals; each rank's trace is a rank of one job. (Its GPU run is what issue 48 needs.)"""
    import subprocess
    import sys

    pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    out = tmp_path / "ranks"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(FIXTURES / "gen" / "ranks.py"), "host", "--cpu", "--steps", "3", "--warmup", "1",
           "--oracle-steps", "2", "--host-ms", "40", "--out-dir", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    o = __import__("json").loads((out / "host_oracle.json").read_text())
    assert o["slow_rank"] == 1 and o["world_size"] == 2 and len(o["step_ns"]) == 3
    assert len(o["host_delay_ns"]) == 3 and all(d >= 40e6 for d in o["host_delay_ns"])
    for s, step in enumerate(o["arrivals_ns"]):
        for b, arr in enumerate(step):
            assert o["wait_ns"][s][b] == [max(arr) - t for t in arr]
            assert o["wait_ns"][s][b][1] == 0  # the slow rank never waits
        # rank 0 waited at least half the slow rank's spin in the step's first bucket (the spin
        # delays all of rank 1's buckets; CPU contention blurs the rest)
        assert o["wait_ns"][s][0][0] >= 0.5 * o["host_delay_ns"][s]
    waited = sum(w[0] for s in o["wait_ns"] for w in s)
    assert o["others_wait_share_pct"] == pytest.approx(100 * waited / sum(o["step_ns"]))
    st = convert(out / "host_rank0.json.gz", out / "host_rank1.json.gz")
    assert st.rows("select rank, world_size, job_id from ranks order by rank") == [(0, 2, 0), (1, 2, 0)]


@pytest.mark.slow  # (diagnose of the DDP fixture; the view: the tests above)
def test_rank_imbalance_says_what_the_slow_rank_did(convert):
    """diagnose's rank_imbalance names the rank the others waited for and what it was doing on the
    critical path: on the DDP fixture rank 0, whose GPU idles between launches (its host is late:
    the 'launch' category) more than it computes."""
    from tracekit.diagnose import diagnose

    st = convert(*DDP)
    (f,) = [f for f in diagnose(st).findings if f.code == "rank_imbalance"]
    assert f.metrics["slowest_rank"] == 0 and f.metrics["waiting_rank"] == 1
    want = defaultdict(int)
    for kind, cat, n in st.rows("select kind, category, ns from critical_path where rank = 0"):
        if kind != "communication":
            want[kind if cat is None else f"{kind}:{cat}"] += n
    doing = f.metrics["slowest_rank_doing_ns"]
    assert doing == dict(want) and max(doing, key=doing.get) == "idle:launch"
    assert doing["idle:launch"] > 2 * doing["compute"]
    assert "critical path" in f.summary and "host was in 'launch'" in f.summary
    assert any(e.view == "critical_path" for e in f.evidence)
