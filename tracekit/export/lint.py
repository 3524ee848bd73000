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
from collections import defaultdict
from pathlib import Path

import orjson

from .lint_proto import lint_proto
from .lint_report import MAX_DEPTH, LintReport, id_ok, read_trace

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TS_US = 1e12
SIZE_WARN = 300_000_000
KNOWN_PHASES = set("XBEiIRCMstfbenP") | {"T"}
THREAD_PHASES = set("XBEiIRstf")
META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
MAX_MESSAGES = 20


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


def lint_json(path: str | Path) -> LintReport:
    path = Path(path)
    rep = LintReport(str(path), "json")
    raw = read_trace(path)
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
            if not id_ok(pid):
                rep.error("metadata pid is not an int in [1, 2^31)", _short(ev))
                continue
            if name.startswith("thread") and not id_ok(tid):
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
            if not id_ok(pid):
                rep.error("pid is not an int in [1, 2^31) (strings and out-of-range values are "
                          "remapped by Perfetto)", _short(ev))
                continue
        if ph in THREAD_PHASES:
            if tid is None or tid == 0:
                rep.error("tid missing or 0: merged with the process's main thread", _short(ev))
                continue
            if not id_ok(tid):
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
def lint(path: str | Path) -> LintReport:
    """Lint a .json/.json.gz or .pftrace file (chosen by content)."""
    p = Path(path)
    head = read_trace(p)[:64].lstrip() if p.stat().st_size < 64 else None
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
