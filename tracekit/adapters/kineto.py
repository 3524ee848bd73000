"""Kineto / torch.profiler Chrome-trace JSON (``.json``, ``.json.gz``) → unified schema.

Reading strategy: the (decompressed) file is decoded once into a top-level map whose values stay
raw JSON text (``msgspec.Raw``), and ``traceEvents`` into a list of raw slices of the buffer.  Each
event is then decoded on its own into a small typed struct, routed to its table and forgotten, so
the parsed trace is never held as Python objects (only the input bytes and the slice list).

Timestamps are parsed from their decimal text into exact int64 ns (``ts`` is µs with up to three
decimals; epoch-µs floats with ns digits do not fit a float64).  Every event is either converted
or counted in ``skipped_rows`` with a reason.  See docs/schema.md for the column mapping.
"""

from __future__ import annotations

import gzip
import re
import zlib
from decimal import Decimal, InvalidOperation
from pathlib import Path

import msgspec

from ..names import short_kernel_name
from .base import Adapter, Builders, TraceError

_EMPTY = msgspec.Raw(b"")


class _Event(msgspec.Struct, forbid_unknown_fields=True):
    ph: str = ""
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = _EMPTY
    dur: msgspec.Raw = _EMPTY
    id: int | str | None = None
    args: msgspec.Raw = _EMPTY
    s: str | None = None
    bp: str | None = None


class _Args(msgspec.Struct, rename={
        "external_id": "External id", "external_id_lc": "external id",
        "registers": "registers per thread", "shared": "shared memory",
        "sync_kind": "cuda_sync_kind", "wait_event": "wait_on_cuda_event_id"}):
    device: int | str | None = None
    context: int | str | None = None
    stream: int | str | None = None
    correlation: int | str | None = None
    external_id: int | str | None = None
    external_id_lc: int | str | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers: int | None = None
    shared: int | None = None
    bytes: int | str | None = None
    kind: str | None = None
    sync_kind: str | None = None
    wait_event: int | None = None


_EV = msgspec.json.Decoder(_Event)
_ARGS = msgspec.json.Decoder(_Args)
_ANY = msgspec.json.Decoder()
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])

INT64_MAX = 2**63 - 1
TS_LIMIT = 2**62  # |ts|, dur in ns: ts + dur must still fit int64

# cat (lower-cased) → (table, normalized category); aliases cover the 2021 formats
_CAT = {
    "kernel": ("kernels", None),
    "gpu_memcpy": ("memops", "memcpy"),
    "memcpy": ("memops", "memcpy"),
    "gpu_memset": ("memops", "memset"),
    "memset": ("memops", "memset"),
    "cuda_runtime": ("api_calls", "cuda_runtime"),
    "runtime": ("api_calls", "cuda_runtime"),
    "cuda_driver": ("api_calls", "cuda_driver"),
    "cuda_sync": ("syncs", None),
    "cpu_op": ("events", "cpu_op"),
    "operator": ("events", "cpu_op"),
    "user_annotation": ("events", "user_annotation"),
    "gpu_user_annotation": ("events", "gpu_user_annotation"),
    "python_function": ("events", "python_function"),
    "cpu_instant_event": ("events", "instant"),
    "overhead": ("events", "overhead"),
    "trace": ("events", "profiler"),
}

_SYNC_TYPES = {"stream sync": "stream_sync", "event sync": "event_sync",
               "context sync": "context_sync", "stream wait event": "stream_wait_event"}
