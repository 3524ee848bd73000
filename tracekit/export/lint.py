"""A fast, pure-Python check of a trace against Perfetto's import rules (no Node.js needed).

``lint_json`` follows the rules of Perfetto's Chrome-JSON importer (json_trace_tokenizer.cc,
json_trace_parser.cc, slice_tracker, flow_tracker; summarized in
/work/shared/reference/perfetto-export.md §1 and §4.2): strict JSON (no NaN, no raw control
characters or DEL), required fields per phase, integer pids/tids in [1, 2^31), timestamps in
[0, 1e12) µs, ``dur`` >= 0, integer args within int64, slices that nest on every thread (a partial
overlap is dropped by Perfetto v51-v56 and spilled by v57+), flows whose ends bind (v2 ``bind_id``:
one ``flow_out`` then one ``flow_in`` at a later or equal time; v1 ``s``/``f``: matched ids inside a
slice), metadata events Perfetto reads.  ``lint_proto`` checks a TrackEvent protobuf trace the
same way (descriptors, balanced BEGIN/END per track, flows).

Both return a :class:`LintReport` with the errors, warnings and the counts the engine should
report (slices, flows, counter samples, named processes and threads), so that a test can compare
them with what trace processor loaded.
"""

from __future__ import annotations

import gzip
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from . import protowire as pw

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TS_US = 1e12
MAX_DEPTH = 512
SIZE_WARN = 300_000_000
KNOWN_PHASES = set("XBEiIRCMstfbenP") | {"T"}
THREAD_PHASES = set("XBEiIRstf")
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
MAX_MESSAGES = 20


@dataclass
class LintReport:
    path: str
    format: str
    errors: Counter = field(default_factory=Counter)  # rule -> count
    warnings: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # rule -> first example text
    counts: dict = field(default_factory=dict)
    process_names: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, rule: str, example: str = "") -> None:
        self.errors[rule] += 1
        if example and rule not in self.examples:
            self.examples[rule] = example[:300]

    def warn(self, rule: str, example: str = "") -> None:
        self.warnings[rule] += 1
        if example and rule not in self.examples:
            self.examples[rule] = example[:300]

    def lines(self) -> list[str]:
        out = [f"{self.path} ({self.format}): "
               + ", ".join(f"{k} {v:,}" for k, v in self.counts.items())]
        for kind, c in (("error", self.errors), ("warning", self.warnings)):
            for rule, n in c.most_common():
                ex = self.examples.get(rule)
                out.append(f"  {kind}: {rule} ({n:,})" + (f": {ex}" if ex else ""))
        out.append("  OK: Perfetto should import it without errors" if self.ok
                   else f"  FAILED: {sum(self.errors.values()):,} errors")
        return out


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def _short(ev) -> str:
    try:
        return orjson.dumps(ev).decode()[:200]
    except TypeError:
        return repr(ev)[:200]


def _check_value(v, rep: LintReport, ev) -> None:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return
    if isinstance(v, int):
        if not INT64_MIN <= v <= INT64_MAX:
            rep.error("integer arg outside int64 (Perfetto reads it as -1.0; write it as a string)", _short(ev))
    elif isinstance(v, float):
        if not math.isfinite(v):
            rep.error("non-finite number in args", _short(ev))
    elif isinstance(v, dict):
        for x in v.values():
            _check_value(x, rep, ev)
    elif isinstance(v, list):
        for x in v:
            _check_value(x, rep, ev)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _id_ok(pidtid) -> bool:
    return isinstance(pidtid, int) and not isinstance(pidtid, bool) and 1 <= pidtid < 2**31


