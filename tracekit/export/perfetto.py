"""Export a tracekit store (or a selection of it) as one merged Perfetto timeline.

Two formats, the same content and the same track layout:

* Chrome JSON (``.json``, ``.json.gz``): Perfetto's legacy importer (and chrome://tracing).
* Perfetto protobuf (``.pftrace``): TrackEvent packets, hand-encoded (tracekit.export.protowire).

**Clocks.**  Every ``*_ns`` value of source ``S`` is mapped to the common clock (Unix-epoch ns) as
``common = ts + offset(S)``, where ``offset(S)`` is, in order of preference:

1. ``--align S=OFFSET_NS`` given by the user;
2. ``sources.clock_offset_ns`` (Kineto: ``baseTimeNanoseconds``, or 0 for epoch-µs traces;
   nsys: the session start time ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``);
3. unknown (NULL): the source is placed so that its first event coincides with the earliest
   first event of the sources whose offset is known (or with ts 0 when none is), and a
   warning names the source so that ``--align`` can fix it.

The written timestamps are rebased: ts 0 of the file is ``t0_ns`` = the earliest common-clock
start among the exported rows (JSON: top-level ``baseTimeNanoseconds`` and ``metadata.t0_ns``), so
JSON's µs values keep exact ns (Perfetto parses them through a double).

**Layout** (top to bottom): sources ordered by (rank, host, source_id), ranks without a number
last; within a source its host processes (ordered by pid; threads: main thread first, then by tid),
then one process per GPU ("GPU 0 · NVIDIA H200 [rank 0 · kineto #3]") with one thread per stream
("Stream 7").  pids are made unique across sources (a pid seen in an earlier source gets a synthetic
one; the real pid stays in the process name); pids/tids outside [1, 2^31) (Kineto's -1, pthread
ids) get synthetic ids.

**Content**: API calls, torch ops, user annotations, NVTX ranges and instants on their host
threads; kernels, memcpy and memset on their stream; GPU-side annotations ("Stream 7 ·
annotations") and sync records ("Stream 7 · sync") next to the stream; counters of the store, GPU
utilization (% busy per bucket, kernels and memops) and launch-queue depth (kernels launched and not
finished, maximum per bucket) per GPU.

**Lanes.**  Perfetto requires the slices of one thread to nest.  On host threads a slice that only
partially overlaps an earlier one is moved to an extra lane thread ("python · lane 2"); on GPU
streams any two overlapping operations go to different lanes ("Stream 7 · lane 2"), first-fit in
start order (the minimum number of lanes).  Nothing is dropped.

**Flows** (arrows): from each launching API call to each kernel/memop by the one launch rule of
the views (`tk_launch_link`, sql/lib/host_calls.sql: same (source_id, correlation_id) and pid; a
GPU row without pid links when exactly one pid issued that correlation); when several API calls
share a correlation the earliest is the launch (`tk_launch_calls()`'s order, here with the row
as the last tie-break, within the exported time range).  A link is
written only when the GPU work does not start before its launch call (Perfetto would drop the arrow).
JSON: flow v2, ``bind_id`` = the launch's first link id with ``flow_out`` on the call and
``flow_in`` on each of its GPU ops (a graph launch fans out to all its kernels; the engine keeps a
v2 flow open after a ``flow_in``).  Proto: one id per link, all in the call's ``flow_ids``, each in
its op's ``terminating_flow_ids``.
"""

from __future__ import annotations

import gzip
import math
import os
import queue
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .. import __version__
from . import protowire as pw

JSON_SUFFIXES = (".json", ".json.gz")
PROTO_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")

INT31 = 2**31
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
HOST_PID_LIMIT = 10_000_000  # real pids below this are kept when unique
SYNTH_PID_BASE = 10_000_000
GPU_PID_BASE = 1_000_000_000
SYNTH_TID_BASE = 2_000_000_000
MAX_DEPTH = 500  # Perfetto's slice tracker stops at 512
BATCH_ROWS = 32_768


class ExportError(Exception):
    """A problem with the selection or the output path; printed as one line."""


@dataclass
class ExportOptions:
    sources: tuple[int, ...] = ()
    start_ns: int | None = None  # common clock (Unix epoch ns)
    end_ns: int | None = None
    devices: tuple[int, ...] = ()
    align: dict[int, int] = field(default_factory=dict)
    counters: bool = True  # GPU utilization and launch-queue depth
    util_bucket_ns: int | None = None  # default: about 2,000 buckets over the exported span
    format: str | None = None  # 'json' or 'proto'; default from the output suffix
    gzip_level: int = 3
    # {'start': True} when start_ns is relative to the earliest start of the selected sources
    relative: dict = field(default_factory=dict)


@dataclass
class ExportResult:
    path: str
    format: str
    t0_ns: int = 0
    slices: int = 0
    flows: int = 0
    counter_samples: int = 0
    counter_tracks: int = 0
    extra_lanes: int = 0
    processes: dict[int, str] = field(default_factory=dict)
    threads: dict[tuple[int, int], str] = field(default_factory=dict)
    sources: list[dict] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    util_bucket_ns: int | None = None
    bytes_written: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [f"{self.slices:,} slices", f"{self.flows:,} flows",
                 f"{self.counter_samples:,} counter samples on {self.counter_tracks} tracks",
                 f"{len(self.processes)} processes", f"{len(self.threads)} threads"]
        if self.extra_lanes:
            parts.append(f"{self.extra_lanes} overlap lanes")
        line = f"wrote {self.path} ({self.format}, {self.bytes_written / 1e6:.1f} MB, " \
               f"{self.seconds:.1f} s): " + ", ".join(parts)
        if self.skipped:
            line += "; not exported: " + "; ".join(f"{n:,} {r}" for r, n in self.skipped.most_common())
        return line


def output_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in ("json", "proto"):
            raise ExportError(f"unknown format {fmt!r}; use json or proto")
        return fmt
    name = str(path).lower()
    if name.endswith(JSON_SUFFIXES):
        return "json"
    if name.endswith(PROTO_SUFFIXES):
        return "proto"
    raise ExportError(f"{path}: cannot tell the format from the name; use .json, .json.gz or "
                      ".pftrace (or --format json|proto)")


# ------------------------------------------------------------------------------------------------
# tracks
# ------------------------------------------------------------------------------------------------
class Track:
    """One Perfetto thread track (pid, tid) or counter track; uuid for the proto writer."""

    # end_packet: the proto writer's SLICE_END packet body; the JSON writer's '"pid":..,"tid":..,'
    __slots__ = ("pid", "tid", "name", "sort", "uuid", "process", "end_packet")

    def __init__(self, pid, tid, name, sort, uuid, process=None):
        self.pid, self.tid, self.name, self.sort, self.uuid = pid, tid, name, sort, uuid
        self.process = process
        self.end_packet = None


class Process:
    __slots__ = ("pid", "name", "sort", "uuid", "tids", "next_synth", "seq")

    def __init__(self, pid, name, sort, uuid):
        self.pid, self.name, self.sort, self.uuid = pid, name, sort, uuid
        self.tids: set[int] = set()
        self.next_synth = SYNTH_TID_BASE
        self.seq = 0


class Lanes:
    """Lane assignment on one track.  nest=True (host threads): a slice joins the first lane
    where it nests (Perfetto's rule: it starts at or after the innermost open slice's start and
    ends at or before its end; slices that ended at or before its start are closed).  nest=False
    (GPU streams): a slice joins the first lane with nothing open at its start."""

    __slots__ = ("nest", "stacks", "ended", "record")

    def __init__(self, nest: bool, record: bool = False):
        self.nest = nest
        self.stacks: list[list[int]] = []
        self.record = record
        self.ended: list[tuple[int, int]] = []  # (lane, end) of closed slices, when record

    def place(self, s: int, e: int) -> int:
        stacks = self.stacks
        if len(stacks) == 1 and not self.record:  # fast path: one lane so far
            st = stacks[0]
            while st and st[-1] <= s:
                st.pop()
            if not st or (self.nest and e <= st[-1] and len(st) < MAX_DEPTH):
                st.append(e)
                return 0
        rec = self.record
        for i, st in enumerate(stacks):
            while st and st[-1] <= s:
                end = st.pop()
                if rec:
                    self.ended.append((i, end))
            if not st or (self.nest and e <= st[-1] and len(st) < MAX_DEPTH):
                st.append(e)
                return i
        self.stacks.append([e])
        return len(self.stacks) - 1

    def place_instant(self, s: int) -> int:
        if not self.stacks:
            self.stacks.append([])
        st = self.stacks[0]
        while st and st[-1] <= s:
            end = st.pop()
            if self.record:
                self.ended.append((0, end))
        return 0

    def close_all(self) -> None:
        if self.record:
            for i, st in enumerate(self.stacks):
                while st:
                    self.ended.append((i, st.pop()))
        self.stacks = []


