"""Nsight Systems adapter and the nsys-stats views.

* Row accounting on every real export in ../shared/realworld/nsys (13 files, nine nsys versions)
  and the bundled fixtures: counts in the store equal counts computed here with plain sqlite3,
  and every input row of a table the adapter reads is converted or counted as skipped.
* The views (hotspots, api_summary, memop_*_summary, nvtx_summary, nvtx_gpu_projection,
  osrt_summary) against independent computations (Python statistics over sqlite3 rows) and
  against nsys's own `nsys stats` CSV output (fixtures/nsys/oracle, nsys 2025.3.1).
* Errors: corrupt SQLite, a SQLite file that is not an nsys export, a report without nsys.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sqlite3
import statistics
import stat
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import FIXTURES, load_json, need, realworld, slow_if_large
from tracekit.adapters.base import TraceError

REAL = [p for p in realworld("nsys") if p.suffix == ".sqlite"]
OWN = sorted((FIXTURES / "nsys").glob("*.sqlite"))
ALL = OWN + REAL
ORACLE = FIXTURES / "nsys" / "oracle"
ORACLED = [p for p in OWN if (ORACLE / f"{p.stem}_cuda_gpu_kern_sum.csv").exists()]


def real(fragment: str) -> Path:
    hits = [p for p in REAL if fragment in p.name]
    if not hits:
        pytest.skip(f"realworld nsys file *{fragment}* not present")
    return hits[0]


def ids(p):
    return p.name[:40]


# -- independent reading with sqlite3 --------------------------------------------------------------
def sq(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def tables(con) -> dict[str, set[str]]:
    names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    return {n: {r[1] for r in con.execute(f'pragma table_info("{n}")')} for n in names}


def count(con, table: str, where: str = "1") -> int:
    if table not in tables(con):
        return 0
    return con.execute(f'select count(*) from "{table}" where {where}').fetchone()[0]


VALID = 'start is not null and "end" is not null and "end" >= start'
WHOLE_GRAPH = "(graph_id is not null and graph_node_id is null)"
LABELS = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
          4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
          8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer",
          11: "Unified Host-to-Device", 12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}


def stats(values):
    v = list(values)
    return {"total": sum(v), "n": len(v), "avg": statistics.fmean(v), "med": statistics.median(v),
            "min": min(v), "max": max(v), "sd": statistics.stdev(v) if len(v) > 1 else 0.0}


def check_stats(got: dict, want: dict, prefix=("total_ns", "avg_ns", "med_ns", "min_ns", "max_ns",
                                                "stddev_ns")):
    t, a, m, lo, hi, sd = prefix
    assert got[t] == want["total"] and got[lo] == want["min"] and got[hi] == want["max"]
    assert got[a] == pytest.approx(want["avg"], rel=1e-12)
    assert got[m] == pytest.approx(want["med"], rel=1e-12)
    assert got[sd] == pytest.approx(want["sd"], rel=1e-9, abs=1e-6)


def dicts(st, q):
    return st.con.sql(q).to_arrow_table().to_pylist()


def nsys_display_name(s):
    return s[:-6] if s and len(s) >= 6 and s[-6:-4] == "_v" else s


# -- row accounting ------------------------------------------------------------------------------
@pytest.mark.parametrize("path", slow_if_large(ALL), ids=ids)
def test_every_row_converted_or_counted(path, convert):
    con = sq(path)
    have = tables(con)
    st = convert(path)

    def n_store(q):
        return st.one(q)

    def skipped(prefix):
        return n_store(f"select coalesce(sum(count), 0) from skipped_rows where reason like '{prefix}:%'")

    expect = {
        ("CUPTI_ACTIVITY_KIND_KERNEL", VALID): f"select count(*) from kernels where not {WHOLE_GRAPH}",
        ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", VALID): f"select count(*) from kernels where {WHOLE_GRAPH}",
        ("CUPTI_ACTIVITY_KIND_MEMCPY", VALID): "select count(*) from memops where kind = 'memcpy'",
        ("CUPTI_ACTIVITY_KIND_MEMSET", VALID): "select count(*) from memops where kind = 'memset'",
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", VALID): "select count(*) from syncs",
        ("CUPTI_ACTIVITY_KIND_RUNTIME", VALID + " and eventClass in (0, 1)"):
            "select count(*) from api_calls",
        ("CUPTI_ACTIVITY_KIND_RUNTIME", VALID + " and eventClass = 67"):
            "select count(*) from events where category = 'cuda_backtrace'",
        ("NVTX_EVENTS", "start is not null and eventType in (59, 60, 70, 71)"):
            "select count(*) from events where category = 'nvtx'",
        ("NVTX_EVENTS", "start is not null and eventType = 34"):
            "select count(*) from events where category = 'nvtx_mark'",
        ("OSRT_API", VALID + " and eventClass = 27"): "select count(*) from events where category = 'osrt'",
    }
    for (table, where), q in expect.items():
        assert n_store(q) == count(con, table, where), (table, where)
    overhead = sum(count(con, t, VALID) for t in ("PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_OVERHEAD"))
    assert n_store("select count(*) from events where category = 'overhead'") == overhead

    # every row of every table read: converted + skipped (reason prefixed by the table) = rows
    converted_from = {
        "CUPTI_ACTIVITY_KIND_KERNEL": expect[("CUPTI_ACTIVITY_KIND_KERNEL", VALID)],
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": expect[("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", VALID)],
        "CUPTI_ACTIVITY_KIND_MEMCPY": expect[("CUPTI_ACTIVITY_KIND_MEMCPY", VALID)],
        "CUPTI_ACTIVITY_KIND_MEMSET": expect[("CUPTI_ACTIVITY_KIND_MEMSET", VALID)],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "select count(*) from syncs",
        "CUPTI_ACTIVITY_KIND_RUNTIME": "select (select count(*) from api_calls) + (select count(*) "
                                       "from events where category = 'cuda_backtrace')",
        "NVTX_EVENTS": "select count(*) from events where category in ('nvtx', 'nvtx_mark')",
        "OSRT_API": "select count(*) from events where category = 'osrt'",
    }
    for table, q in converted_from.items():
        assert n_store(q) + skipped(table) == count(con, table), table

    # GPU work and API calls keep the pid/tid decoded from globalPid / globalTid (bits 47-24, 23-0)
    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        want = {r[0] for r in con.execute(
            "select distinct (globalPid >> 24) & 16777215 from CUPTI_ACTIVITY_KIND_KERNEL")}
        assert {r[0] for r in st.rows("select distinct pid from kernels")} == want
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in have:
        want = Counter(con.execute("select (globalTid >> 24) & 16777215, globalTid & 16777215 "
                                   "from CUPTI_ACTIVITY_KIND_RUNTIME where eventClass in (0, 1)"))
        assert Counter(st.rows("select pid, tid from api_calls")) == want

    # sources: counts, clock mapping, metadata without the captured environment
    src = st.one("select rows_converted, rows_skipped, clock_origin, clock_offset_ns, metadata, "
                 "format_version, tool_version from sources")
    rows_converted, rows_skipped, origin, offset, meta, fmt_version, tool_version = src
    for t, n in json.loads(rows_converted).items():
        assert st.one(f"select count(*) from {t}") == n
    assert rows_skipped == st.one("select coalesce(sum(count), 0) from skipped_rows")
    assert origin == "capture_start"
    start_time = [r[0] for r in con.execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME")] \
        if "TARGET_INFO_SESSION_START_TIME" in have else []
    assert offset == (start_time[0] if start_time else None)
    meta = json.loads(meta)
    export_table = "META_DATA_EXPORT" if "META_DATA_EXPORT" in have else (
        "EXPORT_META_DATA" if "EXPORT_META_DATA" in have else None)
    if export_table:
        pairs = dict(con.execute(f"select name, value from {export_table}"))
        assert {k: meta[k] for k in pairs} == pairs
        assert fmt_version == pairs.get("EXPORT_SCHEMA_VERSION")
        assert tool_version == pairs.get("EXPORT_PRODUCT_VERSION")
    assert not any("ENVIRONMENT" in k for k in meta), "META_DATA_CAPTURE content must not be copied"
    not_read = meta.get("tables_not_converted", {})
    for t in ("SCHED_EVENTS", "CUDA_CALLCHAINS", "META_DATA_CAPTURE", "COMPOSITE_EVENTS"):
        if count(con, t):
            assert not_read[t] == count(con, t)
    for t, n in not_read.items():
        assert n == count(con, t) > 0


@pytest.mark.parametrize("path", ALL, ids=ids)
def test_names_and_shapes_match_sqlite(path, convert):
    con = sq(path)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables(con):
        pytest.skip("no kernels")
    want = Counter(con.execute(
        "select s.value, k.gridX, k.blockX, k.registersPerThread, k.staticSharedMemory + "
        "k.dynamicSharedMemory, k.correlationId, k.\"end\" - k.start from CUPTI_ACTIVITY_KIND_KERNEL k "
        "left join StringIds s on s.id = k.demangledName"))
    st = convert(path)
    got = Counter(st.rows("select name, grid_x, block_x, registers_per_thread, shared_bytes, "
                          "correlation_id, dur_ns from kernels where not " + WHOLE_GRAPH))
    assert got == want
    # whole-graph rows (--cuda-graph-trace=graph) stand for the graph launches of GRAPH_TRACE
    want = Counter(con.execute('select graphId, correlationId, "end" - start from '
                               "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")) if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" \
        in tables(con) else Counter()
    assert Counter(st.rows(f"select graph_id, correlation_id, dur_ns from kernels where {WHOLE_GRAPH}")) == want
    assert all(n == f"[CUDA graph {g}]" for g, n in st.rows(f"select graph_id, name from kernels where {WHOLE_GRAPH}"))


def test_saxpy_with_appended_name_column(convert, tmp_path):
    path = real("saxpy-mpi-cuda")
    con = sq(path)
    assert "name" in tables(con)["CUPTI_ACTIVITY_KIND_RUNTIME"]  # the file's quirk
    st = convert(path)
    assert st.one("select count(*) from api_calls") == count(con, "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                               "eventClass in (0, 1)")
    assert st.one("select count(*) from memops") == count(con, "CUPTI_ACTIVITY_KIND_MEMCPY")
    # all-NULL extra column: nothing in args; MPI ranges named through textId in the MPI domain
    assert st.one("select count(*) from api_calls where args ->> 'name' is not null") == 0
    mpi = st.rows("select name, count(*) from events where domain = 'MPI' group by 1 order by 1")
    want = con.execute("select s.value, count(*) from NVTX_EVENTS n join StringIds s on s.id = n.textId "
                       "where n.eventType = 59 and n.domainId = 1 group by 1 order by 1").fetchall()
    assert mpi == want and want
    # a user column with values lands in args
    copy = tmp_path / "saxpy_named.sqlite"
    shutil.copy(path, copy)
    w = sqlite3.connect(copy)
    w.execute("update CUPTI_ACTIVITY_KIND_RUNTIME set name = 'mine-' || correlationId")
    w.commit()
    w.close()
    st2 = convert(copy)
    rows = st2.rows("select correlation_id, args ->> 'name' from api_calls")
    assert rows and all(n == f"mine-{c}" for c, n in rows)


def test_export_without_gpu_activity(convert):
    path = real("uvmTorch")
    con = sq(path)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" not in tables(con)
    st = convert(path)
    assert st.one("select count(*) from kernels") == 0
    assert st.one("select count(*) from memops") == 0
    for view in ("hotspots", "memop_time_summary", "memop_size_summary", "nvtx_gpu_projection",
                 "idle_gaps"):
        assert st.one(f"select count(*) from {view}") == 0, view
    assert st.one("select count(*) from api_calls") == count(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert st.one("select count(*) from osrt_summary") > 0
    assert st.one("select start_ns is not null and end_ns is not null from sources")


def test_2020_5_export_devices_and_process_names(convert):
    path = real("kmeans-parallel")
    con = sq(path)
    st = convert(path)
    gpu = con.execute("select name, numMultiprocessors, computeCapabilityMajor || '.' || "
                      "computeCapabilityMinor, globalMemorySize from TARGET_INFO_CUDA_GPU").fetchone()
    assert st.one("select name, sm_count, compute_capability, total_memory_bytes from devices") == gpu
    # no PROCESSES table in 2020.5: the process is named after its main thread
    pid = con.execute("select distinct (globalPid >> 24) & 16777215 from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    main = con.execute("select s.value from ThreadNames t join StringIds s on s.id = t.nameId "
                       "where t.globalTid & 16777215 = ? and (t.globalTid >> 24) & 16777215 = ?",
                       (pid, pid)).fetchone()[0]
    assert st.rows("select pid, name from processes") == [(pid, main)]
    # driver API only (eventClass 1)
    assert st.rows("select distinct api from api_calls") == [("cuda_driver",)]


# -- views against independent computations -----------------------------------------------------
def expected_hotspots(con):
    d = defaultdict(list)
    for name, dur in con.execute('select s.value, k."end" - k.start from CUPTI_ACTIVITY_KIND_KERNEL k '
                                 "join StringIds s on s.id = k.demangledName"):
        d[name].append(dur)
    return d


def expected_api(con):
    d = defaultdict(list)
    for name, dur in con.execute('select s.value, r."end" - r.start from CUPTI_ACTIVITY_KIND_RUNTIME r '
                                 "join StringIds s on s.id = r.nameId where r.eventClass in (0, 1)"):
        d[name].append(dur)
    return d


def expected_memops(con, what):
    d = defaultdict(list)
    have = tables(con)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        for kind, dur, size in con.execute('select copyKind, "end" - start, bytes from CUPTI_ACTIVITY_KIND_MEMCPY'):
            d[f"[CUDA memcpy {LABELS[kind]}]"].append(dur if what == "time" else size)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        for dur, size in con.execute('select "end" - start, bytes from CUPTI_ACTIVITY_KIND_MEMSET'):
            d["[CUDA memset]"].append(dur if what == "time" else size)
    return d


def nvtx_rows(con):
    """NVTX ranges as nsys's reports see them: (rowid, start, end, globalTid, endGlobalTid,
    'domain:name', style). Unclosed ranges end at the table's largest timestamp."""
    have = tables(con).get("NVTX_EVENTS")
    if not have:
        return []
    strings = dict(con.execute("select id, value from StringIds"))
    maxts = max(v for v in con.execute('select max(start), max("end") from NVTX_EVENTS').fetchone() if v is not None)
    domains = {}
    for g, d, text, tid in con.execute('select globalTid, domainId, text, textId from NVTX_EVENTS '
                                       'where eventType = 75 order by start'):
        domains.setdefault(((g >> 24) & 0xFFFFFF, d), strings.get(tid, text))
    out = []
    egt = "endGlobalTid" if "endGlobalTid" in have else "NULL"
    for rowid, s, e, et, g, eg, text, tid, dom in con.execute(
            f'select rowid, start, "end", eventType, globalTid, {egt}, text, textId, domainId '
            "from NVTX_EVENTS where eventType in (59, 60, 70, 71)"):
        name = strings.get(tid, text) or ""
        dname = domains.get(((g >> 24) & 0xFFFFFF, dom)) if dom else None
        out.append((rowid, s, maxts if e is None else e, g, eg, f"{dname or ''}:{name}",
                    "StartEnd" if et in (60, 71) else "PushPop"))
    return out


