"""Views against independent computations from the raw JSON (stdlib json + statistics)."""

from __future__ import annotations

import statistics
from collections import defaultdict

import pytest

from conftest import FIXTURES, load_json, realworld
from tracekit import views
from tracekit.adapters.kineto import us_text_to_ns

OWN = sorted((FIXTURES / "kineto").glob("*.json.gz"))
SOME_REAL = [p for p in realworld("kineto") if any(
    k in p.name for k in ("alexnet", "h100_qwen", "nccl_data", "vllm_graph", "mi250"))]


def ns(v) -> int:
    # independent of the adapter's text parser: json gives a float/int; round to ns
    return round(v * 1000) if isinstance(v, float) else int(v) * 1000


def gpu_ops(trace, cats=("kernel",)):
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in cats:
            yield e


@pytest.mark.parametrize("path", OWN + SOME_REAL, ids=lambda p: p.name)
def test_hotspots_equal_independent_computation(path, convert):
    trace = load_json(path)
    by_name = defaultdict(list)
    for e in gpu_ops(trace):
        by_name[e["name"]].append(ns(e["dur"]))
    if not by_name:
        pytest.skip("no kernels")
    total_all = sum(sum(v) for v in by_name.values())
    st = convert(path)
    rows = st.rows("select name, time_pct, total_ns, instances, avg_ns, med_ns, min_ns, max_ns,"
                   " stddev_ns from hotspots")
    assert len(rows) == len(by_name)
    for name, pct, total, n, avg, med, mn, mx, sd in rows:
        d = by_name[name]
        assert total == sum(d) and n == len(d) and mn == min(d) and mx == max(d)
        assert pct == pytest.approx(100 * sum(d) / total_all)
        assert avg == pytest.approx(statistics.fmean(d))
        assert med == pytest.approx(statistics.median(d))
        assert sd == pytest.approx(statistics.stdev(d) if len(d) > 1 else 0.0, abs=1e-6)
    # ordered by total time
    totals = [r[2] for r in rows]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("path", OWN + SOME_REAL, ids=lambda p: p.name)
