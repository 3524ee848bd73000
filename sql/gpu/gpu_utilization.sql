-- gpu_utilization: busy fraction of each GPU over its active window.
--
-- Definition: window = [first operation start, last operation end] of the device
-- (`gpu_activity`); busy_ns = total length of `gpu_busy` (union of kernels, memcpy, memset on
-- all streams, so concurrent streams are not double counted); utilization_pct =
-- 100 * busy_ns / window_ns. kernel_ns / memcpy_ns / memset_ns are plain sums of durations
-- (they can overlap each other). Over time: `gpu_utilization_timeline`; per annotation: `phases`.
--
-- Uses: gpu_activity, gpu_busy
--
-- Columns:
--   source_id        INTEGER  the source
--   device_id        INTEGER  GPU index
--   window_start_ns  BIGINT   first operation start, ns
--   window_end_ns    BIGINT   last operation end, ns
--   window_ns        BIGINT   window length, ns
--   busy_ns          BIGINT   time with at least one operation running, ns
--   idle_ns          BIGINT   window_ns - busy_ns
--   utilization_pct  DOUBLE   100 * busy_ns / window_ns
--   kernel_ns        BIGINT   summed kernel durations
--   memcpy_ns        BIGINT   summed memcpy durations
--   memset_ns        BIGINT   summed memset durations
--   ops              BIGINT   operations
CREATE OR REPLACE VIEW gpu_utilization AS
WITH b AS (
    SELECT source_id, device_id, min(start_ns) AS window_start_ns, max(end_ns) AS window_end_ns,
           sum(dur_ns)::BIGINT AS busy_ns, sum(ops)::BIGINT AS ops
    FROM gpu_busy GROUP BY ALL
),
k AS (
    SELECT source_id, device_id,
           sum(dur_ns) FILTER (WHERE kind = 'kernel')::BIGINT AS kernel_ns,
           sum(dur_ns) FILTER (WHERE kind = 'memcpy')::BIGINT AS memcpy_ns,
           sum(dur_ns) FILTER (WHERE kind = 'memset')::BIGINT AS memset_ns
    FROM gpu_activity GROUP BY ALL
)
SELECT b.source_id, b.device_id, b.window_start_ns, b.window_end_ns,
       b.window_end_ns - b.window_start_ns AS window_ns, b.busy_ns,
       b.window_end_ns - b.window_start_ns - b.busy_ns AS idle_ns,
       100.0 * b.busy_ns / nullif(b.window_end_ns - b.window_start_ns, 0) AS utilization_pct,
       coalesce(k.kernel_ns, 0) AS kernel_ns, coalesce(k.memcpy_ns, 0) AS memcpy_ns,
       coalesce(k.memset_ns, 0) AS memset_ns, b.ops
FROM b JOIN k USING (source_id, device_id)
ORDER BY b.source_id, b.device_id;
