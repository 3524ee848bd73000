"""Values other tools write that are not plain numbers or plain text (issue 49, items 12-14, 17,
18): ncu's ``nan`` / ``-nan`` / ``inf`` metrics, Python's ``NaN`` / ``Infinity`` JSON tokens in a
Kineto trace, an event name of many megabytes, a Parquet export under a path with glob
characters, and the commands ``diagnose`` prints for a store that is not the default one.

Each input is a real capture of fixtures/ edited at the one place the edge case needs (the
captures we have never hit these cases, so they are synthetic edge cases, said at each test)."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from conftest import FIXTURES
from tracekit.adapters.ncu.values import NONFINITE_METRIC, NONFINITE_SPEEDUP, is_nonfinite, parse_number

NCU = FIXTURES / "ncu"
KINETO = FIXTURES / "kineto"
TRACEKIT = [sys.executable, "-m", "tracekit"]


def tk(*args, cwd=None, timeout=300):
    return subprocess.run([*TRACEKIT, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


def repairs(db: Path) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        out: dict = {}
        for (m,) in con.execute("select metadata from sources").fetchall():
            for k, v in (json.loads(m).get("tracekit_repairs") or {}).items():
                out[k] = out.get(k, 0) + v
        return out
    finally:
        con.close()


def one(db: Path, sql: str):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# -- 12: ncu's nan / -nan / inf ---------------------------------------------------------------------

@pytest.mark.parametrize("text, nonfinite", [
    ("nan", True), ("-nan", True), ("NaN", True), ("nan(ind)", True), ("-nan(ind)", True),
    ("inf", True), ("-inf", True), ("+inf", True), ("Infinity", True), ("1.#INF", True),
    ("-1.#IND", True), ("1e999", True), ("nan (nan; nan)", True),
    ("n/a", False), ("", False), ("12.5", False), ("1,024", False), ("CachePreferNone", False),
    ("nano", False), ("information", False),
])
def test_nonfinite_text_reads_as_null(text, nonfinite):
    assert is_nonfinite(text) is nonfinite
    assert parse_number(text) is None or not nonfinite


def _metric_cols(header: list[str]) -> list[int]:
    ids = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
           "Block Size", "Grid Size", "Device", "CC"}
    return [i for i, h in enumerate(header) if h not in ids and "Domain:" not in h]


def _nonfinite_cells(path: Path) -> int:
    """Metric cells of result rows that read 'nan', '-nan', 'inf' or '-inf' (plain csv)."""
    rows = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    cols = _metric_cols(rows[0])
    return sum(1 for r in rows[1:] if r and r[0].isdigit()
               for i in cols if r[i] in ("nan", "-nan", "inf", "-inf"))


def test_real_ncu_raw_pages_nan_cells_are_counted(tmp_path):
    """The real raw pages hold 'nan' (ncu 2025's derived_tempMetric4, one per result: 6 in
    mm_raw.csv, 4 in kn_raw.csv): NULL, counted as repaired, the text kept in raw_value."""
    for name, n in (("mm_raw.csv", 6), ("kn_raw.csv", 4)):
        assert _nonfinite_cells(NCU / name) == n
        db = tmp_path / f"{name}.duckdb"
        r = tk("convert", NCU / name, "--db", db, "--replace")
        assert r.returncode == 0, r.stderr
        assert repairs(db) == {NONFINITE_METRIC: n}
        assert one(db, "select count(*) from ncu_metrics where name = 'derived_tempMetric4' "
                       "and value is null and raw_value = 'nan'") == [(n,)]


def _edit_ncu_raw(src: Path, dst: Path) -> tuple[int, dict[str, int]]:
    """mm_raw.csv (real, ncu 2025 raw page, 6 results) with every metric cell of result 0 made
    'nan' (ncu's text for a result it could not finish) and three SOL cells of result 1 made
    '-nan', 'inf', '-inf'.  Synthetic edge case: the real captures have no such cells.  Returns
    (cells changed, {cell text: count})."""
    rows = list(csv.reader(io.StringIO(src.read_text(), newline="")))
    header = rows[0]
    metric_cols = _metric_cols(header)
    by = {"nan": 0, "-nan": 0, "inf": 0, "-inf": 0}
    for r in rows[1:]:
        if r and r[0] == "0":
            for i in metric_cols:
                if r[i] != "":
                    r[i] = "nan"
                    by["nan"] += 1
        elif r and r[0] == "1":
            for name, text in (("sm__throughput.avg.pct_of_peak_sustained_elapsed", "-nan"),
                               ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "inf"),
                               ("gpu__time_duration.sum", "-inf")):
                i = header.index(name)
                assert r[i] != ""
                r[i] = text
                by[text] += 1
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    dst.write_text(out.getvalue())
    return sum(by.values()), by


def test_ncu_nan_and_inf_are_null_counted_and_diagnose_runs(tmp_path):
    """Issue 49 item 12.  Before: the cells were stored as DOUBLE NaN / inf; a NaN compares
    greater than every threshold, so kernel_bounds called the all-NaN result compute-bound, and
    diagnose failed casting NaN to INT32."""
    src = tmp_path / "mm_raw_nan.csv"
    _, by = _edit_ncu_raw(NCU / "mm_raw.csv", src)
    assert by["nan"] > 1000 and (by["-nan"], by["inf"], by["-inf"]) == (1, 1, 1)
    changed = _nonfinite_cells(src)  # with the 4 real 'nan' cells of results 2-5 and 1 of result 1
    assert changed == sum(by.values()) + 5
    db = tmp_path / "s.duckdb"
    r = tk("convert", src, "--db", db, "--replace")
    assert r.returncode == 0, r.stderr
    assert f"repaired {changed:,} ({changed:,} {NONFINITE_METRIC})" in r.stdout
    assert repairs(db) == {NONFINITE_METRIC: changed}
    # nothing non-finite stored; the text of each such cell kept
    assert one(db, "select count(*) filter (not isfinite(value)), count(*) filter (value is null and "
                   "raw_value in ('nan', '-nan', 'inf', '-inf')) from ncu_metrics") == [(0, changed)]
    # the real values of the other results are untouched: the same as the unedited file's
    ref = tmp_path / "ref.duckdb"
    assert tk("convert", NCU / "mm_raw.csv", "--db", ref, "--replace").returncode == 0
    q = "select id, bound, bound_reason, sm_pct, memory_pct, dur_ns from kernel_bounds order by id"
    got, want = one(db, q), one(ref, q)
    assert got[2:] == want[2:] and len(got) == 6
    assert got[0] == (0, None, "no Speed-of-Light metrics", None, None, None)  # not 'compute'
    assert want[0][1] is not None  # the unedited result 0 has a bound
    assert got[1][:4] == (1, None, "no Speed-of-Light metrics", None) and got[1][5] is None
    r = tk("diagnose", "--db", db)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "findings:" in r.stdout
    r = tk("diagnose", "--db", db, "--format", "json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)


def test_ncu_details_page_nan_rules_and_units(tmp_path):
    """The details page (mm_details.csv, real): a result's metric values 'nan' and a rule's
    estimated speedup 'nan' (synthetic edge case) read as NULL, each counted under its reason."""
    rows = list(csv.reader(io.StringIO((NCU / "mm_details.csv").read_text(), newline="")))
    h = rows[0]
    iv, isu, irule = h.index("Metric Value"), h.index("Estimated Speedup"), h.index("Rule Name")
    metrics = speedups = 0
    for r in rows[1:]:
        if r and r[0] == "4":
            if r[iv]:
                r[iv] = "-nan"
                metrics += 1
            elif r[irule] and r[isu]:
                r[isu] = "nan"
                speedups += 1
    assert metrics > 50 and speedups >= 1
    src = tmp_path / "details_nan.csv"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    src.write_text(out.getvalue())
    db = tmp_path / "d.duckdb"
    r = tk("convert", src, "--db", db, "--replace")
    assert r.returncode == 0, r.stderr
    assert repairs(db) == {NONFINITE_METRIC: metrics, NONFINITE_SPEEDUP: speedups}
    assert one(db, "select bound, bound_reason from kernel_bounds where id = 4") == [
        (None, "no Speed-of-Light metrics")]
    assert one(db, "select count(*) from ncu_rules where id = 4 and speedup_pct is null "
                   "and speedup_type is not null") == [(speedups,)]
    assert tk("diagnose", "--db", db).returncode == 0


class _FakeMetric:
    def __init__(self, v, unit="%"):
        self.v, self.u = v, unit

    def value(self):
        return self.v

    def unit(self):
        return self.u


def test_ncu_report_reader_nan_and_inf(tmp_path):
    """The .ncu-rep reader (ncu_report gives Python floats): NaN / inf values read as NULL and
    counted.  A stand-in for ncu_report's objects (synthetic: no real report holds NaN)."""
    from tracekit.adapters.base import Accounting
    from tracekit.adapters.ncu.values import finite_value

    acc = Accounting()
    got = [finite_value(_FakeMetric(v).value(), acc) for v in (1.5, float("nan"), float("inf"), 3, True, "x")]
    assert got == [1.5, None, None, 3.0, 1.0, None]
    assert acc.repairs == {NONFINITE_METRIC: 2}
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in got)