class Layout:
    """Allocates output pids/tids, names and sort indices; tells the writer about new tracks."""

    def __init__(self, writer, sources: dict[int, dict], proc_names, thread_names, device_names):
        self.w = writer
        self.sources = sources
        self.proc_names = proc_names
        self.thread_names = thread_names
        self.device_names = device_names
        self.used_pids: set[int] = set()
        self.next_synth_pid = SYNTH_PID_BASE
        self.host: dict[tuple, Process] = {}
        self.gpu: dict[tuple, Process] = {}
        self.threads: dict[tuple, Track] = {}
        self.counters: dict[tuple, Track] = {}
        self.processes: list[Process] = []
        self.next_uuid = 1
        self.extra_lanes = 0

    def _uuid(self) -> int:
        u = self.next_uuid
        self.next_uuid += 1
        return u

    def _new_pid(self, want: int | None) -> int:
        if want is not None and 1 <= want < HOST_PID_LIMIT and want not in self.used_pids:
            self.used_pids.add(want)
            return want
        while self.next_synth_pid in self.used_pids:
            self.next_synth_pid += 1
        p = self.next_synth_pid
        self.used_pids.add(p)
        self.next_synth_pid += 1
        return p

    def _new_process(self, pid, name, sort) -> Process:
        p = Process(pid, name, sort, self._uuid())
        self.processes.append(p)
        self.w.on_process(p)
        return p

    def host_process(self, sid: int, pid: int | None) -> Process:
        key = (sid, pid)
        p = self.host.get(key)
        if p is not None:
            return p
        src = self.sources[sid]
        out = self._new_pid(pid)
        if pid is None:
            name = f"unattributed events [{src['label']}]"
            sort = src["ord"] * 1_000_000 + 499_999
        else:
            base = self.proc_names.get((sid, pid)) or "process"
            shown = f"{base} (pid {pid})" if out != pid else base
            name = f"{shown} [{src['label']}]"
            sort = src["ord"] * 1_000_000 + len([k for k in self.host if k[0] == sid])
        p = self.host[key] = self._new_process(out, name, sort)
        return p

    def gpu_process(self, sid: int, device: int | None) -> Process:
        key = (sid, device)
        p = self.gpu.get(key)
        if p is not None:
            return p
        src = self.sources[sid]
        dev_no = -1 if device is None else device
        pid = GPU_PID_BASE + src["ord"] * 1000 + (dev_no % 1000 if dev_no >= 0 else 999)
        while pid in self.used_pids:
            pid += 1
        self.used_pids.add(pid)
        dname = self.device_names.get((sid, device))
        label = "GPU ?" if device is None else f"GPU {device}"
        name = f"{label} · {dname} [{src['label']}]" if dname else f"{label} [{src['label']}]"
        sort = src["ord"] * 1_000_000 + 500_000 + (dev_no if dev_no >= 0 else 99_999)
        p = self.gpu[key] = self._new_process(pid, name, sort)
        return p

    def _tid(self, proc: Process, want: int | None) -> int:
        if want is not None and 1 <= want < SYNTH_TID_BASE and want not in proc.tids:
            proc.tids.add(want)
            return want
        while proc.next_synth in proc.tids:
            proc.next_synth += 1
        t = proc.next_synth
        proc.tids.add(t)
        proc.next_synth += 1
        return t

    def _thread(self, key, proc: Process, want_tid, name, sort, lane: int) -> Track:
        if lane:
            self.extra_lanes += 1
        t = Track(proc.pid, self._tid(proc, want_tid if not lane else None), name, sort,
                  self._uuid(), proc)
        self.threads[key] = t
        self.w.on_thread(t)
        return t

    def host_thread(self, sid, pid, tid, lane: int) -> Track:
        key = ("h", sid, pid, tid, lane)
        t = self.threads.get(key)
        if t is not None:
            return t
        proc = self.host_process(sid, pid)
        base_key = ("h", sid, pid, tid, 0)
        if lane == 0:
            seq = proc.seq
            proc.seq += 1
            if pid is None:
                name = "unattributed" if tid is None else f"unattributed (tid {tid})"
            else:
                name = self.thread_names.get((sid, pid, tid)) or (
                    "main thread" if tid == pid else f"thread {tid}")
            want = tid
            if pid is not None and tid == pid:
                want = proc.pid  # the main thread stays the main thread under a new pid
            return self._thread(key, proc, want, name, seq * 100, 0)
        base = self.threads.get(base_key) or self.host_thread(sid, pid, tid, 0)
        return self._thread(key, proc, None, f"{base.name} · lane {lane + 1}", base.sort + lane, lane)

    def gpu_thread(self, sid, device, kind: str, stream, lane: int) -> Track:
        """kind: 'stream' (kernels and memops), 'annot' (GPU annotations), 'sync'."""
        key = ("g", sid, device, kind, stream, lane)
        t = self.threads.get(key)
        if t is not None:
            return t
        proc = self.gpu_process(sid, device)
        sbase = 0 if stream is None else stream + 1
        if stream is None:
            sname = {"stream": "Stream ?", "annot": "Annotations", "sync": "Context sync"}[kind]
        else:
            sname = f"Stream {stream}" + {"stream": "", "annot": " · annotations", "sync": " · sync"}[kind]
        if stream is None:
            order = 10**9
        else:
            order = stream if stream < 10**6 else 10**6
        sort = order * 1000 + {"annot": 0, "stream": 100, "sync": 900}[kind] + lane
        want = sbase if (kind == "stream" and lane == 0 and 1 <= sbase < SYNTH_TID_BASE) else None
        name = sname if lane == 0 else f"{sname} · lane {lane + 1}"
        return self._thread(key, proc, want, name, sort, lane)

    def counter_track(self, proc: Process, name: str, key: str, unit: str | None = None) -> Track:
        k = (proc.pid, name, key)
        t = self.counters.get(k)
        if t is None:
            t = self.counters[k] = Track(proc.pid, None, f"{name} {key}", 0, self._uuid(), proc)
            self.w.on_counter_track(t, name, key, unit)
        return t


# ------------------------------------------------------------------------------------------------
# output sinks and writers
# ------------------------------------------------------------------------------------------------
class Sink:
    """Writes byte chunks to a file from a background thread (gzip compression runs there, off
    the main thread: zlib releases the GIL).  The queue is bounded, so memory is too."""

    def __init__(self, path: Path, gz: bool, level: int):
        from ..store import os_error_line

        self.path = path
        self.tmp = path.with_name(path.name + ".tmp")
        if path.exists() and not path.is_file():
            raise ExportError(f"{path}: not a regular file (the export is written beside it and "
                              "moved into place); give -o a file path")
        try:
            self.f = open(self.tmp, "wb")
        except OSError as e:
            raise ExportError(os_error_line(e)) from None
        self.out = gzip.GzipFile(fileobj=self.f, mode="wb", compresslevel=level, mtime=0) if gz else self.f
        self.q: queue.Queue = queue.Queue(maxsize=16)
        self.err: BaseException | None = None
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            chunk = self.q.get()
            if chunk is None:
                return
            if self.err is None:
                try:
                    self.out.write(chunk)
                except BaseException as e:  # reported by close()
                    self.err = e

    def write(self, chunk: bytes) -> None:
        if self.err is not None:
            raise ExportError(f"{self.path}: write failed ({self.err})")
        self.q.put(chunk)

    def close(self, ok: bool = True) -> int:
        self.q.put(None)
        self.t.join()
        try:
            if self.out is not self.f:
                self.out.close()
            self.f.close()
        except OSError as e:  # the last bytes did not fit (full disk)
            self.err = self.err or e
        if not ok or self.err is not None:
            self.tmp.unlink(missing_ok=True)
            if self.err is not None:
                raise ExportError(f"{self.path}: write failed ({self.err})")
            return 0
        try:
            os.replace(self.tmp, self.path)
        except OSError as e:
            self.tmp.unlink(missing_ok=True)
            from ..store import os_error_line

            raise ExportError(os_error_line(e, self.path)) from None
        return self.path.stat().st_size


_DUMPS = orjson.dumps


