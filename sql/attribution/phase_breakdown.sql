-- phase_breakdown: per phase and GPU, the phase's time as GPU busy by work class and idle by what the host was doing.
--
-- Definition: a phase's span on a GPU is the union of the windows [start_ns, window_end_ns) of
-- all its instances (`phase_instances`), for each GPU that ran at least one op launched in the
-- phase (`phase_ops`): the same span as `phase_idle`'s span_ns. Each instant of the span is
--   busy:    the class of what the GPU ran then (`tk_busy_segments`, as in `time_breakdown`:
--            'compute', 'communication', 'memcpy', 'memset');
--   idle:    the `idle_attribution` category of the piece of the GPU idle gap then ('sync',
--            'copy', 'compile', 'data', 'rank_wait', 'launch', 'cpu_op', 'untraced', 'queued',
--            'unknown');
--   outside: (state 'idle', category 'outside') before the GPU's first or after its last
--            operation, which no idle gap covers.
-- The rows of one (source_id, phase, category, device_id) add up to span_ns, their pct to 100.
-- Nested phases each count the time they cover (a forward inside a step counts in both).
-- Only rows with ns > 0 are listed. Ordered by source_id, phase, phase_category, device_id, ns
-- descending.
-- Method (no effect on the result): the busy segments and idle pieces of a GPU are disjoint; each
-- is paired with the spans it starts in (`tk_enclosing`, spans as ranges), and the one that holds
-- a span's start is paired with that span too (`tk_enclosing`, segments as ranges); each pair
-- counts the length of their intersection.
--
-- Uses: gpu_activity, idle_attribution, phase_instances, phase_ops
--
-- Columns:
--   source_id       INTEGER  the source
--   phase           VARCHAR  range name without trailing '#N' or per-call ids (tk_phase)
--   phase_category  VARCHAR  'user_annotation' or 'nvtx'
--   device_id       INTEGER  GPU index
--   span_ns         BIGINT   union of the phase's instance windows, ns (phase_idle.span_ns)
--   state           VARCHAR  'busy' or 'idle'
--   category        VARCHAR  busy: 'compute', 'communication', 'memcpy', 'memset'; idle: the
--                            idle_attribution category, or 'outside'
--   ns              BIGINT   time of this category in the span, ns
--   pct             DOUBLE   100 * ns / span_ns
CREATE OR REPLACE VIEW phase_breakdown AS
WITH acts AS (SELECT * FROM gpu_activity),
devs AS (SELECT DISTINCT source_id, phase, category, device_id FROM phase_ops WHERE device_id IS NOT NULL),
windows AS (
    SELECT {'source_id': i.source_id, 'phase': i.phase, 'category': i.category, 'device_id': d.device_id} AS key,
           i.start_ns, i.window_end_ns AS end_ns
    FROM phase_instances i
    JOIN devs d ON d.source_id = i.source_id AND d.phase = i.phase AND d.category = i.category
    WHERE i.window_end_ns > i.start_ns
),
spans AS MATERIALIZED (
    SELECT key.source_id, key.phase, key.category AS phase_category, key.device_id, start_ns, end_ns,
           row_number() OVER (ORDER BY key.source_id, key.phase, key.category, key.device_id, start_ns) AS span_id
    FROM tk_merge_intervals('windows')
),
segs AS MATERIALIZED (
    SELECT source_id, device_id, start_ns, end_ns, state, category,
           row_number() OVER (ORDER BY source_id, device_id, start_ns) AS seg_id
    FROM (SELECT source_id, device_id, start_ns, end_ns, 'busy' AS state, category FROM tk_busy_segments('acts')
          UNION ALL
          SELECT source_id, device_id, start_ns, end_ns, 'idle', category FROM idle_attribution)
),
span_rng AS (
    SELECT {'source_id': source_id, 'device_id': device_id} AS key, span_id AS range_id, start_ns, end_ns FROM spans
),
seg_pts AS (
    SELECT {'source_id': source_id, 'device_id': device_id} AS key, seg_id AS point_id, start_ns AS ts FROM segs
),
seg_rng AS (
    SELECT {'source_id': source_id, 'device_id': device_id} AS key, seg_id AS range_id, start_ns, end_ns FROM segs
),
span_pts AS (
    SELECT {'source_id': source_id, 'device_id': device_id} AS key, span_id AS point_id, start_ns AS ts FROM spans
),
pairs AS (  -- (span, segment): segments that start in a span, and the one that holds its start
    SELECT e.range_id AS span_id, e.point_id AS seg_id FROM tk_enclosing('span_rng', 'seg_pts') e
    UNION ALL
    SELECT e.point_id, e.range_id FROM tk_enclosing('seg_rng', 'span_pts') e
    JOIN spans p ON p.span_id = e.point_id
    JOIN segs s ON s.seg_id = e.range_id
    WHERE s.start_ns < p.start_ns
),
cut AS (
    SELECT p.source_id, p.phase, p.phase_category, p.device_id, s.state, s.category,
           sum(least(s.end_ns, p.end_ns) - greatest(s.start_ns, p.start_ns))::BIGINT AS ns
    FROM pairs x
    JOIN spans p ON p.span_id = x.span_id
    JOIN segs s ON s.seg_id = x.seg_id
    GROUP BY ALL
),
total AS (
    SELECT source_id, phase, phase_category, device_id, sum(end_ns - start_ns)::BIGINT AS span_ns
    FROM spans GROUP BY ALL
),
covered AS (
    SELECT source_id, phase, phase_category, device_id, sum(ns)::BIGINT AS ns FROM cut GROUP BY ALL
),
rows_ AS (
    SELECT c.source_id, c.phase, c.phase_category, c.device_id, t.span_ns, c.state, c.category, c.ns
    FROM cut c
    JOIN total t ON t.source_id = c.source_id AND t.phase = c.phase AND t.phase_category = c.phase_category
     AND t.device_id = c.device_id
    UNION ALL
    SELECT t.source_id, t.phase, t.phase_category, t.device_id, t.span_ns, 'idle', 'outside',
           t.span_ns - coalesce(v.ns, 0)
    FROM total t
    LEFT JOIN covered v ON v.source_id = t.source_id AND v.phase = t.phase
     AND v.phase_category = t.phase_category AND v.device_id = t.device_id
)
SELECT source_id, phase, phase_category, device_id, span_ns, state, category, ns,
       100.0 * ns / span_ns AS pct
FROM rows_
WHERE ns > 0
ORDER BY source_id, phase, phase_category, device_id, ns DESC, state, category;
