"""The Kineto reader's compiled scanner (tracekit/_native.c) against its pure-Python path.

The scanner has no rules of its own: for every chunk it accepts, the tables must equal the Python
reader's, and every chunk with a shape it does not know must go the Python way.  Checked on every
real trace, and on synthetic events for the shapes real captures do not have (escapes, odd
numbers, wrong types: each is said so where it is made).
"""

from __future__ import annotations

import gzip
import json
import os
import random

import pyarrow as pa
import pytest

import tracekit.adapters.kineto as K
from conftest import FIXTURES, realworld, slow_if_large

KINETO_FILES = realworld("kineto") + sorted((FIXTURES / "kineto").glob("*.json.gz"))


def test_scanner_is_built():
    """The install compiles it (hatch_build.py); TRACEKIT_NO_EXTENSION=1 is the only way out."""
    if os.environ.get("TRACEKIT_NO_EXTENSION") == "1":
        pytest.skip("built without the C scanner on purpose")
    assert K._native is not None, "the C module was not built: see the warning of `pip install`"


needs_scanner = pytest.mark.skipif(K._native is None, reason="C module not built")


def convert(path, scan: bool, monkeypatch):
    monkeypatch.setattr(K, "SCAN", scan)
    ad = K.KinetoAdapter()
    out: dict = {}
    for name, batch in ad.read(path, 0, None):
        out.setdefault(name, []).append(batch)
    tables = {k: pa.Table.from_batches(v).combine_chunks() for k, v in out.items()}
    return tables, ad


def assert_same(path, monkeypatch):
    """Both ways give the same tables (row for row), accounting and source; returns the
    scanner's (chunks scanned, chunks that went the Python way)."""
    a, ad_a = convert(path, True, monkeypatch)
    b, ad_b = convert(path, False, monkeypatch)
    assert a.keys() == b.keys()
    for name in a:
        for col in a[name].column_names:
            assert a[name][col].equals(b[name][col]), (path, name, col)
    assert ad_a.accounting.converted == ad_b.accounting.converted
    assert ad_a.accounting.skipped == ad_b.accounting.skipped
    assert ad_a.accounting.examples == ad_b.accounting.examples
    assert ad_a.source == ad_b.source
    assert ad_b.scan_counts == [0, 0]
    return ad_a.scan_counts, a


@needs_scanner
@pytest.mark.parametrize("path", slow_if_large(KINETO_FILES), ids=lambda p: p.name)
def test_real_traces_same_both_ways(path, monkeypatch):
    (scanned, declined), tables = assert_same(path, monkeypatch)
    n_events = sum(t.num_rows for k, t in tables.items() if k in ("events", "kernels", "api_calls"))
    if n_events:
        assert scanned >= 1, "the scanner read no chunk of a real trace"


@needs_scanner
def test_bundled_decode_trace_is_read_by_the_scanner(monkeypatch):
    """The bundled H200 decode capture: every chunk scanned, and the figures of its capture."""
    (scanned, declined), t = assert_same(FIXTURES / "kineto" / "decode_b1.json.gz", monkeypatch)
    assert scanned >= 1 and declined == 0
    assert t["kernels"].num_rows == 3159
    assert t["api_calls"].num_rows == 3366


def write_trace(tmp_path, events, name="t.json"):
    """Events as torch.profiler lays them out: one event per line group, '},' + newline between."""
    body = ",\n".join("  " + (e if isinstance(e, str) else json.dumps(e, ensure_ascii=False))
                      for e in events)
    p = tmp_path / name
    p.write_text('{"schemaVersion": 1, "traceEvents": [\n' + body + "\n]}", encoding="utf-8")
    return p


def kernel(i, **kw):
    e = {"ph": "X", "cat": "kernel", "name": f"void k{i}<float>(int)", "pid": 0, "tid": 7,
         "ts": 1000.5 + i, "dur": 2.25,
         "args": {"device": 0, "context": 1, "stream": 7, "correlation": 100 + i,
                  "External id": 10 + i, "registers per thread": 32, "shared memory": 0,
                  "grid": [4, 1, 1], "block": [128, 1, 1]}}
    e.update(kw)
    return e