_MEMCPY = re.compile(r"memcpy\s+([A-Za-z]+)\s*(?:\(\s*(\w+)\s*->\s*(\w+)\s*\))?", re.IGNORECASE)
_MEMSET = re.compile(r"memset\s*\(\s*(\w+)\s*\)", re.IGNORECASE)
_COPY_KINDS = {"htod": "HtoD", "dtoh": "DtoH", "dtod": "DtoD", "htoh": "HtoH", "ptop": "PtoP",
               "dtop": "PtoP", "ptod": "PtoP", "htoa": "HtoA", "atoh": "AtoH", "atoa": "AtoA",
               "atod": "AtoD", "dtoa": "DtoA"}
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def us_text_to_ns(raw: bytes) -> int:
    """Exact ns from a JSON number of µs (``"12.345"`` → 12345). Raises ValueError."""
    if raw[:1] == b'"':
        raw = raw[1:-1]
    if b"e" in raw or b"E" in raw:
        try:
            return int((Decimal(raw.decode()) * 1000).to_integral_value())
        except InvalidOperation:
            raise ValueError(raw) from None
    dot = raw.find(b".")
    if dot < 0:
        return int(raw) * 1000
    ip, fp = raw[:dot], raw[dot + 1:]
    if len(fp) > 3:  # sub-ns digits: round half to even like Decimal
        return int((Decimal(raw.decode()) * 1000).to_integral_value())
    neg = ip.startswith(b"-")
    v = abs(int(ip or b"0")) * 1000 + int((fp + b"000")[:3] or b"0")
    return -v if neg else v


