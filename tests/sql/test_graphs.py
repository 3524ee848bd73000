"""Eager vs CUDA graphs (fixtures/kineto/graphs.json.gz, fixtures/nsys/graphs.sqlite: the same
16-block MLP step, 8 eager steps then 8 replays of one captured graph, on an H200): the views
show the eager part launch-bound and the graph part not."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from conftest import FIXTURES, load_json, need
from intervals import ns

KINETO = FIXTURES / "kineto" / "graphs.json.gz"
NSYS = FIXTURES / "nsys" / "graphs.sqlite"

GAPS_BY_PHASE = """
    select e.name as phase, count(*) as gaps, count(*) filter (where g.cause = 'host_wait') as host_wait,
           sum(g.dur_ns) as idle_ns
    from idle_gaps g
    join gpu_launches l
      on l.source_id = g.source_id and l.device_id = g.device_id and l.start_ns = g.end_ns
     and l.stream_id = g.after_stream and l.name = g.after_name
    join events e
      on e.source_id = l.source_id and e.pid = l.pid and e.tid = l.tid and e.category = ?
     and l.api_start_ns >= e.start_ns and l.api_start_ns < e.end_ns
    where g.scope = 'device'
    group by 1 order by 1"""


def independent_gaps(trace):
    """Device gaps of the raw JSON, each attributed to the annotation that launched the op after it."""
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    gpu = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    runtime = {e["args"]["correlation"]: e for e in ev
               if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ann = [e for e in ev if e.get("cat") == "user_annotation"]
    out = defaultdict(Counter)
    busy_until = ns(gpu[0]["ts"]) + ns(gpu[0]["dur"])
    for e in gpu[1:]:
        s = ns(e["ts"])
        if s > busy_until:
            r = runtime.get(e["args"].get("correlation"))
            phase = next((a["name"] for a in ann if r is not None and a["tid"] == r["tid"]
                          and ns(a["ts"]) <= ns(r["ts"]) < ns(a["ts"] + a["dur"])), None)
            if phase:
                out[phase]["gaps"] += 1
                out[phase]["host_wait"] += ns(r["ts"]) > busy_until
                out[phase]["idle_ns"] += s - busy_until
        busy_until = max(busy_until, s + ns(e["dur"]))
    return out


def test_kineto_eager_launch_bound_graph_not(convert):
    trace = load_json(need(KINETO))
    want = independent_gaps(trace)
    st = convert(KINETO)
    got = {r[0]: r[1:] for r in st.rows(GAPS_BY_PHASE, ["user_annotation"])}
    assert set(got) == {"eager_step", "graph_step"} == set(want)
    for phase, (gaps, host_wait, idle_ns) in got.items():
        w = want[phase]
        assert abs(gaps - w["gaps"]) <= 2 and abs(host_wait - w["host_wait"]) <= 2
        assert abs(idle_ns - w["idle_ns"]) <= 2 * gaps
    eager, graph = got["eager_step"], got["graph_step"]
    assert eager[1] > 0.7 * eager[0]          # eager: the GPU waits for the CPU at most gaps
    assert graph[1] <= 8                      # graphs: at most the first kernel of each replay
    assert graph[2] < 0.1 * eager[2]          # and an order of magnitude less idle time
    # one launch call per replay starts all 49 GPU ops of the graph
    launches = {r[0]: r[1:] for r in st.rows(
        "select api_name, count(distinct correlation_id), max(ops_in_launch) from gpu_launches group by 1")}
    n_graph = sum(1 for e in trace["traceEvents"] if e.get("name") == "cudaGraphLaunch")
    assert launches["cudaGraphLaunch"] == (n_graph, 49) and n_graph == 8
    assert st.one("select graph_launches from launch_summary") == 8


def test_nsys_node_trace_same_conclusion(convert):
    pytest.importorskip("tracekit.adapters.nsys")
    st = convert(need(NSYS))
    got = {r[0]: r[1:] for r in st.rows(GAPS_BY_PHASE, ["nvtx"])}
    eager, graph = got["eager_step"], got["graph_step"]
    assert eager[1] > 0.7 * eager[0] and graph[1] <= 8 and graph[2] < 0.1 * eager[2]
    # graph kernels carry their graph node ids; one cudaGraphLaunch correlation each replay
    assert st.one("select count(*) from kernels where graph_node_id is not null") == 384
    assert st.one("select count(distinct correlation_id) from gpu_launches where api_name = 'cudaGraphLaunch'") == 8