_BIG_DIGITS = re.compile(r"-?\d{19,}")


def _has_big_int(text: str) -> bool:
    """True when text has a digit run outside int64 (Perfetto reads such numbers as -1.0)."""
    return any(not INT64_MIN <= int(m) <= INT64_MAX for m in _BIG_DIGITS.findall(text))


def _args_sql(alias: str, cols: list, always: list = ()) -> str:
    """SQL for a row's args as JSON object text: ``cols`` (key, SQL expression, kind: 'num',
    'str' or 'raw' JSON text; NULLs left out) then the row's own args JSON.  Kineto rows keep
    their original args alone (the columns were read from them, in the same spelling); other
    formats' args hold only what no column took, so both go in.  ``always`` keys go in for every
    row.  NULL when empty.  (String concatenation: DuckDB's JSON functions cost µs per row.)"""

    def pair(k, e, kind):
        v = {"num": f"({e})::VARCHAR", "str": f"to_json({e})::VARCHAR", "raw": f"({e})"}[kind]
        key = orjson.dumps(k).decode().replace("'", "''")
        return f"CASE WHEN ({e}) IS NOT NULL THEN '{key}:' || {v} END"

    def obj(pairs):
        return "concat_ws(',', " + ", ".join(pair(*x) for x in pairs) + ")" if pairs else "''"

    # JSON text holds raw newlines only between tokens (Kineto writes one arg per line): drop them,
    # one event per line
    raw = f"replace({alias}.args::VARCHAR, chr(10), '')"
    inner = f"CASE WHEN {raw} LIKE '{{%}}' THEN nullif(trim({raw}[2:-2]), '') END"
    ext = obj(always)
    own = f"nullif('{{' || concat_ws(',', nullif({ext}, ''), nullif({obj(cols)}, ''), {inner}) || '}}', '{{}}')"
    if always:
        kin = f"CASE WHEN {ext} = '' THEN {raw} ELSE '{{' || concat_ws(',', {ext}, {inner}) || '}}' END"
    else:
        kin = raw
    return f"CASE WHEN s.kin AND {alias}.args IS NOT NULL THEN {kin} ELSE {own} END"


_DIGIT_TO_0 = bytes.maketrans(b"123456789", b"000000000")
_NINETEEN = b"0" * 19


def _maybe_big(data: bytes) -> bool:
    """True when data may hold an integer outside int64: a run of 19+ digits (found at C speed
    on a copy with every digit turned into '0') whose value is out of range.  Digit runs inside
    strings or fractions only cost the careful per-line path."""
    t = data.translate(_DIGIT_TO_0)
    i = t.find(_NINETEEN)
    n = len(t)
    while i >= 0:
        j = i + 19
        while j < n and t[j] == 48:
            j += 1
        v = int(data[i:j])
        if i > 0 and data[i - 1] == 45:  # '-'
            v = -v
        if not INT64_MIN <= v <= INT64_MAX:
            return True
        i = t.find(_NINETEEN, j)
    return False


def _fix_lines(lines: list[str]) -> list[str]:
    """JSON event lines whose args hold integers outside int64: those become strings."""
    import json

    out = []
    for ln in lines:
        if _has_big_int(ln):
            ev = json.loads(ln)
            if "args" in ev:
                ev["args"] = _fix_ints(ev["args"])
            ln = orjson.dumps(ev).decode()
        out.append(ln)
    return out


def _fix_big_ints(text: str) -> str:
    """Args JSON whose integers outside int64 become strings (Perfetto reads them as -1.0)."""
    import json

    try:
        d = json.loads(text)
    except ValueError:
        return text
    return orjson.dumps(_fix_ints(d)).decode()


