"""One event at a time: the reader of chunks the column-wise paths do not take (B/E pairs,
events of unusual shapes or types, invalid UTF-8), and of the few rows every path converts row
by row (metadata, counters, memcpy / memset / sync rows, devices).  The columns are
`mapping`'s; this module only routes the events and counts what it skips."""

from __future__ import annotations

import msgspec

from ...names import short_kernel_name
from . import flows as flow_rule
from . import mapping
from .decode import (ANY, EV, Event, fix_surrogates, args_text, decode_args, dur_skip,
                     generic_event, ts_skip, us_value)
from .mapping import as_int


# devices column <- the property's key in deviceProperties, then in computeProperties (torch < 1.9)
_DEVICE_FIELDS = {
    "id": ("id",), "name": ("name",), "major": ("computeMajor", "major"), "minor": ("computeMinor", "minor"),
    "sm_count": ("numSms", "multiProcessorCount"), "total_memory_bytes": ("totalGlobalMem",),
    "max_threads_per_sm": ("maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor"),
    "warp_size": ("warpSize",),
}
_DEVICE_KEYS = {k for keys in _DEVICE_FIELDS.values() for k in keys}


class RowReader:
    """The row-wise part of `KinetoAdapter` (a mixin: it uses the adapter's state)."""

    def _one_by_one(self, b, raws: list) -> None:
        flows = []  # the flow events, in order: converted together by the flow rule
        for raw in raws:
            try:
                ev, extra, raw = self._decode_event(raw)
                if ev is None:
                    continue
                self._event_id = self._route(b, ev, extra, raw, flows, self._event_id)
            except RecursionError:
                self.accounting.skip("event nested deeper than the JSON decoder allows (~1000 levels)",
                                     bytes(raw)[:300])
        if flows:
            self._flows(b, *map(list, zip(*flows)))

    def _decode_event(self, raw):
        """(event, extra fields, raw) or (None, None, raw) when the event is skipped."""
        try:
            return EV.decode(raw), None, raw
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as e:
            if "UTF-8" not in str(e):
                fixed, n = fix_surrogates(bytes(raw))
                if n:  # a lone surrogate escape: U+FFFD, counted like invalid UTF-8
                    self._utf8_repairs += n
                    return self._decode_event(msgspec.Raw(fixed))
                self.accounting.skip("malformed JSON event", bytes(raw))
                return None, None, raw
            text = bytes(raw).decode("utf-8", "replace")  # invalid bytes → U+FFFD, counted
            self._utf8_repairs += text.count("\ufffd")
            raw = msgspec.Raw(text.encode())
            try:
                return EV.decode(raw), None, raw
            except msgspec.ValidationError:
                pass
        ev, extra = generic_event(raw)
        if ev is None:
            self.accounting.skip("event is not a JSON object with Chrome trace fields", bytes(raw))
        return ev, extra, raw

    def _route(self, b, ev: Event, extra, raw, flows: list, event_id) -> int:
        acc = self.accounting
        ph = ev.ph
        if ph == "M":
            self._metadata(b, ev)
            return event_id
        code, ts = us_value(ev.ts)
        reason = ts_skip(ph, code, ts)
        if reason:
            acc.skip(reason, bytes(raw))
            return event_id
        if self._first_ts is None:
            self._first_ts = ts
        if ph in ("s", "f", "t"):
            flows.append((ph, ev.cat, ev.id, as_int(ev.pid), as_int(ev.tid), ts))
            return event_id
        if ph == "C":
            self._counter(b, ev, ts, raw)
            return event_id
        if ph in ("i", "I", "n"):
            return self._event(b, ev, extra, ts, ts, "instant", event_id, instant=True)
        begin_stack = self._begin_stack
        if ph == "B":
            begin_stack.setdefault((ev.pid, ev.tid), []).append((ev, ts))
            return event_id
        if ph == "E":
            stack = begin_stack.get((ev.pid, ev.tid))
            if not stack:
                acc.skip("E (end) event without a matching B (begin) event", bytes(raw))
                return event_id
            bev, bts = stack.pop()
            return self._event(b, bev, extra, bts, ts, None, event_id)
        if ph != "X":
            acc.skip(f"unsupported phase '{ph}'", bytes(raw))
            return event_id
        code, dur = us_value(ev.dur)
        reason = dur_skip(code, dur)
        if reason:
            acc.skip(reason, bytes(raw))
            return event_id
        table, kind = mapping.table_of(ev.cat)
        if table == "events":
            return self._event(b, ev, extra, ts, ts + dur, mapping.category_of(ev.cat, kind), event_id)
        self._gpu_row(b, table, kind, ev, decode_args(ev), ts, ts + dur, dur, extra)
        return event_id

    def _gpu_row(self, b, table, kind, ev, a, ts, end, dur, extra) -> None:
        """A kernels, memops, syncs or api_calls row."""
        cols, keep = mapping.row_columns(table, ev, a, extra)
        if table == "kernels":
            cols["short_name"] = short_kernel_name(ev.name)
        elif table == "memops":
            cols["kind"] = kind
            cols["copy_kind"], cols["src_kind"], cols["dst_kind"] = mapping.memop_kinds(kind, ev.name, a.kind)
        elif table == "syncs":
            cols["sync_type"] = mapping.sync_type(a.sync_kind, ev.name)
        else:
            cols["api"] = mapping.api_of(kind, ev.name)
        b[table].add(start_ns=ts, end_ns=end, dur_ns=dur, args=args_text(ev, keep), **cols)

    def _few(self, b, table, kind, sub, t0, end, d) -> None:
        """memops and syncs rows (few per trace), row by row."""
        for ev, a, s_, e_, d_ in zip(sub, self._args_many(sub), t0.to_pylist(), end.to_pylist(),
                                     d.to_pylist()):
            self._gpu_row(b, table, kind, ev, a, s_, e_, d_, None)

    def _event(self, b, ev, extra, ts, end, category, event_id, instant=False) -> int:
        """An `events` row (category None: the event's own, as `mapping.category_of`)."""
        cat = category or mapping.category_of(ev.cat, None)
        a = decode_args(ev) if mapping.with_args(ev.cat, cat) else None
        cols, keep = mapping.row_columns("events", ev, a, extra)
        if cat in mapping.GPU_TRACK_CATEGORIES:
            cols["device_id"], cols["stream_id"], cols["pid"], cols["tid"] = cols["pid"], cols["tid"], None, None
        b["events"].add(event_id=event_id, start_ns=ts, end_ns=end, dur_ns=end - ts, category=cat,
                        is_instant=instant, args=args_text(ev, keep), **cols)
        return event_id + 1

    def _counter(self, b, ev, ts, raw):
        try:
            d = ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            d = None
        if not isinstance(d, dict) or not d:
            self.accounting.skip("counter ('C') event without numeric args", bytes(raw))
            return
        pid = as_int(ev.pid)
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                b["counters"].add(pid=pid, name=f"{ev.name}.{k}", ts_ns=ts, value=float(v))
            else:
                self.accounting.skip("counter ('C') value that is not a number", bytes(raw))

    def _metadata(self, b, ev: Event):
        try:
            a = ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            a = {}
        a = a if isinstance(a, dict) else {}
        pid, tid = as_int(ev.pid), as_int(ev.tid)
        # one processes row per pid and one threads row per (pid, tid), written at the end
        # (`_processes_threads`): a process's name and labels come in separate events, and some
        # writers repeat an event (an MTIA trace: 124,222 thread_name events for 2 pids)
        if ev.name == "process_name":
            self._named(self._procs.setdefault(pid, {}), "name", a.get("name"), ev)
        elif ev.name == "process_labels":
            self._named(self._procs.setdefault(pid, {}), "labels", str(a.get("labels")), ev)
        elif ev.name == "thread_name":
            self._named(self._threads.setdefault((pid, tid), {}), "name", a.get("name"), ev)
        else:  # sort indices and other display hints
            self.accounting.skip(f"metadata event '{ev.name}' (display hint, not kept)", by_design=True)

    def _named(self, row: dict, field: str, value, ev: Event) -> None:
        """Set ``row[field]`` from a metadata event. The first event of a pid (of a thread) makes
        its row; each later one is counted in skipped_rows (by design: no row of its own, and what
        it says is kept: the labels of a named process, a repeat once, another name joined to the
        first by ' / ')."""
        what = "thread" if ev.name == "thread_name" else "process"
        first = not row
        if row.get(field) is None:
            row[field] = value
            if not first:
                self.accounting.skip(f"metadata event '{ev.name}' of a {what} with a row already "
                                     f"(kept in its {field})", by_design=True)
        elif row[field] == value:
            self.accounting.skip(f"metadata event '{ev.name}' repeating one already read (kept once)",
                                 by_design=True)
        elif value is not None and value in str(row[field]).split(" / "):
            self.accounting.skip(f"metadata event '{ev.name}' repeating one already read (kept once)",
                                 by_design=True)
        else:  # renamed during the capture (torch names its autograd threads after they start)
            row[field] = f"{row[field]} / {value}"
            self.accounting.skip(f"metadata event '{ev.name}' giving a {what} another {field} "
                                 "(kept: the names in order, joined by ' / ')", by_design=True)

    def _processes_threads(self, b) -> None:
        """The processes and threads rows: one per pid, one per (pid, tid)."""
        for pid, p in self._procs.items():
            b["processes"].add(pid=pid, name=p.get("name"), labels=p.get("labels"))
        for (pid, tid), t in self._threads.items():
            b["threads"].add(pid=pid, tid=tid, name=t.get("name"))

    def _devices(self, b, props, rocm: bool = False):
        """The devices rows of `deviceProperties`, or of `computeProperties` as torch before 1.9
        named them (with CUDA's own field names: major, minor, multiProcessorCount, ...).
        ``rocm``: the trace was written through ROCm (its devices are AMD's, named or not: a
        vLLM trace gives every MI300X the name '', kept as NULL)."""
        if not isinstance(props, list):
            return
        for p in props:
            if not isinstance(p, dict):
                continue
            f = {col: next((p[k] for k in keys if p.get(k) is not None), None) for col, keys in _DEVICE_FIELDS.items()}
            name = f["name"] if f["name"] != "" else None
            amd = rocm or (bool(name) and any(s in name for s in ("AMD", "Instinct", "Radeon")))
            rest = {k: v for k, v in p.items() if k not in _DEVICE_KEYS}
            b["devices"].add(
                device_id=as_int(f["id"]), name=name, vendor="amd" if amd else "nvidia",
                compute_capability=f"{f['major']}.{f['minor']}" if f["major"] is not None else None,
                sm_count=as_int(f["sm_count"]), total_memory_bytes=as_int(f["total_memory_bytes"]),
                max_threads_per_sm=as_int(f["max_threads_per_sm"]),
                warp_size=as_int(f["warp_size"]),
                args=msgspec.json.encode(rest).decode() if rest else None)
        yield from b.drain()

    def _flows(self, b, phs, cats, ids, pids, tids, tss) -> None:
        """Flow events given column-wise, in input order (`flows.Flows.rows`)."""
        flow_rule.add(b, self._flow_state.rows(phs, cats, ids, pids, tids, tss))
