"""The Python API under the CLI (tracekit/api.py, api_sql.py, api_report.py): the operations
the `tracekit` commands, `tracekit.convert` and `tracekit.profile` share, called directly."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from conftest import FIXTURES
from tracekit import api
from tracekit.adapters.base import TraceError
from tracekit.api_report import diagnose, parse_thresholds, render
from tracekit.diagnose import to_markdown, to_text
from tracekit.store import StoreError

MATMUL = FIXTURES / "kineto" / "matmul.json.gz"
RANK0 = FIXTURES / "kineto" / "ddp_rank0.json.gz"


def kernels_in(path) -> int:
    """The kernel events of a Kineto trace, counted from its JSON (independent of the adapter)."""
    trace = json.load(gzip.open(path))
    return sum(1 for e in trace["traceEvents"] if str(e.get("cat", "")).lower() == "kernel")


def test_parse_params_is_the_one_parser():
    assert api.parse_params(["bucket_ns=1000000", "latency_pct=12.5", "sequence_op=aten::mm"]) == {
        "bucket_ns": 1_000_000, "latency_pct": 12.5, "sequence_op": "aten::mm"}
    with pytest.raises(StoreError, match=r"^--param 'bucket_ns': expected NAME=VALUE$"):
        api.parse_params(["bucket_ns"])
    with pytest.raises(StoreError, match=r"^--param no_such: no view reads .* bucket_ns, "):
        api.parse_params(["no_such=1"])
    assert api.parse_pairs(["spark.a=1", " b =x=y"], "--spark-conf", "k=v") == {"spark.a": "1", "b": "x=y"}
    with pytest.raises(StoreError, match="expected KEY=VALUE, e.g. k=v"):
        api.parse_pairs(["=1"], "--spark-conf", "k=v")


def test_convert_keeps_going_and_reports_each_input(tmp_path):
    db = tmp_path / "s.duckdb"
    seen = []
    done = api.convert([MATMUL, tmp_path / "missing.json"], db, keep_going=True, on_result=seen.append)
    assert [o.path.name for o in seen] == ["matmul.json.gz", "missing.json"]
    assert seen[0].error is None and seen[1].summary is None and "missing.json" in seen[1].error
    assert done.failed == 1 and [s.source_id for s in done.summaries] == [0]
    with api.open_store(db) as st:
        assert st.con.execute("SELECT count(*) FROM kernels").fetchone()[0] == kernels_in(MATMUL) == 6
    # without keep_going the failed input raises and the store is left as it was
    before = db.read_bytes()
    with pytest.raises(TraceError, match="no such file"):
        api.convert([RANK0, tmp_path / "missing.json"], db)
    assert db.read_bytes() == before
    # with replace, one failed input keeps the old store whole, and says so
    done = api.convert([RANK0, tmp_path / "missing.json"], db, replace=True, keep_going=True)
    assert done.note == "1 of 2 inputs failed; the store was not replaced"
    assert db.read_bytes() == before


def test_expand_directories_says_why_each_file_is_skipped(tmp_path):
    shutil.copy(MATMUL, tmp_path / "b.json.gz")
    shutil.copy(RANK0, tmp_path / "a.json.gz")
    (tmp_path / "notes.json").write_text('{"config": 1}')
    (tmp_path / "sub").mkdir()
    skipped = {}
    found = api.expand_directories([tmp_path], skipped=lambda p, why: skipped.setdefault(p.name, why))
    assert [p.name for p in found] == ["a.json.gz", "b.json.gz"]
    assert skipped == {"notes.json": "JSON without 'traceEvents' or 'ph' in its first 64 KiB: not a trace",
                       "sub": "a directory (not searched: pass it as an input)"}
    with pytest.raises(StoreError, match="sub: no trace files in it"):
        api.expand_directories([tmp_path / "sub"])


def test_views_and_schema_listings():
    lines = api.view_lines()
    assert any(line.startswith("hotspots ") for line in lines)
    doc = api.view_source("hotspots")
    sql = api.view_source("hotspots", sql_only=True)
    assert doc.endswith(sql) and doc.startswith("hotspots: GPU time per kernel name") and "CREATE" in sql.upper()
    with pytest.raises(StoreError, match="no view named 'nope'"):
        api.view_source("nope")
    assert api.schema_lines("kernels")[0].startswith("kernels: ")
    with pytest.raises(StoreError, match="no table named 'nope'"):
        api.schema_lines("nope")


def test_diagnose_thresholds_and_formats(tmp_path):
    db = tmp_path / "s.duckdb"
    api.convert([MATMUL], db)
    with pytest.raises(StoreError, match="--threshold 'nope': no such threshold"):
        parse_thresholds(["nope=1"])
    d, text = diagnose(db, fmt="json")
    assert json.loads(text)["findings"] == json.loads(json.dumps(d.to_dict(), default=str))["findings"]
    text = render(d, "text", to_text, to_markdown, 5)
    assert text == to_text(d, 5) and [f.code for f in d.findings] and all(f.code in text for f in d.findings)
