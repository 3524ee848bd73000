"""events.depth / parent_id: both derivations (the set-based SQL, and the compiled module's
stack pass) equal the event-by-event rule, `_nest_track`."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import tracekit.nesting as nesting
from conftest import FIXTURES, realworld
from tracekit import schema
from tracekit.native import native
from tracekit.nesting import _derive_nesting, _nest_track
from tracekit.store import Store, _insert, writing

WAYS = ["sql"] + (["native"] if native is not None else [])


@pytest.fixture(params=WAYS)
def way(request, monkeypatch):
    """Each test runs with each derivation (the native one writing back in slices of 97 rows)."""
    monkeypatch.setattr(nesting, "NATIVE_NESTING", request.param == "native")
    monkeypatch.setattr(nesting, "NEST_UPDATE_ROWS", 97)
    return request.param


def _events(rng: random.Random, n_tracks: int, per_track: int, laminar: bool) -> list[dict]:
    rows, eid = [], 0
    for t in range(n_tracks):
        pid, tid = rng.choice([1, 2, None]), t
        spans = []
        if laminar:  # mostly nested ranges (zero-length ones, ties, a few partial overlaps)
            def fill(lo, hi, depth):  # called in this iteration only
                nonlocal spans
                x = lo
                while x < hi and len(spans) < per_track:  # noqa: B023
                    s = rng.randint(x, hi)
                    e = rng.choice([s, rng.randint(s, hi), hi])
                    spans.append((s, e))  # noqa: B023
                    if depth < 4 and e - s > 2 and rng.random() < 0.6:
                        fill(s, e, depth + 1)
                    x = e if rng.random() < 0.8 else s
            fill(0, 10_000, 0)
        else:  # anything: partial overlaps, duplicates, touching ends
            for _ in range(per_track):
                s = rng.randint(0, 200)
                spans.append((s, s + rng.choice([0, 0, 1, 5, rng.randint(0, 100)])))
        for s, e in spans:
            rows.append({"source_id": 0, "event_id": eid, "pid": pid, "tid": tid, "start_ns": s,
                         "end_ns": e, "dur_ns": e - s, "name": "x", "category": "cpu_op"})
            eid += 1
    rng.shuffle(rows)
    return rows


def _nest_both_ways(path, rows: list[dict]) -> tuple[dict, dict]:
    """depth / parent_id per event_id: (from the SQL derivation, from the stack rule)."""
    with Store(path) as st:
        _insert(st.con, "events", pa.RecordBatch.from_pylist(rows, schema=schema.table("events").arrow))
        _derive_nesting(st.con, 0)
        got = {r[0]: (r[1], r[2]) for r in st.rows("select event_id, depth, parent_id from events")}
        tbl = st.con.sql("""select event_id, start_ns, end_ns,
                                   dense_rank() over (order by pid, tid, device_id, stream_id) as track
                            from events order by track, start_ns, end_ns desc, event_id""").to_arrow_table()
    want = _nest_track(*(tbl.column(c).to_pylist() for c in ("event_id", "start_ns", "end_ns", "track")))
    want = dict(zip(want.column("event_id").to_pylist(),
                    zip(want.column("depth").to_pylist(), want.column("parent_id").to_pylist())))
    return got, want


@pytest.mark.parametrize("seed", range(12))
def test_nesting_equals_stack_rule(tmp_path, seed, way):
    rng = random.Random(seed)
    rows = _events(rng, 6, 300, laminar=True) + [
        dict(r, event_id=r["event_id"] + 10**6, tid=r["tid"] + 100)
        for r in _events(rng, 3, 150, laminar=seed % 2 == 0)]
    got, want = _nest_both_ways(tmp_path / "n.duckdb", rows)
    assert got == want
    assert max(d for d, _ in got.values()) >= 3


def test_deep_nesting_uses_the_general_lookup(tmp_path, way):
    """Synthetic edge case (no real capture nests 4,000 deep): past the depth that the packed
    one-key parent lookup allows, the general ASOF join gives the same depth / parent_id."""
    deep = 4_100
    rows = [{"source_id": 0, "event_id": i, "pid": 1, "tid": 1, "start_ns": i, "end_ns": 10 * deep - i,
             "dur_ns": 10 * deep - 2 * i, "name": "x", "category": "cpu_op"} for i in range(deep)]
    rows += [dict(r, event_id=r["event_id"] + 10**6, tid=r["tid"] + 100)
             for r in _events(random.Random(7), 2, 200, True)]
    got, want = _nest_both_ways(tmp_path / "n.duckdb", rows)
    assert got == want
    assert got[deep - 1] == (deep - 1, deep - 2)


def _stored_nesting(path, trace, native_nesting: bool, monkeypatch) -> dict:
    monkeypatch.setattr(nesting, "NATIVE_NESTING", native_nesting)
    with writing(path, replace=True) as st:
        st.convert(trace)
    with Store(path, read_only=True) as st:
        return {r[0]: (r[1], r[2]) for r in st.rows("select event_id, depth, parent_id from events")}


@pytest.mark.skipif(native is None, reason="C module not built")
@pytest.mark.parametrize("trace", [FIXTURES / "kineto" / "decode_b1.json.gz", FIXTURES / "nsys" / "decode_b1_with_torch.sqlite"]
                         + [p for p in realworld("kineto") if "diff_test" in p.name or "nccl" in p.name],
                         ids=lambda p: p.name)
def test_real_traces_nest_the_same_both_ways(trace, tmp_path, monkeypatch):
    sql = _stored_nesting(tmp_path / "a.duckdb", trace, False, monkeypatch)
    nat = _stored_nesting(tmp_path / "b.duckdb", trace, True, monkeypatch)
    assert nat == sql
    assert len(nat) >= 20 and max(d for d, _ in nat.values()) >= 1
