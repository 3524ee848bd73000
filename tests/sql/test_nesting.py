"""events.depth / parent_id: both derivations (the set-based SQL, and the compiled module's
stack pass) equal the event-by-event rule, `_nest_track`."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import tracekit.nesting as nesting
from conftest import FIXTURES, realworld, slow_if_large
from tracekit import schema
from tracekit.native import native
from tracekit.nesting import derive_nesting, _nest_track
from tracekit.store import Store, writing
from tracekit.store.db import insert

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
        insert(st.con, "events", pa.RecordBatch.from_pylist(rows, schema=schema.table("events").arrow))
        derive_nesting(st.con, 0)
        got = {r[0]: (r[1], r[2]) for r in st.rows("select event_id, depth, parent_id from events")}
        tbl = st.con.sql("""select event_id, start_ns, end_ns,
                                   dense_rank() over (order by pid, tid, device_id, stream_id) as track
                            from events order by track, start_ns, end_ns desc, event_id""").to_arrow_table()
    want = _nest_track(*(tbl.column(c).to_pylist() for c in ("event_id", "start_ns", "end_ns", "track")))
    want = dict(zip(want.column("event_id").to_pylist(),
                    zip(want.column("depth").to_pylist(), want.column("parent_id").to_pylist())))
    return got, want


# 3 random traces by default, 9 more under -m slow
@pytest.mark.parametrize("seed", [*range(3), *(pytest.param(s, marks=pytest.mark.slow) for s in range(3, 12))])
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
                         + slow_if_large([p for p in realworld("kineto") if "diff_test" in p.name or "nccl" in p.name], 2**18),
                         ids=lambda p: p.name)
def test_real_traces_nest_the_same_both_ways(trace, tmp_path, monkeypatch):
    sql = _stored_nesting(tmp_path / "a.duckdb", trace, False, monkeypatch)
    nat = _stored_nesting(tmp_path / "b.duckdb", trace, True, monkeypatch)
    assert nat == sql
    assert len(nat) >= 20 and max(d for d, _ in nat.values()) >= 1


def _stored_derived(path, trace, in_reader: bool, monkeypatch) -> tuple:
    """events (event_id, depth, parent_id) and the GPU rows with their pid, of a store converted
    with the reader's derivations (`StreamNesting`, `LaunchPids`) or with the store's alone."""
    from tracekit.adapters.kineto import gpu_pid

    with monkeypatch.context() as m:
        m.setattr(nesting, "STREAM_NESTING", in_reader)
        if not in_reader:
            m.setattr(gpu_pid.LaunchPids, "fill", lambda self, batch: batch)
        with writing(path, replace=True) as st:
            st.convert(trace)
    with Store(path, read_only=True) as st:
        return tuple(st.rows(q) for q in (
            "select event_id, depth, parent_id from events order by event_id",
            "select start_ns, stream_id, correlation_id, pid from kernels order by all",
            "select start_ns, stream_id, correlation_id, pid from memops order by all",
            "select start_ns, stream_id, correlation_id, pid from syncs order by all"))


def _read(trace):
    """What the Kineto reader yields of ``trace``: the tracks of its events of depth NULL (those
    it left to the store), how many such events, and how many GPU rows it gave a pid."""
    import pyarrow.compute as pc

    from tracekit.adapters.kineto import KinetoAdapter

    tracks, nulls, filled = set(), 0, 0
    for t, b in KinetoAdapter().read(trace, 0):
        if t == "events":
            late = b.filter(pc.is_null(b.column("depth")))
            nulls += late.num_rows
            tracks.update(zip(*(late.column(k).to_pylist() for k in nesting._TRACK)))
        elif t in schema.GPU_TABLES:
            filled += b.num_rows - b.column("pid").null_count
    return sorted(tracks, key=repr), nulls, filled


@pytest.mark.skipif(native is None, reason="C module not built")
@pytest.mark.parametrize("trace", sorted((FIXTURES / "kineto").glob("*.json.gz")) + realworld("kineto"),
                         ids=lambda p: p.name)
@pytest.mark.slow
def test_reader_derivations_equal_the_stores(trace, tmp_path, monkeypatch):
    """The Kineto reader nests the events and gives GPU rows their launching call's pid while it
    reads, chunk by chunk; the store completes what it left (tracks whose rows came out of order,
    GPU rows whose call came later or was contradicted): every real trace gives the rows that the
    store's derivation alone gives."""
    a = _stored_derived(tmp_path / "a.duckdb", trace, True, monkeypatch)
    b = _stored_derived(tmp_path / "b.duckdb", trace, False, monkeypatch)
    assert a == b


