"""Nsight Compute: the CSV / .ncu-rep reader against independent parses of the real files, unit
normalization on real values, the bound classification against ncu's own verdicts, and the join
of ncu results to timeline kernels."""

from __future__ import annotations

import csv
import gzip
import os
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import FIXTURES, realworld
from tracekit.adapters.base import TraceError
from tracekit.adapters.ncu import normalize_unit, parse_nvtx, parse_number
from tracekit.names import short_kernel_name
from tracekit.store import Store

NCU_FIX = FIXTURES / "ncu"
MM_DETAILS, MM_BASE, MM_RAW = NCU_FIX / "mm_details.csv", NCU_FIX / "mm_details_base.csv", NCU_FIX / "mm_raw.csv"
KINETO_MM = FIXTURES / "kineto" / "matmul.json.gz"
NSYS_MM = FIXTURES / "nsys" / "matmul.sqlite"
REAL = {p.name: p for p in realworld("ncu")}
try:
    import ncu_report  # noqa: F401  (the optional ncu extra)
    HAVE_NCU_REPORT = True
except ImportError:
    HAVE_NCU_REPORT = False

GEMV = "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_splitK_NNT"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
REDUCE = "splitKreduce_kernel"

ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
              "Stream", "Block Size", "Grid Size", "Device", "CC"}


def need(p: Path) -> Path:
    if not p.exists():
        pytest.skip(f"{p} is not present")
    return p


# -- an independent reader: plain csv, no tracekit code ---------------------------------------------

def table_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and data rows of the ncu table in the file (everything from the '"ID",' line on)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID",'))
    rows = list(csv.reader(lines[start:]))
    return rows[0], rows[1:]


def independent_details(path: Path) -> dict:
    header, rows = table_rows(path)
    ix = {h: i for i, h in enumerate(header)}
    ids, metrics, rules = set(), 0, 0
    per_result_metric = Counter()
    for r in rows:
        if not r or not r[0].isdigit():
            continue
        ids.add(int(r[0]))
        if r[ix["Metric Name"]]:
            metrics += 1
            per_result_metric[int(r[0])] += 1
        elif "Rule Name" in ix and len(r) > ix["Rule Name"] and r[ix["Rule Name"]]:
            rules += 1
    extra = len(ids) if "Kernel Time" in ix else 0  # one ncu_metrics row per result for it
    return {"results": len(ids), "metrics": metrics + extra, "rules": rules}


def independent_raw(path: Path) -> dict:
    header, rows = table_rows(path)
    metric_cols = [i for i, h in enumerate(header) if h not in ID_COLUMNS and "Domain:" not in h]
    results = [r for r in rows if r and r[0].isdigit()]
    cells = sum(1 for r in results for i in metric_cols if r[i] != "")
    return {"results": len(results), "metrics": cells, "rules": 0}


def report_counts(path: Path) -> dict:
    import ncu_report

    ctx = ncu_report.load_report(str(path))
    results = metrics = rules = 0
    for i in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(i)
        for j in range(rng.num_actions()):
            act = rng.action_by_idx(j)
            results += 1
            metrics += len(act.metric_names())
            rules += len(act.rule_results_as_dicts())
    return {"results": results, "metrics": metrics, "rules": rules}


def counts_in(st: Store, sid: int) -> dict:
    return {
        "results": st.one("select count(*) from ncu_kernels where source_id = ?", [sid]),
        "metrics": st.one("select count(*) from ncu_metrics where source_id = ?", [sid]),
        "rules": st.one("select count(*) from ncu_rules where source_id = ?", [sid]),
    }


def convert_one(path: Path, tmp_path: Path, **kw):
    st = Store(tmp_path / f"{path.name}.duckdb", replace=True)
    try:
        summary = st.convert(path, **kw)
    except BaseException:
        st.close()
        raise
    return st, summary


def one_line_error(path: Path, tmp_path: Path, **kw) -> str:
    st = Store(tmp_path / "err.duckdb", replace=True)
    try:
        with pytest.raises(TraceError) as ei:
            st.convert(path, **kw)
        # the store is left as it was
        assert st.one("select count(*) from sources") == 0
        assert st.one("select count(*) from ncu_metrics") == 0
    finally:
        st.close()
    msg = ei.value.one_line()
    assert "\n" not in msg and "Traceback" not in msg
    return msg


# -- every real file --------------------------------------------------------------------------------

EXPECTED_ERRORS = {
    "AveryClapp__ESMM-Research__profile_multi3.txt": "text-mode output",
    "AveryClapp__ESMM-Research__summary1024.txt": "text-mode output",
    "lukas-ruettgers__dphpc-gemm__sbatch_ncu_benchmark_output.log": "without a result table",
}


@pytest.mark.parametrize("path", list(REAL.values()), ids=lambda p: p.name)
def test_every_realworld_file_converts_or_gives_its_one_line_error(path, tmp_path):
    if path.name in EXPECTED_ERRORS:
        assert EXPECTED_ERRORS[path.name] in one_line_error(path, tmp_path)
        return
    if path.suffix == ".ncu-rep":
        if not HAVE_NCU_REPORT:
            if shutil.which("ncu") is None:
                assert "needs NVIDIA's ncu-report package or the ncu command" in one_line_error(path, tmp_path)
                return
            pytest.skip("ncu on PATH but no ncu_report: covered by the fallback test")
        expected = report_counts(path)
    else:
        expected = independent_details(path)
    st, summary = convert_one(path, tmp_path)
    with st:
        assert counts_in(st, summary.source_id) == expected
        assert summary.skipped == {}
        assert expected["results"] > 0 and expected["metrics"] > 0


