"""`KinetoAdapter`: a trace read as a stream of chunks (stream.py), each chunk converted by the
scanned, column-wise or row-wise reader (scanned.py, columnar.py, rows.py); then the metadata,
the devices, the flows left open, and the source's clock and rank."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ...names import short_kernel_name
from ...nesting import StreamNesting
from ...schema import GPU_TABLES
from ..base import Adapter, Builders, TraceError
from . import flows as flow_rule
from .columnar import ColumnarReader
from .decode import (ANY, EVS, LIST, TOP, Chunk, decode_top, fix_surrogates, split_array,
                     fix_nonfinite, nonfinite_reason)
from .gpu_pid import LaunchPids
from .mapping import as_int
from .memory import split_memory
from .rows import RowReader
from ...native import native as _native
from .scanned import ScannedReader
from .stream import Blocks, read_bytes, block_bytes, setting

_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = b"},\n"
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_STEP_MARKER = r"^ProfilerStep#[0-9]+$"  # torch.profiler's step marker (`_step_markers`)
_STEP_CATEGORIES = pa.array(["user_annotation", "gpu_user_annotation"])
_CHUNK_END = object()  # yielded by _read after each chunk's rows (read() nests its events then)


class KinetoAdapter(ScannedReader, ColumnarReader, RowReader, Adapter):
    FORMAT = "kineto"

    def read(self, path, source_id, progress=None):
        """The rows, a chunk at a time; each chunk's events nested (`nesting.StreamNesting`) and
        its GPU rows given their launching call's pid (`gpu_pid.LaunchPids`) when it ends."""
        nesting, pids = StreamNesting(), LaunchPids()
        events: list = []  # the chunk's events, held until it ends
        gpu: list = []  # the GPU rows of this chunk and the one before (a kernel may come just
        before = 0      # before its launch, across a chunk's end); `before`: how many are older
        devices: list = []  # the devices rows, held to the end (`_device_ids`)
        used: set = set()   # the device ids of the GPU rows

        def chunk_end(last=False):
            nonlocal before
            for b in nesting.nested(events):
                yield "events", b
            events.clear()
            gpu[:] = [(table, pids.fill(b)) for table, b in gpu]
            done = len(gpu) if last else before
            yield from gpu[:done]
            del gpu[:done]
            before = len(gpu)

        for name, batch in self._read(path, source_id, progress):
            if name is _CHUNK_END:
                yield from chunk_end()
            elif name == "events":
                for table, b in split_memory(batch, source_id, self.accounting):
                    if table == "events":
                        events.append(self._step_markers(b))
                    else:
                        yield table, b
            elif name in GPU_TABLES:
                if "device_id" in batch.schema.names:
                    used.update(pc.unique(batch.column("device_id")).to_pylist())
                gpu.append((name, batch))
            elif name == "devices":
                devices.append(batch)
            else:
                if name == "api_calls":
                    pids.calls(batch)
                yield name, batch
        yield from chunk_end(last=True)
        for batch in devices:
            yield "devices", self._device_ids(batch, used - {None})

    def _device_ids(self, batch: pa.RecordBatch, used: set) -> pa.RecordBatch:
        """The devices rows with the device ids the GPU rows use. Kineto numbers the properties
        0..n-1 over the devices the process sees, while the kernels of a process given one GPU
        by HIP/CUDA_VISIBLE_DEVICES carry the GPU's own index (an SGLang trace: properties of
        device 0, every kernel on device 9). Where the used ids missing from the properties are
        as many as the properties no GPU row uses, and those describe one model of GPU (so no
        pairing could be wrong), they are paired in order; the property's own id stays in
        args.deviceProperties_id. Counted in sources.metadata.tracekit_repairs."""
        rows = batch.to_pylist()
        ids = {r["device_id"] for r in rows}
        missing, spare = sorted(used - ids), sorted(i for i in ids - used if i is not None)
        if not missing or len(missing) != len(spare):
            return batch
        same = ("name", "compute_capability", "sm_count", "total_memory_bytes", "max_threads_per_sm",
                "warp_size")
        if len({tuple(r[c] for c in same) for r in rows if r["device_id"] in spare}) != 1:
            return batch
        to = dict(zip(spare, missing))
        for r in rows:
            if r["device_id"] in to:
                args = msgspec.json.decode(r["args"]) if r["args"] else {}
                args["deviceProperties_id"] = r["device_id"]
                r["device_id"], r["args"] = to[r["device_id"]], msgspec.json.encode(args).decode()
        self.accounting.repair("devices.device_id: the properties' index (0..n-1 over the visible "
                               "devices) read as the id the kernels use", len(to))
        return pa.RecordBatch.from_pylist(rows, schema=batch.schema)

    def _step_markers(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """torch.profiler's step markers `ProfilerStep#<N>` as `user_annotation` events whatever
        cat the trace gives them: torch before 1.10 (tb_plugin's 2021 traces) wrote them as
        `cpu_op` / `Operator`, newer ones as `user_annotation`, so the phases and steady-state
        views find the steps of both alike. Counted in sources.metadata.tracekit_repairs."""
        cat = batch.column("category")
        maybe = pc.and_kleene(pc.invert(pc.is_in(cat, _STEP_CATEGORIES)),
                              pc.starts_with(batch.column("name"), "ProfilerStep#"))
        if not pc.any(maybe).as_py():
            return batch
        mask = pc.and_kleene(maybe, pc.match_substring_regex(batch.column("name"), _STEP_MARKER))
        n = pc.sum(mask.cast(pa.int64())).as_py() or 0
        if not n:
            return batch
        self.accounting.repair("events.category: step marker ProfilerStep#N of another cat "
                               "(cpu_op: torch before 1.10) read as user_annotation", n)
        i = batch.schema.get_field_index("category")
        return batch.set_column(i, batch.schema.field(i),
                                pc.if_else(mask.fill_null(False), pa.scalar("user_annotation"), cat))

    def _read(self, path, source_id, progress=None):
        path = self._path = Path(path)
        acc = self.accounting
        b = Builders(source_id, acc)
        self._first_ts: int | None = None
        self._flow_state = flow_rule.Flows()
        self._begin_stack: dict = {}  # (pid, tid) -> [(B event, ts)]
        self._procs: dict = {}      # pid -> {name, labels} (`RowReader._metadata`)
        self._threads: dict = {}    # (pid, tid) -> {name}
        self._event_id = 0
        self._utf8_repairs = 0      # invalid UTF-8 repaired inside single events
        self._chunk_repairs = 0     # ... in whole chunks of the streamed document
        self._short: dict = {}      # kernel name -> short name
        self.scan_counts = [0, 0]   # chunks read by the compiled scanner / not (the Python way)
        top = None
        src = Blocks(path)
        self._stream_notes = src.notes
        try:
            parts = yield from self._stream(path, src, b, progress)
            if parts is not None:
                top, tail = parts
                top.update(tail)
        finally:
            src.close()
        if top is None:  # not streamable: read whole (nothing was converted yet)
            top = yield from self._whole(path, b, progress)
        yield from b.ready()
        repairs = top.pop("__repairs__", 0) + self._chunk_repairs
        meta = {}
        for k, v in top.items():
            try:
                meta[k] = ANY.decode(v)
            except msgspec.DecodeError:
                meta[k] = bytes(v).decode("utf-8", "replace")
        if repairs:
            meta["tracekit_repairs"] = {"invalid_utf8_characters_replaced": repairs}
        yield from self._devices(b, meta.get("deviceProperties") or meta.get("computeProperties"),
                                 rocm=any(k in meta for k in ("roctracer_version", "hip_runtime_version")))
        self._processes_threads(b)
        flow_rule.add(b, self._flow_state.leftover())
        for stack in self._begin_stack.values():
            for _ in stack:
                acc.skip("B (begin) event without a matching E (end) event")
        if self._utf8_repairs:
            meta.setdefault("tracekit_repairs", {})["invalid_utf8_in_events"] = self._utf8_repairs
        if self._stream_notes:
            meta.setdefault("tracekit_repairs", {}).update(self._stream_notes)
        yield from b.drain()
        self.source = self._source_info(path, meta)

    # -- reading ---------------------------------------------------------------------------
    def _stream(self, path: Path, src: Blocks, b, progress):
        """Convert the events while reading; returns (top-level keys before, after traceEvents)
        as raw values, or None (having converted nothing) when the document is not laid out for
        it.  Raises TraceError for a document that is not valid JSON."""
        head = b""
        while True:
            blk = src.next()
            head += blk
            m = _TRACE_EVENTS.search(head)
            if m or not blk or len(head) > setting("HEAD_LIMIT"):
                break
        if not m:
            return None
        h = head[:m.start()].rstrip()
        if h.endswith(b","):
            h = h[:-1]
        try:
            top = TOP.decode(h + b"}")
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        # buf: '[' + the event text not converted yet.  A chunk is cut in place: the ',' after
        # its last event becomes ']' while it is decoded, then '[' to open the next chunk
        buf = bytearray(b"[")
        buf += memoryview(head)[m.end():]
        del head
        eof = not blk
        # the document must have event boundaries at line ends (as torch.profiler writes it)
        while not eof and buf.find(_BOUNDARY) < 0 and len(buf) < 2 * block_bytes():
            blk = src.next()
            buf += blk
            eof = not blk
        if not eof and buf.find(_BOUNDARY) < 0:
            return None
        floor = 1  # a cut before this failed: the next one must be later
        while not eof:
            cut = buf.rfind(_BOUNDARY, floor)
            if cut >= 0:
                buf[cut + 1] = 0x5D  # ']'
                with memoryview(buf) as whole, whole[:cut + 2] as chunk:
                    ok = self._chunk(b, chunk, None)
                if ok:
                    buf[cut + 1] = 0x5B  # '['
                    del buf[:cut + 1]
                    floor = 1
                    if progress:
                        progress(src.done, src.total)
                    yield from b.ready()
                    yield _CHUNK_END, None
                else:
                    buf[cut + 1] = 0x2C  # ','
                    floor = cut + 1
            blk = src.next()
            eof = not blk
            buf += blk
        pending = bytes(memoryview(buf)[1:])
        del buf
        tail = self._finish(b, pending)
        if tail is None:  # not valid JSON: the whole-document reader says why
            decode_top(path, read_bytes(path), {})  # NaN / Infinity read as null: the real fault named
            raise RuntimeError(f"{path}: the streaming reader failed on a valid document")
        if progress:
            progress(src.total, src.total)
        return top, tail

    def _finish(self, b, rest: bytes) -> dict | None:
        """The last events, the closing ']' and the keys after it; None if that is not JSON."""
        hi = len(rest)
        for _ in range(10_000):
            p = rest.rfind(b"]", 0, hi)
            if p < 0:
                return None
            hi = p
            t = rest[p + 1:].strip()
            counts: dict = {}
            try:
                if t == b"}":
                    tail = {}
                elif t[:1] == b",":
                    try:
                        tail = TOP.decode(b"{" + t[1:])
                    except msgspec.DecodeError:  # NaN / Infinity after the events?
                        fixed, counts = fix_nonfinite(b"{" + t[1:])
                        if not counts:
                            raise
                        tail = TOP.decode(fixed)
                else:
                    continue
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if "traceEvents" in tail:
                raise TraceError(self._path, "the JSON object has two traceEvents keys",
                                 "keep one events list per trace")
            body = rest[:p].strip()
            if not body or self._chunk(b, b"[" + body + b"]", None):
                self._count_nonfinite(counts)
                return tail
        return None

    def _whole(self, path: Path, b, progress):
        """The whole document in memory, cut into chunks of its event slices."""
        buf = read_bytes(path, self._stream_notes)
        nonfinite: dict = {}
        top, raw_events, repairs = decode_top(path, buf, nonfinite)
        del buf
        self._count_nonfinite(nonfinite)
        if repairs:
            top["__repairs__"] = repairs
        n = len(raw_events)
        step = setting("WHOLE_CHUNK_EVENTS")
        for i in range(0, n, step):
            part = raw_events[i:i + step]
            self._chunk(b, b"[" + b",".join(part) + b"]", part)
            if progress:
                progress(i + len(part), n)
            yield from b.ready()
            yield _CHUNK_END, None
        if progress:
            progress(n, n)
        return top

    def _chunk(self, b, text: bytes, raws: list | None) -> bool:
        """Convert a chunk of events (a JSON array text).  ``raws``: the event slices when known.
        False, having converted nothing, when the text is not a JSON array (a cut inside an event)."""
        if setting("SCAN"):
            cols = _native.kineto_scan(text)
            if cols is not None and self._scanned(b, text, cols):
                self.scan_counts[0] += 1
                return True
            self.scan_counts[1] += 1
        try:
            evs = EVS.decode(text)
        except (msgspec.DecodeError, RecursionError):  # unusual shapes, nesting beyond the
            evs = None                                   # decoder's depth, or a bad cut
        try:
            if evs is not None and self._columnar(b, Chunk(text, evs, raws)):
                return True
        except RecursionError:  # an args object nested too deep: event by event below
            pass
        # one by one (events are kept across chunks, B/E pairs: on a copy of the text, since
        # a streamed chunk is a view of a buffer that is reused)
        evs = None
        if raws is None:
            raws = self._raw_slices(bytes(text))
            if raws is None:
                return False
        self._one_by_one(b, raws)
        return True

    def _count_nonfinite(self, counts: dict) -> None:
        for (token, field), n in sorted(counts.items()):
            self.accounting.repair(nonfinite_reason(token, field), n)

    def _raw_slices(self, text: bytes) -> list | None:
        """The event slices of a chunk that did not decode; invalid UTF-8 repaired (counted),
        ``NaN`` / ``Infinity`` tokens read as null (counted)."""
        try:
            return LIST.decode(text)
        except RecursionError:  # an element nested beyond the decoder's depth
            return split_array(bytes(text))
        except msgspec.ValidationError:
            return None
        except msgspec.DecodeError as e:
            if "UTF-8" not in str(e):
                fixed, n = fix_surrogates(bytes(text))
                if not n:
                    fixed, counts = fix_nonfinite(text)
                    if not counts:
                        return None
                    raws = self._raw_slices(fixed)
                    if raws is not None:  # counted once the chunk's cut is a good one
                        self._count_nonfinite(counts)
                    return raws
                self._chunk_repairs += n
                return self._raw_slices(fixed)
        fixed = text.decode("utf-8", "replace")
        try:
            raws = LIST.decode(fixed.encode())
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        self._chunk_repairs += fixed.count("\ufffd")
        return raws

    def _short_names(self, names: list) -> list:
        """`short_kernel_name` of each name, each distinct name worked out once per trace."""
        short = self._short
        for nm in set(names) - short.keys():
            short[nm] = short_kernel_name(nm)
        return [short[nm] for nm in names]

    def _source_info(self, path: Path, meta: dict) -> dict:
        dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        rank = as_int(dist.get("rank"))
        if rank is None:
            m = _RANK_IN_NAME.search(path.name)
            rank = int(m.group(1)) if m else None
        base = as_int(meta.get("baseTimeNanoseconds"))
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
            "world_size": as_int(dist.get("world_size")),
            "clock_origin": origin,
            "clock_offset_ns": offset,
            "metadata": meta,
        }