def lint_json(path: str | Path) -> LintReport:
    path = Path(path)
    rep = LintReport(str(path), "json")
    raw = _read(path)
    if len(raw) > SIZE_WARN:
        rep.warn(f"{len(raw) / 1e6:.0f} MB of JSON: the Perfetto UI may run out of memory; "
                 "export a .pftrace or a smaller window")
    if b"\x7f" in raw:
        rep.error("raw DEL (0x7F) character: Perfetto's tokenizer rejects it; escape it as \\u007f")
    head = raw.lstrip()[:2]
    if head[:1] not in (b"{", b"["):
        rep.error("the file does not start with '{' or '['")
        return rep
    try:
        doc = orjson.loads(raw)  # strict: NaN, Infinity and raw control characters are errors
    except orjson.JSONDecodeError as e:
        rep.error(f"invalid JSON ({e})")
        return rep
    del raw
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            rep.error("the top-level object has no traceEvents list")
            return rep
        if "displayTimeUnit" in doc:
            rep.warn("displayTimeUnit is ignored by Perfetto (timestamps are always µs)")
    elif isinstance(doc, list):
        events = doc
    else:
        rep.error("the top level is neither an object nor an array")
        return rep

    per_thread: dict = defaultdict(list)  # (pid, tid) -> [(ts_ns, order, kind, end_ns, ev_index)]
    v2: dict = defaultdict(lambda: {"out": [], "in": []})
    v1_points: list = []  # (kind, key, ts_ns, pid, tid, order, bp)
    counters = 0
    counter_tracks: set = set()
    n_slices = 0
    for order, ev in enumerate(events):
        if not isinstance(ev, dict):
            rep.error("an event is not a JSON object", _short(ev))
            continue
        if not ev:
            continue
        ph = ev.get("ph")
        if not isinstance(ph, str) or not ph:
            rep.error("event without ph (json_tokenizer_failure)", _short(ev))
            continue
        ph = ph[0]
        if ph not in KNOWN_PHASES:
            rep.warn(f"phase '{ph}' is ignored by Perfetto", _short(ev))
            continue
        args = ev.get("args")
        if args is not None:
            if not isinstance(args, dict):
                rep.error("args is not an object", _short(ev))
            else:
                _check_value(args, rep, ev)
        pid, tid = ev.get("pid"), ev.get("tid")
        if ph == "M":
            name = ev.get("name")
            if name not in META_NAMES:
                rep.warn(f"metadata event '{name}' is ignored by Perfetto", _short(ev))
                continue
            if not _id_ok(pid):
                rep.error("metadata pid is not an int in [1, 2^31)", _short(ev))
                continue
            if name.startswith("thread") and not _id_ok(tid):
                rep.error("metadata tid is not an int in [1, 2^31)", _short(ev))
                continue
            a = args if isinstance(args, dict) else {}
            if name.endswith("_name"):
                v = a.get("name")
                if not isinstance(v, str) or not v:
                    rep.error("process/thread name missing or empty (json_parser_failure)", _short(ev))
                elif name == "process_name":
                    rep.process_names[pid] = v
                else:
                    rep.thread_names[(pid, tid)] = v
            elif not isinstance(a.get("sort_index"), int):
                rep.error("sort_index missing or not an int", _short(ev))
            continue
        ts = ev.get("ts")
        if isinstance(ts, str):
            rep.warn("ts is a string (parsed as a number)", _short(ev))
            try:
                ts = float(ts)
            except ValueError:
                rep.error("ts is not a number (json_tokenizer_failure)", _short(ev))
                continue
        if not _is_num(ts):
            rep.error("event without a numeric ts (json_tokenizer_failure)", _short(ev))
            continue
        if ts < 0:
            rep.error("negative ts: dropped by the sorter", _short(ev))
            continue
        if ts >= MAX_TS_US:
            rep.warn("ts >= 1e12 µs: Perfetto's double parsing loses ns precision; rebase the trace",
                     _short(ev))
        ts_ns = round(ts * 1000)
        if ph in THREAD_PHASES or ph == "C":
            if not _id_ok(pid):
                rep.error("pid is not an int in [1, 2^31) (strings and out-of-range values are "
                          "remapped by Perfetto)", _short(ev))
                continue
        if ph in THREAD_PHASES:
            if tid is None or tid == 0:
                rep.error("tid missing or 0: merged with the process's main thread", _short(ev))
                continue
            if not _id_ok(tid):
                rep.error("tid is not an int in [1, 2^31)", _short(ev))
                continue
        if ph == "X":
            dur = ev.get("dur")
            if isinstance(dur, str):
                try:
                    dur = float(dur)
                except ValueError:
                    dur = None
            if not _is_num(dur):
                rep.error("X event without a numeric dur (json_parser_failure)", _short(ev))
                continue
            if dur < 0:
                rep.error("negative dur (slice_negative_duration)", _short(ev))
                continue
            end_ns = round((ts + dur) * 1000)
            # Perfetto sorts by ts, then longer slices first, then file order
            sort_key = (ts_ns, ts_ns - end_ns, order)
            per_thread[(pid, tid)].append((sort_key, order, "X", end_ns, ev))
            n_slices += 1
            bind = ev.get("bind_id")
            if bind is not None:
                fo, fi = ev.get("flow_out") is True, ev.get("flow_in") is True
                if not (fo or fi):
                    rep.error("bind_id without flow_in/flow_out (flow_without_direction)", _short(ev))
                if fo:
                    v2[bind]["out"].append(sort_key)
                if fi:
                    v2[bind]["in"].append(sort_key)
        elif ph in "iIR":
            scope = ev.get("s", "t")
            if scope == "t":
                per_thread[(pid, tid)].append(((ts_ns, 0, order), order, "i", ts_ns, ev))
            n_slices += 1
        elif ph in "BE":
            per_thread[(pid, tid)].append(((ts_ns, 0, order), order, ph, None, ev))
        elif ph == "C":
            if not isinstance(args, dict) or not args:
                rep.error("counter without args (json_parser_failure)", _short(ev))
                continue
            for k, v in args.items():
                if not _is_num(v):
                    rep.error("counter value that is not a number", _short(ev))
                    continue
                counters += 1
                counter_tracks.add((pid, ev.get("name"), ev.get("id"), k))
        elif ph in "stf":
            fid = ev.get("id")
            if isinstance(fid, str):
                try:
                    fid = int(fid, 16)
                except ValueError:
                    rep.error("flow id string that is not hex (flow_invalid_id)", _short(ev))
                    continue
            elif not isinstance(fid, int):
                rep.error("flow event without id", _short(ev))
                continue
            key = (fid, ev.get("cat"), ev.get("name"))
            v1_points.append((ph, key, ts_ns, pid, tid, order, ev.get("bp")))
        elif ph in "ben":
            if pid is None or (ev.get("id") is None and ev.get("id2") is None):
                rep.error("async event without pid or id (json_parser_failure)", _short(ev))
                continue
            if ph != "e":
                n_slices += 1

    # nesting per thread, in Perfetto's order (ts, then file order)
    encl: dict = {}
    for key, evs in per_thread.items():
        evs.sort(key=lambda x: x[0])
        stack: list = []  # [end_ns or None (open B), ev]
        spans = []  # (start, end, order) of closed slices for flow binding
        for sort_key, order, kind, end_ns, ev in evs:
            ts_ns = sort_key[0]
            if kind == "E":
                while stack and stack[-1][0] is not None and stack[-1][0] <= ts_ns:
                    stack.pop()
                if stack and stack[-1][0] is None:
                    s0, o0 = stack.pop()[2]
                    spans.append((s0, ts_ns, o0))
                    n_slices += 1
                else:
                    rep.warn("E without a matching B (ignored by Perfetto)", _short(ev))
                continue
            while stack and stack[-1][0] is not None and stack[-1][0] <= ts_ns:
                stack.pop()
            if kind == "B":
                stack.append([None, ev, (ts_ns, order)])
                continue
            if stack and stack[-1][0] is not None and end_ns > stack[-1][0]:
                rep.error("slices overlap partially on one thread (dropped by Perfetto v51-v56: "
                          "slice_drop_overlapping_complete_event)",
                          f"{_short(stack[-1][1])} and {_short(ev)}")
                continue
            if len(stack) >= MAX_DEPTH:
                rep.error("nesting deeper than 512 (slice_max_depth_exceeded)", _short(ev))
                continue
            spans.append((ts_ns, end_ns, order))
            if kind == "X":
                stack.append([end_ns, ev, (ts_ns, order)])
        for item in stack:
            if item[0] is None:
                rep.error("B without a matching E (open slice, dur = -1)", _short(item[1]))
                n_slices += 1
        encl[key] = spans

    # flows v2: one flow_out per bind_id; each flow_in after it (in Perfetto's order) is an arrow
    # (the flow stays open after a flow_in, so one call can fan out to several GPU ops)
    n_flows = 0
    for bind, d in v2.items():
        outs, ins = d["out"], d["in"]
        if len(outs) != 1:
            rep.error("bind_id with %s flow_out" % ("no" if not outs else "several"), f"bind_id {bind}")
            continue
        if not ins:
            rep.warn("bind_id with a flow_out and no flow_in (no arrow)", f"bind_id {bind}")
            continue
        early = sum(1 for x in ins if x < outs[0])
        if early:
            rep.error("flow_in before its flow_out (flow_end_without_start)", f"bind_id {bind}")
        n_flows += len(ins) - early
    if v2 and any(p[0] == "s" for p in v1_points):
        v2_ids = set(v2)
        for p in v1_points:
            if p[0] == "s" and p[1][0] in v2_ids:
                rep.error("a v1 flow id equal to a v2 bind_id (flow_duplicate_id)", str(p[1]))

    # flows v1: s binds to the enclosing slice at ts; f with bp=e too, else the next slice
    def enclosed(pid, tid, ts_ns) -> bool:
        return any(s <= ts_ns <= e for s, e, _ in encl.get((pid, tid), ()))

    v1_points.sort(key=lambda x: (x[2], x[5]))
    open_v1: dict = {}
    for ph, key, ts_ns, pid, tid, _order, bp in v1_points:
        if ph == "s":
            if not enclosed(pid, tid, ts_ns):
                rep.error("flow start outside any slice (flow_no_enclosing_slice)", str(key))
                continue
            open_v1[key] = ts_ns
        else:
            if key not in open_v1:
                rep.error("flow end without a start (flow_end_without_start)", str(key))
                continue
            if bp == "e" and not enclosed(pid, tid, ts_ns):
                rep.error("flow end outside any slice (flow_no_enclosing_slice)", str(key))
                continue
            n_flows += 1
            if ph == "f":
                del open_v1[key]
            else:
                open_v1[key] = ts_ns
    rep.counts = {"events": len(events), "slices": n_slices, "flows": n_flows,
                  "counter_samples": counters, "counter_tracks": len(counter_tracks),
                  "processes": len(rep.process_names), "threads": len(rep.thread_names)}
    return rep