def _fix_ints(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -INT64_MAX - 1 <= v <= INT64_MAX else str(v)
    if isinstance(v, dict):
        return {k: _fix_ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_fix_ints(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class JsonWriter:
    """Chrome JSON, object form.  Event text is built by DuckDB around the pid/tid (``pre`` and
    ``post``), so Python only places each row on its track and concatenates; metadata events (M)
    go at the end, once every track is known."""

    text = True  # wants the SQL-built pre/post columns

    def __init__(self, sink: Sink):
        self.sink = sink
        self.buf: list[str] = []
        self.first = True
        self.slices = self.flows = self.samples = 0
        self.procs: list[Process] = []
        self.tracks: list[Track] = []
        sink.write(b'{"traceEvents":[\n')

    # tracks
    def on_process(self, p: Process):
        self.procs.append(p)

    def on_thread(self, t: Track):
        self.tracks.append(t)
        t.end_packet = f'"pid":{t.pid},"tid":{t.tid},'

    def on_counter_track(self, t: Track, name, key, unit):
        pass

    def end(self, track: Track, ts: int):
        pass

    # events (slices: appended to buf directly by _Exporter._stream, the hot loop)
    def counter(self, t: Track, name: str, key: str, ts: int, value: float):
        self.buf.append(_DUMPS({"ph": "C", "name": name, "pid": t.pid, "ts": ts / 1000,
                                "args": {key: value}}).decode())
        self.samples += 1
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self):
        if not self.buf:
            return
        data = ",\n".join(self.buf).encode("utf-8", "surrogatepass")
        if _maybe_big(data):
            data = ",\n".join(_fix_lines(self.buf)).encode("utf-8", "surrogatepass")
        self.buf = []
        if b"\x7f" in data:  # Perfetto's tokenizer rejects raw DEL; it only occurs inside strings
            data = data.replace(b"\x7f", b"\\u007f")
        if not self.first:
            data = b",\n" + data
        self.first = False
        self.sink.write(data)

    def finish(self, top: dict):
        for p in self.procs:
            for ev in ({"ph": "M", "name": "process_name", "pid": p.pid, "ts": 0, "args": {"name": p.name}},
                       {"ph": "M", "name": "process_sort_index", "pid": p.pid, "ts": 0,
                        "args": {"sort_index": p.sort}}):
                self.buf.append(_DUMPS(ev).decode())
        for t in self.tracks:
            for ev in ({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": t.tid, "ts": 0,
                        "args": {"name": t.name}},
                       {"ph": "M", "name": "thread_sort_index", "pid": t.pid, "tid": t.tid, "ts": 0,
                        "args": {"sort_index": t.sort}}):
                self.buf.append(_DUMPS(ev).decode())
        self.flush()
        # the keys after the events on one line: no "},\n" there, which line-oriented readers
        # (tracekit's Kineto adapter among them) take for an event boundary
        tail = b"\n]"
        for k, v in top.items():
            tail += b"," + _DUMPS(k) + b":" + _DUMPS(v)
        self.sink.write(tail + b"}\n")


# Perfetto proto field numbers (protos/perfetto/trace/trace_packet.proto, track_event/*.proto)
TP_TIMESTAMP, TP_TRACK_EVENT, TP_SEQ_ID, TP_INTERNED, TP_SEQ_FLAGS, TP_TRACK_DESC = 8, 11, 10, 12, 13, 60
TP_FIRST_ON_SEQ = 87
SEQ_CLEARED, SEQ_NEEDS = 1, 2
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER = 1, 2, 3, 4, 5, 8
TD_CHILD_ORDERING, TD_SIBLING_RANK = 11, 12
PD_PID, PD_NAME, PD_SORT = 1, 6, 3
THD_PID, THD_TID, THD_NAME, THD_SORT = 1, 2, 5, 3
CD_UNIT, CD_UNIT_NAME = 3, 6
TE_CAT_IIDS, TE_NAME_IID, TE_TYPE, TE_TRACK, TE_DOUBLE_VALUE = 3, 10, 9, 11, 44
TE_DEBUG, TE_FLOW_IDS, TE_TERM_FLOW_IDS, TE_CORRELATION = 4, 47, 48, 52
TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
ID_CATS, ID_NAMES, ID_ARG_NAMES = 1, 2, 3
DA_NAME_IID, DA_LEGACY_JSON = 1, 9
SEQ = 1


class ProtoWriter:
    """Perfetto TrackEvent protobuf: one packet sequence, interned names, categories and arg
    names; descriptors written before the first event of each track."""

    text = False

    def __init__(self, sink: Sink):
        self.sink = sink
        self.buf: list[bytes] = []
        self.nbuf = 0
        self.slices = self.flows = self.samples = 0
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.arg_names: dict[str, int] = {}
        self.seq_tail = pw.f_varint(TP_SEQ_ID, SEQ) + pw.f_varint(TP_SEQ_FLAGS, SEQ_NEEDS)
        first = pw.f_varint(TP_SEQ_ID, SEQ) + pw.f_varint(TP_SEQ_FLAGS, SEQ_CLEARED) \
            + pw.f_bool(TP_FIRST_ON_SEQ, True)
        self._packet(first)

    def _packet(self, body: bytes):
        self.buf.append(b"\x0a" + pw.varint(len(body)) + body)  # Trace.packet = 1
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self):
        if self.buf:
            self.sink.write(b"".join(self.buf))
            self.buf = []

    # tracks
    def on_process(self, p: Process):
        desc = pw.f_varint(TD_UUID, p.uuid) + pw.f_bytes(
            TD_PROCESS, pw.f_varint(PD_PID, p.pid) + pw.f_str(PD_NAME, p.name)
            + pw.f_varint(PD_SORT, p.sort & 0x7FFFFFFF)) + pw.f_varint(TD_CHILD_ORDERING, 3)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))

    def on_thread(self, t: Track):
        desc = pw.f_varint(TD_UUID, t.uuid) + pw.f_varint(TD_PARENT, t.process.uuid) + pw.f_bytes(
            TD_THREAD, pw.f_varint(THD_PID, t.pid) + pw.f_varint(THD_TID, t.tid) + pw.f_str(THD_NAME, t.name)
            + pw.f_varint(THD_SORT, t.sort & 0x7FFFFFFF)) + pw.f_varint(TD_SIBLING_RANK, t.sort & 0x7FFFFFFF)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))
        t.end_packet = pw.f_bytes(TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_END) + pw.f_varint(TE_TRACK, t.uuid)) \
            + self.seq_tail

    def on_counter_track(self, t: Track, name, key, unit):
        cd = pw.f_str(CD_UNIT_NAME, unit) if unit else b""
        desc = pw.f_varint(TD_UUID, t.uuid) + pw.f_varint(TD_PARENT, t.process.uuid) \
            + pw.f_str(TD_NAME, t.name) + pw.f_bytes(TD_COUNTER, cd)
        self._packet(pw.f_varint(TP_TIMESTAMP, 0) + pw.f_bytes(TP_TRACK_DESC, desc))
        t.end_packet = pw.f_bytes(TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_COUNTER)
                                  + pw.f_varint(TE_TRACK, t.uuid))

    # interning
    def _intern(self, table: dict, s: str, new: list) -> int:
        iid = table.get(s)
        if iid is None:
            iid = table[s] = len(table) + 1
            new.append((iid, s))
        return iid

    def _interned_data(self, new_names, new_cats, new_args) -> bytes:
        body = b""
        for iid, s in new_cats:
            body += pw.f_bytes(ID_CATS, pw.f_varint(1, iid) + pw.f_str(2, s))
        for iid, s in new_names:
            body += pw.f_bytes(ID_NAMES, pw.f_varint(1, iid) + pw.f_str(2, s))
        for iid, s in new_args:
            body += pw.f_bytes(ID_ARG_NAMES, pw.f_varint(1, iid) + pw.f_str(2, s))
        return pw.f_bytes(TP_INTERNED, body)

    # events
    def end(self, t: Track, ts: int):
        self._packet(pw.f_varint(TP_TIMESTAMP, ts) + t.end_packet)

    def slice(self, t: Track, ts: int, name, cat, args: str | None, out_links=None, in_link=None,
              instant=False):
        """args: a JSON object as text, written as one debug annotation "args" whose
        legacy_json_value trace processor flattens into debug.args.* (like JSON's args.*)."""
        new_names, new_cats, new_args = [], [], []
        te = pw.f_varint(TE_TYPE, TYPE_INSTANT if instant else TYPE_BEGIN) + pw.f_varint(TE_TRACK, t.uuid) \
            + pw.f_varint(TE_NAME_IID, self._intern(self.names, name or "[No name]", new_names)) \
            + pw.f_varint(TE_CAT_IIDS, self._intern(self.cats, cat or "other", new_cats))
        if args:
            te += pw.f_bytes(TE_DEBUG, pw.f_varint(DA_NAME_IID, self._intern(self.arg_names, "args", new_args))
                             + pw.f_str(DA_LEGACY_JSON, args))
        if out_links is not None:
            for fid in out_links:
                te += pw.f_fixed64(TE_FLOW_IDS, fid)
            self.flows += len(out_links)
        elif in_link is not None:
            te += pw.f_fixed64(TE_TERM_FLOW_IDS, in_link)
        pkt = pw.f_varint(TP_TIMESTAMP, ts) + pw.f_bytes(TP_TRACK_EVENT, te)
        if new_names or new_cats or new_args:
            pkt += self._interned_data(new_names, new_cats, new_args)
        self._packet(pkt + self.seq_tail)
        self.slices += 1

    def counter(self, t: Track, name: str, key: str, ts: int, value: float):
        self._packet(pw.f_varint(TP_TIMESTAMP, ts) + pw.f_bytes(
            TP_TRACK_EVENT, pw.f_varint(TE_TYPE, TYPE_COUNTER) + pw.f_varint(TE_TRACK, t.uuid)
            + pw.f_double(TE_DOUBLE_VALUE, value)) + self.seq_tail)
        self.samples += 1

    def finish(self, top: dict):
        self.flush()


# ------------------------------------------------------------------------------------------------
# the export
# ------------------------------------------------------------------------------------------------
_API_CAT = {"cuda_runtime": "cuda_runtime", "cuda_driver": "cuda_driver", "hip_runtime": "cuda_runtime"}
_MEMOP_CAT = {"memcpy": "gpu_memcpy", "memset": "gpu_memset"}


