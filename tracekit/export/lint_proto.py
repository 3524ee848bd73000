"""The Perfetto lint of a TrackEvent protobuf trace (lint.py has the Chrome-JSON one and says
which importer rules both follow): descriptors, balanced BEGIN/END per track, flows."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from . import protowire as pw
from .lint_report import MAX_DEPTH, LintReport, id_ok, read_trace


#: the fields read, by number: of TracePacket, of TrackEvent
_PACKET = {8: "ts", 11: "te", 60: "td", 12: "interned", 13: "flags"}
_EVENT = {9: "type", 11: "uuid", 10: "name_iid", 47: "flow_out", 48: "flow_in"}


def _fields(msg: bytes, names: dict, repeated: tuple = ()) -> dict:
    """The fields of a protobuf message named by ``names`` (number -> name): the last value of
    each, a list of all for those named in ``repeated``."""
    out: dict = {n: [] for n in repeated}
    for f, _, v in pw.fields(msg):
        n = names.get(f)
        if n in out and n in repeated:
            out[n].append(v)
        elif n is not None:
            out[n] = v
    return out


def lint_proto(path: str | Path) -> LintReport:
    """Decode a TrackEvent trace with protowire and apply the same checks."""
    path = Path(path)
    rep = LintReport(str(path), "proto")
    data = read_trace(path)
    tracks: dict = {}  # uuid -> ("thread"|"process"|"counter", pid, tid, name)
    names: dict = {}
    events: list = []  # (ts, order, uuid, type, name, flow_out[], flow_in[])
    seq_cleared = False
    order = 0
    try:
        for fn, wt, pkt in pw.fields(data):
            if fn != 1 or wt != 2:
                rep.error("top-level field other than Trace.packet")
                continue
            p = _fields(pkt, _PACKET)
            ts, te, td, interned = p.get("ts"), p.get("te"), p.get("td"), p.get("interned")
            flags = p.get("flags", 0)
            if flags & 1:
                seq_cleared = True
            if interned is not None:
                for f, _, v in pw.fields(interned):
                    if f == 2:  # event_names
                        iid = nm = None
                        for g, _, x in pw.fields(v):
                            if g == 1:
                                iid = x
                            elif g == 2:
                                nm = bytes(x).decode()
                        names[iid] = nm
            if td is not None:
                uuid, kind, pid, tid, name = None, "track", None, None, None
                for f, _, v in pw.fields(td):
                    if f == 1:
                        uuid = v
                    elif f == 2:
                        name = bytes(v).decode()
                    elif f in (3, 4):
                        kind = "process" if f == 3 else "thread"
                        for g, _, x in pw.fields(v):
                            if g == 1:
                                pid = x
                            elif g == 2:
                                tid = x
                            elif g in (5, 6):
                                name = bytes(x).decode()
                    elif f == 8:
                        kind = "counter"
                if uuid in tracks:
                    rep.error("track uuid described twice", str(uuid))
                tracks[uuid] = (kind, pid, tid, name)
                if kind == "process":
                    if not id_ok(pid):
                        rep.error("process pid outside [1, 2^31)", str(pid))
                    rep.process_names[pid] = name
                elif kind == "thread":
                    if not (id_ok(pid) and id_ok(tid)):
                        rep.error("thread pid/tid outside [1, 2^31)", f"{pid}/{tid}")
                    rep.thread_names[(pid, tid)] = name
            if te is not None:
                if ts is None:
                    rep.error("track event without a timestamp")
                    continue
                got = _fields(te, _EVENT, repeated=("flow_out", "flow_in"))
                typ, uuid, name_iid = got.get("type", 0), got.get("uuid"), got.get("name_iid")
                fo, fi = got["flow_out"], got["flow_in"]
                if name_iid is not None and not seq_cleared:
                    rep.error("interned name before SEQ_INCREMENTAL_STATE_CLEARED")
                events.append((ts, order, uuid, typ, name_iid, fo, fi))
                order += 1
    except (ValueError, IndexError) as e:
        rep.error(f"malformed protobuf ({e})")
        return rep
    n_slices = n_counters = 0
    per_track: dict = defaultdict(list)
    for ev in events:
        ts, o, uuid, typ, name_iid, fo, fi = ev
        if uuid not in tracks:
            rep.error("event on an undescribed track", str(uuid))
            continue
        if typ == 4:
            if tracks[uuid][0] != "counter":
                rep.error("counter event on a non-counter track", str(uuid))
            n_counters += 1
            continue
        if typ in (1, 3) and name_iid is not None and name_iid not in names:
            rep.error("name_iid without an interned name", str(name_iid))
        per_track[uuid].append(ev)
    flow_out: dict = {}
    flow_in: dict = defaultdict(list)
    for uuid, evs in per_track.items():
        evs.sort(key=lambda x: (x[0], x[1]))
        depth = 0
        for ts, _o, _, typ, _, fo, fi in evs:
            if typ == 1:
                depth += 1
                n_slices += 1
                if depth > MAX_DEPTH:
                    rep.error("nesting deeper than 512")
            elif typ == 2:
                if depth == 0:
                    rep.error("SLICE_END without a SLICE_BEGIN on its track", str(uuid))
                else:
                    depth -= 1
            elif typ == 3:
                n_slices += 1
            else:
                rep.error(f"track event of type {typ}", str(uuid))
            for f in fo:
                if f in flow_out:
                    rep.error("flow id started twice", str(f))
                flow_out[f] = ts
            for f in fi:
                flow_in[f].append(ts)
        if depth:
            rep.error("SLICE_BEGIN without SLICE_END (open slice)", str(uuid))
    n_flows = 0
    for f, ins in flow_in.items():
        if f not in flow_out:
            rep.error("terminating flow id without a start", str(f))
        elif len(ins) > 1:
            rep.error("flow id terminated twice", str(f))
        elif ins[0] < flow_out[f]:
            rep.error("flow ends before it starts", str(f))
        else:
            n_flows += 1
    for f in flow_out:
        if f not in flow_in:
            rep.warn("flow id started and never terminated", str(f))
    rep.counts = {"packets": order, "slices": n_slices, "flows": n_flows, "counter_samples": n_counters,
                  "counter_tracks": sum(1 for t in tracks.values() if t[0] == "counter"),
                  "processes": len(rep.process_names), "threads": len(rep.thread_names)}
    return rep
