"""Counter tracks: the store's counters, GPU memory, GPU utilization and launch-queue depth."""

from __future__ import annotations

import math

from .tracks import Layout


def _nice_bucket(span_ns: int, target: int = 2000) -> int:
    raw = max(span_ns // target, 1000)
    mag = 10 ** (len(str(raw)) - 1)
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag



class Counters:
    # -- counters ------------------------------------------------------------------------------------
    def counters(self, L: Layout, w):
        sql = self.sql("counters")
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
        sql = self.sql("memory")
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
        span = self.execute(self.sql("gpu_end"))[0][0]
        if span is None:
            return
        B = self.o.util_bucket_ns or _nice_bucket(max(span - self.t0, 1))
        self.r.util_bucket_ns = B
        # clipped to the window: the busy share of each bucket within the exported time range
        a = "g.start_ns + s.off" if self.o.start_ns is None else "greatest(g.start_ns + s.off, $ws)"
        b = "g.end_ns + s.off" if self.o.end_ns is None else "least(g.end_ns + s.off, $we)"
        util = self.sql("utilization", a=a, b=b)  # the busy periods of each GPU: the `gpu_busy` view
        self._bucket_series(L, w, util, B, "GPU utilization", "%",
                            lambda row: round(100.0 * row["busy"] / B, 2), carry=False)
        queue_sql = self.sql("launch_queue")
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
