"""The one rule for a value its column cannot hold (adapters/fit.py): NULL (text: its text), the
raw value kept in args as `_raw_<name>`, counted as a repair (sources.metadata.tracekit_repairs and
the convert summary); a value its row cannot do without (REQUIRED: the time, ncu's result id):
the row skipped with a reason.  `fit` cases are synthetic edge cases; the nsys / ncu cases are
real captures (fixtures/nsys/matmul.sqlite, fixtures/ncu/mm_raw.csv) with one cell changed."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3

import pyarrow as pa
import pytest

from conftest import FIXTURES, need
from tracekit.adapters.base import Accounting, Adapter, TableBuilder
from tracekit.adapters.fit import REQUIRED, fit, fits, with_raw_args
from tracekit.adapters.detect import adapter_for
from tracekit.store import writing


@pytest.mark.parametrize("values, t, want, bad", [
    ([1, None, 2.0], pa.int64(), [1, None, 2], []),
    ([1, 1.5, True, "12", 2**63, -2**63], pa.int64(), [1, None, None, None, None, -2**63], [1, 2, 3, 4]),
    ([2**31 - 1, 2**31, -2**31 - 1], pa.int32(), [2**31 - 1, None, None], [1, 2]),
    ([float("nan"), float("inf")], pa.int64(), [None, None], [0, 1]),
    ([1, 0.5, 2**53, 2**53 + 1, False], pa.float64(), [1.0, 0.5, 2.0**53, None, None], [3, 4]),
    (["a", None, b"A\xffB", 7], pa.string(), ["a", None, "A\ufffdB", "7"], [2, 3]),
    ([True, 1], pa.bool_(), [True, None], [1]),
])
def test_fit_lists(values, t, want, bad):
    arr, got_bad = fit(values, t)
    assert arr.type == t and arr.to_pylist() == want and got_bad == bad
    assert [fits(v, t) for v in values] == [i not in bad for i in range(len(values))]


def test_fit_arrow_arrays():
    a = pa.array([1, 2**40, None, -2**31], pa.int64())
    arr, bad = fit(a, pa.int32())
    assert arr.to_pylist() == [1, None, None, -2**31] and bad == [1]
    assert fit(a, pa.int64())[0] is a  # same type: untouched
    arr, bad = fit(pa.chunked_array([[1, 2], [3]]), pa.int32())
    assert arr.to_pylist() == [1, 2, 3] and bad == []
    arr, bad = fit(pa.array([5, None]), pa.string())  # numbers in a text column: their text, counted
    assert arr.to_pylist() == ["5", None] and bad == [0]
    assert fit(pa.array([True, None]), pa.int64())[1] == [0]  # a bool is no number
    assert fit(pa.array([1.0, 2.5]), pa.int64())[0].to_pylist() == [1, None]
    assert fit(pa.array([2**53 + 1]), pa.float64())[1] == [0]  # no double holds it exactly


def test_with_raw_args():
    out = with_raw_args(('{"a":1}', None, "[1]"), {0: {"_raw_x": b"\x01"}, 1: {"_raw_y": 2**64 + 1},
                                                  2: {"_raw_z": float("nan")}})
    assert [json.loads(t) for t in out] == [{"a": 1, "_raw_x": "hex:01"}, {"_raw_y": str(2**64 + 1)},
                                           {"args": [1], "_raw_z": "nan"}]


def test_table_builder_applies_the_rule():
    acc = Accounting()
    b = TableBuilder("kernels", 3, acc)
    b.add(start_ns=10, end_ns=20, dur_ns=10, device_id=2**40, name="k", args='{"a":1}')  # NULL, kept
    b.add(start_ns=2**70, end_ns=20, dur_ns=10, name="gone")  # required: skipped
    b.add(start_ns=11, end_ns=12, dur_ns=1, name=5)  # text column: its text, kept
    rows = pa.Table.from_batches([b.flush()]).to_pylist()
    assert [(r["source_id"], r["device_id"], r["name"], json.loads(r["args"])) for r in rows] == [
        (3, None, "k", {"a": 1, "_raw_device_id": 2**40}), (3, None, "5", {"_raw_name": 5})]
    assert acc.converted["kernels"] == 2
    assert dict(acc.skipped) == {"kernels: value of start_ns does not fit the column type": 1}
    assert dict(acc.repairs) == {
        "kernels.device_id: values that do not fit an int32 read as NULL, the raw value kept in "
        "args._raw_device_id": 1,
        "kernels.name: values that are not text written as their text, the raw value kept in "
        "args._raw_name": 1}
    # column-wise, a table without args: counted, not kept; its required value: skipped
    c = TableBuilder("counters", 1, acc)
    c.add_columns(3, {"ts_ns": pa.array([1, 2, 3]), "value": [1.0, "x", 2.0], "device_id": [0, 0, 2**40]})
    assert [(r["ts_ns"], r["device_id"]) for r in pa.Table.from_batches(c.take()).to_pylist()] == [(1, 0), (3, None)]
    assert acc.skipped["counters: value of value does not fit the column type"] == 1
    assert acc.repairs["counters.device_id: values that do not fit an int32 read as NULL"] == 1
    assert set(REQUIRED["counters"]) == {"ts_ns", "value"}


def test_adapter_source_reports_the_repairs():
    ad = Adapter()
    ad.source = {"host": "h", "metadata": {"tracekit_repairs": {"own": 2}, "x": 1}}
    assert ad.source["metadata"]["tracekit_repairs"] == {"own": 2}
    ad.accounting.repair("own", 1)
    ad.accounting.repair("other", 3)
    assert ad.source["metadata"] == {"tracekit_repairs": {"own": 3, "other": 3}, "x": 1}
    assert ad.source["host"] == "h"


def _read(path):
    ad = adapter_for(path)
    out: dict = {}
    for t, b in ad.read(path, 1):
        out.setdefault(t, []).append(b)
    return ad, {t: pa.Table.from_batches(bs).to_pylist() for t, bs in out.items()}


def test_nsys_cells_that_do_not_fit(tmp_path):
    p = tmp_path / "m.sqlite"
    shutil.copyfile(need(FIXTURES / "nsys" / "matmul.sqlite"), p)
    c = sqlite3.connect(p)
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 'abc', gridZ = 777 WHERE rowid = 1")
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1099511627776, gridZ = 778 WHERE rowid = 2")
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 1.5, gridZ = 779 WHERE rowid = 3")
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 99999999, gridZ = 780 WHERE rowid = 4")
    c.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET returnValue = 2.5, correlationId = -7 WHERE rowid = 5")
    c.execute("UPDATE NVTX_EVENTS SET text = X'41FF42', textId = NULL WHERE rowid = "
              "(SELECT min(rowid) FROM NVTX_EVENTS WHERE eventType = 59)")
    n_kernels = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    c.commit()
    c.close()
    ad, t = _read(p)
    k = {r["grid_z"]: r for r in t["kernels"] if r["grid_z"] in (777, 778, 779, 780)}
    assert k[777]["device_id"] is None and json.loads(k[777]["args"])["_raw_deviceId"] == "abc"
    assert k[778]["device_id"] is None and json.loads(k[778]["args"])["_raw_device_id"] == 2**40
    assert 779 not in k and len(t["kernels"]) == n_kernels - 1
    assert json.loads(k[780]["args"])["_raw_demangledName"] == 99999999  # a name id StringIds lacks
    assert ad.accounting.skipped["CUPTI_ACTIVITY_KIND_KERNEL: row with a start that is not an integer"] == 1
    api = [r for r in t["api_calls"] if r["correlation_id"] == -7]
    assert len(api) == 1 and api[0]["return_value"] is None and json.loads(api[0]["args"]) == {"_raw_returnValue": 2.5}
    ev = [r for r in t["events"] if r["args"] and "_raw_text" in r["args"]]
    assert [(e["name"], json.loads(e["args"])["_raw_text"]) for e in ev] == [("A\ufffdB", "hex:41FF42")]
    rep = ad.source["metadata"]["tracekit_repairs"]
    assert rep == {
        "CUPTI_ACTIVITY_KIND_KERNEL.deviceId: values that do not fit an int64 read as NULL, the raw "
        "value kept in args._raw_deviceId": 1,
        "kernels.device_id: values that do not fit an int32 read as NULL, the raw value kept in "
        "args._raw_device_id": 1,
        "CUPTI_ACTIVITY_KIND_RUNTIME.returnValue: values that do not fit an int64 read as NULL, the "
        "raw value kept in args._raw_returnValue": 1,
        "NVTX_EVENTS.text: values that are not text written as their text, the raw value kept in "
        "args._raw_text": 1,
        "CUPTI_ACTIVITY_KIND_KERNEL.demangledName: ids not found in StringIds (name left NULL)": 1}
    with writing(tmp_path / "s.duckdb", replace=True) as st:  # the convert summary names them too
        line = st.convert(p).one_line()
    assert "; repaired 5 (" in line and "1 NVTX_EVENTS.text: values that are not text" in line


def test_ncu_identity_beyond_its_column_keeps_the_text(tmp_path):
    rows = list(csv.reader(io.StringIO(need(FIXTURES / "ncu" / "mm_raw.csv").read_text())))
    header = rows[0]
    first = next(i for i, r in enumerate(rows) if r and r[0].isdigit())
    rows[first][header.index("Device")] = "5000000000"  # beyond devices / ncu_kernels' int32
    rows[first][header.index("Grid Size")] = "(1, 1, 9999999999)"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    p = tmp_path / "c.csv"
    p.write_text(buf.getvalue())
    ad, t = _read(p)
    rid = int(rows[first][0])
    k = next(r for r in t["ncu_kernels"] if r["id"] == rid)
    # the columns fall back to the result's launch__device_id / launch__grid_dim_* metrics, as
    # for a cell that does not parse: the values of the unchanged capture
    k0 = next(r for r in _read(need(FIXTURES / "ncu" / "mm_raw.csv"))[1]["ncu_kernels"] if r["id"] == rid)
    assert [k[c] for c in ("device_id", "grid_x", "grid_y", "grid_z")] == \
        [k0[c] for c in ("device_id", "grid_x", "grid_y", "grid_z")] != [5000000000, 1, 1, 9999999999]
    kept = {r["name"]: r["raw_value"] for r in t["ncu_metrics"] if r["id"] == rid and r["value"] is None
            and r["name"] in ("Device", "Grid Size")}
    assert kept == {"Device": "5000000000", "Grid Size": "(1, 1, 9999999999)"}
    assert len(t["ncu_kernels"]) == len({int(r[0]) for r in rows if r and r[0].isdigit()})