@pytest.mark.parametrize("path", [MM_DETAILS, MM_BASE, MM_RAW], ids=lambda p: p.name)
def test_own_fixture_counts(path, tmp_path):
    need(path)
    expected = independent_raw(path) if "raw" in path.name else independent_details(path)
    st, summary = convert_one(path, tmp_path)
    with st:
        assert counts_in(st, summary.source_id) == expected
        assert expected["results"] == 6  # 2 x (GEMV + splitK reduce, GEMM)
        assert summary.skipped == {}
        assert st.one("select format_version from sources") == ("raw" if "raw" in path.name else "details")
        # one processes row, one devices row (H200, CC 9.0)
        assert st.rows("select pid, name from processes") == [(961, "python3.12")]
        dev = st.one("select device_id, compute_capability, name from devices")
        assert dev[:2] == (0, "9.0")
        if "raw" in path.name:
            assert dev[2] == "NVIDIA H200"
            assert st.one("select sm_count from devices") == 132


def test_kernel_columns_agree_across_pages_and_with_the_csv_cells(tmp_path):
    need(MM_RAW)
    header, rows = table_rows(MM_RAW)
    units, rows = rows[0], rows[1:]
    ix = {h: i for i, h in enumerate(header)}

    def cell(r, metric):
        return float(r[ix[metric]].replace(",", ""))

    with Store(tmp_path / "a.duckdb") as st:
        for p in (MM_DETAILS, MM_BASE, MM_RAW):
            st.convert(p)
        got = st.rows("""select source_id, id, short_name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                registers_per_thread, dur_ns, sm_throughput_pct, memory_throughput_pct,
                                dram_throughput_pct, achieved_occupancy_pct, theoretical_occupancy_pct, nvtx,
                                context_id, stream_id
                         from ncu_kernels order by source_id, id""")
    assert len(got) == 18
    assert units[ix["gpu__time_duration.sum"]] == "us"
    for sid, rid, short, gx, gy, gz, bx, by, bz, reg, dur, sm, mem, dram, ach, theo, nvtx, ctx, stream in got:
        r = rows[rid]
        assert short == short_kernel_name(r[ix["Kernel Name"]])
        assert (gx, gy, gz) == tuple(int(x) for x in r[ix["Grid Size"]].strip("()").split(","))
        assert (bx, by, bz) == tuple(int(x) for x in r[ix["Block Size"]].strip("()").split(","))
        assert reg == int(cell(r, "launch__registers_per_thread"))
        assert (ctx, stream) == (1, 7)
        # the raw page prints 6 decimals in µs, the details page 2 (auto) or ns (base)
        assert dur == pytest.approx(cell(r, "gpu__time_duration.sum") * 1000, abs=10 if sid == 0 else 0.5)
        for got_pct, metric in ((sm, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                                (mem, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
                                (dram, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
                                (ach, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                                (theo, "sm__maximum_warps_per_active_cycle_pct")):
            assert got_pct == pytest.approx(cell(r, metric), abs=0.006)
        assert nvtx == ("measure/gemm_b4096" if short == GEMM else "measure/gemv_b1")


# -- units and numbers --------------------------------------------------------------------------------

@pytest.mark.parametrize("unit, expected", [
    ("ns", ("ns", 1)), ("nsecond", ("ns", 1)), ("us", ("ns", 1e3)), ("usecond", ("ns", 1e3)),
    ("msecond", ("ns", 1e6)), ("ms", ("ns", 1e6)), ("second", ("ns", 1e9)),
    ("hz", ("hz", 1)), ("Ghz", ("hz", 1e9)), ("Mhz", ("hz", 1e6)), ("cycle/second", ("hz", 1)),
    ("cycle/nsecond", ("hz", 1e9)), ("cycle/usecond", ("hz", 1e6)),
    ("byte", ("byte", 1)), ("Kbyte", ("byte", 1e3)), ("Mbyte", ("byte", 1e6)), ("Gbyte", ("byte", 1e9)),
    ("Tbyte", ("byte", 1e12)), ("byte/s", ("byte/s", 1)), ("Gbyte/s", ("byte/s", 1e9)),
    ("Tbyte/s", ("byte/s", 1e12)), ("Mbyte/second", ("byte/s", 1e6)), ("byte/block", ("byte/block", 1)),
    ("Kbyte/block", ("byte/block", 1e3)), ("Kbyte/cycle", ("byte/cycle", 1e3)),
    ("sector/ns", ("sector/s", 1e9)), ("sector/us", ("sector/s", 1e6)), ("inst/cycle", ("inst/cycle", 1)),
    ("register/thread", ("register/thread", 1)), ("%", ("%", 1)), ("", ("", 1)),
    ("%/Kbyte", ("%/Kbyte", 1)), ("warp", ("warp", 1)), ("SM", ("SM", 1)),
])
def test_normalize_unit(unit, expected):
    base, factor = normalize_unit(unit)
    assert base == expected[0] and factor == pytest.approx(expected[1])


@pytest.mark.parametrize("text, value", [
    ("1,073,741,824", 1073741824.0), ("795,373,665.48", 795373665.48), ("768683274.02", 768683274.02),
    ("13.440000", 13.44), ("0", 0.0), ("-3.5", -3.5), ("1e-05", 1e-05), ("n/a", None), ("", None),
    ("nan", None), ("CachePreferNone", None), ("281,845,760 (270,336; 270,336)", 281845760.0),
    ("(256, 1, 1)", None), ("1,2,3", None), ("12,34", None),
])
def test_parse_number(text, value):
    assert parse_number(text) == value


def test_units_normalize_to_the_same_values_as_ncus_base_units(tmp_path):
    """mm_details.csv (auto-scaled units) and mm_details_base.csv (--print-units base) are two
    renderings of one report: after normalization every number must agree within the display
    rounding of the auto-scaled file (2 decimals in its unit)."""
    need(MM_DETAILS), need(MM_BASE)
    with Store(tmp_path / "u.duckdb") as st:
        st.convert(MM_DETAILS)
        st.convert(MM_BASE)
        pairs = st.rows("""
            select a.name, a.raw_unit, a.unit, a.value, b.raw_unit, b.unit, b.value, a.raw_value
            from ncu_metrics a join ncu_metrics b
              on a.id = b.id and a.section = b.section and a.name = b.name
            where a.source_id = 0 and b.source_id = 1 and a.value is not null""")
    assert len(pairs) > 400
    scaled = 0
    for name, au, an, av, bu, bn, bv, araw in pairs:
        assert an == bn, (name, au, bu)
        step = normalize_unit(au)[1] * 10 ** -(len(araw.split(".")[1]) if "." in araw else 0)
        assert av == pytest.approx(bv, abs=step / 2 + 1e-9 * abs(bv)), (name, araw, au, bv, bu)
        scaled += au != bu
    assert scaled >= 50  # us vs ns, Ghz vs hz, Mbyte vs byte, Tbyte/s vs byte/s ...


def test_real_values_in_base_units(tmp_path):
    def value(st, sid, rid, name, body=None):
        return st.one("select value from ncu_metrics where source_id = ? and id = ? and name = ? "
                      "and body_item is not distinct from ?", [sid, rid, name, body])

    files = [REAL.get(n) for n in ("lukas-ruettgers__dphpc-gemm__ncu_benchmark_output.csv",
                                   "peihunglin__XPlacer-ML-DataPlacement__nsight_cfd_097K.ip-128-115-246-7.log",
                                   "peihunglin__XPlacer-ML-DataPlacement__nsight_cfd_097K.log",
                                   "AveryClapp__ESMM-Research__metrics.csv")]
    if not all(files):
        pytest.skip("shared/realworld/ncu is not present")
    with Store(tmp_path / "v.duckdb") as st:
        for p in files:
            st.convert(p)
        # dphpc (auto units, 2025): "549.98" us, "13.79" Ghz, "98.06" Gbyte/s, "1318955" cycle
        assert value(st, 0, 0, "Duration") == pytest.approx(549_980)
        assert st.one("select dur_ns from ncu_kernels where source_id = 0 and id = 0") == 549_980
        assert value(st, 0, 0, "DRAM Frequency") == pytest.approx(13.79e9)
        assert value(st, 0, 0, "DRAM Bandwidth", "Single Precision Achieved Value") == pytest.approx(98.06e9)
        assert value(st, 0, 0, "Elapsed Cycles") == 1_318_955
        assert value(st, 0, 0, "Memory [%]", "GPU Throughput") == pytest.approx(54.76)
        # XPlacer 2020: thousands separators in one file, none in the other; cycle/second -> hz
        assert value(st, 1, 0, "Memory Frequency") == pytest.approx(795_373_665.48)
        assert value(st, 1, 0, "Threads") == 97_152
        assert value(st, 2, 0, "Memory Frequency") == pytest.approx(768_683_274.02)
        assert st.one("select unit from ncu_metrics where source_id = 1 and name = 'Memory Frequency' "
                      "limit 1") == "hz"
        assert st.one("select raw_value from ncu_metrics where source_id = 2 and id = 0 "
                      "and name = 'Kernel Time'") == "2020-May-29 12:02:46"
        # ESMM --metrics: ids as names, "nsecond"
        assert value(st, 3, 0, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum") == 1_073_741_824
        assert value(st, 3, 0, "gpu__time_duration.sum") == 10_776_576
        assert st.one("select dur_ns from ncu_kernels where source_id = 3 and id = 0") == 10_776_576


def test_nvtx_cells():
    h = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"
    cell = ('961  "<default domain>:measure:none:none:none:none:none:none"  '
            '"<default domain>:gemv_b1:none:none:none:none:none:none" ')
    assert parse_nvtx(h, cell) == "measure/gemv_b1"
    assert parse_nvtx(h, '7  "mydom:step:none:none:none:none:none:none" ') == "mydom@step"
    assert parse_nvtx(h, "") is None
    assert parse_nvtx(h, "odd cell") == "odd cell"


# -- the variants no real file covers (synthetic, in the layouts of the real ones) -------------------

HDR = ('"ID","Process ID","Process Name","Host Name",'
       '"thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
       '"Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name",'
       '"Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description",'
       '"Estimated Speedup Type","Estimated Speedup"')


def _row(rid, pid, dev, name, section, metric, unit, value, nvtx=""):
    return (f'"{rid}","{pid}","app","host{dev}","{nvtx}","{name}","1","7","(256, 1, 1)","(64, 1, 1)",'
            f'"{dev}","9.0","{section}","{metric}","{unit}","{value}",')


def synthetic_details() -> str:
    """A capture of two processes on two devices, with everything the real files lack."""
    nv = '11  ""<default domain>:outer:none:none:none:none:none:none"" '
    lines = [
        "Loading model...",
        "==PROF== Connected to process 100 (/usr/bin/app)",
        "==WARNING== Unable to access the following 6 metrics: ctc__rx_bytes_data_user.sum.",
        "==PROF== Disconnected from process 100",
        "",
        HDR,
        _row(0, 100, 0, "void k<1>(float *)", "GPU Speed Of Light Throughput", "Duration", "usecond", "1.50", nv),
        _row(0, 100, 0, "void k<1>(float *)", "GPU Speed Of Light Throughput", "Memory Throughput", "%", "85.00", nv),
        _row(0, 100, 0, "void k<1>(float *)", "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "20.00", nv),
        _row(0, 100, 0, "void k<1>(float *)", "Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "1,234.50", nv),
        _row(0, 100, 0, "void k<1>(float *)", "Launch Statistics", "Waves Per SM", "", "n/a", nv),
        _row(0, 100, 0, "void k<1>(float *)", "Source Counters", "Branch Instructions", "inst", "281,845,760 (270,336; 270,336)", nv),
        '"0","100","app","host0","","void k<1>(float *)","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",'
        '"SpeedOfLight","","","","SOLBottleneck","OPT","Memory is more heavily utilized than Compute.","global","12.5"',
        "    Not supported for NVSwitch.",
        "",
        '"GPU ID","GPU Name","NVLink","Links","Bandwidth"',
        '"0","NVIDIA H200","yes","18","900"',
        _row(1, 200, 1, "other_kernel", "GPU Speed Of Light Throughput", "Duration", "msecond", "2.00"),
        _row(1, 200, 1, "other_kernel", "GPU Speed Of Light Throughput", "Memory Throughput", "%", "30.00"),
        _row(1, 200, 1, "other_kernel", "GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "25.00"),
        _row(1, 200, 1, "other_kernel", "Launch Statistics", "Waves Per SM", "", "0.50"),
        _row(1, 200, 1, "other_kernel", "Launch Statistics", "Function Cache Configuration", "", "CachePreferNone"),
    ]
    return "\n".join(lines) + "\n"


def test_synthetic_capture_with_preamble_processes_devices_rules_and_foreign_rows(tmp_path):
    p = tmp_path / "capture.csv"
    p.write_text(synthetic_details())
    st, summary = convert_one(p, tmp_path)
    with st:
        assert summary.converted == {"ncu_kernels": 2, "ncu_metrics": 11, "ncu_rules": 1, "processes": 2,
                                     "devices": 2}
        # the NVSwitch text line and the 2 rows of the foreign table: counted, not silent
        assert sum(summary.skipped.values()) == 3
        assert st.rows("select pid, name from processes order by pid") == [(100, "app"), (200, "app")]
        assert st.rows("select device_id, compute_capability from devices order by 1") == [(0, "9.0"), (1, "9.0")]
        k = st.rows("select id, pid, device_id, dur_ns, memory_throughput_pct, sm_throughput_pct, nvtx, "
                    "bottleneck_rule, grid_x, block_x from ncu_kernels order by id")
        assert k[0] == (0, 100, 0, 1500, 85.0, 20.0, "outer", "Memory is more heavily utilized than Compute.", 64, 256)
        assert k[1][:6] == (1, 200, 1, 2_000_000, 30.0, 25.0)
        assert st.one("select value from ncu_metrics where name = 'Memory Throughput' and unit = 'byte/s'") \
            == pytest.approx(1234.5e9)
        assert st.rows("select value, raw_value from ncu_metrics where name = 'Waves Per SM' order by id") == \
            [(None, "n/a"), (0.5, "0.50")]
        assert st.one("select value from ncu_metrics where name = 'Branch Instructions'") == 281_845_760
        assert st.one("select raw_value from ncu_metrics where name = 'Function Cache Configuration'") \
            == "CachePreferNone"
        assert st.rows("select rule, type, speedup_type, speedup_pct from ncu_rules") == \
            [("SOLBottleneck", "OPT", "global", 12.5)]
        meta = st.one("select metadata->>'$.preamble[1]' from sources")
        assert meta.startswith("==PROF== Connected")
        b = st.rows("select id, bound, bound_reason from kernel_bounds order by id")
        assert b == [(0, "memory", "high throughput"), (1, "latency", "small grid")]


def test_raw_page_gzip_and_base_units(tmp_path):
    need(MM_RAW)
    gz = tmp_path / "mm_raw.csv.gz"
    with open(MM_RAW, "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    st, summary = convert_one(gz, tmp_path)
    with st:
        assert counts_in(st, summary.source_id) == independent_raw(MM_RAW)
        # "dram__bytes_read.sum" is "33.578752" Mbyte for the first GEMV
        assert st.one("select value from ncu_metrics where id = 0 and name = 'dram__bytes_read.sum'") \
            == pytest.approx(33_578_752)
        assert st.one("select value from ncu_metrics where id = 0 and name = 'dram__bytes.sum.per_second'") \
            == pytest.approx(2.748775e12)


# -- malformed input: one line, store unchanged ------------------------------------------------------

@pytest.mark.parametrize("case", ["missing_columns", "truncated_in_quote", "truncated_row", "semicolons",
                                  "not_ncu", "header_only", "summary", "text_mode", "locale",
                                  "second_table", "tabs", "empty_rep", "garbage_rep"])
def test_malformed_input_gives_one_line_error(case, tmp_path):
    good = synthetic_details().splitlines()
    table = good[5:]
    p = tmp_path / f"{case}.csv"
    fmt = None
    if case == "missing_columns":
        hdr = HDR.replace('"Metric Value",', "")
        text, needle = hdr + "\n" + "\n".join(table[1:3]) + "\n", "without column(s) Metric Value"
    elif case == "truncated_in_quote":
        text, needle = "\n".join(table[:3]) + '\n"0","100","app","ho', "truncated"
    elif case == "truncated_row":
        text, needle = "\n".join(table[:3]) + '\n"0","100","app","host0"', "truncated"
    elif case == "semicolons":
        text, needle = "\n".join(l.replace('","', '";"') for l in table[:4]) + "\n", "';' as field delimiter"
    elif case == "tabs":
        text, needle = "\n".join(l.replace('","', '"\t"') for l in table[:4]) + "\n", "'\\t' as field delimiter"
    elif case == "not_ncu":
        text, needle, fmt = "a,b,c\n1,2,3\n", "no ncu CSV header", "ncu"
    elif case == "header_only":
        text, needle = HDR + "\n", "no result rows"
    elif case == "summary":
        text, needle = ('"Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size",'
                        '"Device","CC","Invocations","Section Name","Metric Name","Metric Unit","Minimum",'
                        '"Maximum","Average"\n'), "--print-summary"
    elif case == "text_mode":
        text = ("[8821] a.out@127.0.0.1\n  k(int) (32, 32, 1)x(32, 1, 1), Context 1, Stream 7\n"
                "    Section: GPU Speed Of Light Throughput\n    ----- ----\n"
                "    Metric Name               Metric Unit Metric Value\n")
        needle = "text-mode output"
    elif case == "locale":
        text = "\n".join([HDR, table[1], table[2].replace('"85.00"', '"85,00"')]) + "\n"
        needle = "locale-formatted"
    elif case == "second_table":
        text, needle = "\n".join(table[:3] + table[:3]) + "\n", "second ncu table header"
    elif case == "empty_rep":
        p = tmp_path / "x.ncu-rep"
        text, needle = "not a report", "report magic"
    else:  # garbage_rep
        p = tmp_path / "y.ncu-rep"
        text = "NVR\0garbage"
        if HAVE_NCU_REPORT:
            needle = "ncu_report found no results"
        elif shutil.which("ncu") is None:
            needle = "ncu-report package or the ncu command"
        else:
            pytest.skip("an ncu is installed: its own error text")
    p.write_bytes(text.encode())
    assert needle in one_line_error(p, tmp_path, format=fmt)


def test_cli_prints_one_line_for_a_text_mode_file(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    p = tmp_path / "profile.txt"
    p.write_text("==PROF== Connected to process 1 (a.out)\n[1] a.out@127.0.0.1\n"
                 "    Section: GPU Speed Of Light Throughput\n")
    r = CliRunner().invoke(main, ["convert", str(p), "--db", str(tmp_path / "c.duckdb")],
                           catch_exceptions=False)
    assert r.exit_code == 2
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "text-mode output" in lines[0] and "Traceback" not in r.stderr


# -- .ncu-rep without ncu_report: the ncu fallback and the error -------------------------------------

def _hide_ncu_report(monkeypatch):
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import raises ImportError


def test_report_without_ncu_report_or_ncu_is_a_one_line_error(tmp_path, monkeypatch):
    rep = REAL.get("AveryClapp__ESMM-Research__profile.ncu-rep")
    if rep is None:
        pytest.skip("shared/realworld/ncu is not present")
    _hide_ncu_report(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    msg = one_line_error(rep, tmp_path)
    assert "needs NVIDIA's ncu-report package or the ncu command" in msg and "pip install 'tracekit-gpu[ncu]'" in msg


def test_report_falls_back_to_ncu_import(tmp_path, monkeypatch):
    """With ncu on PATH (a stand-in that records its arguments and prints a raw page), the report
    is read from `ncu --import X --csv --page raw --print-units base`."""
    need(MM_RAW)
    _hide_ncu_report(monkeypatch)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    args_file = tmp_path / "args.txt"
    ncu = bindir / "ncu"
    ncu.write_text(f'#!/bin/sh\necho "$@" > "{args_file}"\ncat "{MM_RAW}"\n')
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    rep = tmp_path / "mm.ncu-rep"
    rep.write_bytes(b"NVR\x00" + b"\x00" * 64)
    st, summary = convert_one(rep, tmp_path)
    with st:
        assert args_file.read_text().split() == ["--import", str(rep), "--csv", "--page", "raw",
                                                 "--print-units", "base"]
        assert counts_in(st, summary.source_id) == independent_raw(MM_RAW)
        assert st.one("select metadata->>'$.reader' from sources").startswith("ncu --import")
    # a failing ncu: its message, one line
    ncu.write_text('#!/bin/sh\necho "==ERROR== Report version 99 is not supported" >&2\nexit 1\n')
    msg = one_line_error(rep, tmp_path)
    assert "`ncu --import` failed: ==ERROR== Report version 99 is not supported" in msg


# -- classification --------------------------------------------------------------------------------

NCU_TITLE_TO_REASON = {
    "Balanced Throughput": ("balanced", "balanced"),
    "High Memory Throughput": ("memory", "memory > compute"),
    "High Compute Throughput": ("compute", "compute > memory"),
    "Small Grid": ("latency", "small grid"),
    "Latency Issue": ("latency", "latency issue"),
}


@pytest.mark.skipif(not HAVE_NCU_REPORT, reason="needs the ncu-report package (the ncu extra)")
@pytest.mark.parametrize("name", ["AveryClapp__ESMM-Research__profile.ncu-rep",
                                  "AveryClapp__ESMM-Research__profile_output.ncu-rep"])
def test_bound_reproduces_ncus_own_verdict_on_every_stored_report(name, tmp_path):
    rep = REAL.get(name) or pytest.skip("shared/realworld/ncu is not present")
    st, _ = convert_one(rep, tmp_path)
    with st:
        rows = st.rows("""select b.bound, b.bound_reason, r.title from kernel_bounds b
                          join ncu_rules r using (source_id, id) where r.rule = 'SOLBottleneck'""")
    assert len(rows) == report_counts(rep)["results"]
    for bound, reason, title in rows:
        assert (bound, reason) == NCU_TITLE_TO_REASON[title]


def test_bound_reproduces_the_latency_verdict_of_the_2025_csv(tmp_path):
    p = REAL.get("lukas-ruettgers__dphpc-gemm__ncu_benchmark_output.csv") or pytest.skip("no shared/")
    st, _ = convert_one(p, tmp_path)
    with st:
        rows = st.rows("select bound, bound_reason, ncu_bottleneck, round(arithmetic_intensity, 1), "
                       "round(flop_per_s / 1e12, 2), round(peak_flop_per_s / 1e12, 1), "
                       "round(peak_dram_bytes_per_s / 1e9), round(pct_of_peak_flop), roofline_bound "
                       "from kernel_bounds order by id")
    assert len(rows) == 4
    for bound, reason, text, ai, tflops, peak, peak_bw, pct, roof in rows:
        assert (bound, reason) == ("latency", "latency issue")
        assert text.startswith("This workload exhibits low compute throughput and memory bandwidth")
        # FP32 roofline: (FADD + FMUL + 2 FFMA per cycle) * SM clock / DRAM bandwidth
        assert 22.3 <= ai <= 22.8 and 2.22 <= tflops <= 2.25
        assert (peak, peak_bw, pct, roof) == (22.1, 441, 10, "memory")  # the rule text says 10 %


def gemv_gemm_from_raw_cells():
    """Independent computation from the raw page's cells: per result, SOL %, waves, and the
    tensor FLOP / DRAM byte arithmetic intensity."""
    header, rows = table_rows(MM_RAW)
    ix = {h: i for i, h in enumerate(header)}

    def v(r, m):
        return float(r[ix[m]].replace(",", ""))

    out = {}
    for r in rows[1:]:
        ops = v(r, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")
        dur_s = v(r, "gpu__time_duration.sum") * 1e-6  # us
        dram_bps = v(r, "dram__bytes.sum.per_second") * 1e12  # Tbyte/s
        peak = v(r, "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained") * v(r, "sm__cycles_elapsed.avg.per_second") * 1e9
        peak_bw = v(r, "dram__bytes.sum.peak_sustained") * 1e3 * v(r, "dram__cycles_elapsed.avg.per_second") * 1e9
        out[int(r[0])] = dict(
            name=short_kernel_name(r[ix["Kernel Name"]]),
            sm=v(r, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            mem=v(r, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            waves=v(r, "launch__waves_per_multiprocessor"),
            ai=(ops / dur_s) / dram_bps, ridge=peak / peak_bw)
    return out


def test_gemv_is_memory_side_latency_bound_and_gemm_compute_bound_on_the_h200_fixture(tmp_path):
    """The seed's experiment, from the real numbers (ncu --set full on an H200, bf16 W[4096,4096]).
    batch-1 GEMV: SM 9.4 %, memory 57-58 % (all DRAM), 0.97 waves -> below ncu's 60 % on both
    units with less than one wave: ncu's rule says "Small Grid" (latency), with memory dominant and
    arithmetic intensity ~8 FLOP/B far left of the ~400 FLOP/B bf16 ridge (memory side of the roofline).
    batch-4096 GEMM: SM 90 % (tensor pipe 90 %), AI ~780 FLOP/B right of the ridge -> compute."""
    need(MM_RAW)
    ind = gemv_gemm_from_raw_cells()
    with Store(tmp_path / "b.duckdb") as st:
        st.convert(MM_RAW)
        st.convert(MM_DETAILS)
        got = st.rows("select source_id, id, short_name, bound, bound_reason, dominant, sm_pct, memory_pct, "
                      "waves, arithmetic_intensity, ridge, roofline_bound, memory_level, tensor_pct "
                      "from kernel_bounds order by source_id, id")
    assert len(got) == 12
    for sid, rid, name, bound, reason, dominant, sm, mem, waves, ai, ridge, roof, _level, tensor in got:
        e = ind[rid]
        assert name == e["name"]
        assert sm == pytest.approx(e["sm"], abs=0.006) and mem == pytest.approx(e["mem"], abs=0.006)
        assert waves == pytest.approx(e["waves"])
        if name == GEMV:
            assert e["sm"] < 60 and e["mem"] < 60 and e["waves"] < 1 and e["mem"] - e["sm"] > 40
            assert (bound, reason, dominant) == ("latency", "small grid", "memory")
            assert bound in ("memory", "latency")
        elif name == GEMM:
            assert e["sm"] >= 80 > e["mem"]
            assert (bound, reason, dominant) == ("compute", "high throughput", "compute")
        else:  # the split-K reduction: a 0.24-wave sliver
            assert (bound, reason) == ("latency", "small grid")
        if sid == 0:  # raw page: the roofline counters are there
            if name == REDUCE:  # fp32/fp16 only (no tensor ops): memory side as well
                assert ai < 1 and roof == "memory"
                continue
            assert ai == pytest.approx(e["ai"], rel=1e-4) and ridge == pytest.approx(e["ridge"], rel=1e-4)
            if name == GEMV:
                assert ai < 10 and ridge > 300 and roof == "memory"
            if name == GEMM:
                assert ai > ridge and roof == "compute" and tensor == pytest.approx(e["sm"], abs=0.01)
        else:  # the details page (default sections) has no roofline counters
            assert ai is None and roof is None


# -- joining ncu results to the timeline --------------------------------------------------------------

def kineto_kernels_in_launch_order(path: Path):
    from conftest import load_json

    t = load_json(path)
    launch = {e["args"]["correlation"]: e["ts"] for e in t["traceEvents"]
              if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ks = [e for e in t["traceEvents"] if e.get("cat") == "kernel"]
    ks.sort(key=lambda e: (launch.get(e["args"]["correlation"], e["ts"]), e["ts"]))
    return ks


def test_ncu_launches_match_the_kineto_kernels_of_the_same_script(tmp_path):
    need(MM_RAW), need(KINETO_MM)
    ks = kineto_kernels_in_launch_order(KINETO_MM)
    assert [short_kernel_name(e["name"]) for e in ks] == [GEMV, REDUCE, GEMM] * 2
    with Store(tmp_path / "m.duckdb") as st:
        st.convert(KINETO_MM)  # source 0
        st.convert(MM_RAW)  # source 1
        st.convert(MM_DETAILS)  # source 2
        rows = st.rows("select ncu_source_id, ncu_id, timeline_source_id, correlation_id, match_quality, "
                       "key_ordinal, ncu_launches, timeline_launches, kernel_name, dur_ns, timeline_ranges, "
                       "nvtx_agrees from ncu_timeline_match order by ncu_source_id, ncu_id")
        hb = st.rows("select short_name, instances, ncu_launches, bound, roofline_bound, match_quality "
                     "from hotspots_bound where source_id = 0")
    assert len(rows) == 12
    for _nsrc, nid, tsrc, corr, quality, ordinal, n_ncu, n_tl, kname, dur, ranges, agrees in rows:
        e = ks[nid]  # ncu profiled exactly the measured launches, in launch order
        assert tsrc == 0 and corr == e["args"]["correlation"] and kname == e["name"]
        assert dur == round(e["dur"] * 1000)
        assert ordinal == nid // 3 + 1 and n_ncu == n_tl == 2
        # nvjet names read the same everywhere; ncu spells the splitK template args differently
        assert quality == ("key" if short_kernel_name(kname) == REDUCE else "exact")
        # the record_function range around the launch is the innermost NVTX range ncu saw
        assert ranges == ("gemm_b4096" if short_kernel_name(kname) == GEMM else "gemv_b1") and agrees
    by_name = {r[0]: r[1:] for r in hb}
    assert by_name[GEMM] == (2, 4, "compute", "compute", "exact")  # 2 ncu sources x 2 launches
    assert by_name[GEMV] == (2, 4, "latency", "memory", "exact")
    assert by_name[REDUCE][:3] == (2, 4, "latency")
    # hotspots_bound keeps hotspots' rows and order
    with Store(tmp_path / "m.duckdb") as st:
        assert st.rows("select source_id, name, total_ns from hotspots_bound") == \
            st.rows("select source_id, name, total_ns from hotspots")


def test_ncu_launches_match_the_nsys_kernels_of_the_same_script(tmp_path):
    need(MM_RAW), need(NSYS_MM)
    pytest.importorskip("tracekit.adapters.nsys")
    import sqlite3

    con = sqlite3.connect(NSYS_MM)
    nsys = con.execute("""select k.correlationId, s.value, k.gridX, k.gridY, k.blockX, k.blockY
                          from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName
                          join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId
                          order by r.start""").fetchall()
    con.close()
    assert [n[1] for n in nsys] == [GEMV, REDUCE, GEMM] * 2
    with Store(tmp_path / "n.duckdb") as st:
        st.convert(NSYS_MM)
        st.convert(MM_RAW)
        rows = st.rows("select ncu_id, correlation_id, match_quality, timeline_ranges = ncu_nvtx "
                       "from ncu_timeline_match where ncu_source_id = 1 order by ncu_id")
        hb = st.rows("select short_name, bound from hotspots_bound where source_id = 0")
    assert [r[1] for r in rows] == [n[0] for n in nsys]
    assert all(r[2] in ("exact", "key") for r in rows)
    assert all(r[3] for r in rows)  # nsys's NVTX stack at the launch = ncu's ('measure/gemv_b1', ...)
    assert dict(hb)[GEMM] == "compute" and dict(hb)[GEMV] in ("memory", "latency")


def test_unmatched_launches_are_listed(tmp_path):
    xplacer = REAL.get("peihunglin__XPlacer-ML-DataPlacement__nsight_cfd_097K.log")
    need(MM_RAW)
    with Store(tmp_path / "u.duckdb") as st:
        st.convert(MM_RAW)  # no timeline in the store yet
        alone = st.rows("select ncu_id, timeline_source_id, match_quality from ncu_timeline_match")
        assert alone == [(i, None, "unmatched") for i in range(6)]
        if KINETO_MM.exists() and xplacer:
            st.convert(KINETO_MM)
            st.convert(xplacer)
            q = Counter(st.rows("select ncu_source_id, match_quality from ncu_timeline_match"))
            assert q[(2, "unmatched")] == 100  # every XPlacer launch listed, none dropped
            assert q[(0, "exact")] + q[(0, "key")] == 6


def test_launch_count_mismatch_pairs_by_order_and_lists_the_rest(tmp_path):
    """Synthetic: ncu profiled 3 launches of one key (and one kernel the timeline lacks), the
    timeline has 2 launches of that key, launched in the opposite order of their start times."""
    import json

    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
           "ts": ts, "dur": 1, "args": {"correlation": c}} for ts, c in ((10, 5), (20, 6))]
    ev += [{"ph": "X", "cat": "kernel", "name": "void ns::k<2>(float*)", "pid": 0, "tid": 7, "ts": ts,
            "dur": 3, "args": {"correlation": c, "device": 0, "stream": s, "grid": [64, 1, 1],
                               "block": [256, 1, 1]}} for ts, c, s in ((100, 6, 8), (200, 5, 7))]
    kin = tmp_path / "k.json"
    kin.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    rows = [HDR] + [_row(i, 1, 0, "void ns::k<2>(float *)", "GPU Speed Of Light Throughput", "Duration",
                         "ns", "10") for i in range(3)]
    rows.append(_row(3, 1, 0, "missing(int)", "GPU Speed Of Light Throughput", "Duration", "ns", "10"))
    ncu = tmp_path / "n.csv"
    ncu.write_text("\n".join(rows) + "\n")
    with Store(tmp_path / "o.duckdb") as st:
        st.convert(kin)
        st.convert(ncu)
        got = st.rows("select ncu_id, correlation_id, match_quality, ncu_launches, timeline_launches "
                      "from ncu_timeline_match order by ncu_id")
    # launch order (API start) is correlation 5 then 6, although kernel 6 started first
    assert got == [(0, 5, "order", 3, 2), (1, 6, "order", 3, 2), (2, None, "unmatched", 3, 2),
                   (3, None, "unmatched", 1, 0)]


def test_thresholds_are_parameters(tmp_path):
    """ncu's 60 % 'both low' threshold is a DuckDB variable: at 50 % the GEMV (memory 57 %,
    SM 9 %) becomes memory-bound by the gap rule, the GEMM stays compute-bound."""
    need(MM_RAW)
    with Store(tmp_path / "p.duckdb") as st:
        st.convert(MM_RAW)
        q = "select short_name, bound, bound_reason from kernel_bounds where id in (0, 2) order by id"
        assert st.rows(q) == [(GEMV, "latency", "small grid"), (GEMM, "compute", "high throughput")]
        st.con.execute("SET VARIABLE bound_low_pct = 50")
        assert st.rows(q) == [(GEMV, "memory", "memory > compute"), (GEMM, "compute", "high throughput")]


def test_pairing_uses_the_nvtx_range_first(convert):
    """ncu --nvtx-include "decode_step/" profiled 120 launches of the batch-1 decode, all inside
    decode step 1; the nsys timeline of the same program launches many of the same kernels (same
    name and geometry) in the prefill first. Launch order alone paired 44 of the 120 results with
    prefill launches; within the innermost NVTX range none crosses (checked here with csv and
    sqlite3 on the raw files)."""
    import gzip
    import sqlite3

    from tracekit.names import short_kernel_name

    ncu_path = need(FIXTURES / "ncu" / "decode_steps_details.csv.gz")
    nsys_path = need(FIXTURES / "nsys" / "decode_b1.sqlite")
    with gzip.open(ncu_path, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    ncu = {}
    for r in rows:
        ncu.setdefault(int(r["ID"]), (r["Kernel Name"], r["Grid Size"], r["Block Size"],
                                      r["thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"]))
    assert len(ncu) == 120 and all(":decode_step:" in v[3] for v in ncu.values())
    con = sqlite3.connect(f"file:{nsys_path}?mode=ro", uri=True)
    steps = con.execute("""SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS n
                           WHERE coalesce(n.text, (SELECT value FROM StringIds WHERE id = n.textId)) = 'decode_step'""").fetchall()
    launches = con.execute("""SELECT s.value, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, r.start,
                                     r.globalTid, k.start
                              FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName
                              JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
                              ORDER BY r.start""").fetchall()

    def key(name, grid, block):
        return short_kernel_name(name), grid.replace(" ", ""), block.replace(" ", "")

    def in_step(t, tid):
        return any(a <= t < b and g == tid for a, b, g in steps)

    by_key, in_steps = defaultdict(list), defaultdict(list)
    for name, gx, gy, gz, bx, by, bz, t, tid, kstart in launches:
        k = key(name, f"({gx},{gy},{gz})", f"({bx},{by},{bz})")
        by_key[k].append((kstart, in_step(t, tid)))
        if in_step(t, tid):
            in_steps[k].append(kstart)
    want, seen = {}, defaultdict(int)
    crossing_by_order = 0
    for i in sorted(ncu):
        k = key(*ncu[i][:3])
        seen[k] += 1
        crossing_by_order += not by_key[k][seen[k] - 1][1]  # the k-th launch of the key overall
        want[i] = in_steps[k][seen[k] - 1]  # the k-th launch of the key inside the decode steps
    assert crossing_by_order == 44  # what launch order alone did

    st = convert(ncu_path, nsys_path)
    m = st.rows("""select ncu_id, paired_by, nvtx_agrees, timeline_ranges, start_ns
                   from ncu_timeline_match where timeline_source_id is not null order by ncu_id""")
    assert len(m) == 120 and {r[1] for r in m} == {"nvtx_range"} and all(r[2] for r in m)
    assert {r[3] for r in m} == {"decode_step"}
    assert {r[0]: r[4] for r in m} == want