def projection(ranges, calls, ops):
    """Independent nvtx_gpu_proj_sum: ranges = [(id, start, end, thread, name, style)],
    calls = {key: (thread, start, end)}, ops = [(key, start, end)]  (key = process + correlation).
    Returns {(name, style): dict}."""
    by_thread = defaultdict(list)
    for r in ranges:
        by_thread[r[3]].append(r)
    parent = {}
    for rs in by_thread.values():  # tightest enclosing range on the thread
        rs.sort(key=lambda r: (r[1], -r[2]))
        starts = [r[1] for r in rs]
        for c in rs:
            best = None
            for p in rs[:bisect_right(starts, c[1])]:
                if p[0] != c[0] and p[2] >= c[2]:
                    t = (c[1] - p[1]) + (p[2] - c[2])
                    if best is None or t < best[0]:
                        best = (t, p[0])
            parent[c[0]] = best[1] if best else None
    level = {}
    for rid in parent:
        n, cur, seen = 0, rid, set()
        while parent[cur] is not None and cur not in seen:
            seen.add(cur)
            cur, n = parent[cur], n + 1
        level[rid] = n
    info = {r[0]: r for r in ranges}
    proj = defaultdict(lambda: [None, None, set()])
    calls_by_thread = defaultdict(list)
    for key, s, e in ops:
        if key in calls:
            th, cs, ce = calls[key]
            calls_by_thread[th].append((cs, ce, s, e, key))
    for th, cl in calls_by_thread.items():
        rs = sorted(by_thread.get(th, []), key=lambda r: r[1])
        cl.sort()
        active, i = [], 0
        for cs, ce, s, e, key in cl:
            while i < len(rs) and rs[i][1] <= cs:
                active.append(rs[i])
                i += 1
            active = [r for r in active if r[2] >= cs]
            for r in active:
                if r[2] >= ce:
                    p = proj[r[0]]
                    p[0] = s if p[0] is None else min(p[0], s)
                    p[1] = e if p[1] is None else max(p[1], e)
                    p[2].add(key)
    children = Counter(parent[rid] for rid in proj if parent[rid] is not None)
    groups = defaultdict(list)
    for rid, (lo, hi, keys) in proj.items():
        r = info[rid]
        groups[(r[4], r[5])].append((hi - lo, r[2] - r[1], len(keys), level[rid], children.get(rid, 0)))
    return groups