# ------------------------------------------------------------------------------------------------
# protobuf
# ------------------------------------------------------------------------------------------------
def lint_proto(path: str | Path) -> LintReport:
    """Decode a TrackEvent trace with protowire and apply the same checks."""
    path = Path(path)
    rep = LintReport(str(path), "proto")
    data = _read(path)
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
            ts = None
            te = td = interned = None
            flags = 0
            for f, _, v in pw.fields(pkt):
                if f == 8:
                    ts = v
                elif f == 11:
                    te = v
                elif f == 60:
                    td = v
                elif f == 12:
                    interned = v
                elif f == 13:
                    flags = v
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
                    if not _id_ok(pid):
                        rep.error("process pid outside [1, 2^31)", str(pid))
                    rep.process_names[pid] = name
                elif kind == "thread":
                    if not (_id_ok(pid) and _id_ok(tid)):
                        rep.error("thread pid/tid outside [1, 2^31)", f"{pid}/{tid}")
                    rep.thread_names[(pid, tid)] = name
            if te is not None:
                if ts is None:
                    rep.error("track event without a timestamp")
                    continue
                typ, uuid, name_iid, fo, fi = 0, None, None, [], []
                for f, _, v in pw.fields(te):
                    if f == 9:
                        typ = v
                    elif f == 11:
                        uuid = v
                    elif f == 10:
                        name_iid = v
                    elif f == 47:
                        fo.append(v)
                    elif f == 48:
                        fi.append(v)
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


def lint(path: str | Path) -> LintReport:
    """Lint a .json/.json.gz or .pftrace file (chosen by content)."""
    p = Path(path)
    head = _read(p)[:64].lstrip() if p.stat().st_size < 64 else None
    if head is None:
        with open(p, "rb") as f:
            first = f.read(2)
        if first == b"\x1f\x8b":
            with gzip.open(p, "rb") as f:
                head = f.read(64).lstrip()
        else:
            with open(p, "rb") as f:
                head = f.read(64).lstrip()
    if head[:1] in (b"{", b"["):
        return lint_json(p)
    return lint_proto(p)
