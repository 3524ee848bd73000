"""Track layout: output pids / tids, process and thread names, sort order, overlap lanes.

The writers are told about each new track (``on_process`` / ``on_thread`` / ``on_counter_track``)
before its first event.
"""

from __future__ import annotations

HOST_PID_LIMIT = 10_000_000  # real pids below this are kept when unique
SYNTH_PID_BASE = 10_000_000
GPU_PID_BASE = 1_000_000_000
SYNTH_TID_BASE = 2_000_000_000
MAX_DEPTH = 500  # Perfetto's slice tracker stops at 512


def _claim_id(want: int | None, limit: int, used: set[int], synth: int) -> tuple[int, int]:
    """An output pid or tid: `want` when it is in [1, limit) and not in `used`, else the first
    free synthetic id from `synth` on. Marks it used; returns it and the next synthetic id to try."""
    if want is not None and 1 <= want < limit and want not in used:
        used.add(want)
        return want, synth
    while synth in used:
        synth += 1
    used.add(synth)
    return synth, synth + 1


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
        p, self.next_synth_pid = _claim_id(want, HOST_PID_LIMIT, self.used_pids, self.next_synth_pid)
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
        t, proc.next_synth = _claim_id(want, SYNTH_TID_BASE, proc.tids, proc.next_synth)
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
