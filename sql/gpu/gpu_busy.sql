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
WITH ops AS (
    SELECT {'source_id': source_id, 'device_id': device_id} AS key, start_ns, end_ns
    FROM gpu_activity WHERE device_id IS NOT NULL
)
SELECT key.source_id AS source_id, key.device_id AS device_id, start_ns, end_ns, end_ns - start_ns AS dur_ns, n AS ops
FROM tk_merge_intervals('ops')  -- sql/lib/intervals.sql
ORDER BY source_id, device_id, start_ns;
