"""Where every idle nanosecond went: `idle_attribution`, `time_breakdown` and the verdicts drawn
from them, on the attribution corpus (fixtures/attribution/, made by fixtures/gen/attribution.py
on an H100: 27 programs (11 of them held out), each captured by torch.profiler and by nsys, each run writing its own
oracle of the host time per built part) and on every other store of the fixtures and of
../shared/realworld (the pieces of every gap add up to the gap)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import FIXTURES, REPO, realworld

pytestmark = pytest.mark.slow  # converts the 54 captures of the attribution corpus and every real-world trace: minutes

sys.path.insert(0, str(REPO / "bench"))
import attribution as A  # noqa: E402  (bench/attribution.py: the scorer, one definition)

ATTR = FIXTURES / "attribution"
CASES = A.cases()
CAPTURES = [(c, f) for c in CASES for f in A.FORMATS]


def oracle(case, fmt):
    return json.loads((ATTR / A.FORMATS[fmt][1].format(case=case)).read_text())


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    import tracekit

    d = tmp_path_factory.mktemp("attr")
    made = {}

    def get(case, fmt):
        if (case, fmt) not in made:
            db = d / f"{case}_{fmt}.duckdb"
            tracekit.convert([str(ATTR / A.FORMATS[fmt][0].format(case=case))], db=str(db), replace=True, jobs=1)
            st = tracekit.open(str(db))
            r = A.score_one(st, oracle(case, fmt))
            made[case, fmt] = (st, r)
        return made[case, fmt]

    yield get
    for st, _ in made.values():
        st.close()


def test_corpus_is_complete():
    """12 single causes, 6 healthy controls, 9 mixtures, each captured both ways with its oracle."""
    kinds = {}
    for c in CASES:
        for f in A.FORMATS:
            assert (ATTR / A.FORMATS[f][0].format(case=c)).exists(), (c, f)
            o = oracle(c, f)
            kinds.setdefault(o["kind"], set()).add(c)
            assert o["window_ns"] > 0 and o["case"] == c
    assert len(kinds["single"]) == 12 and len(kinds["control"]) == 6 and len(kinds["mixture"]) == 9
    assert {oracle(c, "kineto")["expected"] for c in kinds["single"]} == \
        {"launch", "data", "sync", "copy", "compile", "startup", "untraced", "cpu_op"}
    # the held-out programs (ho_*), written after the verdicts were tuned on the others
    assert sum(oracle(c, "kineto").get("held_out", False) for c in CASES) == 11


@pytest.mark.parametrize("case,fmt", [(c, f) for c, f in CAPTURES if oracle(c, f)["kind"] == "single"],
                         ids=lambda x: x)
def test_single_cause_is_the_top_finding(scored, case, fmt):
    st, r = scored(case, fmt)
    if r["expected"] == "startup":  # a long start-up before a healthy loop: reported apart, nothing HIGH
        assert r["startup"] > 50 and not r["high"] and r["top"] is None, r["findings"]
        return
    assert r["top"] == A.CODE[r["expected"]] and r["top_severity"] == "high", r["findings"]


@pytest.mark.parametrize("case,fmt", [(c, f) for c, f in CAPTURES if oracle(c, f)["kind"] == "mixture"],
                         ids=lambda x: x)
def test_mixture_parts_within_10_points_of_the_oracle(scored, case, fmt):
    st, r = scored(case, fmt)
    for part, s in r["shares"].items():
        assert abs(s["share_pct"] - s["oracle_pct"]) <= 10, (part, s, r["findings"])
    # the larger built part comes first among the cause findings
    big = max(r["shares"], key=lambda p: r["shares"][p]["oracle_pct"])
    assert r["top"] == A.CODE[big], r["findings"]


@pytest.mark.parametrize("case,fmt", [(c, f) for c, f in CAPTURES if oracle(c, f)["kind"] == "control"],
                         ids=lambda x: x)
def test_healthy_controls_have_no_high_finding(scored, case, fmt):
    st, r = scored(case, fmt)
    assert not r["high"], r["findings"]
    # train (Kineto): torch's own 'Optimizer.step#AdamW.step' ranges repeat in the warm-up too, so
    # the steady window starts there and holds its first-call costs (library ranges taken for
    # steps: issue 50); ho_train_item's loss.item() every step drains the GPU once a step (83-84 %
    # busy, a MEDIUM sync_stall of 6-7 %, as it should be); the other controls' steady state is
    # > 85 % busy
    busy = st.one("select sum(pct) from time_breakdown where part = 'steady' and state = 'busy'")
    floor = {("train", "kineto"): 60, ("ho_train_item", "kineto"): 75, ("ho_train_item", "nsys"): 75}
    assert busy > floor.get((case, fmt), 85), busy


@pytest.mark.parametrize("case,fmt", CAPTURES, ids=lambda x: x)
def test_dataloader_remedy_only_where_a_dataloader_ran(scored, case, fmt):
    from tracekit.diagnose import diagnose

    st, _ = scored(case, fmt)
    ran = st.one("select count(*) from events where name ilike '%DataLoader%'") > 0
    for f in diagnose(st).findings:
        if "DataLoader" in f.remedy:
            assert ran and f.code == "input_bound", (case, fmt, f.code)


def test_sync_gap_is_the_syncs_cost_until_the_host_was_blocked(scored):
    """sync (nsys): after each .item() the GPU drained; the 1 ms of plain Python that follows is
    the sync's, since the host had been blocked longer (the step's GEMMs) than that."""
    st, r = scored("sync", "nsys")
    rows = st.rows("""select a.gap_start_ns, sum(a.dur_ns) filter (where a.category = 'sync'),
                             any_value(a.gap_end_ns - a.gap_start_ns), any_value(g.sync_ns)
                      from idle_attribution a join idle_gaps g
                        on g.scope = 'device' and g.start_ns = a.gap_start_ns and g.device_id = a.device_id
                      join steady_state w on a.gap_start_ns >= w.window_start_ns and a.gap_end_ns <= w.window_end_ns
                      where a.gap_end_ns - a.gap_start_ns > 500000 group by 1""")
    assert len(rows) == 19  # one after every step but the last
    for _, sync, dur, sync_ns in rows:
        assert sync == dur == sync_ns


def test_cudnn_plan_building_is_compile_in_both_formats(scored):
    """torch.profiler records neither NVRTC nor module loads: the long cuDNN operator is the plan."""
    for fmt in A.FORMATS:
        st, _ = scored("cudnn_plan", fmt)
        top = st.rows("""select host_op from idle_attribution where category = 'compile'
                         group by 1 order by sum(dur_ns) desc limit 3""")
        assert any("cudnn" in (h or "").lower() or h == "cuLibraryLoadData" for (h,) in top), top


def test_torch_compile_recompiles_name_the_compiler(scored):
    from tracekit.diagnose import diagnose

    st, _ = scored("compile", "kineto")
    f = next(f for f in diagnose(st).findings if f.code == "runtime_compile")
    assert "torch.compile recompiles" in f.remedy
    assert any("dynamo" in (o["host_op"] or "") or "inductor" in (o["host_op"] or "")
               for o in f.metrics["top_host_ops"])


def test_marked_pieces_name_an_event_open_over_them(scored):
    """A compile / data / rank_wait piece names the innermost marking event open over it, never
    one that has ended (torch.compile's nested dynamo_timed ranges: after an inner one ends, its
    parent is what runs). Before the fix about a third (Kineto) and 61 % (nsys) of the compile
    time named a range that had already closed."""
    for fmt in A.FORMATS:
        st, _ = scored("compile", fmt)
        total, named_closed = st.rows("""
            with p as (select * from idle_attribution where category in ('compile', 'data', 'rank_wait'))
            select sum(p.dur_ns), coalesce(sum(p.dur_ns) filter (where not exists (
                       select 1 from events e where e.pid = p.pid and e.tid = p.tid and e.name = p.host_op
                          and e.start_ns <= p.start_ns and e.end_ns >= p.end_ns)
                   and not exists (
                       select 1 from api_calls a where a.pid = p.pid and a.tid = p.tid and a.name = p.host_op
                          and a.start_ns <= p.start_ns and a.end_ns >= p.end_ns)), 0)
            from p""")[0]
        assert total > 900_000_000, (fmt, total)  # ≥ 0.9 s of compile time in both captures
        assert named_closed == 0, (fmt, named_closed, total)


def _assert_pieces_add_up(st):
    bad = st.rows("""select g.source_id, g.device_id, g.start_ns, g.dur_ns, coalesce(sum(a.dur_ns), 0)
                     from idle_gaps g left join idle_attribution a
                       on a.source_id = g.source_id and a.device_id = g.device_id and a.gap_start_ns = g.start_ns
                     where g.scope = 'device'
                     group by all having coalesce(sum(a.dur_ns), 0) <> g.dur_ns limit 5""")
    assert not bad, bad
    parts = st.rows("""select source_id, device_id, part, any_value(part_ns), sum(ns) from time_breakdown
                       group by all having sum(ns) <> any_value(part_ns) limit 5""")
    assert not parts, parts
    n = st.one("select count(*) from idle_attribution where dur_ns <= 0 or category is null")
    assert n == 0
    # phase_breakdown: each phase's rows add up to its span, and its span, busy and outside time
    # are phase_idle's (computed there another way: buckets over idle_gaps, not pieces)
    bad = st.rows("""select b.source_id, b.phase, b.device_id, b.span_ns, b.ns, b.busy, b.outside,
                              p.span_ns, p.busy_ns, p.outside_ns
                       from (select source_id, phase, phase_category, device_id, any_value(span_ns) as span_ns,
                                    sum(ns) as ns, sum(ns) filter (where state = 'busy') as busy,
                                    sum(ns) filter (where category = 'outside') as outside
                             from phase_breakdown group by all) b
                       full join phase_idle p
                         on p.source_id = b.source_id and p.phase = b.phase and p.category = b.phase_category
                        and p.device_id = b.device_id
                       where p.span_ns > 0 and (b.span_ns is distinct from p.span_ns or b.ns <> b.span_ns
                             or coalesce(b.busy, 0) <> p.busy_ns or coalesce(b.outside, 0) <> p.outside_ns)
                       limit 5""")
    assert not bad, bad


OTHER = sorted(p for d in ("kineto", "nsys", "labelled", "roofline") for p in (FIXTURES / d).glob("*")
               if p.name.endswith((".json.gz", ".sqlite")))


# (.nsys-rep reports need nsys to export them: their SQLite exports are in the corpus too)
READABLE = OTHER + [p for p in realworld("kineto") + realworld("nsys") if p.name.endswith((".json.gz", ".json", ".sqlite"))]


@pytest.mark.parametrize("path", READABLE, ids=lambda p: p.name)
def test_every_gap_is_attributed_whole(tmp_path, path):
    """On every store: each gap's pieces add up to its dur_ns, each part of time_breakdown to its
    length (busy + idle = 100 %), and each phase of phase_breakdown to its span."""
    import tracekit
    from tracekit.adapters.base import TraceError

    db = tmp_path / "s.duckdb"
    try:
        tracekit.convert([str(path)], db=str(db), jobs=1)
    except TraceError as e:  # a corpus file kept for its error, not a trace
        pytest.skip(f"not a trace, on purpose: {str(e)[:200]}")
    with tracekit.open(str(db)) as st:
        _assert_pieces_add_up(st)


def test_attribution_pieces_add_up_on_the_corpus(scored):
    for case, fmt in CAPTURES:
        st, _ = scored(case, fmt)
        _assert_pieces_add_up(st)


@pytest.mark.parametrize("case,fmt", [("ho_prefill", "kineto"), ("ho_overlap_pinned", "nsys"),
                                      ("mix_graph_data", "kineto"), ("mix_graph_data", "nsys")],
                         ids=lambda x: x)
def test_a_first_step_paying_first_call_costs_is_start_up(scored, case, fmt):
    """These programs warm only part of their step up: their first step takes 5-40 x the median
    step on the host (lazy module loading, cuBLAS heuristics for a new GEMM shape, the first
    graph replay). steady_state leaves it to the start-up: the window opens at the second step."""
    st, _ = scored(case, fmt)
    starts = [r[0] for r in st.rows("""SELECT i.start_ns FROM phase_instances i WHERE i.name = 'step'
                                       AND i.gpu_ops > 0 ORDER BY i.start_ns""")]
    durs = st.rows("""SELECT end_ns - start_ns FROM phase_instances WHERE name = 'step' AND gpu_ops > 0
                      ORDER BY start_ns""")
    first, rest = durs[0][0], sorted(d[0] for d in durs[1:])
    assert first > 4 * rest[len(rest) // 2]
    ws, steps, warm = st.rows("SELECT window_start_ns, steps, warmup_steps FROM steady_state")[0]
    assert (warm, steps) == (1, len(starts) - 1)
    assert ws >= starts[1] - 1 and ws < starts[2]