def nsys_projection_inputs(con):
    have = tables(con)
    ranges = [(rid, s, e, g, name, style) for rid, s, e, g, eg, name, style in nvtx_rows(con) if eg is None]
    calls = {}
    for corr, g, s, e in con.execute('select correlationId, globalTid, start, "end" from CUPTI_ACTIVITY_KIND_RUNTIME'):
        calls[(g & ~0xFFFFFF, corr)] = (g, s, e)
    ops = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in have:
            ops += [((gp, corr), s, e) for gp, corr, s, e in
                    con.execute(f'select globalPid, correlationId, start, "end" from {t}')]
    return ranges, calls, ops


def check_projection(st, groups):
    rows = dicts(st, "select * from nvtx_gpu_projection")
    assert len(rows) == len(groups)
    for r in rows:
        g = groups[(r["range"], r["style"])]
        proj = [x[0] for x in g]
        check_stats(r, stats(proj), ("total_proj_ns", "proj_avg_ns", "proj_med_ns", "proj_min_ns",
                                     "proj_max_ns", "proj_stddev_ns"))
        assert r["range_instances"] == len(g)
        assert r["total_range_ns"] == sum(x[1] for x in g)
        assert r["total_gpu_ops"] == sum(x[2] for x in g)
        assert r["avg_gpu_ops"] == pytest.approx(statistics.fmean(x[2] for x in g))
        assert r["avg_range_lvl"] == pytest.approx(statistics.fmean(x[3] for x in g))
        assert r["avg_num_child"] == pytest.approx(statistics.fmean(x[4] for x in g))