@pytest.mark.skipif(native is None, reason="C module not built")
def test_reader_nests_in_order_tracks_and_leaves_late_ones(monkeypatch):
    """decode_b1 (real): every event nested by the reader, and every one of its 3,176 kernels and
    memops given its pid (one of them only at the end of the next chunk: its call comes after it).  The real-world h100 trace: one thread's rows
    arrive out of order (its Python-stack events, `<string>(1): <module>` and below, come after
    the ops they enclose), so the reader leaves that track to the store (the 4,257 rows it read
    after seeing that unnested; the store redoes all 8,444) and nests the other tracks."""
    tracks, nulls, filled = _read(FIXTURES / "kineto" / "decode_b1.json.gz")
    assert tracks == [] and nulls == 0 and filled == 3176
    h100 = [p for p in realworld("kineto") if "h100" in p.name]
    if not h100:
        pytest.skip("../shared/realworld is absent")
    tracks, nulls, _ = _read(h100[0])
    assert tracks == [(25286, 25286, None, None)] and nulls == 4257


@pytest.mark.skipif(native is None, reason="C module not built")
@pytest.mark.parametrize("hold", [None, 0, 1000])
def test_late_rows_held_back_then_inserted_nested(hold, tmp_path, monkeypatch):
    """The rows of a late track, which the reader yields unnested after nested ones, are held
    back from the inserts (`LateRows`: the h100 trace's 4,257) and inserted by the store with
    their nesting, instead of inserted unnested and UPDATEd; with no holding (HOLD_LATE_BYTES 0),
    or more held bytes than allowed (1,000), they are inserted unnested as before.  Each way the store has the rows of the store's own derivation."""
    h100 = [p for p in realworld("kineto") if "h100" in p.name]
    if not h100:
        pytest.skip("../shared/realworld is absent")
    if hold is not None:
        monkeypatch.setattr(nesting, "HOLD_LATE_BYTES", hold)
    from tracekit.adapters.kineto import KinetoAdapter

    rows = nesting.LateRows(KinetoAdapter().read(h100[0], 0))
    yielded = sum(b.column("depth").null_count for t, b in rows if t == "events")
    held = sum(b.num_rows for b in rows.held)
    assert not any(b.column("depth").null_count < b.num_rows for b in rows.held)
    assert (yielded, held) == ((0, 4257) if hold is None else (4257, 0))
    a = _stored_derived(tmp_path / "a.duckdb", h100[0], True, monkeypatch)
    b = _stored_derived(tmp_path / "b.duckdb", h100[0], False, monkeypatch)
    assert a == b and len(a[0]) == 8453 and sum(d is None for _, d, _ in a[0]) == 0


