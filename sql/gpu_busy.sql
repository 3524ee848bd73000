-- gpu_busy: the merged busy intervals of each GPU (union of all its operations).
--
-- Definition: per (source_id, device_id), the intervals of `gpu_activity` on all streams are
-- merged: an interval that starts at or before the running maximum end of the earlier ones
-- joins their busy period. The result is disjoint, sorted busy periods; the time between two
-- of them is an `idle_gaps` row of scope 'device'.
--
-- Uses: gpu_activity
--
-- Columns:
--   source_id  INTEGER  the source
--   device_id  INTEGER  GPU index
--   start_ns   BIGINT   busy period start, ns
--   end_ns     BIGINT   busy period end, ns
--   dur_ns     BIGINT   end_ns - start_ns
--   ops        BIGINT   operations in the period
CREATE OR REPLACE VIEW gpu_busy AS
WITH o AS (
    SELECT source_id, device_id, start_ns, end_ns,
           max(end_ns) OVER (PARTITION BY source_id, device_id ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM gpu_activity WHERE device_id IS NOT NULL
),
i AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY source_id, device_id ORDER BY start_ns, end_ns
                        ROWS UNBOUNDED PRECEDING) AS island
    FROM o
)
SELECT source_id, device_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
       max(end_ns) - min(start_ns) AS dur_ns, count(*) AS ops
FROM i GROUP BY source_id, device_id, island
ORDER BY source_id, device_id, start_ns;