def _nice_bucket(span_ns: int, target: int = 2000) -> int:
    raw = max(span_ns // target, 1000)
    mag = 10 ** (len(str(raw)) - 1)
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _source_label(s: dict) -> str:
    parts = []
    if s["rank"] is not None:
        parts.append(f"rank {s['rank']}")
    if s["host"]:
        parts.append(s["host"])
    parts.append(f"{s['format']} #{s['source_id']}")
    return " · ".join(parts)


class _Exporter:
    def __init__(self, con, opts: ExportOptions, result: ExportResult):
        self.con = con
        self.o = opts
        self.r = result

    # -- selection ----------------------------------------------------------------------------
    def resolve_sources(self) -> dict[int, dict]:
        cols = ["source_id", "path", "format", "host", "rank", "world_size", "clock_origin",
                "clock_offset_ns", "start_ns", "end_ns"]
        rows = self.con.execute(f"SELECT {', '.join(cols)} FROM sources ORDER BY source_id").fetchall()
        allsrc = {r[0]: dict(zip(cols, r)) for r in rows}
        if not allsrc:
            raise ExportError("the store has no sources; convert a trace into it first")
        want = list(dict.fromkeys(self.o.sources)) or list(allsrc)
        missing = [s for s in want if s not in allsrc]
        if missing:
            raise ExportError(f"no source {', '.join(map(str, missing))} in the store "
                              f"(sources: {', '.join(map(str, allsrc))})")
        bad_align = [s for s in self.o.align if s not in want]
        if bad_align:
            raise ExportError(f"--align names source {bad_align[0]}, which is not selected")
        sel = {s: allsrc[s] for s in want}
        known = {}
        for sid, s in sel.items():
            if sid in self.o.align:
                s["offset"], s["offset_from"] = self.o.align[sid], "--align"
                known[sid] = s["offset"]
            elif s["clock_offset_ns"] is not None:
                s["offset"], s["offset_from"] = s["clock_offset_ns"], f"clock_offset_ns ({s['clock_origin']})"
                known[sid] = s["offset"]
        starts = [sel[sid]["start_ns"] + off for sid, off in known.items() if sel[sid]["start_ns"] is not None]
        ref = min(starts) if starts else 0
        for sid, s in sel.items():
            if "offset" not in s:
                s["offset"] = ref - (s["start_ns"] or 0)
                s["offset_from"] = "unknown clock: first event aligned to the earliest source"
                if len(sel) > 1 and s["start_ns"] is not None:
                    self.r.warnings.append(
                        f"source {sid} ({Path(s['path']).name}) has no known clock offset; its first "
                        f"event was aligned with the earliest source's. Use --align {sid}=OFFSET_NS "
                        "to place it exactly")
        if self.o.relative:
            firsts = [s["start_ns"] + s["offset"] for s in sel.values() if s["start_ns"] is not None]
            base = min(firsts) if firsts else 0
            for name in ("start", "end"):
                if self.o.relative.get(name) and getattr(self.o, f"{name}_ns") is not None:
                    setattr(self.o, f"{name}_ns", getattr(self.o, f"{name}_ns") + base)
            self.o.relative = {}
            if self.o.start_ns is not None and self.o.end_ns is not None and self.o.end_ns <= self.o.start_ns:
                raise ExportError("--end must be after --start")
        order = sorted(sel.values(), key=lambda s: (s["rank"] is None, s["rank"] or 0, s["host"] or "",
                                                    s["source_id"]))
        for i, s in enumerate(order):
            s["ord"] = i
            s["label"] = _source_label(s)
        return sel

    def _win(self, alias: str, start="start_ns", end="end_ns") -> str:
        o = self.o
        conds = []
        if o.end_ns is not None:
            conds.append(f"{alias}.{start} + s.off < $we")
        if o.start_ns is not None:
            conds.append(f"({alias}.{end} + s.off > $ws OR ({alias}.{end} = {alias}.{start} "
                         f"AND {alias}.{start} + s.off >= $ws))")
        return " AND ".join(conds) or "TRUE"

    def _dev(self, alias: str, allow_null: bool = False) -> str:
        if not self.o.devices:
            return "TRUE"
        ids = ", ".join(str(int(d)) for d in self.o.devices)
        cond = f"{alias}.device_id IN ({ids})"
        return f"({alias}.device_id IS NULL OR {cond})" if allow_null else cond

    def params(self, sql: str, **extra) -> dict:
        """The query parameters that ``sql`` uses (DuckDB rejects unused ones)."""
        p = {"ws": self.o.start_ns, "we": self.o.end_ns, **extra}
        return {k: v for k, v in p.items() if re.search(rf"\${k}\b", sql)}

    def execute(self, sql: str, **params):
        return self.con.execute(sql, self.params(sql, **params)).fetchall()

    def reader(self, sql: str, **params):
        rel = self.con.sql(sql, params=self.params(sql, **params))
        return rel.to_arrow_reader(BATCH_ROWS)

    # -- setup ----------------------------------------------------------------------------------
    def setup(self):
        con = self.con
        import pyarrow as pa

        sel = self.sources
        tbl = pa.table({"source_id": pa.array(list(sel), pa.int32()),
                        "off": pa.array([s["offset"] for s in sel.values()], pa.int64()),
                        "ord": pa.array([s["ord"] for s in sel.values()], pa.int32()),
                        "kin": pa.array([s["format"] == "kineto" for s in sel.values()], pa.bool_())})
        con.register("tk_src_arrow", tbl)
        con.execute("CREATE OR REPLACE TEMP TABLE tk_src AS SELECT * FROM tk_src_arrow")
        con.unregister("tk_src_arrow")
        W = self._win
        t0 = self.execute(f"""
            SELECT min(v) FROM (
              SELECT min(a.start_ns + s.off) v FROM api_calls a JOIN tk_src s USING (source_id) WHERE {W('a')}
              UNION ALL SELECT min(a.start_ns + s.off) FROM events a JOIN tk_src s USING (source_id)
                WHERE {W('a')} AND (a.device_id IS NULL OR {self._dev('a')})
              UNION ALL SELECT min(a.start_ns + s.off) FROM kernels a JOIN tk_src s USING (source_id)
                WHERE {W('a')} AND {self._dev('a')}
              UNION ALL SELECT min(a.start_ns + s.off) FROM memops a JOIN tk_src s USING (source_id)
                WHERE {W('a')} AND {self._dev('a')}
              UNION ALL SELECT min(a.start_ns + s.off) FROM syncs a JOIN tk_src s USING (source_id)
                WHERE {W('a')} AND {self._dev('a')}
              UNION ALL SELECT min(a.ts_ns + s.off) FROM counters a JOIN tk_src s USING (source_id)
                WHERE {W('a', 'ts_ns', 'ts_ns')} AND {self._dev('a', True)}
              UNION ALL SELECT min(a.ts_ns + s.off) FROM memory_events a JOIN tk_src s USING (source_id)
                WHERE {W('a', 'ts_ns', 'ts_ns')} AND {self._dev('a', True)})""")[0][0]
        self.t0 = self.r.t0_ns = int(t0) if t0 is not None else 0
        if t0 is None:
            self.r.warnings.append("the selection holds no events; the trace is empty")
        # launch links
        self.execute(f"""
            CREATE OR REPLACE TEMP TABLE tk_pairs AS
            WITH api AS (
              SELECT a.rowid AS api_rowid, a.source_id, a.pid, a.correlation_id, a.start_ns + s.off AS api_s,
                     a.dur_ns AS api_dur, row_number() OVER (PARTITION BY a.source_id, a.pid, a.correlation_id
                                        ORDER BY a.start_ns, a.end_ns DESC, a.tid, a.rowid) AS rn
              FROM api_calls a JOIN tk_src s USING (source_id)
              WHERE a.correlation_id IS NOT NULL AND {W('a')}
            ), chosen AS (
              SELECT *, count(*) OVER (PARTITION BY source_id, correlation_id) AS n_pids FROM api WHERE rn = 1
            ), gpu AS (
              SELECT 'k' AS tbl, k.rowid AS g_rowid, k.source_id, k.pid, k.correlation_id,
                     k.start_ns + s.off AS g_s, k.dur_ns AS g_dur
              FROM kernels k JOIN tk_src s USING (source_id)
              WHERE k.correlation_id IS NOT NULL AND {W('k')} AND {self._dev('k')}
              UNION ALL
              SELECT 'm', m.rowid, m.source_id, m.pid, m.correlation_id, m.start_ns + s.off, m.dur_ns
              FROM memops m JOIN tk_src s USING (source_id)
              WHERE m.correlation_id IS NOT NULL AND {W('m')} AND {self._dev('m')}
            )
            SELECT g.tbl, g.g_rowid, c.api_rowid, g.g_s, c.api_s,
                   -- Perfetto orders events by ts, then longer first, then file order (host first)
                   g.g_s > c.api_s OR (g.g_s = c.api_s AND g.g_dur <= c.api_dur) AS ok
            FROM gpu g JOIN chosen c ON g.source_id = c.source_id AND g.correlation_id = c.correlation_id
            WHERE tk_launch_link(g.pid, c.pid, c.n_pids)  -- the one launch rule (sql/lib/host_calls.sql)""")
        late = con.execute("SELECT count(*) FROM tk_pairs WHERE NOT ok").fetchall()[0][0]
        if late:
            self.r.skipped["flow arrows whose GPU work starts before its launch call"] += late
        con.execute("""
            CREATE OR REPLACE TEMP TABLE tk_links AS
            SELECT tbl, g_rowid, api_rowid,
                   row_number() OVER (ORDER BY api_rowid, g_s, tbl, g_rowid) AS link_id,
                   row_number() OVER (PARTITION BY api_rowid ORDER BY g_s, tbl, g_rowid) - 1 AS link_rank
            FROM tk_pairs WHERE ok""")
        con.execute("""
            CREATE OR REPLACE TEMP TABLE tk_launch AS
            SELECT api_rowid, min(link_id) AS first_link, count(*) AS n_links FROM tk_links GROUP BY api_rowid""")
        bound = _bound_sql(con)
        self.bound_join, self.bound_expr = "", "NULL::VARCHAR"
        if bound:  # computed once: the bound views are not cheap
            con.execute(f"CREATE OR REPLACE TEMP TABLE tk_bound AS {bound[0]}")
            self.bound_join, self.bound_expr = f" LEFT JOIN tk_bound tkb ON {bound[1]}", "tkb.bound::VARCHAR"

    def names(self):
        con = self.con
        ids = ", ".join(str(s) for s in self.sources)
        proc_names = {}
        for sid, pid, name in con.execute(
                f"SELECT source_id, pid, name FROM processes WHERE source_id IN ({ids}) AND name IS NOT NULL "
                "ORDER BY source_id, pid").fetchall():
            proc_names.setdefault((sid, pid), name)
        thread_names = {}
        for sid, pid, tid, name in con.execute(
                f"SELECT source_id, pid, tid, name FROM threads WHERE source_id IN ({ids}) AND name IS NOT NULL "
                "ORDER BY source_id, pid, tid").fetchall():
            thread_names.setdefault((sid, pid, tid), name)
        dev_names = {}
        for sid, dev, name in con.execute(
                f"SELECT source_id, device_id, name FROM devices WHERE source_id IN ({ids}) AND name IS NOT NULL "
                "ORDER BY source_id, device_id").fetchall():
            dev_names.setdefault((sid, dev), name)
        return proc_names, thread_names, dev_names

    # -- streams ---------------------------------------------------------------------------------
    # One query per source and stream kind, ordered by track, then (ts, longer first); DuckDB
    # builds the args text (string concatenation: its JSON functions cost µs per row) and, for
    # JSON, the event text around pid/tid.  Memory: DuckDB sorts one source at a time, Python
    # holds one Arrow batch.
    _TEXT = """,
        '{"ph":"' || CASE WHEN instant THEN 'i","s":"t' ELSE 'X' END || '","cat":'
          || to_json(coalesce(cat, 'other')) || ',"name":' || to_json(coalesce(nullif(name, ''), '[No name]'))
          || ',' AS pre,
        '"ts":' || (ts // 1000) || '.' || lpad((ts % 1000)::VARCHAR, 3, '0')
          || CASE WHEN instant OR dur < 0 THEN ''
                  ELSE ',"dur":' || (dur // 1000) || '.' || lpad((dur % 1000)::VARCHAR, 3, '0') END
          || CASE WHEN out_first IS NOT NULL THEN ',"bind_id":' || out_first || ',"flow_out":true'
                  WHEN in_link IS NOT NULL THEN ',"bind_id":' || in_bind || ',"flow_in":true' ELSE '' END AS post"""

    def _wrap(self, w, inner: str, order: str) -> str:
        text = self._TEXT if w.text else ""
        return f"SELECT * {text} FROM ({inner}) ORDER BY {order}"

    def _stream(self, w, sql: str, key_cols: tuple, make_track, nest) -> None:
        json_mode = w.text
        record = not json_mode
        skipped = self.r.skipped
        cur = None
        lanes = None
        tracks: list = []
        n = 0  # JSON lines appended and not yet counted
        for batch in self.reader(sql, t0=self.t0, sid=self.sid):
            c = batch.to_pydict()
            keys = list(zip(*(c[k] for k in key_cols)))
            tss, durs, insts, argss = c["ts"], c["dur"], c["instant"], c["args"]
            outs, outn, ins = c["out_first"], c["out_n"], c["in_link"]
            if not json_mode and _maybe_big("\n".join(a for a in argss if a).encode()):
                argss = [_fix_big_ints(a) if a and _has_big_int(a) else a for a in argss]
            if json_mode:
                pres, posts = c["pre"], c["post"]
                buf = w.buf
                buf_append = buf.append
            else:
                names, cats = c["name"], c["cat"]
            for i in range(len(keys)):
                key = keys[i]
                if key != cur:
                    if lanes is not None:
                        self._close(lanes, tracks, w)
                    cur, lanes, tracks = key, Lanes(nest(key), record), []
                    place, place_instant = lanes.place, lanes.place_instant
                ts = tss[i]
                dur = durs[i]
                if dur is None or dur < 0:
                    skipped["rows with a negative or missing duration"] += 1
                    continue
                lane = place_instant(ts) if insts[i] else place(ts, ts + dur)
                if record and lanes.ended:
                    self._ends(lanes, tracks, w)
                if lane >= len(tracks):
                    while len(tracks) <= lane:
                        tracks.append(make_track(key, len(tracks)))
                args = argss[i]
                if json_mode:
                    pt = tracks[lane].end_packet
                    if args:
                        buf_append(f'{pres[i]}{pt}{posts[i]},"args":{args}}}')
                    else:
                        buf_append(f"{pres[i]}{pt}{posts[i]}}}")
                    n += 1
                    if len(buf) >= 8192:
                        w.slices += n
                        n = 0
                        w.flush()
                        buf = w.buf
                        buf_append = buf.append
                else:
                    first = outs[i]
                    w.slice(tracks[lane], ts, names[i], cats[i], args,
                            out_links=range(first, first + outn[i]) if first is not None else None,
                            in_link=ins[i], instant=insts[i])
            if json_mode:
                w.flows += sum(x for x in outn if x)
        if lanes is not None:
            self._close(lanes, tracks, w)
        if json_mode:
            w.slices += n

    def _ends(self, lanes: Lanes, tracks, w):
        for lane, end in lanes.ended:
            w.end(tracks[lane], end)
        lanes.ended.clear()

    def _close(self, lanes: Lanes, tracks, w):
        lanes.close_all()
        if lanes.ended:
            self._ends(lanes, tracks, w)

    def host(self, L: Layout, w):
        W = self._win
        api_args = _args_sql("a", [("correlation", "a.correlation_id", "num"),
                                   ("External id", "a.external_id", "num")])
        inner = f"""
            SELECT 0 AS kind, a.source_id, a.pid, a.tid, a.start_ns + s.off - $t0 AS ts, a.dur_ns AS dur,
                   false AS instant, a.name, coalesce(CASE a.api WHEN 'hip_runtime' THEN 'cuda_runtime' ELSE a.api END,
                                                      'cuda_api') AS cat, {api_args} AS args,
                   l.first_link AS out_first, l.n_links AS out_n, NULL::BIGINT AS in_link, NULL::BIGINT AS in_bind
            FROM api_calls a JOIN tk_src s USING (source_id) LEFT JOIN tk_launch l ON l.api_rowid = a.rowid
            WHERE a.source_id = $sid AND {W('a')}
            UNION ALL
            SELECT 1, e.source_id, e.pid, e.tid, e.start_ns + s.off - $t0, e.dur_ns,
                   coalesce(e.is_instant, false), e.name, e.category, {_args_sql("e", [])}, NULL, NULL, NULL, NULL
            FROM events e JOIN tk_src s USING (source_id)
            WHERE e.source_id = $sid AND e.device_id IS NULL AND e.stream_id IS NULL AND {W('e')}"""
        sql = self._wrap(w, inner, "(pid IS NULL OR pid < 1), pid, (tid IS DISTINCT FROM pid), "
                                   "tid NULLS LAST, ts, dur DESC, kind DESC")
        self._stream(w, sql, ("source_id", "pid", "tid"),
                     lambda k, lane: L.host_thread(k[0], k[1], k[2], lane), lambda k: True)

    def gpu(self, L: Layout, w):
        W, D = self._win, self._dev
        common = [("device", "{t}.device_id", "num"), ("stream", "{t}.stream_id", "num"),
                  ("context", "{t}.context_id", "num"), ("correlation", "{t}.correlation_id", "num"),
                  ("External id", "{t}.external_id", "num")]
        k_args = _args_sql("k", [(n, e.format(t="k"), kd) for n, e, kd in common] + [
            ("grid", "'[' || k.grid_x || ',' || k.grid_y || ',' || k.grid_z || ']'", "raw"),
            ("block", "'[' || k.block_x || ',' || k.block_y || ',' || k.block_z || ']'", "raw"),
            ("registers per thread", "k.registers_per_thread", "num"),
            ("shared memory", "k.shared_bytes", "num"),
            ("static shared memory", "k.static_shared_bytes", "num"),
            ("dynamic shared memory", "k.dynamic_shared_bytes", "num"),
            ("graph id", "k.graph_id", "num"), ("graph node id", "k.graph_node_id", "num"),
            ("launch type", "k.launch_type", "num")],
            always=[("ncu", f"'{{\"bound\":' || to_json({self.bound_expr}) || '}}'", "raw")])
        m_args = _args_sql("m", [(n, e.format(t="m"), kd) for n, e, kd in common] + [
            ("bytes", "m.bytes", "num"),
            ("GB/s", "CASE WHEN m.dur_ns > 0 THEN round(m.bytes / m.dur_ns, 3) END", "num"),
            ("copy kind", "m.copy_kind", "str"), ("src kind", "m.src_kind", "str"),
            ("dst kind", "m.dst_kind", "str"), ("graph node id", "m.graph_node_id", "num")])
        inner = f"""
            SELECT 0 AS kind, k.source_id, k.device_id, k.stream_id, k.start_ns + s.off - $t0 AS ts,
                   k.dur_ns AS dur, false AS instant, k.name, 'kernel' AS cat, {k_args} AS args,
                   NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, l.link_id AS in_link,
                   l.link_id - l.link_rank AS in_bind
            FROM kernels k JOIN tk_src s USING (source_id)
                 LEFT JOIN tk_links l ON l.tbl = 'k' AND l.g_rowid = k.rowid {self.bound_join}
            WHERE k.source_id = $sid AND {W('k')} AND {D('k')}
            UNION ALL
            SELECT 1, m.source_id, m.device_id, m.stream_id, m.start_ns + s.off - $t0, m.dur_ns, false,
                   m.name, CASE m.kind WHEN 'memcpy' THEN 'gpu_memcpy' WHEN 'memset' THEN 'gpu_memset'
                                       ELSE coalesce(m.kind, 'memop') END, {m_args},
                   NULL, NULL, l.link_id, l.link_id - l.link_rank
            FROM memops m JOIN tk_src s USING (source_id)
                 LEFT JOIN tk_links l ON l.tbl = 'm' AND l.g_rowid = m.rowid
            WHERE m.source_id = $sid AND {W('m')} AND {D('m')}"""
        sql = self._wrap(w, inner, "device_id NULLS LAST, stream_id NULLS LAST, ts, dur DESC, kind")
        self._stream(w, sql, ("source_id", "device_id", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], "stream", k[2], lane), lambda k: False)

    def gpu_side(self, L: Layout, w):
        """GPU annotations and sync records, next to their stream."""
        W, D = self._win, self._dev
        e_args = _args_sql("e", [("device", "e.device_id", "num"), ("stream", "e.stream_id", "num"),
                                 ("correlation", "e.correlation_id", "num"),
                                 ("External id", "e.external_id", "num")])
        y_args = _args_sql("y", [("device", "y.device_id", "num"), ("stream", "y.stream_id", "num"),
                                 ("correlation", "y.correlation_id", "num"), ("sync type", "y.sync_type", "str"),
                                 ("wait_on_cuda_event_id", "y.event_id", "num")])
        inner = f"""
            SELECT 'annot' AS kind, e.source_id, e.device_id, e.stream_id, e.start_ns + s.off - $t0 AS ts,
                   e.dur_ns AS dur, coalesce(e.is_instant, false) AS instant, e.name, e.category AS cat,
                   {e_args} AS args, NULL::BIGINT AS out_first, NULL::BIGINT AS out_n, NULL::BIGINT AS in_link,
                   NULL::BIGINT AS in_bind
            FROM events e JOIN tk_src s USING (source_id)
            WHERE e.source_id = $sid AND (e.device_id IS NOT NULL OR e.stream_id IS NOT NULL)
              AND {W('e')} AND {D('e')}
            UNION ALL
            SELECT 'sync', y.source_id, y.device_id, y.stream_id, y.start_ns + s.off - $t0, y.dur_ns, false,
                   CASE y.sync_type WHEN 'stream_sync' THEN 'Stream Sync' WHEN 'event_sync' THEN 'Event Sync'
                        WHEN 'context_sync' THEN 'Context Sync' WHEN 'stream_wait_event' THEN 'Stream Wait Event'
                        ELSE coalesce(y.sync_type, 'sync') END,
                   'cuda_sync', {y_args}, NULL, NULL, NULL, NULL
            FROM syncs y JOIN tk_src s USING (source_id)
            WHERE y.source_id = $sid AND {W('y')} AND {D('y')}"""
        sql = self._wrap(w, inner, "device_id NULLS LAST, kind, stream_id NULLS LAST, ts, dur DESC")
        self._stream(w, sql, ("source_id", "device_id", "kind", "stream_id"),
                     lambda k, lane: L.gpu_thread(k[0], k[1], k[2], k[3], lane), lambda k: k[2] == "annot")

    # -- counters ------------------------------------------------------------------------------------
    def counters(self, L: Layout, w):
        W = self._win
        sql = f"""
            SELECT s.ord, c.source_id, c.pid, c.device_id, c.name, c.ts_ns + s.off - $t0 AS ts, c.value
            FROM counters c JOIN tk_src s USING (source_id)
            WHERE {W('c', 'ts_ns', 'ts_ns')} AND {self._dev('c', True)}
            ORDER BY ord, pid NULLS LAST, device_id NULLS LAST, name, ts"""
        for batch in self.reader(sql, t0=self.t0):
            c = {n: batch.column(n).to_pylist() for n in batch.schema.names}
            for i in range(batch.num_rows):
                v = c["value"][i]
                if v is None or not math.isfinite(v):
                    self.r.skipped["counter samples that are not finite numbers"] += 1
                    continue
                sid, pid, dev, name = c["source_id"][i], c["pid"][i], c["device_id"][i], c["name"][i]
                if pid is not None:
                    proc = L.host_process(sid, pid)
                elif dev is not None:
                    proc = L.gpu_process(sid, dev)
                else:
                    proc = L.host_process(sid, None)
                name = name or "counter"
                if self.sources[sid]["format"] == "kineto" and "." in name:
                    cname, ckey = name.rsplit(".", 1)
                else:
                    cname, ckey = name, "value"
                t = L.counter_track(proc, cname, ckey)
                w.counter(t, cname, ckey, c["ts"][i], v)
        self.memory_counters(L, w)
        if self.o.counters:
            self.derived_counters(L, w)

    def memory_counters(self, L: Layout, w):
        """Device memory under each GPU: the allocator's totals after every allocation and free
        (`tk_memory_series()` of sql/lib/memory.sql, the definition `memory_timeline` uses):
        'GPU memory allocated' and 'GPU memory reserved' for torch's caching allocator, 'GPU memory
        (driver)' for the driver's allocations (nsys --cuda-memory-usage)."""
        W = self._win
        sql = f"""
            SELECT s.ord AS sord, m.source_id, m.device_id, m.allocator, m.ts_ns + s.off - $t0 AS ts,
                   m.allocated, m.reserved
            FROM tk_memory_series() m JOIN tk_src s USING (source_id)
            WHERE {W('m', 'ts_ns', 'ts_ns')} AND {self._dev('m')}
            ORDER BY sord, m.device_id, m.allocator, m.ord"""
        for batch in self.reader(sql, t0=self.t0):
            c = {n: batch.column(n).to_pylist() for n in batch.schema.names}
            for i in range(batch.num_rows):
                proc = L.gpu_process(c["source_id"][i], c["device_id"][i])
                if c["allocator"][i] == "cuda":
                    series = (("GPU memory (driver)", c["allocated"][i]),)
                else:
                    series = (("GPU memory allocated", c["allocated"][i]), ("GPU memory reserved", c["reserved"][i]))
                for name, v in series:
                    if v is None:
                        continue
                    t = L.counter_track(proc, name, c["allocator"][i], unit="bytes")
                    w.counter(t, name, c["allocator"][i], c["ts"][i], float(v))

    def derived_counters(self, L: Layout, w):
        W, D = self._win, self._dev
        span = self.execute(f"""
            SELECT max(v) FROM (
              SELECT max(k.end_ns + s.off) AS v FROM kernels k JOIN tk_src s USING (source_id) WHERE {W('k')} AND {D('k')}
              UNION ALL SELECT max(m.end_ns + s.off) FROM memops m JOIN tk_src s USING (source_id)
              WHERE {W('m')} AND {D('m')})""")[0][0]
        if span is None:
            return
        B = self.o.util_bucket_ns or _nice_bucket(max(span - self.t0, 1))
        self.r.util_bucket_ns = B
        util = f"""
            WITH act AS (
              SELECT s.ord, k.source_id, k.device_id, k.start_ns + s.off - $t0 AS a, k.end_ns + s.off - $t0 AS b
              FROM kernels k JOIN tk_src s USING (source_id) WHERE k.end_ns > k.start_ns AND {W('k')} AND {D('k')}
              UNION ALL
              SELECT s.ord, m.source_id, m.device_id, m.start_ns + s.off - $t0, m.end_ns + s.off - $t0
              FROM memops m JOIN tk_src s USING (source_id) WHERE m.end_ns > m.start_ns AND {W('m')} AND {D('m')}
            ), keyed AS (
              SELECT {{'ord': ord, 'source_id': source_id, 'device_id': device_id}} AS key, a AS start_ns, b AS end_ns
              FROM act
            ), busy AS (  -- the union per device: tk_merge_intervals of sql/lib/intervals.sql
              SELECT key.ord AS ord, key.source_id AS source_id, key.device_id AS device_id, start_ns AS a, end_ns AS b
              FROM tk_merge_intervals('keyed')
            ), bk AS (
              SELECT ord, source_id, device_id, a, b, unnest(generate_series(a // $B, (b - 1) // $B)) AS bi FROM busy
            )
            SELECT ord, source_id, device_id, bi,
                   sum(least(b, (bi + 1) * $B) - greatest(a, bi * $B))::DOUBLE AS busy
            FROM bk GROUP BY ALL ORDER BY ord, device_id NULLS LAST, bi"""
        self._bucket_series(L, w, util, B, "GPU utilization", "%",
                            lambda row: round(100.0 * row["busy"] / B, 2), carry=False)
        queue_sql = """
            WITH q AS (
              SELECT s.ord, k.source_id, k.device_id, a.start_ns + s.off - $t0 AS t, 1 AS d
              FROM tk_links l JOIN kernels k ON l.tbl = 'k' AND k.rowid = l.g_rowid
                   JOIN api_calls a ON a.rowid = l.api_rowid JOIN tk_src s ON s.source_id = k.source_id
              UNION ALL
              SELECT s.ord, k.source_id, k.device_id, k.end_ns + s.off - $t0, -1
              FROM tk_links l JOIN kernels k ON l.tbl = 'k' AND k.rowid = l.g_rowid
                   JOIN tk_src s ON s.source_id = k.source_id
            ), r AS (
              SELECT *, sum(d) OVER (PARTITION BY source_id, device_id ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS depth,
                     row_number() OVER (PARTITION BY source_id, device_id ORDER BY t, d) AS rn
              FROM q
            )
            SELECT ord, source_id, device_id, t // $B AS bi, max(depth) AS mx, arg_max(depth, rn) AS last
            FROM r GROUP BY ALL ORDER BY ord, device_id NULLS LAST, bi"""
        self._bucket_series(L, w, queue_sql, B, "Launch queue", "kernels",
                            lambda row: float(row["mx"]), carry=True)

    def _bucket_series(self, L, w, sql, B, name, key, value_of, carry: bool):
        """Emit one counter per device from per-bucket rows: a sample when the value changes.
        Buckets without a row are 0 (carry=False) or keep the last value (carry=True)."""
        cur = None
        track = None
        last_val = None
        carry_val = 0.0
        next_bi = None

        def emit(bi, v):
            nonlocal last_val
            if v != last_val:
                w.counter(track, name, key, max(bi * B, 0), v)
                last_val = v

        for batch in self.reader(sql, t0=self.t0, B=B):
            for row in batch.to_pylist():
                k = (row["source_id"], row["device_id"])
                if k != cur:
                    if track is not None:
                        emit(next_bi, 0.0)
                    cur = k
                    track = L.counter_track(L.gpu_process(*k), name, key)
                    last_val, carry_val, next_bi = None, 0.0, row["bi"]
                bi = row["bi"]
                if bi > next_bi:  # buckets without a row
                    emit(next_bi, carry_val if carry else 0.0)
                emit(bi, value_of(row))
                if carry:
                    carry_val = float(row["last"])
                next_bi = bi + 1
        if track is not None:
            emit(next_bi, 0.0)

    # -- run ---------------------------------------------------------------------------------------
    def run(self, path: Path, fmt: str) -> None:
        self.sources = self.resolve_sources()
        self.r.sources = [{"source_id": sid, "path": s["path"], "format": s["format"], "rank": s["rank"],
                           "host": s["host"], "offset_ns": s["offset"], "offset_from": s["offset_from"],
                           "label": s["label"]} for sid, s in self.sources.items()]
        self.setup()
        sink = Sink(path, gz=str(path).lower().endswith(".gz"), level=self.o.gzip_level)
        ok = False
        try:
            w = JsonWriter(sink) if fmt == "json" else ProtoWriter(sink)
            L = Layout(w, self.sources, *self.names())
            # one source at a time, host first: a launch and its GPU work at the same ts (and
            # dur) then keep file order
            for src in sorted(self.sources.values(), key=lambda x: x["ord"]):
                self.sid = src["source_id"]
                self.host(L, w)
                self.gpu(L, w)
                self.gpu_side(L, w)
            self.sid = None
            self.counters(L, w)
            w.flush()
            top = {"baseTimeNanoseconds": self.t0,
                   "metadata": {"tracekit_version": __version__, "t0_ns": self.t0,
                                "clock": "Unix epoch ns = ts (µs) × 1000 + t0_ns",
                                "sources": self.r.sources}}
            if len(self.sources) == 1:
                s = next(iter(self.sources.values()))
                if s["rank"] is not None:
                    top["distributedInfo"] = {"rank": s["rank"], "world_size": s["world_size"]}
            w.finish(top)
            r = self.r
            r.slices, r.flows, r.counter_samples = w.slices, w.flows, w.samples
            r.counter_tracks = len(L.counters)
            r.extra_lanes = L.extra_lanes
            r.processes = {p.pid: p.name for p in L.processes}
            r.threads = {(t.pid, t.tid): t.name for t in L.threads.values()}
            ok = True
        finally:
            r_bytes = sink.close(ok)
        self.r.bytes_written = r_bytes
        ends = [s["end_ns"] + s["offset"] for s in self.sources.values() if s["end_ns"] is not None]
        if fmt == "json" and ends and self.r.slices and max(ends) - self.t0 >= 10**15:
            self.r.warnings.append(
                f"the exported span is {(max(ends) - self.t0) / 86400e9:.1f} days: beyond 11.5 days "
                "Perfetto's JSON reader loses ns precision; export fewer sources or a .pftrace")
        for t in ("tk_links", "tk_launch", "tk_pairs", "tk_src", "tk_bound"):
            self.con.execute(f"DROP TABLE IF EXISTS {t}")