def test_late_mask_matches_whole_tracks_null_safe():
    """`StreamNesting._late_mask` marks the rows of the late tracks only: every key equal, NULL
    matching NULL.  Synthetic keys (a real capture has one or two late tracks): the rows
    (1, 4, ..) and (3, 2, ..) have every key among the late tracks' values but are on no late
    track, and (1, 2, 0, NULL) differs from the late (1, 2, NULL, NULL) by a NULL only."""
    sn = nesting.StreamNesting()
    assert sn._late_mask(pa.table({k: pa.array([1], pa.int64()) for k in nesting._TRACK})) is None
    sn.late_tracks = {(1, 2, None, None), (3, 4, None, None)}
    rows = [(1, 2, None, None), (1, 4, None, None), (3, 4, None, None), (3, 2, None, None),
            (1, 2, 0, None), (5, 6, None, None), (1, 2, None, None)]
    tbl = pa.table({k: pa.array([r[i] for r in rows], pa.int64() if i < 2 else pa.int32())
                    for i, k in enumerate(nesting._TRACK)})
    assert sn._late_mask(tbl).to_pylist() == [True, False, True, False, False, False, True]


@pytest.mark.skipif(native is None, reason="C module not built")
@pytest.mark.slow
def test_contradicted_and_forgotten_pids(tmp_path, monkeypatch):
    """A call naming another pid with a kernel's correlation, after the kernel (edited into the
    real matmul capture: real captures do not have one), takes back the pid the reader gave that
    kernel: it has none, as the store's rule says (the one pid of the calls with its correlation).
    With a map of 2 correlation ids the reader forgets most calls: the store fills those rows."""
    import gzip
    import json

    from tracekit.adapters.kineto import gpu_pid

    doc = json.loads(gzip.open(FIXTURES / "kineto" / "matmul.json.gz").read())
    evs = doc["traceEvents"]
    k = next(e for e in evs if e.get("cat") == "kernel")  # its call follows it in the file
    launch = next(e for e in evs if e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and e["args"].get("correlation") == k["args"]["correlation"])
    evs.append(dict(launch, pid=launch["pid"] + 1, ts=k["ts"] + 1000))
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc).replace("}, {", "},\n{"))  # event boundaries at line ends
    import tracekit.adapters.kineto as K

    # chunks of ~10 events: the kernel and its call in the first, the other call in the last
    monkeypatch.setattr(K, "BLOCK_BYTES", 4096)
    rows = [b for t, b in K.KinetoAdapter().read(edited, 0) if t == "kernels"]
    assert k["args"]["correlation"] in {
        c for b in rows for c, p in zip(b.column("correlation_id").to_pylist(), b.column("pid").to_pylist())
        if p is not None}  # the reader gave it the first call's pid ...
    a = _stored_derived(tmp_path / "a.duckdb", edited, True, monkeypatch)
    b = _stored_derived(tmp_path / "b.duckdb", edited, False, monkeypatch)
    assert a == b  # ... which the store took back
    pids = {corr: pid for _, _, corr, pid in a[1]}
    assert pids[k["args"]["correlation"]] is None and sum(p is not None for p in pids.values()) == len(pids) - 1
    monkeypatch.setattr(gpu_pid, "LIMIT", 2)
    _, _, filled = _read(FIXTURES / "kineto" / "decode_b1.json.gz")
    assert 0 < filled < 3162
    c = _stored_derived(tmp_path / "c.duckdb", FIXTURES / "kineto" / "decode_b1.json.gz", True, monkeypatch)
    d = _stored_derived(tmp_path / "d.duckdb", FIXTURES / "kineto" / "decode_b1.json.gz", False, monkeypatch)
    assert c == d


@pytest.mark.skipif(native is None, reason="C module not built")
def test_late_tracks_beyond_a_piece_are_reset_and_derived(tmp_path, monkeypatch):
    """A late track of more events than a piece (here pieces of 97: the h100 trace's late thread
    has 8,444) is reset and nested with the piece-wise pass instead of nested again in memory:
    the same rows."""
    h100 = [p for p in realworld("kineto") if "h100" in p.name]
    if not h100:
        pytest.skip("../shared/realworld is absent")
    a = _stored_derived(tmp_path / "a.duckdb", h100[0], False, monkeypatch)
    monkeypatch.setattr(nesting, "NEST_UPDATE_ROWS", 97)
    b = _stored_derived(tmp_path / "b.duckdb", h100[0], True, monkeypatch)
    assert a == b and len(a[0]) == 8453