# Synthetic: the odd but valid shapes the scanner must read exactly like the Python path.
ACCEPTED = [
    kernel(1, name='quote " back \\ slash / nl \n tab \t'),
    kernel(2, name="caf\u00e9 \u6f22 \U0001F600"),
    '{"ph": "X", "cat": "kernel", "name": "esc \\u00e9 \\ud83d\\ude00 \\/", "pid": 0, "tid": 7, '
    '"ts": 5, "dur": 1}',
    kernel(3, ts=-12.5, dur=0),
    kernel(4, ts=7, dur=0.001),
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": -0, "dur": 1.1}',
    kernel(5, args={}),
    kernel(6, args=None),
    kernel(7, args={"grid": [1, 2], "block": [], "stream": 4294967295, "device": None}),
    kernel(8, args={"stream": -1, "External id": None, "correlation": 9223372036854775807}),
    {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 2, "ts": 3,
     "dur": 1, "args": {"correlation": 5, "external id": 6}},
    {"ph": "X", "cat": "cuda_runtime", "name": None, "pid": 1, "tid": 2, "ts": 3, "dur": 1},
    {"ph": "X", "cat": "Kernel", "name": "Upper-case cat", "pid": 1, "tid": 2, "ts": 4, "dur": 1},
    {"ph": "X", "name": "no cat", "pid": 1, "tid": 2, "ts": 4, "dur": 1},
    {"ph": "X", "cat": "", "name": "empty cat", "pid": 1, "tid": 2, "ts": 4, "dur": 1},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ann", "pid": 0, "tid": 7, "ts": 4,
     "dur": 3, "args": {"External id": 3}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
     "tid": 7, "ts": 9, "dur": 1, "args": {"bytes": 64, "device": 0, "stream": 7}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 9, "dur": 1,
     "args": {"cuda_sync_kind": "Stream Sync", "stream": 7}},
    {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 2, "ts": 8},
    {"ph": "n", "name": "async", "pid": 1, "tid": 2, "ts": 8, "id": 3},
    {"ph": "s", "cat": "ac2g", "id": 41, "pid": 1, "tid": 2, "ts": 3, "name": "ac2g"},
    {"ph": "f", "cat": "ac2g", "id": 41, "pid": 0, "tid": 7, "ts": 5, "bp": "e", "name": "ac2g"},
    {"ph": "f", "cat": "ac2g", "id": 42, "pid": 0, "tid": 7, "ts": 5, "bp": "e"},
    {"ph": "C", "name": "mem", "pid": 1, "ts": 6, "args": {"bytes": 12, "label": "x"}},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    # torch.profiler's own spans have text pids and tids: those groups go from decoded text
    {"ph": "X", "cat": "Trace", "ts": 1.5, "dur": 9, "pid": "Spans", "tid": "PyTorch Profiler",
     "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
    {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "Traces", "tid": "Trace", "ts": 1.5},
    {"ph": "X", "cat": "cpu_op", "name": "text tid", "pid": 1, "tid": "0x10", "ts": 2, "dur": 1},
    {"ph": "s", "cat": "ac2g", "id": 43, "pid": "1", "tid": 2, "ts": 3},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "main",
     "ts": 3, "dur": 1, "args": {"correlation": 43}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "ts": "anything", "args": {"name": "main"}},
    '{\n    "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,\n'
    '    "ts": 1.5, "dur": 2,\n    "args": {\n      "External id": 8, "Input Dims": [[2, 3], []],'
    ' "x": {"y": [true, false, null, 1e5, -0.5]}\n    }\n  }',
]

# Synthetic: shapes the scanner must leave to the Python path (it returns None for the chunk).
DECLINED = {
    "sub-ns ts": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.00005, "dur": 1},
    "exponent ts": '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1e3, "dur": 1}',
    "text ts": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": "1", "dur": 1},
    "no ts": {"ph": "i", "name": "a", "pid": 1, "tid": 1},
    "no dur": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1},
    "negative dur": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": -1},
    "huge ts": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 2**62 // 1000 + 1, "dur": 1},
    "begin/end": {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1},
    "unknown phase": {"ph": "P", "name": "a", "pid": 1, "tid": 1, "ts": 1},
    "unknown key": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "sf": 3},
    "text correlation": kernel(1, args={"correlation": "0x10"}),
    "float stream": kernel(1, args={"stream": 7.0}),
    "bool device": kernel(1, args={"device": True}),
    "grid of floats": kernel(1, args={"grid": [1.5, 1, 1]}),
    "id beyond int64": {"ph": "s", "cat": "ac2g", "id": 2**63, "pid": 1, "tid": 1, "ts": 1},
    "name not text": {"ph": "X", "cat": "cpu_op", "name": 5, "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    "args not an object": {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": [1]},
    "repeated key": '{"ph": "X", "cat": "cpu_op", "name": "a", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": 1}',
    "escaped key": '{"ph": "X", "c\\u0061t": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}',
}


