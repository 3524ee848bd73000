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
        # clipped to the window: the busy share of each bucket within the exported time range
        a = "g.start_ns + s.off" if self.o.start_ns is None else "greatest(g.start_ns + s.off, $ws)"
        b = "g.end_ns + s.off" if self.o.end_ns is None else "least(g.end_ns + s.off, $we)"
        util = f"""
            WITH busy AS (  -- the busy periods of each GPU: the `gpu_busy` view (sql/gpu_busy.sql)
              SELECT s.ord, g.source_id, g.device_id, {a} - $t0 AS a, {b} - $t0 AS b
              FROM gpu_busy g JOIN tk_src s USING (source_id)
              WHERE {W('g')} AND {D('g')}
            ), bk AS (
              SELECT ord, source_id, device_id, a, b, unnest(generate_series(a // $B, (b - 1) // $B)) AS bi FROM busy
              WHERE b > a
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
