"""The Kineto mapping (tracekit/adapters/kineto/mapping.py) is the one definition of raw field ->
column: its three evaluators (row by row, column-wise on decoded events, on the C scanner's
columns) give the same rows, and the C scanner reads what the table says it reads."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tracekit.adapters.kineto as K
from conftest import FIXTURES, realworld
from tracekit import nesting, schema
from tracekit.adapters.kineto import columnar, gpu_pid, mapping, scanned

needs_scanner = pytest.mark.skipif(K._native is None, reason="C module not built")


def test_columns_are_schema_columns():
    for table, cols in mapping.COLUMNS.items():
        assert set(cols) <= set(schema.BY_NAME[table].column_names), table
        for field, col in mapping.KEEP_RAW[table].items():
            assert col in cols, (table, field)
        for col in cols.values():
            for src in col.src:
                if src.startswith("args."):
                    assert src.split(".")[1] in mapping.ARG, src
    assert {t for t, _ in mapping.CAT.values()} <= set(mapping.COLUMNS)


@needs_scanner
def test_scanner_reads_the_mapped_args_fields():
    """Each args field the mapping says the scanner reads lands in the scanner column it names
    (synthetic events, one field each); and the scanner has no args column the mapping lacks."""
    i64, strs = K._native.kineto_names()
    event_level = {"ts", "dur", "pid", "tid", "id", "span_start", "span_end", "text_pid_tid", "args_start",
                   "args_end"}
    assert set(i64) - event_level == {c for a in mapping.ARGS for c in a.scan}
    for a in mapping.ARGS:
        if not a.scan:
            continue
        value = [5, 6, 7] if a.type == "int3" else 123457
        ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1,
              "args": {a.key: value}}
        res = K._native.kineto_scan(json.dumps([ev]).encode())
        assert res is not None, a.key
        n, _, cols, _, _ = res
        got = [pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols[i64.index(c)])])[0].as_py()
               for c in a.scan]
        assert got == (value if a.type == "int3" else [value]), a.key


@needs_scanner
def test_column_wise_tables_are_scanned():
    """Every source of the tables the scanner converts column-wise is a scanner column: a new
    column read from an args field the C scanner does not know fails here (teach
    tracekit/_native.c the field, or accept that the table goes the Python way)."""
    assert scanned.SCANNED == {"kernels": True, "api_calls": True, "events": True}


@needs_scanner
def test_scanner_takes_the_event_fields_only():
    """The scanner accepts each field of the decoded event struct, and declines any other key
    (that event then goes the Python way, which keeps the field in args)."""
    base = {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": 1, "dur": 1}
    values = {"id": 3, "args": {"a": 1}, "s": "t", "bp": "e"}
    for f in K.decode.Event.__struct_fields__:
        ev = dict(base, **({f: values[f]} if f in values else {}))
        assert K._native.kineto_scan(json.dumps([ev]).encode()) is not None, f
    assert K._native.kineto_scan(json.dumps([dict(base, other=1)]).encode()) is None


def tables(path, monkeypatch, row_by_row: bool):
    monkeypatch.setattr(K, "SCAN", False)
    # what the reader derives chunk by chunk and the store completes (events' nesting, GPU rows'
    # pid: test_nesting.py) depends on where the batches end, which row by row differs
    monkeypatch.setattr(nesting, "STREAM_NESTING", False)
    monkeypatch.setattr(gpu_pid.LaunchPids, "fill", lambda self, batch: batch)
    if row_by_row:  # every chunk one event at a time
        monkeypatch.setattr(columnar.ColumnarReader, "_columnar", lambda self, b, ch: False)
    ad = K.KinetoAdapter()
    out: dict = {}
    for name, batch in ad.read(path, 0, None):
        out.setdefault(name, []).append(batch)
    monkeypatch.undo()
    return {k: pa.Table.from_batches(v) for k, v in out.items()}, ad


def sorted_rows(t: pa.Table) -> pa.Table:
    return t.take(pc.sort_indices(t, [(c, "ascending") for c in t.column_names
                                      if not pa.types.is_nested(t.schema.field(c).type)]))


@pytest.mark.parametrize("path", [FIXTURES / "kineto" / "ddp_rank0.json.gz",
                                  FIXTURES / "kineto" / "graphs.json.gz"]
                         + [p for p in realworld("kineto") if "alexnet" in p.name or "mi250" in p.name
                            or "h100" in p.name],
                         ids=lambda p: p.name)
def test_row_by_row_equals_column_wise(path, monkeypatch):
    """The row evaluator and the column-wise one give the same rows on real traces (kernels,
    memops, syncs, API calls, annotations on GPU tracks, flows, memory records)."""
    a, ad_a = tables(path, monkeypatch, False)
    b, ad_b = tables(path, monkeypatch, True)
    assert a.keys() == b.keys()
    for name in a:
        assert sorted_rows(a[name]).equals(sorted_rows(b[name])), name
    assert ad_a.accounting.converted == ad_b.accounting.converted
    assert ad_a.accounting.skipped == ad_b.accounting.skipped
    assert ad_a.source == ad_b.source
    assert a["kernels"].num_rows > 0 and a["flows"].num_rows > 0


def test_row_by_row_equals_column_wise_on_odd_shapes(tmp_path, monkeypatch):
    """Synthetic (the odd but valid shapes of tests/adapters/test_kineto_scan.py: 'no stream' markers,
    args of other types, a kernel's pid other than its device, HIP calls, hex / text ids, GPU
    annotations): the row evaluator gives the column-wise rows."""
    from test_kineto_scan import ACCEPTED, write_trace

    p = write_trace(tmp_path, ACCEPTED + [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": "stream 9", "ts": 9, "dur": 1,
         "args": {"device": 0, "stream": 7, "grid": [1, 2, 3]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": "0x10", "tid": "main",
         "ts": 9, "dur": 1, "args": {"correlation": "0x20", "external id": 4}},
        {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 4294967295, "ts": 9,
         "dur": 1, "args": {"cuda_sync_kind": "event sync", "wait_on_cuda_event_id": 3}}])
    a, ad_a = tables(p, monkeypatch, False)
    b, ad_b = tables(p, monkeypatch, True)
    assert a.keys() == b.keys()
    for name in a:
        assert sorted_rows(a[name]).equals(sorted_rows(b[name])), name
    assert ad_a.accounting.skipped == ad_b.accounting.skipped
    k = a["kernels"]
    assert k.num_rows >= 10 and None in k["stream_id"].to_pylist()
    assert "hip_runtime" in a["api_calls"]["api"].to_pylist()
