-- idle_gaps: intervals on each GPU where no kernel, memcpy or memset runs.
--
-- Definition: per (source_id, device_id), the GPU is busy during the union of the intervals
-- of `gpu_activity` (kernels and memops, all streams). The window is [first activity start,
-- last activity end] of that device, so there is no gap before the first or after the last
-- operation. A gap is a maximal interval inside the window covered by no operation; gaps of
-- length 0 (back-to-back operations) are not listed.
-- The neighbours are the operation whose end closes the busy period before the gap (the one
-- ending last; ties: lowest stream, then name) and the first operation starting at end_ns.
--
-- Columns:
--   source_id     INTEGER  the source
--   device_id     INTEGER  GPU index
--   start_ns      BIGINT   gap start = end of the preceding busy period, ns
--   end_ns        BIGINT   gap end = start of the next operation, ns
--   dur_ns        BIGINT   end_ns - start_ns (> 0)
--   before_kind   VARCHAR  kind of the operation before the gap ('kernel', 'memcpy', 'memset')
--   before_name   VARCHAR  name of the operation before the gap
--   before_stream BIGINT   its stream
--   after_kind    VARCHAR  kind of the operation after the gap
--   after_name    VARCHAR  name of the operation after the gap
--   after_stream  BIGINT   its stream
CREATE OR REPLACE VIEW idle_gaps AS
WITH ordered AS (
    SELECT *,
           max(end_ns) OVER (PARTITION BY source_id, device_id ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
    FROM gpu_activity
    WHERE device_id IS NOT NULL
),
gaps AS (
    SELECT source_id, device_id, busy_until AS start_ns, start_ns AS end_ns,
           kind AS after_kind, name AS after_name, stream_id AS after_stream,
           row_number() OVER (PARTITION BY source_id, device_id, start_ns
                              ORDER BY stream_id, name) AS rn
    FROM ordered
    WHERE busy_until < start_ns
)
SELECT g.source_id, g.device_id, g.start_ns, g.end_ns, g.end_ns - g.start_ns AS dur_ns,
       b.kind AS before_kind, b.name AS before_name, b.stream_id AS before_stream,
       g.after_kind, g.after_name, g.after_stream
FROM gaps g
LEFT JOIN LATERAL (
    SELECT kind, name, stream_id FROM gpu_activity a
    WHERE a.source_id = g.source_id AND a.device_id = g.device_id AND a.end_ns = g.start_ns
    ORDER BY a.stream_id, a.name LIMIT 1
) b ON true
WHERE g.rn = 1
ORDER BY g.source_id, g.device_id, g.start_ns;
