"""Column-wise on the compiled scanner's columns (`_native.kineto_scan`, tracekit/_native.c):
the fast path of a chunk, routed with Arrow compute, with `columnar`'s rules in the same order
(so the rows come out the same) and `mapping`'s columns."""

from __future__ import annotations

import re
from typing import NamedTuple

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from ...native import native as _native
from . import flows as flow_rule
from . import mapping
from .decode import EV, with_extras
from .mapping import as_ints

_SCAN_I64, _SCAN_STR = _native.kineto_names() if _native is not None else ((), ())
_INSTANT_PHASES = pa.array([ord(x) for x in "iIn"], pa.uint8())
# Python values handed to Arrow compute carry their Arrow type: for a value without one, pyarrow
# infers it, and its inference tries to import dateutil each time (a search of sys.path where
# dateutil is not installed: ~0.1 ms a call, hundreds of calls on a big trace)
_X = pa.scalar(ord("X"), pa.uint8())
_FLOW_PHASES = pa.array([ord(x) for x in "sft"], pa.uint8())
# the tables converted column-wise whose every source the scanner reads (else: from the
# decoded events, as the Python path); memops and syncs (few rows) always go row by row
SCANNED = {t: mapping.scannable(t, set(_SCAN_I64) | set(_SCAN_STR)) for t in ("kernels", "api_calls", "events")}
_EVENT_NO = "_event_no"  # (in a chunk's columns: the running count of its `events` rows)


