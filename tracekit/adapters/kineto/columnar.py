"""Column-wise on decoded events: the Python path of a chunk (the events decoded in one msgspec
call into small structs, then routed and built as Arrow columns, one table and category at a
time), with `rows`' rules and `mapping`'s columns."""

from __future__ import annotations

import itertools
from collections import defaultdict

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from . import mapping
from .decode import (ARGS_LIST, NO_ARGS, NULL_JSON, OK, TS_LIMIT, args_texts, Chunk, LazyRaw,
                     us_column, with_extras, decode_args, dur_skip, ts_skip)
from .mapping import as_ints


class ColumnarReader:
    """The column-wise part of `KinetoAdapter` (a mixin: it uses the adapter's state)."""

    def _skip(self, reason: str, ch: Chunk, i: int) -> None:
        acc = self.accounting
        acc.skip(reason, ch.raw(i) if reason not in acc.examples else None)

    def _columnar(self, b, ch: Chunk) -> bool:
        """Convert a decoded chunk with the rules of `_route`, one table and category at a time;
        False (having converted nothing) when it has B/E events, which go one by one."""
        evs = ch.evs
        n = len(evs)
        by_ph: dict[str, list[int]] = defaultdict(list)
        for i, ph in enumerate([e.ph for e in evs]):
            by_ph[ph].append(i)
        if "B" in by_ph or "E" in by_ph:
            return False  # begin/end pairs: one by one, in order
        for i in by_ph.pop("M", ()):
            self._metadata(b, evs[i])
        if not by_ph:
            return True
        ts, codes = us_column([e.ts for e in evs])
        lo_hi = pc.min_max(ts).as_py() if codes is None else None
        if codes is not None or lo_hi["min"] is None or not (
                -TS_LIMIT < lo_hi["min"] and lo_hi["max"] < TS_LIMIT):
            tsl = ts.to_pylist()
            for ph, idx in list(by_ph.items()):
                keep = []
                for i in idx:
                    reason = ts_skip(ph, codes[i] if codes is not None else OK, tsl[i])
                    if reason:
                        self._skip(reason, ch, i)
                    else:
                        keep.append(i)
                by_ph[ph] = keep
        if self._first_ts is None:
            first = min((idx[0] for idx in by_ph.values() if idx), default=None)
            if first is not None:
                self._first_ts = ts[first].as_py()
        flows = sorted(itertools.chain(by_ph.pop("s", ()), by_ph.pop("f", ()), by_ph.pop("t", ())))
        instants = sorted(itertools.chain(by_ph.pop("i", ()), by_ph.pop("I", ()), by_ph.pop("n", ())))
        xs = by_ph.pop("X", [])
        for i in by_ph.pop("C", ()):
            self._counter(b, evs[i], ts[i].as_py(), LazyRaw(ch, i))
        for ph, idx in by_ph.items():
            for i in idx:
                self._skip(f"unsupported phase '{ph}'", ch, i)
        if flows:
            sub = [evs[i] for i in flows]
            self._flows(b, [e.ph for e in sub], [e.cat for e in sub], [e.id for e in sub],
                        as_ints([e.pid for e in sub])[1], as_ints([e.tid for e in sub])[1],
                        ts.take(flows).to_pylist())
        # complete events: dur, then one group per category
        groups: dict = defaultdict(list)
        dur = None
        if xs:
            dur, dcodes = us_column([evs[i].dur for i in xs])
            lo_hi = pc.min_max(dur).as_py() if dcodes is None else None
            if dcodes is not None or not (0 <= lo_hi["min"] and lo_hi["max"] < TS_LIMIT):
                durl = dur.to_pylist()
                keep = []
                for j, i in enumerate(xs):
                    reason = dur_skip(dcodes[j] if dcodes is not None else OK, durl[j])
                    if reason:
                        self._skip(reason, ch, i)
                    else:
                        keep.append(j)
            else:
                keep = range(len(xs))
            cats = [evs[i].cat for i in xs]
            for j in keep:
                groups[cats[j]].append(j)
        # event ids: one per `events` row, in input order
        ev_groups = []
        for cat, js in groups.items():
            table, kind = mapping.table_of(cat)
            if table == "events":
                ev_groups.append((cat, kind, js))
        if instants or ev_groups:
            mark = bytearray(n)
            for i in instants:
                mark[i] = 1
            for _, _, js in ev_groups:
                for j in js:
                    mark[xs[j]] = 1
            cum = list(itertools.accumulate(mark))
            base = self._event_id - 1
            self._event_id += cum[-1]
        for cat, js in groups.items():
            table, kind = mapping.table_of(cat)
            ci = [xs[j] for j in js]
            sub = [evs[i] for i in ci]
            t0 = ts.take(ci)
            d = dur.take(js)
            end = pc.add(t0, d)
            if table == "events":
                category = mapping.category_of(cat, kind)
                self._events(b, sub, [base + cum[i] for i in ci], t0, end, d, category,
                             mapping.with_args(cat, category),
                             False)
            elif table == "kernels":
                self._kernels(b, sub, t0, end, d)
            elif table == "api_calls":
                self._api_calls(b, sub, t0, end, d, kind)
            else:  # memops, syncs: few rows
                self._few(b, table, kind, sub, t0, end, d)
        if instants:
            t0 = ts.take(instants)
            self._events(b, [evs[i] for i in instants], [base + cum[i] for i in instants], t0, t0,
                         pa.repeat(pa.scalar(0, pa.int64()), len(instants)), "instant", False, True)
        return True

    def _args_many(self, sub: list) -> list:
        """The mapped args fields of many events: one decode call (per event if one is unusual)."""
        raws = [e.args or NULL_JSON for e in sub]
        raws[0] = b"[" + raws[0]
        raws[-1] = bytes(raws[-1]) + b"]"
        try:
            out = ARGS_LIST.decode(b",".join(raws))
        except (msgspec.ValidationError, msgspec.DecodeError):
            return [decode_args(e) for e in sub]
        return [a if a is not None else NO_ARGS for a in out]

    def _events(self, b, sub, ids, t0, end, dur, category, with_args, instant) -> None:
        m = len(sub)
        cols, extras = mapping.list_columns("events", sub, self._args_many(sub) if with_args else None)
        if extras:  # text pids/tids are kept in args: row by row
            for ev, eid, s_, e_ in zip(sub, ids, t0.to_pylist(), end.to_pylist()):
                self._event(b, ev, None, s_, e_, category, eid, instant=instant)
            return
        if category in mapping.GPU_TRACK_CATEGORIES:
            cols["device_id"], cols["stream_id"], cols["pid"], cols["tid"] = cols["pid"], cols["tid"], None, None
        b["events"].add_columns(m, {
            **cols, "event_id": pa.array(ids, pa.int64()), "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "category": pa.repeat(pa.scalar(category), m), "is_instant": pa.repeat(pa.scalar(instant), m),
            "args": args_texts(sub)})

    def _kernels(self, b, sub, t0, end, dur) -> None:
        cols, extras = mapping.list_columns("kernels", sub, self._args_many(sub))
        b["kernels"].add_columns(len(sub), {
            **cols, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "short_name": self._short_names(cols["name"]),
            "args": with_extras(args_texts(sub), extras)})

    def _api_calls(self, b, sub, t0, end, dur, kind) -> None:
        cols, extras = mapping.list_columns("api_calls", sub, self._args_many(sub))
        b["api_calls"].add_columns(len(sub), {
            **cols, "start_ns": t0, "end_ns": end, "dur_ns": dur,
            "api": [mapping.api_of(kind, nm) for nm in cols["name"]],
            "args": with_extras(args_texts(sub), extras)})
