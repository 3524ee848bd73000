-- memory_peaks: the peak of device memory per GPU and per phase instance, the levels at the phase's boundaries, and who holds the memory at the peak.
--
-- Definition: the allocator totals after each device-memory event (`tk_memory_series()`,
-- sql/lib/memory.sql: recorded "Total Allocated" / "Total Reserved", else the running sum of the
-- driver's allocations). One row per (source, GPU, allocator) with scope 'device' over the whole trace,
-- and one per phase instance (`phase_instances`) and GPU with memory events in its source, scope
-- 'phase':
--   allocated_at_start = the total after the last event before the window starts; when the
--                        trace has none before it, the total before its first event inside (that
--                        event's total minus its own bytes: for 'cuda' lanes 0 at the capture start)
--   allocated_at_end   = the total after the last event at or before the window's end: for a
--                        record_function / NVTX range, torch.cuda.memory_allocated() read right
--                        after the range closed
--   peak_allocated_bytes = the highest total in the window (the level at its start included);
--                        peak_ns = the first time it was reached (the window start when it was
--                        already there)
--   peak_reserved_bytes / reserved_at_end: the same for reserved
--   top_ops            = the allocations live at peak_ns (allocated at or before it, freed after
--                        it or never: `memory_allocations`) grouped by the op that made them, the 5
--                        holding the most bytes, largest first; for allocator 'pytorch' these are
--                        the tensors in use, for 'cuda' the driver allocations (the framework's
--                        reserved segments and libraries' own buffers)
--   pct_of_device      = 100 * max(peak reserved, peak allocated) / the GPU's memory (`devices`)
--
-- Uses: memory_allocations, phase_instances
--
-- Columns:
--   scope                 VARCHAR  'device' (whole trace) or 'phase' (one phase instance)
--   source_id             INTEGER  the source
--   device_id             INTEGER  GPU index
--   allocator             VARCHAR  'pytorch' or 'cuda'
--   phase                 VARCHAR  the phase (NULL for scope 'device')
--   event_id              BIGINT   the phase instance (phase_instances.event_id; NULL for 'device')
--   start_ns              BIGINT   window start: the range start, or the first memory event
--   end_ns                BIGINT   window end: the range end, or the last memory event
--   allocated_at_start    BIGINT   bytes in use when the window starts
--   allocated_at_end      BIGINT   bytes in use when it ends
--   peak_allocated_bytes  BIGINT   highest bytes in use in the window
--   peak_ns               BIGINT   when that was first reached
--   peak_reserved_bytes   BIGINT   highest bytes reserved in the window
--   reserved_at_end       BIGINT   bytes reserved when it ends
--   pct_of_device         DOUBLE   100 * the higher of the two peaks / the GPU's memory size
--   top_ops               STRUCT(op VARCHAR, bytes BIGINT, allocations BIGINT)[]  live allocations at the peak by op (top 5)
CREATE OR REPLACE VIEW memory_peaks AS
WITH s AS (  -- totals after each event, in order (lib/memory)
    SELECT source_id, device_id, allocator, ts_ns, pid, ord, allocated AS alloc_v, reserved AS res_v,
           allocated_before AS pre_v
    FROM tk_memory_series()
),
lanes AS (SELECT DISTINCT source_id, device_id, allocator FROM s),
win AS (  -- the windows: each lane's whole trace, and each phase instance on each lane of its source
    SELECT 'device' AS scope, source_id, device_id, allocator, NULL::VARCHAR AS phase, NULL::BIGINT AS event_id,
           min(ts_ns) AS start_ns, max(ts_ns) AS end_ns
    FROM s GROUP BY ALL
    UNION ALL
    SELECT 'phase', l.source_id, l.device_id, l.allocator, p.phase, p.event_id, p.start_ns, p.end_ns
    FROM phase_instances p JOIN lanes l USING (source_id)
),
w AS (SELECT row_number() OVER () AS wid, * FROM win),
before AS (  -- level when the window starts: the last event before it
    SELECT w.wid, s.alloc_v, s.res_v
    FROM w ASOF JOIN s ON s.source_id = w.source_id AND s.device_id = w.device_id AND s.allocator = w.allocator
                      AND w.start_ns > s.ts_ns
),
at_end AS (
    SELECT w.wid, s.alloc_v, s.res_v
    FROM w ASOF JOIN s ON s.source_id = w.source_id AND s.device_id = w.device_id AND s.allocator = w.allocator
                      AND w.end_ns >= s.ts_ns
),
inside AS (
    SELECT w.wid, max(s.alloc_v) AS max_alloc, max(s.res_v) AS max_res, arg_min(s.pre_v, s.ord) AS first_pre,
           arg_min(s.ts_ns, (-s.alloc_v, s.ord)) AS max_alloc_ns
    FROM w JOIN s ON s.source_id = w.source_id AND s.device_id = w.device_id AND s.allocator = w.allocator
                 AND s.ts_ns >= w.start_ns AND s.ts_ns <= w.end_ns
    GROUP BY w.wid
),
pk AS (
    SELECT w.*, coalesce(b.alloc_v, i.first_pre) AS allocated_at_start, e.alloc_v AS allocated_at_end,
           e.res_v AS reserved_at_end,
           greatest(coalesce(b.alloc_v, i.first_pre), i.max_alloc) AS peak_allocated_bytes,
           CASE WHEN i.max_alloc IS NULL OR coalesce(b.alloc_v, i.first_pre) >= i.max_alloc THEN w.start_ns
                ELSE i.max_alloc_ns END AS peak_ns,
           greatest(b.res_v, i.max_res) AS peak_reserved_bytes
    FROM w LEFT JOIN before b USING (wid) LEFT JOIN at_end e USING (wid) LEFT JOIN inside i USING (wid)
),
live AS (  -- allocations live at each window's peak, by op
    SELECT pk.wid, coalesce(a.op, '(unknown)') AS op, sum(a.bytes)::BIGINT AS bytes, count(*) AS allocations
    FROM pk JOIN memory_allocations a
      ON a.source_id = pk.source_id AND a.device_id = pk.device_id AND a.allocator = pk.allocator
     AND a.alloc_ns <= pk.peak_ns AND (a.free_ns IS NULL OR a.free_ns > pk.peak_ns)
    GROUP BY ALL
),
top AS (
    SELECT wid, list({'op': op, 'bytes': bytes, 'allocations': allocations} ORDER BY bytes DESC, op)[1:5] AS top_ops
    FROM live GROUP BY wid
)
SELECT pk.scope, pk.source_id, pk.device_id, pk.allocator, pk.phase, pk.event_id, pk.start_ns, pk.end_ns,
       pk.allocated_at_start, pk.allocated_at_end, pk.peak_allocated_bytes, pk.peak_ns,
       pk.peak_reserved_bytes, pk.reserved_at_end,
       100.0 * greatest(pk.peak_reserved_bytes, pk.peak_allocated_bytes) / d.total_memory_bytes AS pct_of_device,
       t.top_ops
FROM pk
LEFT JOIN top t USING (wid)
LEFT JOIN devices d ON d.source_id = pk.source_id AND d.device_id = pk.device_id;
