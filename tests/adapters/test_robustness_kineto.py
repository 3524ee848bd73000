"""Kineto corruption corpus: mutations of a real capture, generated with a fixed seed.

For every variant, conversion either raises TraceError (one-line message naming the file) or
succeeds with every input event accounted for: converted into exactly one row (or one flow
endpoint), or counted in skipped_rows with a reason. Any other exception is a bug.
"""

from __future__ import annotations

import gzip
import json
import random

import pytest
from conftest import FIXTURES, need

from tracekit.adapters.base import TraceError
from tracekit.store import Store

pytestmark = pytest.mark.slow  # a corpus of damaged Kineto traces

SEED = 20261129
BASE = FIXTURES / "kineto" / "ddp_rank0.json.gz"
FIELDS = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "args", "s", "bp"]
BAD_VALUES = [None, True, -1, 0, 2**64 + 5, -(2**70), 1.5e300, "x", "", "12.5", [], [1, 2], {}, {"a": 1}]


def base_trace():
    t = json.load(gzip.open(need(BASE)))
    # a small window keeps the corpus fast: metadata + the first 150 other events
    meta = [e for e in t["traceEvents"] if e.get("ph") == "M"]
    rest = [e for e in t["traceEvents"] if e.get("ph") != "M"][:150]
    t["traceEvents"] = meta + rest
    return t


def mutate_event(rng, trace):
    t = json.loads(json.dumps(trace))
    evs = t["traceEvents"]
    i = rng.randrange(len(evs))
    op = rng.choice(["type", "missing", "extra", "duplicate", "negative", "reverse", "bigint"])
    e = evs[i]
    f = rng.choice(FIELDS)
    if op == "type":
        e[f] = rng.choice(BAD_VALUES)
    elif op == "missing":
        e.pop(f, None)
    elif op == "extra":
        e[f"extra_{rng.randrange(9)}"] = rng.choice(BAD_VALUES)
    elif op == "duplicate":
        evs.insert(i, json.loads(json.dumps(e)))
    elif op == "negative":
        e["ts"] = -abs(e.get("ts", 1) if isinstance(e.get("ts"), (int, float)) else 1)
    elif op == "reverse":
        e["dur"] = -5
    elif op == "bigint":
        e.setdefault("args", {})["correlation"] = 2**64 + rng.randrange(1000)
    return json.dumps(t).encode(), op


def byte_variants(rng, raw: bytes):
    out = []
    for _k in range(120):  # truncation at many offsets
        out.append((raw[: rng.randrange(0, len(raw))], "truncate"))
    for _k in range(120):  # byte flips
        b = bytearray(raw)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append((bytes(b), "flip"))
    for _k in range(40):  # invalid UTF-8 inside a string
        pos = raw.find(b'"name": "', rng.randrange(len(raw) // 2))
        if pos > 0:
            out.append((raw[: pos + 9] + b"\xff\xfe" + raw[pos + 9:], "utf8"))
    for tok in (b"NaN", b"Infinity", b"-Infinity", b"99999999999999999999999999"):
        pos = raw.find(b'"dur": ', rng.randrange(len(raw) // 2))
        end = raw.find(b",", pos)
        out.append((raw[: pos + 7] + tok + raw[end:], "nonfinite"))
    out += [(b"", "empty"), (b"   ", "blank"), (b"[]", "array"), (b"{}", "object"),
            (b'{"traceEvents": 5}', "wrongtype"), (b'{"traceEvents": [1, "a", null]}', "junk"),
            (b"SQLite format 3\x00garbage", "wrongformat"), (b"\x1f\x8bnotgzip", "badgzip"),
            (gzip.compress(raw)[:-50], "gziptrunc"), (b"ID,Process ID\n1,2\n", "csv")]
    return out


def corpus():
    rng = random.Random(SEED)
    t = base_trace()
    raw = json.dumps(t, indent=1).encode()
    variants = byte_variants(rng, raw)
    for _ in range(760):
        variants.append(mutate_event(rng, t))
    return variants


def accounted(st) -> int:
    """Input events the store accounts for."""
    return st.one("""select (select count(*) from events) + (select count(*) from kernels)
        + (select count(*) from memops) + (select count(*) from api_calls) + (select count(*) from syncs)
        + (select count(*) from processes) + (select count(*) from threads)
        + (select count(start_ns) + count(end_ns) from flows) + (select count(*) from counters)
        + (select coalesce(sum(count), 0) from skipped_rows)""")


def test_kineto_corruption_corpus(tmp_path):
    variants = corpus()
    assert len(variants) >= 1000
    outcomes = {"error": 0, "partial": 0, "clean": 0}
    db = tmp_path / "c.duckdb"
    with Store(db) as st:
        for k, (data, op) in enumerate(variants):
            p = tmp_path / f"v{k}.json"
            p.write_bytes(data)
            before = st.one("select count(*) from sources")
            try:
                summary = st.convert(p)
            except TraceError as e:
                line = e.one_line()
                assert "\n" not in line and str(p) in line
                assert st.one("select count(*) from sources") == before  # nothing half-written
                outcomes["error"] += 1
                continue
            try:
                n_in = len(json.loads(data.decode("utf-8", "replace"))["traceEvents"])
            except (ValueError, KeyError, TypeError):
                n_in = None  # our reader repaired what Python's json rejects
            sid = summary.source_id
            if n_in is not None:
                tables = ["events", "kernels", "memops", "api_calls", "syncs", "processes", "threads",
                          "counters"]
                rows = sum(st.one(f"select count(*) from {t} where source_id = ?", [sid]) for t in tables)
                rows += st.one("select count(start_ns) + count(end_ns) from flows where source_id = ?", [sid])
                skipped = st.one("select coalesce(sum(count), 0) from skipped_rows where source_id = ?", [sid])
                assert rows + skipped == n_in, (op, k)
            outcomes["partial" if summary.skipped else "clean"] += 1
    print(f"\nKineto corpus: {len(variants)} variants: {outcomes}")
    assert outcomes["error"] > 100 and outcomes["partial"] > 100
