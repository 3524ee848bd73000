-- time_breakdown: where each GPU's time went, start-up and steady state apart: busy by work class, idle by what the host was doing.
--
-- Definition: per GPU, three parts of its activity window [first op start, last op end]
-- (`steady_state`): 'startup' = [device_start_ns, window_start_ns) before the first steady
-- step (warm-up steps included), 'steady' = [window_start_ns, window_end_ns) from there to the
-- last step (the whole
-- window when the source has no repeated steps: steady_state.method 'whole'), 'teardown' =
-- [window_end_ns, device_end_ns). Each part's time is
--   busy: the union of the GPU's operations (`gpu_activity`), each instant given to one class
--         by precedence: 'compute' (a kernel that is not communication), 'communication'
--         (tk_kernel_type 'communication': tk_is_comm_kernel), 'memcpy', 'memset'; so
--         memcpy time is counted only where no kernel runs (its exposed part), and
--         communication only where no compute kernel runs;
--   idle: the `idle_attribution` pieces, by their category ('sync', 'copy', 'compile', 'data',
--         'rank_wait', 'launch', 'cpu_op', 'untraced', 'queued', 'unknown'),
-- each clipped to the part. Busy and idle rows of a part add up to part_ns, their pct to 100.
-- Only rows with ns > 0 are listed. Ordered by source_id, device_id, part (startup, steady,
-- teardown), ns descending.
--
-- Uses: gpu_activity, idle_attribution, steady_state
--
-- Columns:
--   source_id      INTEGER  the source
--   device_id      INTEGER  GPU index
--   part           VARCHAR  'startup', 'steady' or 'teardown'
--   part_start_ns  BIGINT   the part's start, ns
--   part_end_ns    BIGINT   the part's end, ns
--   part_ns        BIGINT   part_end_ns - part_start_ns
--   state          VARCHAR  'busy' or 'idle'
--   category       VARCHAR  busy: 'compute', 'communication', 'memcpy', 'memset'; idle: the
--                           idle_attribution category
--   ns             BIGINT   time of this category in the part, ns
--   pct            DOUBLE   100 * ns / part_ns
CREATE OR REPLACE VIEW time_breakdown AS
WITH w AS MATERIALIZED (
    SELECT source_id, device_id, device_start_ns AS ds, window_start_ns AS ws, window_end_ns AS we,
           device_end_ns AS de
    FROM steady_state
),
acts AS (SELECT * FROM gpu_activity),
segs AS (  -- busy segments with their class, and the idle pieces
    SELECT source_id, device_id, start_ns, end_ns, 'busy' AS state, category FROM tk_busy_segments('acts')
    UNION ALL
    SELECT source_id, device_id, start_ns, end_ns, 'idle', category FROM idle_attribution
),
clipped AS (
    SELECT s.source_id, s.device_id, w.ds, w.ws, w.we, w.de, s.state, s.category,
           sum(greatest(0, least(s.end_ns, w.ws) - greatest(s.start_ns, w.ds)))::BIGINT AS startup_ns,
           sum(greatest(0, least(s.end_ns, w.we) - greatest(s.start_ns, w.ws)))::BIGINT AS steady_ns,
           sum(greatest(0, least(s.end_ns, w.de) - greatest(s.start_ns, w.we)))::BIGINT AS teardown_ns
    FROM segs s JOIN w ON w.source_id = s.source_id AND w.device_id = s.device_id
    GROUP BY ALL
),
parts AS (
    SELECT source_id, device_id, 'startup' AS part, 0 AS part_no, ds AS part_start_ns, ws AS part_end_ns,
           state, category, startup_ns AS ns
    FROM clipped
    UNION ALL
    SELECT source_id, device_id, 'steady', 1, ws, we, state, category, steady_ns FROM clipped
    UNION ALL
    SELECT source_id, device_id, 'teardown', 2, we, de, state, category, teardown_ns FROM clipped
)
SELECT source_id, device_id, part, part_start_ns, part_end_ns, part_end_ns - part_start_ns AS part_ns,
       state, category, ns, 100.0 * ns / (part_end_ns - part_start_ns) AS pct
FROM parts
WHERE ns > 0
ORDER BY source_id, device_id, part_no, ns DESC, state, category;
