"""Host-side tables: CUDA runtime / driver calls, NVTX, OS runtime, profiler overhead, GPU metrics
(a mixin of NsysAdapter)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...names import api_base_name
from ..fit import fit
from .args import args_sql
from .common import (
    API_CLASSES,
    CUDA_BACKTRACE,
    EVENT_CLASS_LABELS,
    NVTX_BY_DESIGN,
    NVTX_DOMAIN_CREATE,
    NVTX_MARK,
    NVTX_RANGES,
    OSRT_CLASS,
    RUNTIME,
    is_int64,
    merge_unknown_enums,
    nvtx_skip_reason,
    quote_ident,
    seq,
    decode_pid,
    decode_tid,
)


class HostTables:
    def _thread_events(self, n: int, g, start, end, name, category: str, args, **more) -> dict:
        """The columns of an `events` batch of n host intervals of one category, on the threads
        of the globalTid array `g`, with the columns `more`."""
        return {"event_id": self._event_ids(n), "pid": decode_pid(g), "tid": decode_tid(g),
                "start_ns": start, "end_ns": end, "dur_ns": pc.subtract(end, start), "name": name,
                "category": pa.nulls(n, pa.string()).fill_null(category),
                "is_instant": pa.nulls(n, pa.bool_()).fill_null(False), "args": args, **more}

    def _runtime(self):
        t = RUNTIME
        if t not in self.tables:
            return
        wanted = ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"]
        api_names: dict = {}
        for rows, c in self._select_fast(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start, end = self._times(t, c, n)
            g = I("globalTid")
            raw = self._lookup(t, c, "nameId")
            enc = raw.dictionary_encode()
            for s in set(enc.dictionary.to_pylist()) - api_names.keys():
                api_names[s] = api_base_name(s)
            base = pc.take(pa.array([api_names[s] for s in enc.dictionary.to_pylist()], pa.string()),
                           enc.indices)
            ec = c["eventClass"]
            klass, ret = I("eventClass"), I("returnValue")  # before args are taken: raw values go there
            common = {"pid": decode_pid(g), "tid": decode_tid(g), "start_ns": start, "end_ns": end,
                      "dur_ns": pc.subtract(end, start), "correlation_id": I("correlationId"),
                      "args": c["__args"]}
            ok = self._valid_interval(t, rows, wanted, start, end)
            ok = pa.array([True] * n) if ok is None else ok
            is_api = pc.is_in(klass, pa.array(list(API_CLASSES), pa.int64())).fill_null(False)
            is_bt = pc.equal(klass, CUDA_BACKTRACE).fill_null(False)
            api = self._batch("api_calls", n, {
                **common, "name": base, "raw_name": raw,
                "api": pc.if_else(pc.equal(klass, 0), pa.scalar(API_CLASSES[0]),
                                  pc.if_else(pc.equal(klass, 1), pa.scalar(API_CLASSES[1]),
                                             pa.scalar(None, pa.string()))),
                "return_value": ret})
            yield from self._emit("api_calls", api, pc.and_(ok, is_api))
            if pc.any(is_bt).as_py():
                # events have no return_value column: keep it in args
                args = merge_unknown_enums(seq(c["__args"]), (("returnValue", seq(c["returnValue"]), {}),))
                ev = self._batch("events", n, self._thread_events(
                    n, g, start, end, base, "cuda_backtrace", args, correlation_id=common["correlation_id"]))
                yield from self._emit("events", ev, pc.and_(ok, is_bt))
            other = pc.and_(ok, pc.invert(pc.or_(is_api, is_bt)))
            if pc.any(other).as_py():
                ec = seq(ec)
                for i in (i for i, v in enumerate(other.to_pylist()) if v):
                    x = ec[i]
                    self.accounting.skip(
                        f"{t}: row with eventClass {x} ({EVENT_CLASS_LABELS.get(x, 'unknown class')}), "
                        "not a CUDA runtime or driver call", dict(zip(wanted, rows[i])))
            self._tick(n)

    def _nvtx(self):
        t = "NVTX_EVENTS"
        if t not in self.tables:
            return
        have = set(self.tables[t])
        con = self.con
        # domain names per process (eventType 75), first creation row wins
        domains: dict = {}
        if {"eventType", "domainId"} <= have:
            txt = quote_ident("text") if "text" in have else "NULL"
            tid = quote_ident("textId") if "textId" in have else "NULL"
            gt = quote_ident("globalTid") if "globalTid" in have else "NULL"
            order = "ORDER BY start" if "start" in have else ""
            for g, d, text, text_id in self._all(
                    f"SELECT {gt}, domainId, {txt}, {tid} FROM NVTX_EVENTS WHERE eventType = "
                    f"{NVTX_DOMAIN_CREATE} {order}"):
                key = (((g if is_int64(g) else 0) >> 24) & 0xFFFFFF, d)
                if key not in domains:
                    domains[key] = self.strings.get(text_id, text)
        hi = con.execute(
            f"SELECT {'max(start)' if 'start' in have else 'NULL'}, "
            f"{'max(' + quote_ident('end') + ')' if 'end' in have else 'NULL'} FROM NVTX_EVENTS").fetchone()
        maxts = max((v for v in hi if is_int64(v)), default=None)
        wanted = ["start", "end", "eventType", "globalTid", "text", "textId", "domainId"]
        # eventType stays in args (the range style); endGlobalTid too (only set when a range ended
        # on another thread); domainId only when it is not the default domain
        args_skip = {"text", "textId", "start", "end", "globalTid"}
        extra = {"unclosed": f"CASE WHEN {quote_ident('end') if 'end' in have else 'NULL'} IS NULL AND "
                             f"{quote_ident('eventType') if 'eventType' in have else 'NULL'} IN "
                             f"({', '.join(map(str, NVTX_RANGES))}) THEN json('true') END"}
        for rows, c in self._select_nvtx(t, wanted, args_skip, extra):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start, end = self._times(t, c, n, end_required=False)
            etype = I("eventType")
            is_range = pc.is_in(etype, pa.array(NVTX_RANGES, pa.int64())).fill_null(False)
            is_mark = pc.equal(etype, NVTX_MARK).fill_null(False)
            if maxts is not None:
                end = pc.if_else(pc.and_(is_range, pc.is_null(end)), pa.scalar(maxts, pa.int64()), end)
            end = pc.if_else(is_mark, start, end)
            g = I("globalTid")
            pid = decode_pid(g)
            name = pc.coalesce(self._lookup(t, c, "textId"), self._strs(t, "text", c["text"], c))
            dom_ids = c["domainId"]
            if domains:
                pids = pid.to_pylist()
                dom = [domains.get((p, d)) if d else None for p, d in zip(pids, dom_ids)]
            else:
                dom = None
            kept = pc.or_(is_range, is_mark)
            mask = self._valid_interval(t, rows, wanted, start, end, among=kept)
            batch = self._batch("events", n, {
                "event_id": self._event_ids(n), "pid": pid, "tid": decode_tid(g), "start_ns": start,
                "end_ns": end, "dur_ns": pc.subtract(end, start), "name": name,
                "category": pc.if_else(is_mark, pa.scalar("nvtx_mark"), pa.scalar("nvtx")),
                "domain": dom, "is_instant": is_mark, "args": c["__args"]})
            yield from self._emit("events", batch, mask)
            # the rows that are neither ranges nor marks, counted per eventType
            if not pc.all(kept).as_py():
                for i in (i for i, v in enumerate(kept.to_pylist()) if not v):
                    x = c["eventType"][i]
                    self.accounting.skip(nvtx_skip_reason(x), dict(zip(wanted, rows[i])),
                                         by_design=x in NVTX_BY_DESIGN)
            self._tick(n)

    def _select_nvtx(self, table, wanted, args_skip, extra):
        have = self.tables[table]
        sel = [(quote_ident(c) if c in have else "NULL") for c in wanted]
        rest = [c for c in have if c not in args_skip]
        sel.append(args_sql(rest, extra, drop_zero={"domainId"}))
        keys = list(wanted) + ["__args"]
        for rows in self._chunks(table, f"SELECT {', '.join(sel)} FROM {quote_ident(table)}"):
            yield rows, dict(zip(keys, zip(*rows)))

    def _osrt(self):
        t = "OSRT_API"
        if t not in self.tables:
            return
        wanted = ["start", "end", "eventClass", "globalTid", "nameId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start, end = self._times(t, c, n)
            klass = I("eventClass")
            g = I("globalTid")
            is_call = pc.or_(pc.equal(klass, OSRT_CLASS), pc.is_null(klass)).fill_null(False)
            mask = self._valid_interval(t, rows, wanted, start, end, among=is_call)
            name = self._lookup(t, c, "nameId")
            batch = self._batch("events", n, self._thread_events(n, g, start, end, name, "osrt", c["__args"]))
            yield from self._emit("events", batch, mask)
            if not pc.all(is_call).as_py():
                for i in (i for i, v in enumerate(is_call.to_pylist()) if not v):
                    x = c["eventClass"][i]
                    self.accounting.skip(
                        f"{t}: eventClass {x} ({EVENT_CLASS_LABELS.get(x, 'unknown class')}) row, a "
                        "zero-length tracing marker, not an OS runtime call", dict(zip(wanted, rows[i])),
                        by_design=True)
            self._tick(n)

    def _overhead(self, t: str):
        if t not in self.tables:
            return
        wanted = ["start", "end", "globalTid", "nameId", "correlationId"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            I = lambda k: self._ints(t, c, k, n)  # noqa: E731, B023 (called in this iteration only)
            start, end = self._times(t, c, n)
            g = I("globalTid")
            name, corr = self._lookup(t, c, "nameId"), I("correlationId")
            batch = self._batch("events", n, self._thread_events(n, g, start, end, name, "overhead",
                                                                 c["__args"], correlation_id=corr))
            yield from self._emit("events", batch, self._valid_interval(t, rows, wanted, start, end))
            self._tick(n)

    def _gpu_metrics(self):
        t = "GPU_METRICS"
        if t not in self.tables:
            return
        have = set(self.tables[t])
        if not {"timestamp", "value"} <= have:
            if self.counts.get(t):
                self.accounting.skip(f"{t}: rows of an unknown layout (no timestamp/value columns)",
                                     None, self.counts[t])
            return
        metric_names: dict = {}
        mt = self.tables.get("TARGET_INFO_GPU_METRICS", [])
        if {"typeId", "metricId", "metricName"} <= set(mt):
            for ty, mi, nm in self._all("SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS"):
                if isinstance(ty, int) and isinstance(mi, int):
                    metric_names.setdefault((ty << 32) | (mi & 0xFFFFFFFF), nm)
        keys = pa.array(list(metric_names), pa.int64())
        values = pa.array(list(metric_names.values()), pa.string())
        wanted = ["timestamp", "typeId", "metricId", "value"]
        for rows, c in self._select(t, wanted):
            n = len(rows)
            # counters have no args: a value that does not fit is counted, not kept
            ts = self._ints(t, c, "timestamp", n, keep=False, required=True)
            ty = self._ints(t, c, "typeId", n, keep=False)
            mi = self._ints(t, c, "metricId", n, keep=False)
            key = pc.bit_wise_or(pc.shift_left(ty, 32), pc.bit_wise_and(mi, 0xFFFFFFFF))
            names = pc.coalesce(pc.take(values, pc.index_in(key, value_set=keys)),  # unnamed: "metric N"
                                pc.binary_join_element_wise("metric ", pc.cast(mi, pa.string()), ""))
            value = fit(c["value"], pa.float64())[0]  # a value that is not a number: skipped below
            ok = pc.and_(pc.is_valid(ts), pc.is_valid(value))
            if not pc.all(ok).as_py():
                for i in (i for i, v in enumerate(ok.to_pylist()) if not v):
                    self.accounting.skip(f"{t}: sample without timestamp or value", dict(zip(wanted, rows[i])))
            batch = self._batch("counters", n, {
                "device_id": pc.bit_wise_and(ty, 0xFF), "name": names, "ts_ns": ts, "value": value})
            yield from self._emit("counters", batch, ok)
            self._tick(n)
