"""events.depth / parent_id: the set-based derivation in SQL equals the event-by-event rule."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from tracekit import schema
from tracekit.store import Store, _derive_nesting, _insert, _nest_track


def _events(rng: random.Random, n_tracks: int, per_track: int, laminar: bool) -> list[dict]:
    rows, eid = [], 0
    for t in range(n_tracks):
        pid, tid = rng.choice([1, 2, None]), t
        spans = []
        if laminar:  # mostly nested ranges (zero-length ones, ties, a few partial overlaps)
            def fill(lo, hi, depth):
                nonlocal spans
                x = lo
                while x < hi and len(spans) < per_track:
                    s = rng.randint(x, hi)
                    e = rng.choice([s, rng.randint(s, hi), hi])
                    spans.append((s, e))
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
def test_sql_nesting_equals_stack_rule(tmp_path, seed):
    rng = random.Random(seed)
    rows = _events(rng, 6, 300, laminar=True) + [
        dict(r, event_id=r["event_id"] + 10**6, tid=r["tid"] + 100)
        for r in _events(rng, 3, 150, laminar=seed % 2 == 0)]
    got, want = _nest_both_ways(tmp_path / "n.duckdb", rows)
    assert got == want
    assert max(d for d, _ in got.values()) >= 3


def test_deep_nesting_uses_the_general_lookup(tmp_path):
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