def check_summary(rows, expected, key, count_col, pct=True):
    assert len(rows) == len(expected)
    grand = sum(sum(v) for v in expected.values())
    for r in rows:
        want = stats(expected[r[key]])
        assert r[count_col] == want["n"]
        check_stats(r, want)
        if pct:
            assert r["time_pct"] == pytest.approx(100 * want["total"] / grand)
    totals = [r["total_ns"] for r in rows]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("path", ALL, ids=ids)
@pytest.mark.slow
def test_views_equal_independent_computation(path, convert):
    con = sq(path)
    have = tables(con)
    st = convert(path)
    # hotspots (cuda_gpu_kern_sum)
    exp = expected_hotspots(con) if "CUPTI_ACTIVITY_KIND_KERNEL" in have else {}
    check_summary(dicts(st, "select * from hotspots"), exp, "name", "instances")
    # api_summary (cuda_api_sum): grouped by the recorded name, nsys's display rule
    exp = expected_api(con) if "CUPTI_ACTIVITY_KIND_RUNTIME" in have else {}
    rows = dicts(st, "select * from api_summary")
    for r in rows:
        assert r["name"] == nsys_display_name(r["raw_name"])
    check_summary(rows, exp, "raw_name", "num_calls")
    # memop_time_summary / memop_size_summary (cuda_gpu_mem_time_sum / _size_sum)
    check_summary(dicts(st, "select * from memop_time_summary"), expected_memops(con, "time"),
                  "operation", "count")
    exp = expected_memops(con, "size")
    rows = dicts(st, "select * from memop_size_summary")
    assert len(rows) == len(exp)
    for r in rows:
        check_stats(r, stats(exp[r["operation"]]), ("total_bytes", "avg_bytes", "med_bytes",
                                                    "min_bytes", "max_bytes", "stddev_bytes"))
    # nvtx_summary (nvtx_sum)
    exp = defaultdict(list)
    for _rid, s, e, _g, _eg, name, style in nvtx_rows(con):
        exp[(name, style)].append(e - s)
    rows = dicts(st, "select * from nvtx_summary")
    for r in rows:
        r["key"] = (r["range"], r["style"])
    check_summary(rows, exp, "key", "instances")
    # osrt_summary (osrt_sum: eventClass 27)
    exp = defaultdict(list)
    if "OSRT_API" in have:
        for name, dur in con.execute('select s.value, o."end" - o.start from OSRT_API o join StringIds s '
                                     "on s.id = o.nameId where o.eventClass = 27"):
            exp[name].append(dur)
    check_summary(dicts(st, "select * from osrt_summary"), exp, "name", "num_calls")
    # nvtx_gpu_projection (nvtx_gpu_proj_sum)
    if "NVTX_EVENTS" in have and "CUPTI_ACTIVITY_KIND_RUNTIME" in have:
        check_projection(st, projection(*nsys_projection_inputs(con)))
    else:
        assert st.one("select count(*) from nvtx_gpu_projection") == 0