def _int(v) -> int | None:
    """An id as int64, or None (hex strings '0x1f' accepted; values beyond int64 → None)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -INT64_MAX - 1 <= v <= INT64_MAX else None
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    if isinstance(v, str):
        try:
            n = int(v, 0)
        except ValueError:
            return None
        return n if -INT64_MAX - 1 <= n <= INT64_MAX else None
    return None


def _stream(v) -> int | None:
    n = _int(v)
    return None if n in (4294967295, -1) else n


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                return f.read()
        except (EOFError, OSError, zlib.error) as e:
            raise TraceError(path, f"truncated or corrupt gzip data ({e})",
                             "re-copy or re-export the trace") from None
    return path.read_bytes()


def _decode_top(path: Path, buf: bytes) -> tuple[dict, list, int]:
    """Top-level map (raw values) and the raw event list; repairs invalid UTF-8 (counted)."""
    repairs = 0
    try:
        top = _TOP.decode(buf)
    except msgspec.ValidationError:
        raise TraceError(path, "not a Chrome trace: the JSON is not an object with a traceEvents list",
                         "pass a torch.profiler export_chrome_trace() file") from None
    except msgspec.DecodeError as e:
        msg = str(e)
        if "UTF-8" in msg:
            fixed = buf.decode("utf-8", "replace")
            repairs = fixed.count("\ufffd")
            return _decode_top(path, fixed.encode())[0:2] + (repairs,)
        if "truncated" in msg:
            raise TraceError(path, f"JSON is truncated (the file ends at byte {len(buf):,} inside the data)",
                             "the profiler did not finish writing it; re-export the trace") from None
        raise TraceError(path, f"invalid JSON ({msg})", "check that this is a torch.profiler trace") from None
    if "traceEvents" not in top:
        raise TraceError(path, "JSON object has no traceEvents key",
                         "pass a torch.profiler export_chrome_trace() file")
    try:
        events = _LIST.decode(top.pop("traceEvents"))
    except msgspec.ValidationError:
        raise TraceError(path, "traceEvents is not a list", "pass a torch.profiler trace") from None
    return top, events, repairs


class KinetoAdapter(Adapter):
    FORMAT = "kineto"

    def read(self, path, source_id, progress=None):
        path = Path(path)
        buf = _read_bytes(path)
        top, raw_events, repairs = _decode_top(path, buf)
        meta = {}
        for k, v in top.items():
            try:
                meta[k] = _ANY.decode(v)
            except msgspec.DecodeError:
                meta[k] = bytes(v).decode("utf-8", "replace")
        if repairs:
            meta["tracekit_repairs"] = {"invalid_utf8_characters_replaced": repairs}
        acc = self.accounting
        b = Builders(source_id, acc)
        yield from self._devices(b, meta.get("deviceProperties"))

        self._first_ts: int | None = None
        open_flows: dict = {}
        begin_stack: dict = {}
        counted_pids: set = set()
        n = len(raw_events)
        step = max(n // 200, 1)
        event_id = 0
        self._utf8_repairs = 0
        for i, raw in enumerate(raw_events):
            ev, extra, raw = self._decode_event(raw)
            if ev is None:
                continue
            event_id = self._route(b, ev, extra, raw, open_flows, begin_stack, counted_pids, event_id)
            if i % step == 0:
                if progress:
                    progress(i, n)
                yield from b.ready()
        for (cat, fid), (pid, tid, ts) in open_flows.items():
            b["flows"].add(flow_id=_int(fid), kind=cat, start_pid=pid, start_tid=tid, start_ns=ts)
        for stack in begin_stack.values():
            for _ in stack:
                acc.skip("B (begin) event without a matching E (end) event")
        if progress:
            progress(n, n)
        if self._utf8_repairs:
            meta.setdefault("tracekit_repairs", {})["invalid_utf8_in_events"] = self._utf8_repairs
        del raw_events, buf
        yield from b.drain()
        self.source = self._source_info(path, meta)

    # -- routing -------------------------------------------------------------------------------
    def _decode_event(self, raw):
        """(event, extra fields, raw) or (None, None, raw) when the event is skipped."""
        try:
            return _EV.decode(raw), None, raw
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError as e:
            if "UTF-8" not in str(e):
                self.accounting.skip("malformed JSON event", bytes(raw))
                return None, None, raw
            text = bytes(raw).decode("utf-8", "replace")  # invalid bytes → U+FFFD, counted
            self._utf8_repairs += text.count("\ufffd")
            raw = msgspec.Raw(text.encode())
            try:
                return _EV.decode(raw), None, raw
            except msgspec.ValidationError:
                pass
        ev, extra = self._generic(raw)
        if ev is None:
            self.accounting.skip("event is not a JSON object with Chrome trace fields", bytes(raw))
        return ev, extra, raw

    @staticmethod
    def _generic(raw):
        """Fallback for events with unusual fields or types: keep every field."""
        try:
            d = _ANY.decode(raw)
        except msgspec.DecodeError:
            return None, None
        if not isinstance(d, dict):
            return None, None
        known = {f: d.pop(f) for f in _Event.__struct_fields__ if f in d}
        for f in ("ts", "dur", "args"):
            if f in known:
                known[f] = msgspec.Raw(msgspec.json.encode(known[f]))
        for f in ("name", "cat", "ph", "s", "bp"):
            if f in known and not isinstance(known[f], str):
                d[f"_{f}"] = known[f]
                known[f] = None if known[f] is None else str(known[f])
        for f in ("pid", "tid", "id"):
            if f in known and not isinstance(known[f], (int, str, type(None))):
                d[f"_{f}"] = known.pop(f)
        return _Event(**known), (d or None)

    def _route(self, b, ev: _Event, extra, raw, open_flows, begin_stack, counted_pids, event_id) -> int:
        acc = self.accounting
        ph = ev.ph
        if ph == "M":
            self._metadata(b, ev)
            return event_id
        ts_raw = bytes(ev.ts)
        if not ts_raw or ts_raw == b"null":
            acc.skip(f"'{ph}' event without ts", bytes(raw))
            return event_id
        try:
            ts = us_text_to_ns(ts_raw)
        except ValueError:
            acc.skip(f"'{ph}' event with a non-numeric ts", bytes(raw))
            return event_id
        if not -TS_LIMIT < ts < TS_LIMIT:
            acc.skip(f"'{ph}' event with ts out of range", bytes(raw))
            return event_id
        if self._first_ts is None:
            self._first_ts = ts
        if ph in ("s", "f", "t"):
            self._flow(b, ev, ts, open_flows)
            return event_id
        if ph == "C":
            self._counter(b, ev, ts, raw)
            return event_id
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ph in ("i", "I", "n"):
            return self._event(b, ev, extra, ts, ts, pid, tid, "instant", event_id, instant=True)
        if ph == "B":
            begin_stack.setdefault((ev.pid, ev.tid), []).append((ev, ts))
            return event_id
        if ph == "E":
            stack = begin_stack.get((ev.pid, ev.tid))
            if not stack:
                acc.skip("E (end) event without a matching B (begin) event", bytes(raw))
                return event_id
            bev, bts = stack.pop()
            return self._event(b, bev, extra, bts, ts, pid, tid, None, event_id)
        if ph != "X":
            acc.skip(f"unsupported phase '{ph}'", bytes(raw))
            return event_id
        dur_raw = bytes(ev.dur)
        if not dur_raw or dur_raw == b"null":
            acc.skip("complete ('X') event without dur", bytes(raw))
            return event_id
        try:
            dur = us_text_to_ns(dur_raw)
        except ValueError:
            acc.skip("complete ('X') event with a non-numeric dur", bytes(raw))
            return event_id
        if dur < 0:
            acc.skip("complete ('X') event with a negative dur", bytes(raw))
            return event_id
        if dur >= TS_LIMIT:
            acc.skip("complete ('X') event with dur out of range", bytes(raw))
            return event_id
        end = ts + dur
        cat = (ev.cat or "").lower()
        table, kind = _CAT.get(cat, ("events", None))
        if table == "events":
            return self._event(b, ev, extra, ts, end, pid, tid, kind or cat or "unknown", event_id)
        args = self._args(ev, raw)
        if table == "kernels":
            self._kernel(b, ev, args, ts, end, dur, pid, tid)
        elif table == "memops":
            self._memop(b, ev, args, kind, ts, end, dur, pid, tid)
        elif table == "api_calls":
            api = kind
            if api == "cuda_runtime" and (ev.name or "").startswith("hip"):
                api = "hip_runtime"
            b["api_calls"].add(
                pid=pid, tid=tid, start_ns=ts, end_ns=end, dur_ns=dur, name=ev.name, raw_name=ev.name,
                api=api, correlation_id=_int(args.correlation),
                external_id=_int(args.external_id if args.external_id is not None else args.external_id_lc),
                args=self._args_text(ev, extra))
        elif table == "syncs":
            b["syncs"].add(
                device_id=_int(args.device) if args.device is not None else pid,
                context_id=_int(args.context), stream_id=_stream(args.stream if args.stream is not None else tid),
                start_ns=ts, end_ns=end, dur_ns=dur,
                sync_type=_SYNC_TYPES.get((args.sync_kind or ev.name or "").lower(), "unknown"),
                correlation_id=_int(args.correlation), event_id=_int(args.wait_event),
                args=self._args_text(ev, extra))
        return event_id

    def _args(self, ev: _Event, raw) -> _Args:
        a = bytes(ev.args)
        if not a or a == b"null":
            return _Args()
        try:
            return _ARGS.decode(a)
        except msgspec.ValidationError:
            try:
                d = _ANY.decode(a)
            except msgspec.DecodeError:
                d = None
            if not isinstance(d, dict):  # kept verbatim in the args column; no fields to map
                return _Args()
            out = _Args()
            for f in _Args.__struct_fields__:
                key = _Args.__struct_encode_fields__[_Args.__struct_fields__.index(f)]
                v = d.get(key)
                if f in ("grid", "block"):
                    v = [_int(x) for x in v] if isinstance(v, list) else None
                elif f in ("registers", "shared", "wait_event"):
                    v = _int(v)
                setattr(out, f, v)
            return out

    @staticmethod
    def _args_text(ev: _Event, extra) -> str | None:
        a = bytes(ev.args)
        if extra:
            d = _ANY.decode(a) if a and a != b"null" else {}
            if not isinstance(d, dict):
                d = {"args": d}
            d.update({f"_{k}" if not k.startswith("_") else k: v for k, v in extra.items()})
            return msgspec.json.encode(d).decode()
        if not a or a == b"null" or a == b"{}":
            return None
        return a.decode("utf-8", "replace")

    def _kernel(self, b, ev, a: _Args, ts, end, dur, pid, tid):
        g = a.grid if a.grid and len(a.grid) == 3 else (None, None, None)
        bl = a.block if a.block and len(a.block) == 3 else (None, None, None)
        name = ev.name
        b["kernels"].add(
            device_id=_int(a.device) if a.device is not None else pid,
            context_id=_int(a.context), stream_id=_stream(a.stream if a.stream is not None else tid),
            start_ns=ts, end_ns=end, dur_ns=dur, name=name, short_name=short_kernel_name(name),
            correlation_id=_int(a.correlation), external_id=_int(a.external_id),
            grid_x=g[0], grid_y=g[1], grid_z=g[2], block_x=bl[0], block_y=bl[1], block_z=bl[2],
            registers_per_thread=_int(a.registers), shared_bytes=_int(a.shared), args=self._args_text(ev, None))

    def _memop(self, b, ev, a: _Args, kind, ts, end, dur, pid, tid):
        name = ev.name or ""
        copy_kind = src = dst = None
        if kind == "memcpy":
            m = _MEMCPY.search(name)
            if m:
                copy_kind = _COPY_KINDS.get(m.group(1).lower(), m.group(1))
                src = m.group(2) and m.group(2).lower()
                dst = m.group(3) and m.group(3).lower()
            elif a.kind:
                copy_kind = _COPY_KINDS.get(a.kind.lower(), a.kind)
            copy_kind = copy_kind or "unknown"
        else:
            m = _MEMSET.search(name)
            dst = m.group(1).lower() if m else None
        b["memops"].add(
            device_id=_int(a.device) if a.device is not None else pid,
            context_id=_int(a.context), stream_id=_stream(a.stream if a.stream is not None else tid),
            start_ns=ts, end_ns=end, dur_ns=dur, kind=kind, copy_kind=copy_kind, src_kind=src,
            dst_kind=dst, bytes=_int(a.bytes), name=name, correlation_id=_int(a.correlation),
            external_id=_int(a.external_id), args=self._args_text(ev, None))

    def _event(self, b, ev, extra, ts, end, pid, tid, category, event_id, instant=False) -> int:
        cat = category or (ev.cat or "").lower() or "unknown"
        if extra is None and (ev.pid is not None and pid is None or ev.tid is not None and tid is None):
            extra = {}
        if extra is not None:  # keep non-numeric pid/tid
            if ev.pid is not None and pid is None:
                extra["pid"] = ev.pid
            if ev.tid is not None and tid is None:
                extra["tid"] = ev.tid
        device = stream = None
        if cat == "gpu_user_annotation":
            device, stream, pid, tid = pid, tid, None, None
        a = None
        if ev.cat and cat in ("cpu_op", "user_annotation", "gpu_user_annotation"):
            a = self._args(ev, b"")
        b["events"].add(
            event_id=event_id, pid=pid, tid=tid, device_id=device, stream_id=stream, start_ns=ts,
            end_ns=end, dur_ns=end - ts, name=ev.name, category=cat,
            external_id=_int(a.external_id) if a else None,
            correlation_id=_int(a.correlation) if a else None,
            is_instant=instant, args=self._args_text(ev, extra))
        return event_id + 1

    def _flow(self, b, ev, ts, open_flows):
        key = ((ev.cat or "").lower() or "flow", ev.id)
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ev.ph == "s":
            if key in open_flows:  # a second start: the first one never ended
                spid, stid, sts = open_flows.pop(key)
                b["flows"].add(flow_id=_int(ev.id), kind=key[0], start_pid=spid, start_tid=stid,
                               start_ns=sts)
            open_flows[key] = (pid, tid, ts)
            return
        start = open_flows.pop(key, None)
        if ev.ph == "t" and start is not None:  # step: end this link, start the next from here
            open_flows[key] = (pid, tid, ts)
        spid, stid, sts = start if start else (None, None, None)
        b["flows"].add(flow_id=_int(ev.id), kind=key[0], start_pid=spid, start_tid=stid, start_ns=sts,
                       end_pid=pid, end_tid=tid, end_ns=ts)

    def _counter(self, b, ev, ts, raw):
        try:
            d = _ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            d = None
        if not isinstance(d, dict) or not d:
            self.accounting.skip("counter ('C') event without numeric args", bytes(raw))
            return
        pid = _int(ev.pid)
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                b["counters"].add(pid=pid, name=f"{ev.name}.{k}", ts_ns=ts, value=float(v))
            else:
                self.accounting.skip("counter ('C') value that is not a number", bytes(raw))

    def _metadata(self, b, ev: _Event):
        try:
            a = _ANY.decode(ev.args) if bytes(ev.args) else {}
        except msgspec.DecodeError:
            a = {}
        a = a if isinstance(a, dict) else {}
        pid, tid = _int(ev.pid), _int(ev.tid)
        if ev.name == "process_name":
            b["processes"].add(pid=pid, name=a.get("name"))
        elif ev.name == "process_labels":
            b["processes"].add(pid=pid, labels=str(a.get("labels")))
        elif ev.name == "thread_name":
            b["threads"].add(pid=pid, tid=tid, name=a.get("name"))
        else:  # sort indices and other display hints
            self.accounting.skip(f"metadata event '{ev.name}' (display hint, not kept)")

    def _devices(self, b, props):
        if not isinstance(props, list):
            return
        for p in props:
            if not isinstance(p, dict):
                continue
            name = p.get("name")
            major, minor = p.get("computeMajor"), p.get("computeMinor")
            amd = bool(name) and any(s in name for s in ("AMD", "Instinct", "Radeon"))
            rest = {k: v for k, v in p.items() if k not in (
                "id", "name", "computeMajor", "computeMinor", "numSms", "totalGlobalMem",
                "maxThreadsPerMultiprocessor", "warpSize")}
            b["devices"].add(
                device_id=_int(p.get("id")), name=name, vendor="amd" if amd else "nvidia",
                compute_capability=f"{major}.{minor}" if major is not None else None,
                sm_count=_int(p.get("numSms")), total_memory_bytes=_int(p.get("totalGlobalMem")),
                max_threads_per_sm=_int(p.get("maxThreadsPerMultiprocessor")),
                warp_size=_int(p.get("warpSize")),
                args=msgspec.json.encode(rest).decode() if rest else None)
        yield from b.drain()

    def _source_info(self, path: Path, meta: dict) -> dict:
        dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        rank = _int(dist.get("rank"))
        if rank is None:
            m = _RANK_IN_NAME.search(path.name)
            rank = int(m.group(1)) if m else None
        base = _int(meta.get("baseTimeNanoseconds"))
        first = self._first_ts
        if first is not None and first > 10**17:  # ts were epoch µs (> ~1973 in ns)
            origin, offset = "unix_epoch", 0
        elif base is not None:
            origin, offset = "base_time", base
        else:
            origin, offset = "unknown", None
        versions = [f"{k}={meta[k]}" for k in ("cupti_version", "cuda_runtime_version",
                                                "cuda_driver_version", "roctracer_version",
                                                "hip_runtime_version") if k in meta]
        return {
            "format_version": str(meta["schemaVersion"]) if "schemaVersion" in meta else None,
            "tool_version": " ".join(versions) or None,
            "host": meta.get("hostname") if isinstance(meta.get("hostname"), str) else None,
            "rank": rank,
            "world_size": _int(dist.get("world_size")),
            "clock_origin": origin,
            "clock_offset_ns": offset,
            "metadata": meta,
        }