class ScannedReader:
    """The scanned part of `KinetoAdapter` (a mixin: it uses the adapter's state)."""

    def _scanned(self, b, text, cols) -> bool:
        """Convert a chunk that `_native.kineto_scan` read into columns, with the rules of `_columnar`
        (in the same order, so the rows come out the same).  The scanner only accepts the
        shapes those rules take column-wise: every non-'M' event has an exact ts in range, every
        'X' event a dur in range, ids are ints, args fields have their usual types.  The few
        events converted one by one (metadata, counters, memcpy/memset/sync) and the groups
        with a pid or tid given as text are converted from their decoded text, as there.
        False, having changed nothing, when one of those does not decode."""
        n, ph, i64, valid, strs = cols
        if not n:
            return True
        c = {}
        for name, data, v in zip(_SCAN_I64, i64, valid):
            c[name] = pa.Array.from_buffers(pa.int64(), n, [v and pa.py_buffer(v), pa.py_buffer(data)])
        for name, (off, data, v) in zip(_SCAN_STR, strs):
            c[name] = pa.Array.from_buffers(pa.string(), n, [v and pa.py_buffer(v), pa.py_buffer(off),
                                                            pa.py_buffer(data)])
        span0, span1 = c["span_start"], c["span_end"]
        c["args"] = _Spans(text, c.pop("args_start"), c.pop("args_end"))  # gathered from the text

        def decoded(idx):  # the events at idx as structs (one by one, like the Python path)
            idx = pa.array(idx, pa.int64()) if isinstance(idx, list) else idx
            return [EV.decode(text[s_:e_]) for s_, e_ in zip(span0.take(idx).to_pylist(),
                                                            span1.take(idx).to_pylist())]

        def at(pattern):
            return [m.start() for m in re.finditer(pattern, ph)]

        phs = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(ph)])
        is_x = pc.equal(phs, _X)
        xs = pc.indices_nonzero(is_x)
        groups = []  # (cat, table, kind, indices into the chunk), in order of first appearance
        mark = pc.is_in(phs, value_set=_INSTANT_PHASES)  # the rows of `events`, for their ids
        if len(xs):
            enc = c["cat"].take(xs).dictionary_encode(null_encoding="encode")
            for k, cat in enumerate(enc.dictionary.to_pylist()):
                table, kind = mapping.table_of(cat)
                ci = (xs.take(pc.indices_nonzero(pc.equal(enc.indices, pa.scalar(k, enc.indices.type))))
                      if len(enc.dictionary) > 1 else xs)
                groups.append((cat, table, kind, ci))
            codes = [k for k, g in enumerate(groups) if g[1] == "events"]
            if codes:
                mark = pc.replace_with_mask(mark, is_x, pc.is_in(
                    enc.indices, value_set=pa.array(codes, enc.indices.type)))
        textual = c["text_pid_tid"]
        has_text = pc.max(textual).as_py() == 1

        def text_rows(idx) -> bool:  # a pid or tid given as text among these rows?
            return has_text and pc.max(textual.take(idx)).as_py() == 1

        def where(phases) -> pa.Array:  # the positions of those phases (Arrow: flows are ~1/3 of events)
            return pc.indices_nonzero(pc.is_in(phs, value_set=phases)).cast(pa.int64())

        flows = where(_FLOW_PHASES)
        instants = where(_INSTANT_PHASES)
        try:  # the events converted from their decoded text: decoded before anything is changed
            meta = decoded(at(b"M")) if b"M" in ph else []
            counters = at(b"C") if b"C" in ph else []
            counter_evs = decoded(counters) if counters else []
            # memops, syncs (few rows), and groups with a text pid/tid: as the Python path does
            few = {k: decoded(ci) for k, (_, table, _, ci) in enumerate(groups)
                   if not SCANNED.get(table) or text_rows(ci)}
            flow_evs = decoded(flows) if len(flows) and text_rows(flows) else None
            instant_evs = decoded(instants) if len(instants) and text_rows(instants) else None
        except msgspec.DecodeError:
            return False
        for ev in meta:
            self._metadata(b, ev)
        if len(meta) == n:
            return True
        ts = c["ts"]
        if self._first_ts is None:
            self._first_ts = ts[re.search(rb"[^M]", ph).start()].as_py()
        for i, ev in zip(counters, counter_evs):
            self._counter(b, ev, ts[i].as_py(), text[span0[i].as_py():span1[i].as_py()])
        if len(flows):
            fi = flows
            fph = phs.take(fi).buffers()[1].to_pybytes()[:len(fi)]
            if flow_evs is None:  # in C, on the columns
                fenc = c["cat"].take(fi).dictionary_encode()
                lower = [(x or "").lower() or "flow" for x in fenc.dictionary.to_pylist()] + ["flow"]
                kinds = [lower[k] for k in fenc.indices.fill_null(len(lower) - 1).to_pylist()]
                cols = [c[k].take(fi) for k in ("id", "pid", "tid")] + [ts.take(fi)]
                bufs = []
                for a in cols[:3]:
                    bufs += [a.buffers()[1], a.buffers()[0] if a.null_count else None]
                flow_rule.add(b, _native.kineto_flows(fph, kinds, *bufs, cols[3].buffers()[1],
                                                      self._flow_state.open, self._flow_state.early))
            else:  # a text pid / tid among them: as the Python path
                pids, tids = (as_ints([getattr(e, f) for e in flow_evs])[1] for f in ("pid", "tid"))
                self._flows(b, list(fph.decode()), c["cat"].take(fi).to_pylist(),
                            c["id"].take(fi).to_pylist(), pids, tids, ts.take(fi).to_pylist())
        # event ids: one per `events` row, in input order
        cum = pc.cumulative_sum(mark.cast(pa.int64()))
        c[_EVENT_NO] = cum
        base = pa.scalar(self._event_id - 1, pa.int64())
        self._event_id += cum[-1].as_py()
        for k, (cat, table, kind, ci) in enumerate(groups):
            sub = few.get(k)
            category = mapping.category_of(cat, kind) if table == "events" else None
            with_args = mapping.with_args(cat, category) if table == "events" else True
            g = _gather(c, ci, ("ts", "dur") + ((_EVENT_NO,) if table == "events" else ()) + (
                () if sub is not None or table not in SCANNED else mapping.scanned_sources(table, with_args) + ("args",)))
            t0, d = g["ts"], g["dur"]
            end = pc.add(t0, d)
            if table == "events":
                ids = pc.add(g[_EVENT_NO], base)
                if sub is not None:
                    self._events(b, sub, ids.to_pylist(), t0, end, d, category, with_args, False)
                else:
                    self._scanned_events(b, g, ids, t0, end, d, category, with_args, False)
            elif table == "kernels":
                if sub is not None:
                    self._kernels(b, sub, t0, end, d)
                else:
                    self._scanned_kernels(b, g, t0, end, d)
            elif table == "api_calls":
                if sub is not None:
                    self._api_calls(b, sub, t0, end, d, kind)
                else:
                    self._scanned_api_calls(b, g, t0, end, d, kind)
            else:
                self._few(b, table, kind, sub, t0, end, d)
        if len(instants):
            g = _gather(c, instants, ("ts", _EVENT_NO) + (
                () if instant_evs is not None else mapping.scanned_sources("events", False) + ("args",)))
            t0 = g["ts"]
            ids = pc.add(g[_EVENT_NO], base)
            zero = pa.repeat(pa.scalar(0, pa.int64()), len(instants))
            if instant_evs is not None:
                self._events(b, instant_evs, ids.to_pylist(), t0, t0, zero, "instant", False, True)
            else:
                self._scanned_events(b, g, ids, t0, t0, zero, "instant", False, True)
        return True

    def _scanned_events(self, b, c, ids, t0, end, dur, category, with_args, instant) -> None:
        m = len(ids)
        cols, _ = mapping.scanned_columns("events", c, with_args)
        if category in mapping.GPU_TRACK_CATEGORIES:
            cols["device_id"], cols["stream_id"], cols["pid"], cols["tid"] = cols["pid"], cols["tid"], None, None
        b["events"].add_columns(m, {
            **cols, "event_id": ids, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "category": pa.repeat(pa.scalar(category, pa.string()), m),
            "is_instant": pa.repeat(pa.scalar(instant, pa.bool_()), m),
            "args": c["args"]})

    def _scanned_kernels(self, b, c, t0, end, dur) -> None:
        cols, extras = mapping.scanned_columns("kernels", c)
        enc = cols["name"].dictionary_encode()
        short = self._short_names(enc.dictionary.to_pylist())
        b["kernels"].add_columns(len(t0), {
            **cols, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "short_name": pa.array(short, pa.string()).take(enc.indices),
            "args": with_extras(c["args"], extras)})

    def _scanned_api_calls(self, b, c, t0, end, dur, kind) -> None:
        cols, extras = mapping.scanned_columns("api_calls", c)
        b["api_calls"].add_columns(len(t0), {
            **cols, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "api": mapping.by_name(lambda nm: mapping.api_of(kind, nm), cols["name"]),
            "args": with_extras(c["args"], extras)})