def _bound_sql(con) -> tuple[str, str] | None:
    """ncu's bound per kernel, from the `hotspots_bound` view (per source and name) or the
    `kernel_bounds` view (per kernel short name) when another part of tracekit provides one and
    the store holds ncu results."""
    try:
        have = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        if not have & {"hotspots_bound", "kernel_bounds"}:
            return None
        if not con.execute("SELECT count(*) FROM (SELECT 1 FROM ncu_kernels LIMIT 1)").fetchall()[0][0]:
            return None
    except Exception:  # noqa: BLE001
        return None

    def cols(v):
        try:
            return {r[0] for r in con.execute(f"DESCRIBE {v}").fetchall()}
        except Exception:  # noqa: BLE001
            return set()

    cands = []
    if "hotspots_bound" in have:
        c = cols("hotspots_bound")
        if {"source_id", "name", "bound"} <= c:
            cands.append(("SELECT source_id, name, any_value(bound) AS bound FROM hotspots_bound "
                          "WHERE bound IS NOT NULL GROUP BY ALL",
                          "tkb.source_id = k.source_id AND tkb.name = k.name"))
    if "kernel_bounds" in have:
        c = cols("kernel_bounds")
        if "bound" in c:
            for kc in ("short_name", "name"):
                if kc in c:
                    cands.append((f"SELECT {kc}, any_value(bound) AS bound FROM kernel_bounds "
                                  f"WHERE bound IS NOT NULL GROUP BY ALL", f"tkb.{kc} = k.{kc}"))
                    break
    for sub, on in cands:
        try:
            con.execute(f"SELECT * FROM ({sub}) LIMIT 0").fetchall()
        except Exception:  # noqa: BLE001
            continue
        return sub, on
    return None