# -- parity with nsys's own `nsys stats` CSV output ---------------------------------------------------
def sqlite_round(x, digits=1):
    """SQLite's round(), as nsys's report SQL uses it."""
    return sqlite3.connect(":memory:").execute("select round(?, ?)", (x, digits)).fetchone()[0]


def oracle(stem, report):
    p = ORACLE / f"{stem}_{report}.csv"
    need(p)
    with open(p, newline="") as f:
        return list(csv.DictReader(f))


def fmt1(x) -> str:
    return f"{sqlite_round(x, 1):.1f}"


# (report, view, key column in the CSV, key column in the view, [(csv col, view col, kind)])
STAT_COLS = [("Total Time (ns)", "total_ns", "int"), ("Avg (ns)", "avg_ns", "1"),
             ("Med (ns)", "med_ns", "1"), ("Min (ns)", "min_ns", "int"), ("Max (ns)", "max_ns", "int"),
             ("StdDev (ns)", "stddev_ns", "1"), ("Time (%)", "time_pct", "1")]
REPORTS = [
    ("cuda_gpu_kern_sum", "hotspots", "Name", "name", STAT_COLS + [("Instances", "instances", "int")]),
    ("cuda_api_sum", "api_summary", "Name", "name", STAT_COLS + [("Num Calls", "num_calls", "int")]),
    ("cuda_gpu_mem_time_sum", "memop_time_summary", "Operation", "operation",
     STAT_COLS + [("Count", "count", "int")]),
    ("cuda_gpu_mem_size_sum", "memop_size_summary", "Operation", "operation",
     [("Total (MB)", "total_bytes", "MB"), ("Count", "count", "int"), ("Avg (MB)", "avg_bytes", "MB"),
      ("Med (MB)", "med_bytes", "MB"), ("Min (MB)", "min_bytes", "MB"), ("Max (MB)", "max_bytes", "MB"),
      ("StdDev (MB)", "stddev_bytes", "MB")]),
    ("nvtx_sum", "nvtx_summary", "Range", "range",
     STAT_COLS + [("Instances", "instances", "int"), ("Style", "style", "str")]),
    ("osrt_sum", "osrt_summary", "Name", "name", STAT_COLS + [("Num Calls", "num_calls", "int")]),
    ("nvtx_gpu_proj_sum", "nvtx_gpu_projection", "Range", "range",
     [("Style", "style", "str"), ("Total Proj Time (ns)", "total_proj_ns", "int"),
      ("Total Range Time (ns)", "total_range_ns", "int"), ("Range Instances", "range_instances", "int"),
      ("Proj Avg (ns)", "proj_avg_ns", "1"), ("Proj Med (ns)", "proj_med_ns", "1"),
      ("Proj Min (ns)", "proj_min_ns", "int"), ("Proj Max (ns)", "proj_max_ns", "int"),
      ("Proj StdDev (ns)", "proj_stddev_ns", "1"), ("Total GPU Ops", "total_gpu_ops", "int"),
      ("Avg GPU Ops", "avg_gpu_ops", "1"), ("Avg Range Lvl", "avg_range_lvl", "1"),
      ("Avg Num Child", "avg_num_child", "1")]),
]


@pytest.mark.parametrize("report,view,okey,vkey,cols", REPORTS, ids=[r[0] for r in REPORTS])
# every report on the first fixture by default, on the others under -m slow (the same views)
@pytest.mark.parametrize("path", ORACLED[:1] + [pytest.param(p, marks=pytest.mark.slow) for p in ORACLED[1:]],
                         ids=lambda p: p.stem)
def test_views_equal_nsys_stats_oracle(path, report, view, okey, vkey, cols, convert):
    want = oracle(path.stem, report)
    st = convert(path)
    got = dicts(st, f"select * from {view}")
    assert sorted(r[okey] for r in want) == sorted(r[vkey] for r in got)
    by_key = {r[vkey]: r for r in got}
    assert len(by_key) == len(got)  # one row per name, like nsys
    for w in want:
        g = by_key[w[okey]]
        for ocol, vcol, kind in cols:
            if kind == "int":
                assert int(w[ocol]) == g[vcol], (w[okey], ocol)
            elif kind == "1":
                assert w[ocol] == fmt1(g[vcol]), (w[okey], ocol, g[vcol])
            elif kind == "MB":  # nsys prints sizes in MB (10^6 bytes) with 3 decimals
                assert w[ocol] == f"{g[vcol] / 1e6:.3f}", (w[okey], ocol)
            else:
                assert w[ocol] == g[vcol], (w[okey], ocol)
    # same order: total descending (ties may come in any order)
    first = cols[0][1] if report in ("cuda_gpu_mem_size_sum",) else (
        "total_proj_ns" if report == "nvtx_gpu_proj_sum" else "total_ns")
    assert [by_key[w[okey]][first] for w in want] == [r[first] for r in got]


# -- Kineto sources in the same views --------------------------------------------------------------
def kineto_ns(v) -> int:
    return round(v * 1000) if isinstance(v, float) else int(v) * 1000