@needs_scanner
def test_odd_valid_shapes_same_both_ways(tmp_path, monkeypatch):
    p = write_trace(tmp_path, ACCEPTED)
    (scanned, declined), t = assert_same(p, monkeypatch)
    assert scanned >= 1 and declined == 0
    names = t["kernels"]["name"].to_pylist()
    assert 'quote " back \\ slash / nl \n tab \t' in names
    assert "esc \u00e9 \U0001F600 /" in names
    assert "caf\u00e9 \u6f22 \U0001F600" in names
    k = t["kernels"].to_pylist()
    by_name = {r["name"]: r for r in k}
    assert by_name["void k3<float>(int)"]["start_ns"] == -12_500
    assert by_name["void k4<float>(int)"]["dur_ns"] == 1
    assert by_name["void k7<float>(int)"]["stream_id"] is None       # 4294967295: no stream
    assert by_name["void k7<float>(int)"]["device_id"] == 0          # null device: the pid
    assert by_name["void k7<float>(int)"]["grid_x"] is None          # a grid of 2 values
    assert by_name["void k8<float>(int)"]["correlation_id"] == 2**63 - 1
    assert by_name["void k5<float>(int)"]["args"] is None            # {}
    api = {r["name"]: r["api"] for r in t["api_calls"].to_pylist()}
    assert api["hipLaunchKernel"] == "hip_runtime" and api[None] == "cuda_runtime"


@needs_scanner
@pytest.mark.parametrize("case", sorted(DECLINED))
def test_unusual_shapes_go_the_python_way(case, tmp_path, monkeypatch):
    events = [kernel(0), DECLINED[case], kernel(2)]
    p = write_trace(tmp_path, events)
    text = p.read_bytes()
    body = text[text.index(b"["):text.rindex(b"]") + 1]
    assert K._native.kineto_scan(body) is None
    (scanned, declined), _ = assert_same(p, monkeypatch)
    assert declined >= 1


@needs_scanner
def test_invalid_utf8_goes_the_python_way(tmp_path, monkeypatch):
    p = write_trace(tmp_path, [kernel(0), kernel(1)])
    p.write_bytes(p.read_bytes().replace(b"void k1", b"void \xff\xfek1"))
    (scanned, declined), t = assert_same(p, monkeypatch)
    assert declined >= 1
    assert "void \ufffd\ufffdk1<float>(int)" in t["kernels"]["name"].to_pylist()


@needs_scanner
def test_lone_surrogate_is_repaired_the_same_both_ways(tmp_path, monkeypatch):
    """Synthetic: a lone surrogate escape (valid JSON, no UTF-8 string can hold it): the scanner
    declines, and both ways the event is kept with U+FFFD in its place, counted as a repair."""
    p = write_trace(tmp_path, [kernel(0), '{"ph": "X", "cat": "cpu_op", "name": "a\\ud800b", '
                                          '"pid": 1, "tid": 1, "ts": 1, "dur": 1}'])
    (scanned, declined), t = assert_same(p, monkeypatch)
    assert declined >= 1
    assert "a\ufffdb" in t["events"]["name"].to_pylist()


@needs_scanner
def test_cut_inside_an_event_is_not_json():
    """A chunk cut inside an event (the streaming reader relies on this failing)."""
    good = b'[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": {"y": 1}}}]'
    assert K._native.kineto_scan(good) is not None
    cut = good[:good.index(b'{"y"') + 9] + b"]"
    assert K._native.kineto_scan(cut) is None
    for junk in (b"", b"[", b"[,]", b'[{"ph": "X"},]', b"[] x", b'[{"ph": "X", "ts": 01, "dur": 1}]'):
        assert K._native.kineto_scan(junk) is None


def flow(rng):
    """Synthetic flow ends that meet every branch of the flow rule: a second start before the
    end, an end before its start (in file order, before or after it in time), steps, no id,
    no or upper-case cat, ids shared by two kinds."""
    e = {"ph": rng.choice("ssfft"), "id": rng.choice([1, 2, 3, None]), "pid": rng.choice([0, 1, None]),
         "tid": rng.choice([2, 7]), "ts": rng.choice([1, 3, 5, 5.5, 9])}
    cat = rng.choice(["ac2g", "ac2g", "AC2G", "fwdbwd", None, ""])
    if cat is not None:
        e["cat"] = cat
    if e["ph"] == "f" and rng.random() < 0.5:
        e["bp"] = "e"
    return e


