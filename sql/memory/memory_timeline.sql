-- memory_timeline: device memory allocated and reserved over time, per GPU and allocator, in time buckets (like gpu_utilization_timeline).
--
-- Definition: the allocator's totals after each device-memory event (`tk_memory_series()`,
-- sql/lib/memory.sql): allocated = "Total Allocated" and reserved = "Total Reserved" where the
-- source records them (torch.profiler profile_memory=True), else (nsys
-- --cuda-memory-usage=true: allocator 'cuda') both are the running sum of allocated minus freed
-- bytes since the capture started. The span from the first to the last such event is cut into buckets of
-- bucket_ns (parameter; default: span / 100 rounded up). Per bucket:
--   allocated_bytes / reserved_bytes          = the totals at the bucket's end (the last event
--                                               in or before it)
--   max_allocated_bytes / max_reserved_bytes  = the highest totals during the bucket: the level
--                                               it started at (carried from before) or any event in it
-- The largest max_allocated_bytes of a GPU is its peak: for torch.profiler traces,
-- torch.cuda.max_memory_allocated() over the profiled region (after reset_peak_memory_stats).
-- Parameters:
--   bucket_ns  (gpu_utilization_timeline)
--
-- Uses: (tables only)
--
-- Columns:
--   source_id            INTEGER  the source
--   device_id            INTEGER  GPU index
--   allocator            VARCHAR  'pytorch' or 'cuda'
--   bucket               BIGINT   bucket number, 0 = first memory event
--   bucket_start_ns      BIGINT   bucket start, ns
--   bucket_end_ns        BIGINT   bucket end, ns
--   allocated_bytes      BIGINT   bytes in use at the bucket's end
--   max_allocated_bytes  BIGINT   highest bytes in use during the bucket
--   reserved_bytes       BIGINT   bytes reserved at the bucket's end
--   max_reserved_bytes   BIGINT   highest bytes reserved during the bucket
--   allocs               BIGINT   allocations in the bucket
--   frees                BIGINT   frees in the bucket
CREATE OR REPLACE VIEW memory_timeline AS
WITH s AS (  -- totals after each event (lib/memory)
    SELECT source_id, device_id, allocator, ts_ns, kind, ord, allocated AS alloc_v, reserved AS res_v
    FROM tk_memory_series()
),
w AS (
    SELECT source_id, device_id, allocator, min(ts_ns) AS t0, max(ts_ns) AS t1,
           greatest(coalesce(getvariable('bucket_ns')::BIGINT, (max(ts_ns) - min(ts_ns) + 100) // 100), 1) AS bucket_ns
    FROM s GROUP BY ALL
),
per AS (  -- per bucket with events: last totals, highest totals, counts
    SELECT s.source_id, s.device_id, s.allocator, (s.ts_ns - w.t0) // w.bucket_ns AS bucket,
           arg_max(s.alloc_v, s.ord) AS last_alloc,
           arg_max(s.res_v, s.ord) AS last_res,
           max(s.alloc_v) AS max_alloc, max(s.res_v) AS max_res,
           count(*) FILTER (WHERE s.kind = 'alloc') AS allocs, count(*) FILTER (WHERE s.kind = 'free') AS frees
    FROM s JOIN w USING (source_id, device_id, allocator)
    GROUP BY ALL
),
grid AS (
    SELECT w.source_id, w.device_id, w.allocator, r.bucket, w.t0 + r.bucket * w.bucket_ns AS bucket_start_ns,
           w.t0 + (r.bucket + 1) * w.bucket_ns AS bucket_end_ns
    FROM w, LATERAL (SELECT range AS bucket FROM range(0, (w.t1 - w.t0) // w.bucket_ns + 1)) r
),
g AS (
    SELECT g.*, p.max_alloc, p.max_res, coalesce(p.allocs, 0) AS allocs, coalesce(p.frees, 0) AS frees,
           last_value(p.last_alloc IGNORE NULLS) OVER wb AS alloc_end,
           last_value(p.last_res IGNORE NULLS) OVER wb AS res_end
    FROM grid g LEFT JOIN per p USING (source_id, device_id, allocator, bucket)
    WINDOW wb AS (PARTITION BY g.source_id, g.device_id, g.allocator ORDER BY g.bucket ROWS UNBOUNDED PRECEDING)
)
SELECT source_id, device_id, allocator, bucket, bucket_start_ns, bucket_end_ns,
       alloc_end AS allocated_bytes,
       greatest(max_alloc, lag(alloc_end) OVER wb, CASE WHEN max_alloc IS NULL THEN alloc_end END) AS max_allocated_bytes,
       res_end AS reserved_bytes,
       greatest(max_res, lag(res_end) OVER wb, CASE WHEN max_res IS NULL THEN res_end END) AS max_reserved_bytes,
       allocs, frees
FROM g
WINDOW wb AS (PARTITION BY source_id, device_id, allocator ORDER BY bucket);