def test_idle_gaps_equal_independent_sweep(path, convert):
    trace = load_json(path)
    per_dev = defaultdict(list)
    for e in gpu_ops(trace, ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset")):
        dev = e.get("args", {}).get("device", e.get("pid"))
        s = ns(e["ts"])
        per_dev[int(dev)].append((s, s + ns(e["dur"])))
    want = []
    for dev, iv in per_dev.items():
        iv.sort()
        busy_until = iv[0][1]
        for s, e in iv[1:]:
            if s > busy_until:
                want.append((dev, busy_until, s))
            busy_until = max(busy_until, e)
    st = convert(path)
    got = st.rows("select device_id, start_ns, end_ns from idle_gaps where scope = 'device'")
    if not want:
        assert got == []
        return
    # float µs → ns rounding differs by ≤ 1 ns from the exact decimal parse
    assert len(got) == len(want)
    for (gd, gs, ge), (wd, ws, we) in zip(sorted(got), sorted(want)):
        assert gd == wd and abs(gs - ws) <= 1 and abs(ge - we) <= 1
    # busy + idle = window, per device
    for dev, iv in per_dev.items():
        busy = st.one("select sum(dur_ns) from idle_gaps where scope = 'device' and device_id = ?", [dev]) or 0
        window = max(e for _, e in iv) - min(s for s, _ in iv)
        assert 0 <= busy <= window


def test_us_text_to_ns_exact():
    assert us_text_to_ns(b"1712195495521131.125") == 1712195495521131125
    assert us_text_to_ns(b"12") == 12000
    assert us_text_to_ns(b"0.5") == 500
    assert us_text_to_ns(b"-3.25") == -3250
    assert us_text_to_ns(b"1.5e3") == 1_500_000
    assert us_text_to_ns(b"2.0004") == 2000  # sub-ns digits rounded


@pytest.mark.parametrize("threads", [1, 4])
def test_idle_gaps_rows_come_in_their_documented_order(convert, threads):
    """idle_gaps puts the names back after its ORDER BY (a lookup in one-row lists): the rows
    must still come ordered by (source_id, scope, device_id, stream_id, start_ns)."""
    import tracekit

    st = convert(FIXTURES / "kineto" / "ddp_rank0.json.gz", FIXTURES / "kineto" / "ddp_rank1.json.gz",
                 FIXTURES / "nsys" / "decode_b1.sqlite")
    st.close()
    st = tracekit.open(st.path, sandbox=False)  # (a sandboxed store's settings are locked)
    st.con.execute(f"SET threads = {threads}")
    rows = st.rows("select source_id, scope, device_id, stream_id, start_ns, before_name from idle_gaps")
    assert len(rows) > 1000 and len({r[0] for r in rows}) == 3
    key = [(r[0], r[1], r[2], r[3] if r[3] is not None else 2**63, r[4]) for r in rows]
    assert key == sorted(key)
    assert all(r[5] for r in rows)


def test_phase_views_add_up(convert):
    """The phase views pair ops with instances by one rule (tk_phase_launches): per instance,
    phase_ops has as many ops as phase_instances counts, and phase_idle's instances, wall time,
    span (the union of the windows) and op counts add up from them."""
    st = convert(FIXTURES / "kineto" / "decode_b1.json.gz", FIXTURES / "nsys" / "decode_b1.sqlite",
                 FIXTURES / "kineto" / "graphs.json.gz")
    ops = dict(st.rows("select event_id * 10 + source_id, count(*) from phase_ops group by all"))
    inst = dict(st.rows("select event_id * 10 + source_id, gpu_ops from phase_instances where gpu_ops > 0"))
    assert ops == inst and len(ops) > 20
    # phases and phase_idle select their instances with phase_instances' rule (phase_idle: the
    # windows from phase_ops): instances, wall time and the union of the windows must agree
    inst = {r[:3]: r[3:] for r in st.rows(
        "select source_id, phase, category, count(*), sum(dur_ns) from phase_instances group by all")}
    assert {r[:3]: r[3:] for r in st.rows(
        "select source_id, phase, category, instances, wall_ns from phases")} == inst
    idle = st.rows("select source_id, phase, category, instances, wall_ns, span_ns from phase_idle")
    assert len(idle) > 3
    for s, ph, cat, n, wall, span in idle:
        assert inst[(s, ph, cat)] == (n, wall)
        total, end = 0, None
        for a, b in st.rows("select start_ns, window_end_ns from phase_instances where source_id = ?"
                            " and phase = ? and category = ? order by 1, 2", [s, ph, cat]):
            if end is None or a > end:
                total, end = total + b - a, b
            elif b > end:
                total, end = total + b - end, b
        assert span == total
    # phase_idle also matches the ops to the instances with phase_ops' rule
    assert dict(st.rows("select source_id * 1000000 + device_id, sum(gpu_ops) from phase_idle group by all")) \
        == dict(st.rows("select source_id * 1000000 + device_id, count(*) from phase_ops"
                        " where device_id is not null group by all"))
    assert st.rows("select source_id, phase, category, device_id, gpu_ops, kernels, kernel_ns, memcpy_ns,"
                   " short_kernels, launch_calls, graph_launches from phase_idle order by all") == st.rows(
        "select source_id, phase, category, device_id, count(*), count(*) filter (where kind = 'kernel'),"
        " coalesce(sum(dur_ns) filter (where kind = 'kernel'), 0),"
        " coalesce(sum(dur_ns) filter (where kind = 'memcpy'), 0),"
        " count(*) filter (where kind = 'kernel' and shorter_than_launch),"
        " count(distinct (pid, tid, correlation_id)),"
        " count(distinct (pid, tid, correlation_id)) filter (where ops_in_launch > 1)"
        " from phase_ops where device_id is not null group by all order by all")


def _view_names(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


@pytest.mark.slow
def test_views_are_created_in_dependency_order():
    """`views.referenced(v)` lists what v needs first: each statement succeeds at its first try."""
    import duckdb

    from tracekit import schema, views
    from tracekit.store.db import create_tables

    for v in views.all_views():
        con = duckdb.connect()
        create_tables(con)
        views.register_library(con)
        names = views.referenced(v.name)
        assert names[-1] == v.name
        for n in names:
            con.execute(next(x for x in views.all_views() if x.name == n).sql)
        assert _view_names(con) == set(names)
    assert set(schema.BY_NAME).isdisjoint(v.name for v in views.all_views())


def test_views_are_created_when_first_needed(convert):
    """A query creates the views it names (with those they use); `con` creates them all."""
    from tracekit.store import Store

    path = convert(FIXTURES / "kineto" / "decode_b1.json.gz").path
    with Store(path, read_only=True) as st:
        assert _view_names(st._con) == set()
        assert st.one("select count(*) from idle_gaps") > 100
        assert _view_names(st._con) == {"gpu_activity", "idle_gaps"}
        assert st.table("hotspots").count("*").fetchall()[0][0] > 10
        assert "hotspots" in _view_names(st._con)
        assert len(_view_names(st.con)) == len(views.all_views()) == 47


def test_shared_views_are_kept_from_the_second_query_that_reads_them(convert):
    """A read-only session keeps a shared view's rows once a second query needs them (naming it or
    through another view); one query is planned whole (nothing kept); a store open for writing
    keeps nothing; the kept view answers with the view's own column types and rows."""
    from tracekit.store import Store

    opened = convert(FIXTURES / "kineto" / "graphs.json.gz")
    path = opened.path
    opened.close()  # (a store open for writing needs the file to itself)
    with Store(path, read_only=True) as st:
        plain = sorted(st.rows("select * from phase_idle"), key=str)
        assert st.kept.views == {}  # one query: idle_gaps and gpu_launches were planned inside it
    with Store(path, read_only=True) as st:
        plain_types = st.con.sql("select * from idle_gaps").types  # (`con` counts no need)
        gaps = sorted(st.con.sql("select * from idle_gaps").fetchall(), key=str)
        assert sorted(st.rows("select * from idle_gaps"), key=str) == gaps
        assert st.kept.views == {}  # one query: planned whole
        assert sorted(st.rows("select * from idle_gaps"), key=str) == gaps
        assert set(st.kept.views) == {"idle_gaps"}  # named directly a second time
        assert sorted(st.rows("select * from idle_gaps"), key=str) == gaps  # from the kept rows
        assert sorted(st.rows("select * from phase_idle"), key=str) == plain
        assert set(st.kept.views) == {"idle_gaps"}  # gpu_launches: its first need (idle_gaps reads none)
        assert sorted(st.rows("select * from phase_idle"), key=str) == plain
        assert {"idle_gaps", "gpu_launches", "phase_idle"} <= set(st.kept.views)  # their second
        assert "__tk_kept_idle_gaps" in st.one("select sql from duckdb_views() where view_name = 'idle_gaps'")
        assert st.sql("select * from idle_gaps").types == plain_types
        assert set(st.kept.views) <= views.kept_views()
    with Store(path, read_only=True) as st:  # over KEEP_MAX_BYTES: dropped, and no more kept
        import tracekit.store as S

        was, S.KEEP_MAX_BYTES = S.KEEP_MAX_BYTES, 1
        try:
            for _ in range(2):
                assert sorted(st.rows("select * from phase_idle"), key=str) == plain
        finally:
            S.KEEP_MAX_BYTES = was
        assert st.kept.views == {} and not st.kept.enabled
    with Store(path, read_only=True) as st:  # more GPU operations than KEEP_MAX_GPU_ROWS: none kept
        import tracekit.store as S

        was, S.KEEP_MAX_GPU_ROWS = S.KEEP_MAX_GPU_ROWS, st.one("select count(*) from gpu_activity") - 1
        try:
            for _ in range(2):
                assert sorted(st.rows("select * from phase_idle"), key=str) == plain
            assert st.keep("roofline") == []
        finally:
            S.KEEP_MAX_GPU_ROWS = was
        assert st.kept.views == {} and not st.kept.enabled and st.kept.small is False
    with Store(path) as st:  # open for writing: tables may change, nothing is kept
        for _ in range(3):
            st.rows("select * from phase_idle")
        assert st.kept.views == {}


def test_a_views_parameters_include_those_of_the_views_it_reads():
    """What decides whether kept rows are stale: a view's parameters and its shared views'
    (the library's macros read none, so the views' own texts are the whole list)."""
    assert views.parameters("idle_gaps") == views.parameters("phase_idle") == ("kernel_wait_ns",)
    assert views.parameters("steady_state") == ("kernel_wait_ns", "min_step_repeats", "warmup_min_pct", "warmup_step_factor")
    assert {"latency_pct", "peak_tflops", "peak_tbps", "bound_low_pct"} <= set(views.parameters("phase_roofline"))
    assert views.parameters("gpu_launches") == ()
    assert not [p for p, text in views.library() if "getvariable" in text.lower()]


def test_a_changed_parameter_drops_the_kept_rows(convert):
    """Rows kept with one value of a parameter are never answered for another: a query through the
    store computes them again; a query on `con` itself (which does not look) fails, in one line."""
    import duckdb
    import tracekit

    st = convert(FIXTURES / "kineto" / "decode_b1.json.gz")
    q = "select cause, count(*) from idle_gaps where scope = 'stream' group by all order by all"
    st.rows("select * from phase_idle")
    st.rows("select * from phase_idle")
    assert st.kept.views["idle_gaps"] == {"kernel_wait_ns": None}
    default = st.rows(q)
    assert dict(default).get("kernel_wait", 0) > 0
    st.con.execute("SET VARIABLE kernel_wait_ns = 0")
    changed = st.rows(q)
    assert "idle_gaps" not in st.kept.views  # dropped, back to its definition
    assert dict(changed).get("kernel_wait", 0) == 0 and changed != default
    with tracekit.open(st.path) as fresh:
        fresh.con.execute("SET VARIABLE kernel_wait_ns = 0")
        assert fresh.rows(q) == changed
    st.rows("select * from phase_idle")
    st.rows("select * from phase_idle")
    assert st.kept.views["idle_gaps"] == {"kernel_wait_ns": "0"}
    con = st.con
    con.execute("SET VARIABLE kernel_wait_ns = 30000")
    with pytest.raises(duckdb.Error, match="view idle_gaps were kept with parameters kernel_wait_ns=0"):
        con.execute(q).fetchall()
    assert st.rows(q) == default  # through the store: computed again with the new value


def test_utilization_timeline_empty_buckets_are_idle(convert):
    """A bucket that no busy period touches is 0 % busy (it was 100 %: a LEFT JOIN's NULLs through
    least/greatest, which skip NULLs). The buckets add up to gpu_utilization's busy time."""
    st = convert(FIXTURES / "kineto" / "graphs.json.gz", FIXTURES / "nsys" / "graphs.sqlite",
                 FIXTURES / "labelled" / "gemm_loop.sqlite")
    per = dict(st.rows("select source_id, sum(busy_ns) from gpu_utilization_timeline group by 1"))
    assert per == dict(st.rows("select source_id, busy_ns from gpu_utilization"))
    empty = st.rows("select source_id, bucket_start_ns, bucket_end_ns from gpu_utilization_timeline"
                    " where busy_ns = 0")
    assert len(empty) >= 3  # the idle start-up of gemm_loop, and a launch gap in each graphs capture
    for sid, a, b in empty:
        assert st.one("select count(*) from gpu_activity where source_id = ? and start_ns < ? and end_ns > ?",
                      [sid, b, a]) == 0
    assert st.one("select max(utilization_pct) from gpu_utilization_timeline where busy_ns = 0") == 0


def test_every_view_header_documents_its_columns_and_types(convert):
    """Each view's header lists every column in order with its DuckDB type (`--   name  TYPE
    text`), and that list is what DESCRIBE says: the documentation cannot drift from the SQL."""
    import re

    st = convert(FIXTURES / "kineto" / "graphs.json.gz")
    con = st.con
    col = re.compile(r"^--\s+([a-z_][a-z0-9_]*)\s+([A-Z][A-Z0-9_]*(?:\([^)]*\))?(?:\[\])?)\s")
    for v in views.all_views():
        lines = v.sql.split("\n")
        start = next((i for i, line in enumerate(lines) if re.match(r"^--\s*Columns:\s*$", line)), None)
        assert start is not None, f"{v.path}: no 'Columns:' section"
        doc = []
        for line in lines[start + 1:]:
            if not line.startswith("--"):
                break
            m = col.match(line)
            if m:
                doc.append((m.group(1), m.group(2)))
        got = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {v.name}").fetchall()]
        assert doc == got, (v.path.name, [(a, b) for a, b in zip(doc + [None] * len(got), got) if a != b][:3])


def test_declared_uses_are_the_views_each_statement_reads():
    """Each header's `-- Uses:` line names exactly the views its statement reads (comments,
    inline ones too, are not read: a view named in a comment is no dependency)."""
    import re

    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    names = {v.name for v in views.all_views()}
    for v in views.all_views():
        body = "\n".join(re.sub(r"--.*$", "", line) for line in v.sql.split("\n"))
        body = re.sub(r"'(?:[^']|'')*'", "''", body)  # string literals are no dependency either
        read = {w for w in word.findall(body) if w in names and w != v.name}
        assert set(v.uses) == read, (v.name, sorted(v.uses), sorted(read))


OVERLAPPED_COPIES = [p for p in realworld("kineto") if p.name in ("hta__diff_test.json.gz", "hta__sampled_rank-1.json.gz")]


@pytest.mark.parametrize("path", OVERLAPPED_COPIES, ids=lambda p: p.name)
@pytest.mark.slow
def test_steady_state_exposed_memcpy_equals_a_sweep(path, convert):
    """Real traces (HTA's) whose copies overlap compute kernels: `steady_state.exposed_memcpy_ns`
    equals each copy in the window less the part of it under the union of the device's compute
    kernels (which kernels are collectives is the SQL rule, `tk_is_comm_kernel`), computed
    here by a sweep over all of them; the view merges only the kernels over some copy."""
    st = convert(path)
    rows = st.rows("select device_id, window_start_ns, window_end_ns, memcpy_ns, exposed_memcpy_ns "
                   "from steady_state")
    assert rows and any(r[4] < r[3] for r in rows)
    for dev, ws, we, memcpy_ns, exposed in rows:
        copies = st.rows("select start_ns, end_ns from memops where kind = 'memcpy' and device_id = ? "
                         "and start_ns >= ? and start_ns < ?", [dev, ws, we])
        merged: list[list[int]] = []
        for s, e in sorted(st.rows("select start_ns, end_ns from kernels where device_id = ? "
                                   "and not tk_is_comm_kernel(name)", [dev])):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        want = sum(e - s - sum(max(0, min(e, me) - max(s, ms)) for ms, me in merged) for s, e in copies)
        assert sum(e - s for s, e in copies) == memcpy_ns
        assert exposed == want


def test_each_parameter_has_one_default_in_the_view_that_owns_it():
    """Issue 46: a view parameter's default is written once, in its owner's `-- Parameters:`
    section; the bodies read bare getvariable() (the loader adds the default), and the diagnose
    thresholds that are view parameters take it from there."""
    import re

    from tracekit.diagnose.model import THRESHOLDS

    defaults = views.parameter_defaults()  # raises on a view that reads an undeclared parameter
    assert set(defaults) == set(views.all_parameters())
    literal = re.compile(r"coalesce\(\s*(try_cast\()?getvariable\('[a-z_]+'\)[^,]*,\s*[-0-9.']")
    for v in views.all_views():
        assert not literal.search(v.definition), f"{v.path}: a default written in the body"
    for name, th in THRESHOLDS.items():
        if th.view_param:
            assert str(th.default) == defaults[name] or float(th.default) == float(defaults[name]), name
    # the default applies where no value is set, and a set value wins (kernel_wait_ns: idle_gaps)
    con = views.duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    expanded = views.expand("SELECT getvariable('kernel_wait_ns') AS k FROM t")
    assert con.execute(expanded).fetchone()[0] == 30000
    con.execute("SET VARIABLE kernel_wait_ns = 5")
    assert con.execute(expanded).fetchone()[0] == 5


def test_library_modules_declare_their_includes_and_load_on_demand(convert, monkeypatch):
    """Issue 46: each sql/lib file says which other library files it calls (`-- Includes:`), the
    declaration is exact, a cycle is refused, and a session creates only the modules its queries
    and views call."""
    import re

    from tracekit.store import Store

    mods = views.lib_modules()
    owner = {m.lower(): k for k, (_p, _t, ms, _i) in mods.items() for m in ms}
    for name, (path, _t, _m, inc) in mods.items():
        body = "\n".join(re.sub(r"--.*$", "", line) for line in path.read_text().split("\n"))
        calls = {owner[w.lower()] for w in re.findall(r"[A-Za-z_]\w*", body) if w.lower() in owner} - {name}
        assert set(inc) == calls, (path.name, sorted(inc), sorted(calls))
    assert views.lib_needed("select tk_merge_intervals('x')") == ["names", "intervals"]
    assert views.lib_needed("select 1") == []

    path = convert(FIXTURES / "kineto" / "decode_b1.json.gz").path
    with Store(path, read_only=True) as st:
        st.kept.enabled = False  # TEMP copies, not the store's own
        st._library = True
        assert st.one("select count(*) from idle_gaps") > 100
        assert st._libs == set(views.lib_needed(views.by_name("idle_gaps").text + views.by_name("gpu_activity").text))
        assert "ops" not in st._libs and "memory" not in st._libs
        assert st.one("select tk_dtype_bytes('float16')") == 2  # a user's query loads what it calls
        assert "names" in st._libs

    fake = dict(mods)
    p0, t0, m0, _ = fake["names"]
    fake["names"] = (p0, t0, m0, ("intervals",))
    monkeypatch.setattr(views, "lib_modules", lambda: fake)
    with pytest.raises(ValueError, match="include cycle"):
        views.lib_needed("select tk_merge_intervals('x')")
