"""`tracekit diagnose` on the labelled corpus: real H200 captures with one injected cause each,
and healthy negative controls (fixtures/labelled/, made by fixtures/gen/labelled.py; labels in
fixtures/labelled/labels.json; bench/labelled.py prints precision and recall).

Every case is captured twice from the same program, by torch.profiler (Kineto) and by nsys, with
its start-up (model built, weights copied, warm-up) inside the capture. The numbers asserted are
read from the raw captures here (sqlite3 on the nsys export, json on the Kineto trace).
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from conftest import FIXTURES, load_json, need

LAB = FIXTURES / "labelled"
LABELS = json.loads((LAB / "labels.json").read_text())
CASES = [(c, f) for c, lab in LABELS["cases"].items() for f in lab.get("formats", LABELS["formats"])]
# the default run diagnoses each injected cause in its nsys capture and each healthy control in
# one format; the other captures (and the tests reading all of them) run under -m slow
SLOW_CASES = {(c, "kineto") for c, lab in LABELS["cases"].items() if lab["cause"] is not None} | {
    ("graph_replay", "nsys"), ("gemm_loop", "kineto"), ("graphs_whole", "nsys")}  # (graphs_whole: the test below)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    import tracekit
    from tracekit.diagnose import diagnose

    d = tmp_path_factory.mktemp("lab")
    made = {}

    def get(case, fmt):
        if (case, fmt) not in made:
            path = need(LAB / LABELS["formats"][fmt].format(case=case))
            db = d / f"{case}_{fmt}.duckdb"
            tracekit.convert([str(path)], db=str(db), replace=True)
            st = tracekit.open(str(db))
            made[case, fmt] = (st, diagnose(st))
        return made[case, fmt]

    yield get
    for st, _ in made.values():
        st.close()


def top_cause(d):
    symptoms = set(LABELS["symptoms"])
    causes = [f for f in d.findings if f.code not in symptoms and f.severity != "info"]
    return causes[0] if causes else None


def nsys_db(case):
    return sqlite3.connect(f"file:{need(LAB / f'{case}.sqlite')}?mode=ro", uri=True)


def nsys_steps(con, names=("step",)):
    """(start, end) of the NVTX step ranges, in order."""
    q = ", ".join("?" * len(names))
    return con.execute(f"""SELECT start, end FROM NVTX_EVENTS WHERE text IN ({q}) OR textId IN
                           (SELECT id FROM StringIds WHERE value IN ({q})) ORDER BY start""",
                       [*names, *names]).fetchall()


STEP_NAMES = {"graphs_whole": ("eager_step", "graph_step")}  # else 'step' (labelled.py)


@pytest.mark.parametrize("case,fmt", [pytest.param(c, f, id=f"{c}-{f}", marks=pytest.mark.slow if (c, f) in SLOW_CASES else ())
                                      for c, f in CASES])
def test_injected_cause_is_the_top_finding(lab, case, fmt):
    label = LABELS["cases"][case]
    st, d = lab(case, fmt)
    top = top_cause(d)
    high = [f.code for f in d.findings if f.severity == "high"]
    if label["cause"] is None:  # negative control: nothing HIGH, no cause finding at all
        assert not high, high
        assert top is None, (top.code, top.severity, top.summary)
    elif fmt in label.get("not_visible", {}):
        # the cause leaves no trace in this format (documented in labels.json): the time is
        # still called host time, not launch overhead (CUDA graphs would not help)
        assert top.code == "host_bound" and "launch_bound" not in d.codes()
        # ... and it names the host op the time went into (the longest gaps' innermost op)
        assert "the host was in aten::_cudnn_attention_forward" in top.summary
    else:
        assert top is not None and top.code == label["cause"] and top.severity == "high", \
            [(f.code, f.severity, f.share_pct) for f in d.findings]
    # every capture holds its start-up, reported apart and low
    su = [f for f in d.findings if f.code == "startup"]
    assert len(su) == 1 and su[0].severity == "low" and su[0].time_ns > 0


@pytest.mark.slow
def test_startup_is_before_the_first_step(lab):
    """nsys: the steady window starts at the first NVTX 'step' (or the first GPU op after it)."""
    for case in LABELS["cases"]:
        st, d = lab(case, "nsys")
        con = nsys_db(case)
        steps = nsys_steps(con, STEP_NAMES.get(case, ("step",)))
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        first_op = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0]
                       for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                 "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables)
        row = st.rows("select window_start_ns, steps, startup_ns, method from steady_state")[0]
        assert row[3] == "steps" and row[1] == len(steps) == int(LABELS_STEPS[case])
        assert row[0] == steps[0][0] and row[2] == steps[0][0] - first_op


LABELS_STEPS = {"launch_bound": 30, "item_sync": 20, "pageable_copy": 8, "runtime_compile": 8,
                "graph_replay": 60, "gemm_loop": 20,  # labelled.py's default steps per case
                "graphs_whole": 16}  # graphs.py: 8 eager_step + 8 graph_step


def test_item_sync_gaps_are_put_on_the_sync(lab):
    """item_sync: after each step's .item() the GPU drains and waits ~1 ms for the host work that
    follows; every such gap begins inside a cudaStreamSynchronize that blocked the host longer
    than the gap (the step's ~2 ms of GEMMs), so all of it is sync_wait."""
    st, d = lab("item_sync", "nsys")
    con = nsys_db("item_sync")
    syncs = con.execute("""SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cudaStreamSynchronize%'""").fetchall()
    steps = nsys_steps(con)
    gaps = st.rows("""select g.start_ns, g.end_ns, g.sync_ns from idle_gaps g, steady_state w
                      where g.scope = 'device' and g.cause = 'sync_wait'
                        and g.start_ns >= w.window_start_ns and g.end_ns <= w.window_end_ns order by 1""")
    assert len(gaps) == len(steps) - 1 == 19  # one after each step but the last
    for s, e, sync_ns in gaps:
        blocking = [(a, b) for a, b in syncs if a < s <= b]
        assert len(blocking) == 1
        a, b = blocking[0]
        assert b - a > e - s and sync_ns == e - s  # blocked longer than the gap: all of it
        assert 1_000_000 <= e - s < 2_000_000  # the injected 1 ms of host work + the relaunch
    f = next(f for f in d.findings if f.code == "sync_stall")
    assert f.time_ns == sum(e - s for s, e, _ in gaps)


def test_runtime_compile_gaps_hold_nvrtc_and_module_loads(lab):
    """runtime_compile (nsys): every step builds a cuDNN kernel for its new KV length: NVRTC is
    opened, ~35-55 ms of untraced compilation, then cuLibraryLoadData; those gaps are
    runtime_compile, not launch waits."""
    st, d = lab("runtime_compile", "nsys")
    con = nsys_db("runtime_compile")
    steps = nsys_steps(con)
    loads = [r[0] for r in con.execute("""SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s
                                          ON s.id = r.nameId WHERE s.value = 'cuLibraryLoadData'""")]
    opens = [r[0] for r in con.execute("""SELECT o.start FROM PROFILER_OVERHEAD o JOIN StringIds s ON s.id = o.nameId
                                          WHERE s.value LIKE 'dlopen(libnvrtc%'""")]
    # a new kernel is loaded, and NVRTC opened, in every step
    for a, b in steps:
        assert any(a <= t < b for t in loads) and any(a <= t < b for t in opens)
    gaps = st.rows("""select g.start_ns, g.end_ns, g.compile_ns from idle_gaps g, steady_state w
                      where g.scope = 'device' and g.cause = 'runtime_compile'
                        and g.start_ns >= w.window_start_ns and g.end_ns <= w.window_end_ns""")
    assert len(gaps) >= len(steps)
    for s, e, c in gaps:
        assert any(s <= t < e for t in loads) and 2 * c >= e - s
    f = next(f for f in d.findings if f.code == "runtime_compile")
    assert f.severity == "high" and f.share_pct > 90 and "cuLibraryLoadData" in f.summary
    assert "warm up the shapes" in f.remedy and "launch_bound" not in d.codes()


def test_pageable_copy_transfer_time(lab):
    """pageable_copy: 8 copies of 192 MiB into pageable memory, nothing overlapping them."""
    st, d = lab("pageable_copy", "nsys")
    con = nsys_db("pageable_copy")
    steps = nsys_steps(con)
    copies = [(a, b, n) for a, b, n in con.execute(
        "SELECT start, end, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 2 AND dstKind = 0")
        if steps[0][0] <= a < steps[-1][1]]
    assert [n for *_, n in copies] == [192 * 2**20] * 8
    f = next(f for f in d.findings if f.code == "transfer_bound")
    # the copies' GPU time (no kernel overlaps them) plus the idle time the host spent in them
    assert f.time_ns - f.metrics["idle_ns"] == sum(b - a for a, b, _ in copies)
    assert f.severity == "high" and f.share_pct > 90


@pytest.mark.slow
@pytest.mark.parametrize("case,util", [("graph_replay", 85), ("gemm_loop", 95)])
def test_negative_controls_are_busy(lab, case, util):
    """The healthy controls keep the GPU busy in their steady state (the start-up before the
    loop, 83-92 % of the captured GPU window, is what made them HIGH low_utilization before)."""
    for fmt in LABELS["formats"]:
        st, d = lab(case, fmt)
        u = st.one("select utilization_pct from steady_state")
        assert u > util, (case, fmt, u)
        whole = st.one("select utilization_pct from gpu_utilization")
        assert whole < 50  # the whole capture, start-up included, looks idle


@pytest.mark.slow
def test_kineto_and_nsys_agree(lab):
    """The same program captured both ways gets the same verdicts (runtime_compile apart)."""
    for case, label in LABELS["cases"].items():
        if "kineto" in label.get("not_visible", {}) or len(label.get("formats", LABELS["formats"])) < 2:
            continue
        codes = [top_cause(lab(case, f)[1]) for f in LABELS["formats"]]
        assert len({c.code if c else None for c in codes}) == 1, (case, [c and c.code for c in codes])


@pytest.mark.slow
def test_kineto_step_counts(lab):
    for case, n in LABELS_STEPS.items():
        if "kineto" not in LABELS["cases"][case].get("formats", LABELS["formats"]):
            continue
        raw = load_json(need(LAB / f"{case}.json.gz"))
        steps = [e for e in raw["traceEvents"] if e.get("name") == "step" and e.get("cat") == "user_annotation"]
        st, _ = lab(case, "kineto")
        # runtime_compile: its first step (cuDNN's first plan, ~10 x the others) is warm-up
        assert len(steps) == st.one("select steps + warmup_steps from steady_state") == n


def test_whole_program_capture_has_no_false_sync_stall(tmp_path):
    """nsys on the whole eager-vs-graphs program (start-up included, nsys/graphs_whole.sqlite):
    diagnose had put 69 gaps, 72.4 ms, on synchronizing calls that blocked the host 1.6 ms in all
    (MEDIUM sync_stall, 21.6 % of the window). A gap's sync part is at most the time the host
    was blocked in the sync the GPU drained during; here that is one gap and 0.79 ms, computed
    again from the raw export with sqlite3. The verdict is launch_bound over the steps."""
    import tracekit
    from tracekit.diagnose import diagnose

    path = need(LAB / "graphs_whole.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = sorted(r for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                 if t in tables for r in con.execute(f"SELECT start, end, correlationId FROM {t}"))
    calls = {c: t for c, t in con.execute("""SELECT correlationId, min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME
                                             GROUP BY correlationId""")}
    syncs = con.execute("""SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                           WHERE s.value LIKE 'cuda%Synchronize%'""").fetchall()
    busy, blocked = ops[0][1], {}  # gap start -> (gap length, time the host was blocked in the sync)
    for s, e, corr in ops[1:]:
        if s > busy and calls.get(corr, 0) > busy:
            before = [(b, a) for a, b in syncs if a < busy]
            if before and max(before)[0] >= busy:
                b, a = max(before)
                blocked[busy] = (s - busy, b - a)
        busy = max(busy, e)
    assert len(blocked) == 65  # gaps that began while the host was in a sync
    db = tmp_path / "gw.duckdb"
    tracekit.convert([str(path)], db=str(db))
    with tracekit.open(str(db)) as st:
        got = {r[0]: r[1:] for r in st.rows("""select start_ns, dur_ns, sync_ns, compile_ns from idle_gaps
                                               where scope = 'device'""")}
        for g0, (dur, blk) in blocked.items():  # the sync part: at most the blocked time
            assert got[g0][0] == dur and got[g0][1] == min(dur - got[g0][2], blk)
        assert sum(v[1] for v in got.values()) < 1_000_000  # 72.4 ms before
        assert st.one("select count(*) from idle_gaps where cause = 'sync_wait'") == 0
        assert st.one("select sum(dur_ns) from host_syncs") < 2_000_000
        d = diagnose(st)
    assert "sync_stall" not in d.codes()
    assert top_cause(d).code == "launch_bound"
    f = next(f for f in d.findings if f.code == "launch_bound")
    assert f.phases["eager_step"]["meets_rule"] and not f.phases["graph_step"]["meets_rule"]
    su = next(f for f in d.findings if f.code == "startup")
    assert su.severity == "low" and su.share_pct > 90