def _gather(c: dict, idx, names: tuple) -> dict:
    """The scanner's columns ``names`` (of ``c``) at the rows ``idx``: one Arrow take of the
    integer columns (a take per column costs ~20 us of Python: thousands of columns on big
    traces), and the text columns by `_take_text`."""
    ints = [n for n in names if n not in _TEXT]
    taken = pa.RecordBatch.from_arrays([c[n] for n in ints], names=ints).take(idx) if ints else None
    return {n: _take_text(c[n], idx) if n in _TEXT else taken.column(n) for n in names}


class _Spans(NamedTuple):
    """A text column as byte ranges of the chunk (the scanner's args: not copied while scanning)."""
    text: object  # the chunk (bytes-like)
    start: pa.Array  # int64, NULL where the row has no text
    end: pa.Array


_TEXT = frozenset(_SCAN_STR) | {"args"}


def _take_text(col, idx: pa.Array) -> pa.Array:
    """A text column of the scanner (a string array of offset 0, or `_Spans`) at the rows
    ``idx``, in C: the text copied once into a buffer of its exact size
    (`_native.take_strings` / `take_spans`; Arrow's take grows and shrinks its buffer, copying
    the text up to three times), the args straight from the chunk (2-5x faster than Arrow's take
    on a trace's ~100 MB of names and args)."""
    m = len(idx)
    if isinstance(col, _Spans):
        if idx.null_count:
            raise ValueError("row numbers with nulls")
        if idx.type.bit_width != 64:
            idx = idx.cast(pa.int64())
        s = col.start
        o, d, valid = _native.take_spans(idx.buffers()[1], idx.offset, m, len(s), col.text, s.buffers()[1],
                                         col.end.buffers()[1], s.buffers()[0] if s.null_count else None)
    else:
        if idx.null_count or col.offset or idx.type.bit_width != 64:
            return col.take(idx)
        v, off, data = col.buffers()
        o, d, valid = _native.take_strings(idx.buffers()[1], idx.offset, m, len(col), off, data,
                                           v if col.null_count else None)
    return pa.Array.from_buffers(pa.string(), m, [valid and pa.py_buffer(valid), pa.py_buffer(o), pa.py_buffer(d)])