@needs_scanner
def test_random_traces_same_both_ways(tmp_path, monkeypatch):
    """Synthetic: 80 traces of events drawn from the shapes above and from `flow`, in random
    order and chunked by the streaming reader at random sizes (so scanned and Python chunks mix
    in one trace, and flows cross chunks)."""
    rng = random.Random(8)
    pool = ACCEPTED + list(DECLINED.values())
    for i in range(80):
        events = [rng.choice(pool) if rng.random() < 0.5 else flow(rng) for _ in range(rng.randint(1, 40))]
        monkeypatch.setattr(K, "BLOCK_BYTES", rng.choice([64, 256, 1024, 1 << 20]))
        p = write_trace(tmp_path, events, f"r{i}.json")
        if rng.random() < 0.5:
            gz = p.with_suffix(".json.gz")
            gz.write_bytes(gzip.compress(p.read_bytes()))
            p = gz
        assert_same(p, monkeypatch)


@needs_scanner
def test_mutated_chunks_same_both_ways(tmp_path, monkeypatch):
    """Synthetic: the bundled capture's first events with random bytes changed, cut or added
    (fixed seed).  The scanner never crashes, declines what it cannot take, and every mutated
    chunk it accepts converts the same both ways (a longer run of this: 16,540 of 158,996
    accepted, all the same)."""
    raw = gzip.decompress((FIXTURES / "kineto" / "decode_b1.json.gz").read_bytes())
    start = raw.index(b"[", raw.index(b'"traceEvents"'))
    body = raw[start:start + 12_000]
    body = body[:body.rfind(b"},\n") + 1] + b"]"
    rng = random.Random(2)
    alphabet = b'{}[]",:\\0123456789.-eE nulltruefalse\x00\xff\xc3\xa9ux'
    compared = 0
    for _ in range(3000):
        b = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(b))
            op = rng.random()
            if op < 0.5:
                b[k] = rng.choice(alphabet)
            elif op < 0.75:
                del b[k:k + rng.randint(1, 20)]
            else:
                b[k:k] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
        if K._native.kineto_scan(bytes(b)) is None or compared >= 150:
            continue
        p = tmp_path / "m.json"
        p.write_bytes(b'{"schemaVersion": 1, "traceEvents": ' + bytes(b) + b"}")
        assert_same(p, monkeypatch)
        compared += 1
    assert compared == 150


@needs_scanner
def test_take_text_is_arrows_take():
    """`_native.take_strings` / `take_spans` (the reader's take of its text columns) against
    Arrow's take, on the scanner's columns of the bundled capture's last 2 MB of events: name, cat
    and args (the args as byte ranges of the chunk, NULL where absent: flow events have none), at
    random row numbers (repeated, out of order, uint64 and int64, from an offset into the index
    array); a row number out of range is an error, not a read past the buffer."""
    from tracekit.adapters.kineto.scanned import _Spans, _take_text

    raw = gzip.decompress((FIXTURES / "kineto" / "decode_b1.json.gz").read_bytes())
    end = raw.rindex(b"]")
    body = raw[end - 2_000_000:end]
    body = b"[" + body[body.index(b"},\n") + 3:body.rindex(b"}") + 1] + b"]"
    n, _, i64, valid, strs = K._native.kineto_scan(body)
    i64_names, str_names = K._native.kineto_names()
    cols = {name: pa.Array.from_buffers(pa.string(), n, [v and pa.py_buffer(v), pa.py_buffer(off),
                                                        pa.py_buffer(data)])
            for name, (off, data, v) in zip(str_names, strs)}
    ints = {name: pa.Array.from_buffers(pa.int64(), n, [v and pa.py_buffer(v), pa.py_buffer(d)])
            for name, d, v in zip(i64_names, i64, valid)}
    a0, a1 = ints["args_start"], ints["args_end"]
    # the args as the text of each range: what the spans must give
    cols["args"] = pa.array([None if s is None else body[s:e].decode() for s, e in zip(a0.to_pylist(), a1.to_pylist())],
                            pa.string())
    spans = _Spans(memoryview(body), a0, a1)
    assert n > 4000 and 0 < cols["args"].null_count < n
    assert all(t.startswith("{") and t.endswith("}") for t in cols["args"].drop_null().to_pylist())
    rng = random.Random(5)
    for m in (0, 1, 7, 4096):
        rows = [rng.randrange(n) for _ in range(m + 3)]
        for typ in (pa.int64(), pa.uint64()):
            idx = pa.array(rows, typ).slice(3)
            for name, col in cols.items():
                got = _take_text(spans if name == "args" else col, idx)
                want = col.take(idx)
                assert got.equals(want) and got.type == pa.string(), (name, m, typ)
                assert got.to_pylist() == [col[i].as_py() for i in rows[3:]]
    for col in (cols["name"], spans):
        with pytest.raises(ValueError):
            _take_text(col, pa.array([0, n], pa.int64()))