MEMCPY_NAME = re.compile(r"Memcpy (\w+)")
KINETO = [p for p in sorted((FIXTURES / "kineto").glob("*.json.gz")) if "decode" in p.name or "matmul" in p.name]


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_views_on_kineto_sources(path, convert):
    trace = load_json(path)
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    st = convert(path)
    api = defaultdict(list)
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            api[e["name"]].append(kineto_ns(e["dur"]))
    check_summary(dicts(st, "select * from api_summary"), api, "raw_name", "num_calls")
    mem = defaultdict(list)
    short = {"HtoD": "Host-to-Device", "DtoH": "Device-to-Host", "DtoD": "Device-to-Device"}
    for e in ev:
        if e.get("cat") == "gpu_memcpy":
            direction = short[MEMCPY_NAME.match(e["name"]).group(1)]
            mem[f"[CUDA memcpy {direction}]"].append(kineto_ns(e["dur"]))
        elif e.get("cat") == "gpu_memset":
            mem["[CUDA memset]"].append(kineto_ns(e["dur"]))
    check_summary(dicts(st, "select * from memop_time_summary"), mem, "operation", "count")
    ann = defaultdict(list)
    for e in ev:
        if e.get("cat") == "user_annotation":
            ann[(e["name"], "PushPop")].append(kineto_ns(e["dur"]))
    rows = dicts(st, "select * from nvtx_summary")
    for r in rows:
        r["key"] = (r["range"], r["style"])
    check_summary(rows, ann, "key", "instances")
    # GPU projection of the record_function ranges: same algorithm on the JSON events
    ranges = [(i, kineto_ns(e["ts"]), kineto_ns(e["ts"]) + kineto_ns(e["dur"]), (e["pid"], e["tid"]),
               e["name"], "PushPop") for i, e in enumerate(ev) if e.get("cat") == "user_annotation"]
    calls = {e["args"]["correlation"]: ((e["pid"], e["tid"]), kineto_ns(e["ts"]),
                                        kineto_ns(e["ts"]) + kineto_ns(e["dur"]))
             for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ops = [(e["args"]["correlation"], kineto_ns(e["ts"]), kineto_ns(e["ts"]) + kineto_ns(e["dur"]))
           for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    groups = projection(ranges, calls, ops)
    assert bool(groups) == bool(ops)  # the decode / matmul ranges launch GPU work (when traced)
    check_projection(st, groups)


# -- synthetic exports: features the real corpus lacks -----------------------------------------------
def make_export(path: Path, script: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(script)
    con.commit()
    con.close()
    return path


G = (7 << 24) | 7  # globalTid of pid 7, tid 7
GP = 7 << 24


SYNTH = f"""
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'k1(int)'), (2, 'k1'), (3, 'cudaGraphLaunch_v10000'),
  (4, 'cudaLaunchKernel_v7000'), (5, 'mydomain'), (6, 'registered'), (7, 'gpu__util'), (8, 'cuWeird');
-- an old/trimmed KERNEL: no shortName, no grid/block, no mangledName
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, "end" INTEGER, deviceId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, myNote TEXT);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 200, 0, 7, 1, {GP}, 1, 'hello'),
  (300, NULL, 0, 7, 2, {GP}, 1, NULL), (500, 400, 0, 7, 3, {GP}, 1, NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER, "end" INTEGER, deviceId INTEGER,
  contextId INTEGER, greenContextId INTEGER, streamId INTEGER, correlationId INTEGER,
  globalPid INTEGER, graphId INTEGER, graphExecId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (1000, 1500, 0, 1, 0, 7, 10, {GP}, 3, 4);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, "end" INTEGER, eventClass INTEGER,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (50, 90, 0, {G}, 1, 4, 0), (900, 950, 0, {G}, 10, 3, 0),
  (960, 970, 99, {G}, 11, 8, 0);
CREATE TABLE NVTX_EVENTS (start INTEGER, "end" INTEGER, eventType INTEGER, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
  textId INTEGER, domainId INTEGER, uint64Value INTEGER, binaryData BLOB);
INSERT INTO NVTX_EVENTS VALUES
  (10, NULL, 75, NULL, NULL, NULL, NULL, {G}, NULL, 5, 2, NULL, NULL),
  (20, 2000, 59, NULL, NULL, NULL, 'outer', {G}, NULL, NULL, 0, NULL, NULL),
  (40, 980, 60, 1, NULL, NULL, NULL, {G}, NULL, 6, 2, 42, X'00ff'),
  (45, 3000, 60, 2, NULL, NULL, 'crossed', {G}, {G + 1}, NULL, 0, NULL, NULL),
  (600, NULL, 34, NULL, NULL, NULL, 'mark', {G}, NULL, NULL, 0, NULL, NULL),
  (700, NULL, 59, NULL, NULL, NULL, 'unclosed', {G}, NULL, NULL, 0, NULL, NULL),
  (5, NULL, 33, NULL, 1, NULL, 'category name', {G}, NULL, NULL, 0, NULL, NULL);
CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, metricId INTEGER, value INTEGER);
INSERT INTO GPU_METRICS VALUES (-5, 65536 + 1, 3, 40), (15, 65536 + 1, 3, 60), (25, 65536 + 1, 9, 1);
CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER, sourceId INTEGER, typeName TEXT,
  metricId INTEGER, metricName TEXT);
INSERT INTO TARGET_INFO_GPU_METRICS VALUES (65537, 0, 'GH100', 3, 'SM Active [Throughput %]');
CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER, pid INTEGER, uuid TEXT,
  numMultiprocessors INTEGER);
INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (0, 0, 7, 'GPU-abc', 132);
CREATE TABLE SCHED_EVENTS (start INTEGER, cpu INTEGER, isSchedIn INTEGER, globalTid INTEGER);
INSERT INTO SCHED_EVENTS VALUES (1, 0, 1, {G}), (2, 0, 0, {G});
"""


def test_synthetic_features(tmp_path, convert):
    path = make_export(tmp_path / "synthetic.sqlite", SYNTH)
    st = convert(path)
    # kernels: missing columns are NULL, the unknown column lands in args, bad rows are counted
    k = dicts(st, "select * from kernels order by start_ns")
    assert [(r["name"], r["short_name"], r["grid_x"], r["mangled_name"]) for r in k] == [
        ("k1(int)", "k1", None, None), ("[CUDA graph 3]", "[CUDA graph 3]", None, None)]
    assert json.loads(k[0]["args"]) == {"myNote": "hello"}
    assert k[1]["graph_id"] == 3 and json.loads(k[1]["args"]) == {"greenContextId": 0, "graphExecId": 4}
    assert k[1]["correlation_id"] == 10 and k[1]["pid"] == 7
    skips = dict(st.rows("select reason, count from skipped_rows"))
    assert skips["CUPTI_ACTIVITY_KIND_KERNEL: row without end"] == 1
    assert skips["CUPTI_ACTIVITY_KIND_KERNEL: row with end before start"] == 1
    assert skips["CUPTI_ACTIVITY_KIND_RUNTIME: row with eventClass 99 (unknown class), not a CUDA "
                 "runtime or driver call"] == 1
    assert any(r.startswith("NVTX_EVENTS: eventType 75") for r in skips)
    assert any(r.startswith("NVTX_EVENTS: eventType 33 (NvtxCategory)") for r in skips)
    # API names: the recorded one and the one without the suffix
    assert st.rows("select name, raw_name, api from api_calls order by start_ns") == [
        ("cudaLaunchKernel", "cudaLaunchKernel_v7000", "cuda_runtime"),
        ("cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuda_runtime")]
    # nsys keeps the 5-digit suffix in its display (it strips only `_vNNNN`)
    assert st.one("select name from api_summary where raw_name like 'cudaGraph%'") == "cudaGraphLaunch_v10000"
    # NVTX: domains per process, registered strings, StartEnd, marks, unclosed ranges
    ev = {r["name"]: r for r in dicts(st, "select * from events")}
    assert ev["registered"]["domain"] == "mydomain"
    args = json.loads(ev["registered"]["args"])
    assert args["eventType"] == 60 and args["uint64Value"] == 42 and args["binaryData"] == "hex:00FF"
    assert ev["mark"]["category"] == "nvtx_mark" and ev["mark"]["is_instant"]
    assert ev["mark"]["end_ns"] == ev["mark"]["start_ns"] == 600
    assert ev["unclosed"]["end_ns"] == 3000 and json.loads(ev["unclosed"]["args"])["unclosed"] is True
    assert json.loads(ev["crossed"]["args"])["endGlobalTid"] == G + 1
    summary = {(r["range"], r["style"]): r["total_ns"] for r in dicts(st, "select * from nvtx_summary")}
    assert summary == {(":outer", "PushPop"): 1980, ("mydomain:registered", "StartEnd"): 940,
                       (":crossed", "StartEnd"): 2955, (":unclosed", "PushPop"): 2300}
    # projection: the kernel launched by the call at 50-90 is inside `outer` and `registered`;
    # the crossed start/end range is left out (it ended on another thread), and the whole-graph
    # row is not a GPU op for nsys (nor in hotspots), though it stays in kernels / gpu_activity
    proj = {r["range"]: r for r in dicts(st, "select * from nvtx_gpu_projection")}
    assert set(proj) == {":outer", "mydomain:registered"}
    assert proj[":outer"]["total_gpu_ops"] == 1 and proj[":outer"]["total_proj_ns"] == 100
    assert proj["mydomain:registered"]["avg_range_lvl"] == 1.0
    assert proj[":outer"]["avg_num_child"] == 1.0
    assert st.rows("select name from hotspots") == [("k1(int)",)]
    assert st.one("select count(*) from gpu_activity where name = '[CUDA graph 3]'") == 1
    # GPU metrics → counters (GPU = typeId & 0xFF; negative timestamps kept)
    assert st.rows("select device_id, name, ts_ns, value from counters order by ts_ns") == [
        (1, "SM Active [Throughput %]", -5, 40.0), (1, "SM Active [Throughput %]", 15, 60.0),
        (1, "metric 9", 25, 1.0)]
    # devices from TARGET_INFO_CUDA_DEVICE alone; unread tables listed; no session start → NULL
    assert st.rows("select device_id, sm_count, uuid from devices") == [(0, 132, "GPU-abc")]
    meta = json.loads(st.one("select metadata from sources"))
    assert meta["tables_not_converted"] == {"SCHED_EVENTS": 2}
    assert st.one("select clock_offset_ns from sources") is None


def test_progress_callback_counts_rows(tmp_path):
    from tracekit.store import Store

    path = FIXTURES / "nsys" / "matmul.sqlite"
    need(path)
    calls = []
    with Store(tmp_path / "p.duckdb") as s:
        s.convert(path, progress=lambda done, total: calls.append((done, total)))
    con = sq(path)
    total = sum(count(con, t) for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "OSRT_API",
        "PROFILER_OVERHEAD", "CUPTI_ACTIVITY_KIND_OVERHEAD", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "GPU_METRICS"))
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


# -- bad input -------------------------------------------------------------------------------------
def one_line(e: TraceError, *needles):
    msg = e.one_line()
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


def convert_error(path, tmp_path) -> TraceError:
    from tracekit.store import Store

    with Store(tmp_path / "err.duckdb") as s:
        with pytest.raises(TraceError) as ei:
            s.convert(path)
        assert s.one("select count(*) from sources") == 0  # nothing half-written
    return ei.value


def test_corrupt_sqlite(tmp_path):
    src = FIXTURES / "nsys" / "matmul.sqlite"
    need(src)
    raw = src.read_bytes()
    p = tmp_path / "corrupt.sqlite"
    p.write_bytes(raw[:100] + bytes(range(256)) * 64 + raw[100 + 256 * 64:])  # header kept, pages garbled
    one_line(convert_error(p, tmp_path), "corrupt.sqlite", "SQLite")
    q = tmp_path / "truncated.sqlite"
    q.write_bytes(raw[: len(raw) // 3])
    one_line(convert_error(q, tmp_path), "truncated.sqlite")


def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    p = make_export(tmp_path / "other.sqlite", "CREATE TABLE foo (a INTEGER); INSERT INTO foo VALUES (1);")
    one_line(convert_error(p, tmp_path), "other.sqlite", "not an Nsight Systems export")


def report_copy(tmp_path) -> Path:
    srcs = [FIXTURES / "nsys" / "matmul.nsys-rep"] + [p for p in realworld("nsys") if p.suffix == ".nsys-rep"]
    srcs = [p for p in srcs if p.exists()]
    if not srcs:
        pytest.skip("no .nsys-rep present")
    p = tmp_path / "rep" / srcs[0].name
    p.parent.mkdir()
    shutil.copy(srcs[0], p)
    return p


def test_report_without_nsys_is_a_one_line_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tracekit.cli import main

    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    rep = report_copy(tmp_path)
    one_line(convert_error(rep, tmp_path), rep.name, "nsys", "install Nsight Systems",
             "nsys export --type sqlite")
    r = CliRunner().invoke(main, ["convert", str(rep), "--db", str(tmp_path / "cli.duckdb")])
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "install Nsight Systems" in lines[0]
    qd = tmp_path / "old.qdrep"  # a .qdrep is a report too (by suffix when the magic is older)
    qd.write_bytes(b"not a real report")
    one_line(convert_error(qd, tmp_path), "old.qdrep", "install Nsight Systems")


def fake_nsys(tmp_path, sqlite_src: Path, fail: bool = False) -> Path:
    """A stand-in `nsys` that 'exports' by copying a known SQLite file (logs its arguments)."""
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir(exist_ok=True)
    body = ('echo "nsys: report is damaged" >&2; exit 3' if fail else
            f'echo "$@" >> "{tmp_path}/nsys.log"\n'
            'while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; esac; shift; done\n'
            f'cp "{sqlite_src}" "$out"')
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_report_with_nsys_exports_once_and_caches(tmp_path, monkeypatch, convert):
    src = FIXTURES / "nsys" / "matmul.sqlite"
    need(src)
    rep = report_copy(tmp_path)
    monkeypatch.setenv("NSYS", str(fake_nsys(tmp_path, src)))
    st = convert(rep)
    cache = rep.with_name(rep.name + ".sqlite")
    assert cache.exists()
    log = (tmp_path / "nsys.log").read_text().splitlines()
    assert len(log) == 1 and log[0].startswith("export --type sqlite --force-overwrite=true -o ")
    assert log[0].endswith(str(rep))
    con = sq(src)
    assert st.one("select count(*) from kernels") == count(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    meta = json.loads(st.one("select metadata from sources"))
    assert meta["exported_sqlite"] == str(cache) and meta["report"] == str(rep.resolve())
    assert st.one("select path from sources") == str(rep.resolve())
    convert(rep)  # second time: the cache is fresh, nsys is not run again
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1


def test_report_cache_in_temp_dir_when_folder_is_read_only(tmp_path, monkeypatch, convert):
    import tempfile

    from tracekit.adapters import nsys

    src = FIXTURES / "nsys" / "matmul.sqlite"
    need(src)
    rep = report_copy(tmp_path)
    monkeypatch.setenv("NSYS", str(fake_nsys(tmp_path, src)))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    real_access = os.access  # the report's folder is not writable (works as root too)
    monkeypatch.setattr(nsys.report.os, "access", lambda p, mode: False if (
        Path(p) == rep.parent and mode == os.W_OK) else real_access(p, mode))
    st = convert(rep)
    assert not rep.with_name(rep.name + ".sqlite").exists()
    cached = json.loads(st.one("select metadata from sources"))["exported_sqlite"]
    assert cached.startswith(str(tmp_path / "tmp")) and Path(cached).exists()
    convert(rep)  # reused from the temp dir
    assert len((tmp_path / "nsys.log").read_text().splitlines()) == 1


def test_report_export_failure_is_one_line(tmp_path, monkeypatch):
    rep = report_copy(tmp_path)
    monkeypatch.setenv("NSYS", str(fake_nsys(tmp_path, rep, fail=True)))
    one_line(convert_error(rep, tmp_path), rep.name, "nsys export --type sqlite` failed",
             "report is damaged")
    assert not list(rep.parent.glob("*.sqlite"))  # no half-written cache left behind


def test_invalid_utf8_is_replaced_and_counted(tmp_path, monkeypatch, convert):
    from tracekit.adapters import nsys

    monkeypatch.setattr(nsys.reader, "CHUNK_ROWS", 2)  # the bad row comes after chunks already delivered
    rows = ", ".join(f"({i * 10}, {i * 10 + 5}, 59, {G}, 'r{i}')" for i in range(5))
    path = make_export(tmp_path / "utf8.sqlite", f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'ok');
        CREATE TABLE NVTX_EVENTS (start INTEGER, "end" INTEGER, eventType INTEGER, globalTid INTEGER, text TEXT);
        INSERT INTO NVTX_EVENTS VALUES {rows}, (60, 65, 59, {G}, CAST(X'626164FF21' AS TEXT)),
            (70, 75, 59, {G}, 'r6');""")
    st = convert(path)
    names = [r[0] for r in st.rows("select name from events order by start_ns")]
    assert names == ["r0", "r1", "r2", "r3", "r4", "bad\ufffd!", "r6"]  # each row exactly once
    meta = json.loads(st.one("select metadata from sources"))
    assert meta["tracekit_repairs"] == {"NVTX_EVENTS: invalid UTF-8 in text values, replaced with U+FFFD": 1}