def export_perfetto(store, out: str | os.PathLike, options: ExportOptions | None = None) -> ExportResult:
    """Export ``store`` (a tracekit.store.Store or a path) to ``out``; returns what was written."""
    from ..store import Store

    opts = options or ExportOptions()
    path = Path(out)
    fmt = output_format(path, opts.format)
    if path.is_dir():
        raise ExportError(f"{path}: is a directory; give a file name")
    if not path.parent.exists():
        raise ExportError(f"{path.parent}: no such directory")
    if opts.start_ns is not None and opts.end_ns is not None and opts.end_ns <= opts.start_ns \
            and opts.relative.get("start") == opts.relative.get("end"):
        raise ExportError("--end must be after --start")
    own = not hasattr(store, "con")
    st = Store(store, read_only=True) if own else store
    t = time.perf_counter()
    result = ExportResult(path=str(path), format=fmt)
    con = st.con
    progress, locked = con.execute(
        "SELECT current_setting('enable_progress_bar'), current_setting('lock_configuration')").fetchall()[0]
    if not locked:  # a sandboxed store has it off already (store.SANDBOX)
        con.execute("SET enable_progress_bar = false")  # DuckDB would draw on stdout
    try:
        _Exporter(con, opts, result).run(path, fmt)
    finally:
        if not locked:
            con.execute(f"SET enable_progress_bar = {'true' if progress else 'false'}")
        if own:
            st.close()
    result.seconds = time.perf_counter() - t
    return result
