-- gpu_utilization_timeline: busy fraction of each GPU per time bucket.
--
-- Definition: the device window of `gpu_utilization` is cut into buckets of bucket_ns
-- (parameter; default: window_ns / 100 rounded up, so about 100 buckets per device); for each
-- bucket, busy_ns = overlap of the bucket with the `gpu_busy` periods (0 for a bucket that no
-- busy period touches). The last bucket may be shorter (bucket_end_ns is clipped to the window
-- end).
-- Parameters:
--   bucket_ns  NULL  the bucket length, ns (NULL: window_ns / 100 rounded up)
--
-- Uses: gpu_busy, gpu_utilization
--
-- Columns:
--   source_id        INTEGER  the source
--   device_id        INTEGER  GPU index
--   bucket           BIGINT   bucket number, 0 = window start
--   bucket_start_ns  BIGINT   bucket start, ns
--   bucket_end_ns    BIGINT   bucket end, ns
--   busy_ns          BIGINT   busy time inside the bucket, ns
--   utilization_pct  DOUBLE   100 * busy_ns / (bucket_end_ns - bucket_start_ns)
CREATE OR REPLACE VIEW gpu_utilization_timeline AS
WITH w AS (
    SELECT source_id, device_id, window_start_ns, window_end_ns,
           greatest(coalesce(getvariable('bucket_ns')::BIGINT, (window_ns + 99) // 100), 1) AS bucket_ns
    FROM gpu_utilization WHERE window_ns > 0
),
buckets AS (
    SELECT w.source_id, w.device_id, r.bucket,
           w.window_start_ns + r.bucket * w.bucket_ns AS bucket_start_ns,
           least(w.window_start_ns + (r.bucket + 1) * w.bucket_ns, w.window_end_ns) AS bucket_end_ns
    FROM w, LATERAL (SELECT range AS bucket
                     FROM range(0, (w.window_end_ns - w.window_start_ns + w.bucket_ns - 1) // w.bucket_ns)) r
),
bucket_busy AS (  -- busy time per bucket, from the busy periods that overlap it (inner join:
                  -- a bucket with no busy period has no row here and is 0 below)
    SELECT b.source_id, b.device_id, b.bucket,
           sum(least(g.end_ns, b.bucket_end_ns) - greatest(g.start_ns, b.bucket_start_ns)) AS busy_ns
    FROM buckets b
    JOIN gpu_busy g
      ON g.source_id = b.source_id AND g.device_id = b.device_id
     AND g.start_ns < b.bucket_end_ns AND g.end_ns > b.bucket_start_ns
    GROUP BY ALL
)
SELECT b.source_id, b.device_id, b.bucket, b.bucket_start_ns, b.bucket_end_ns,
       coalesce(o.busy_ns, 0)::BIGINT AS busy_ns,
       100.0 * coalesce(o.busy_ns, 0) / (b.bucket_end_ns - b.bucket_start_ns) AS utilization_pct
FROM buckets b
LEFT JOIN bucket_busy o USING (source_id, device_id, bucket)
ORDER BY b.source_id, b.device_id, b.bucket;
