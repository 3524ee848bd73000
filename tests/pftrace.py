"""The tests' own reader of .pftrace files: Perfetto's official generated classes
(`perfetto_trace_pb2` of the `perfetto` package on PyPI), not tracekit's protowire.

decode(path) parses the whole trace and resolves what the exporter relies on: the one packet
sequence and its interning (event names, categories, debug-annotation names), the track
descriptors (process / thread / counter, uuid, parent), slices (BEGIN/END pairs and instants) with
their flow ids, and counter samples.  check(path, result) asserts the structure field by field
against the ExportResult; as_json_like(decoded) gives the same normal form as from_json(path) of
a Chrome JSON export, so that the two formats of one store can be compared exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

SEQ_ID = 1


def _pb():
    return pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2",
                               reason="the perfetto package (pip install -e '.[dev]') decodes the .pftrace exports")


@dataclass
class Decoded:
    processes: dict = field(default_factory=dict)  # uuid -> {pid, name, sort}
    threads: dict = field(default_factory=dict)  # uuid -> {pid, tid, name, sort, parent}
    counters: dict = field(default_factory=dict)  # uuid -> {name, parent, unit}
    slices: list = field(default_factory=list)  # dicts: uuid, ts, dur (None: instant), name, cat, args, flow_ids, term
    samples: list = field(default_factory=list)  # (uuid, ts, value)
    packets: int = 0


def decode(path: Path) -> Decoded:
    pb = _pb()
    TE = pb.TrackEvent
    trace = pb.Trace()
    trace.ParseFromString(Path(path).read_bytes())
    d = Decoded(packets=len(trace.packet))
    names, cats, arg_names = {}, {}, {}
    open_: dict[int, list] = {}
    seen_tracks: set[int] = set()
    for i, p in enumerate(trace.packet):
        # events on the one sequence; track descriptors (no interning) written outside it
        want = 0 if p.HasField("track_descriptor") else SEQ_ID
        assert p.trusted_packet_sequence_id == want, f"packet {i}: sequence {p.trusted_packet_sequence_id}"
        if i == 0:
            assert p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED and p.first_packet_on_sequence
        if p.HasField("interned_data"):
            for table, entries in ((names, p.interned_data.event_names),
                                   (cats, p.interned_data.event_categories),
                                   (arg_names, p.interned_data.debug_annotation_names)):
                for e in entries:
                    assert e.iid not in table, f"iid {e.iid} interned twice"
                    table[e.iid] = e.name
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            assert td.uuid not in seen_tracks, f"track uuid {td.uuid} described twice"
            seen_tracks.add(td.uuid)
            assert p.timestamp == 0
            if td.HasField("process"):
                assert not td.HasField("parent_uuid")
                assert td.child_ordering == pb.TrackDescriptor.EXPLICIT
                d.processes[td.uuid] = {"pid": td.process.pid, "name": td.process.process_name,
                                        "sort": td.process.legacy_sort_index}
            elif td.HasField("thread"):
                assert td.parent_uuid in d.processes, f"thread track {td.uuid}: parent {td.parent_uuid}"
                assert td.thread.pid == d.processes[td.parent_uuid]["pid"]
                assert td.sibling_order_rank == td.thread.legacy_sort_index
                d.threads[td.uuid] = {"pid": td.thread.pid, "tid": td.thread.tid, "name": td.thread.thread_name,
                                      "sort": td.sibling_order_rank, "parent": td.parent_uuid}
            else:
                assert td.HasField("counter"), f"track {td.uuid}: neither process, thread nor counter"
                assert td.parent_uuid in d.processes
                d.counters[td.uuid] = {"name": td.name, "parent": td.parent_uuid,
                                       "unit": td.counter.unit_name or None}
            continue
        if not p.HasField("track_event"):
            assert i == 0 or p.HasField("interned_data"), f"packet {i}: nothing in it"
            continue
        te = p.track_event
        u = te.track_uuid
        assert u in seen_tracks, f"packet {i}: event on track {u} before its descriptor"
        assert p.sequence_flags == pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        if te.type == TE.TYPE_COUNTER:
            assert u in d.counters
            d.samples.append((u, p.timestamp, te.double_counter_value))
        elif te.type == TE.TYPE_SLICE_END:
            assert u in d.threads
            s = open_[u].pop()
            assert p.timestamp >= s["ts"]
            s["dur"] = p.timestamp - s["ts"]
        else:
            assert te.type in (TE.TYPE_SLICE_BEGIN, TE.TYPE_INSTANT) and u in d.threads
            assert len(te.category_iids) == 1
            args = None
            for a in te.debug_annotations:
                assert arg_names[a.name_iid] == "args" and args is None
                args = json.loads(a.legacy_json_value)
            s = {"uuid": u, "ts": p.timestamp, "dur": None, "name": names[te.name_iid],
                 "cat": cats[te.category_iids[0]], "args": args, "flow_ids": list(te.flow_ids),
                 "term": list(te.terminating_flow_ids)}
            d.slices.append(s)
            if te.type == TE.TYPE_SLICE_BEGIN:
                open_.setdefault(u, []).append(s)
    assert not any(open_.values()), "slices left open"
    return d


def check(path: Path, r) -> Decoded:
    """Every field the exporter promises, against its ExportResult."""
    d = decode(path)
    assert {p["pid"]: p["name"] for p in d.processes.values()} == r.processes
    assert len({p["pid"] for p in d.processes.values()}) == len(d.processes)
    assert {(t["pid"], t["tid"]): t["name"] for t in d.threads.values()} == r.threads
    assert len({(t["pid"], t["tid"]) for t in d.threads.values()}) == len(d.threads)
    assert len(d.slices) == r.slices
    assert len(d.counters) == r.counter_tracks and len(d.samples) == r.counter_samples
    assert all(math.isfinite(v) for _, _, v in d.samples)
    outs = [f for s in d.slices for f in s["flow_ids"]]
    ins = [f for s in d.slices for f in s["term"]]
    assert len(outs) == len(set(outs)) == len(ins) == len(set(ins)) == r.flows
    assert set(outs) == set(ins)
    return d


# -- one normal form for both formats ------------------------------------------------------------------
def _slice_key(pid, tid, ts, name):
    return (pid, tid, ts, name)


def as_json_like(d: Decoded):
    """(slices, counters, arrows): slices as sorted (pid, tid, ts_ns, dur_ns or None, name, cat, args
    JSON text); counters as sorted (pid, track name, ts_ns, value); arrows as sorted (out slice key,
    in slice key)."""
    slices, keys_out, keys_in = [], {}, {}
    for s in d.slices:
        t = d.threads[s["uuid"]]
        key = _slice_key(t["pid"], t["tid"], s["ts"], s["name"])
        slices.append(key + (s["dur"], s["cat"], json.dumps(s["args"], sort_keys=True)))
        for f in s["flow_ids"]:
            keys_out[f] = key
        for f in s["term"]:
            keys_in[f] = key
    counters = [(d.processes[d.counters[u]["parent"]]["pid"], d.counters[u]["name"], ts, v)
                for u, ts, v in d.samples]
    arrows = [(keys_out[f], keys_in[f]) for f in keys_out]
    return sorted(slices), sorted(counters), sorted(arrows)


def _ns(us) -> int:
    """A JSON µs value, as written with 3 decimals, to exact ns."""
    return int(Decimal(str(us)) * 1000)


def from_json(path: Path):
    """The same normal form from a Chrome JSON export (flow v2: bind_id, flow_out / flow_in)."""
    import gzip

    raw = gzip.open(path).read() if str(path).endswith(".gz") else Path(path).read_bytes()
    doc = json.loads(raw, parse_float=Decimal)
    slices, outs, ins, counters = [], {}, [], []
    for e in doc["traceEvents"]:
        if e["ph"] in ("X", "i"):
            key = _slice_key(e["pid"], e["tid"], _ns(e["ts"]), e["name"])
            args = json.loads(json.dumps(e["args"], default=float)) if "args" in e else None
            slices.append(key + (_ns(e["dur"]) if e["ph"] == "X" else None, e["cat"],
                                 json.dumps(args, sort_keys=True)))
            if e.get("flow_out"):
                outs[e["bind_id"]] = key
            elif e.get("flow_in"):
                ins.append((e["bind_id"], key))
        elif e["ph"] == "C":
            (k, v), = e["args"].items()
            counters.append((e["pid"], f"{e['name']} {k}", _ns(e["ts"]), float(v)))
    arrows = [(outs[b], key) for b, key in ins]
    return sorted(slices), sorted(counters), sorted(arrows)
