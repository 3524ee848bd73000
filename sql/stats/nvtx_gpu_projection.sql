-- nvtx_gpu_projection: GPU time of the work launched inside each NVTX range, per range name (nsys stats nvtx_gpu_proj_sum).
--
-- Definition (identical to `nsys stats --report nvtx_gpu_proj_sum`):
--   ranges     the range events (category 'nvtx', and 'user_annotation' for Kineto) that start
--              and end on one thread: NVTX start/end ranges ended on another thread
--              (`args.endGlobalTid` set) are left out. Name and style as in `nvtx_summary`.
--   GPU ops    every row of `kernels` (except the whole-graph `[CUDA graph N]` rows of a
--              `--cuda-graph-trace=graph` capture, which nsys does not read) and `memops`,
--              joined to its launch call by the one launch rule (`tk_launched`,
--              sql/lib/host_calls.sql). An op belongs to every
--              range of the launching thread (same pid and tid) with
--              range.start_ns <= call.start_ns and call.end_ns <= range.end_ns (the whole
--              push/pop stack).
--   projection per range with at least one op: proj_start = min(op start), proj_end = max(op end),
--              projected duration = proj_end - proj_start; gpu ops = number of distinct
--              correlation ids (a CUDA-graph launch counts once).
--   level      depth of the range in the per-thread parent tree: a range's parent is the
--              tightest other range of the same thread enclosing it (smallest
--              (child.start - parent.start) + (parent.end - child.end)); roots have level 0
--   children   number of ranges with a projection whose parent is this range
-- Then per (source_id, range, style), over the ranges with a projection:
--   total_proj_ns  = sum of projected durations (children are not subtracted)
--   total_range_ns = sum of the ranges' own durations (end_ns - start_ns)
--   proj_*_ns      = mean / median (mean of the two middle values for even n) / min / max /
--                    sample standard deviation (0 for one instance) of the projected durations
--   total_gpu_ops, avg_gpu_ops, avg_range_lvl, avg_num_child as named
-- Difference from nsys: an unclosed range ends at the largest timestamp of the whole NVTX
-- table (nsys: of its range rows only).
-- nsys rounds the averages to 1 decimal; we do not. Ordered by source_id, total_proj_ns DESC, range.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id       INTEGER  the source
--   range           VARCHAR  display name (`<domain>:<name>` for NVTX, as in nvtx_summary)
--   style           VARCHAR  'PushPop' or 'StartEnd'
--   total_proj_ns   BIGINT   summed projected GPU duration, ns
--   total_range_ns  BIGINT   summed CPU-side range duration, ns
--   range_instances BIGINT   number of ranges that launched GPU work
--   proj_avg_ns     DOUBLE   mean projected duration, ns
--   proj_med_ns     DOUBLE   median projected duration, ns
--   proj_min_ns     BIGINT   shortest projected duration, ns
--   proj_max_ns     BIGINT   longest projected duration, ns
--   proj_stddev_ns  DOUBLE   sample standard deviation of the projected duration, ns
--   total_gpu_ops   BIGINT   GPU operations launched inside these ranges
--   avg_gpu_ops     DOUBLE   mean GPU operations per range
--   avg_range_lvl   DOUBLE   mean nesting level of the ranges (0 = outermost)
--   avg_num_child   DOUBLE   mean number of child ranges (with GPU work) per range
CREATE OR REPLACE VIEW nvtx_gpu_projection AS
WITH RECURSIVE ranges AS (
    SELECT source_id, event_id, pid, tid, start_ns, end_ns,
           CASE WHEN category = 'nvtx' THEN coalesce(domain, '') || ':' || coalesce(name, '')
                ELSE name END AS range,
           CASE WHEN category = 'nvtx' AND (args ->> 'eventType') IN ('60', '71') THEN 'StartEnd'
                ELSE 'PushPop' END AS style
    FROM events
    WHERE ((category = 'nvtx' AND (args ->> 'endGlobalTid') IS NULL) OR category = 'user_annotation')
      AND NOT coalesce(is_instant, false) AND pid IS NOT NULL AND tid IS NOT NULL
),
parents AS (
    SELECT c.source_id, c.event_id,
           arg_min(p.event_id, (c.start_ns - p.start_ns) + (p.end_ns - c.end_ns)) AS parent_id
    FROM ranges c
    JOIN ranges p ON p.source_id = c.source_id AND p.pid = c.pid AND p.tid = c.tid
                 AND p.event_id <> c.event_id
                 AND p.start_ns <= c.start_ns AND p.end_ns >= c.end_ns
    GROUP BY c.source_id, c.event_id
),
tree AS (
    SELECT r.source_id, r.event_id, 0 AS level
    FROM ranges r ANTI JOIN parents p ON p.source_id = r.source_id AND p.event_id = r.event_id
    UNION ALL
    SELECT p.source_id, p.event_id, t.level + 1
    FROM tree t JOIN parents p ON p.source_id = t.source_id AND p.parent_id = t.event_id
),
ops AS (
    SELECT source_id, pid, correlation_id, start_ns, end_ns FROM kernels
    WHERE correlation_id IS NOT NULL AND (graph_id IS NULL OR graph_node_id IS NOT NULL)
    UNION ALL
    SELECT source_id, pid, correlation_id, start_ns, end_ns FROM memops
    WHERE correlation_id IS NOT NULL
),
launched AS (
    SELECT source_id, start_ns, end_ns, call_pid AS pid, call_tid AS tid, correlation_id,
           call_start_ns AS api_start, call_end_ns AS api_end
    FROM tk_launched('ops') WHERE call_start_ns IS NOT NULL
),
projection AS (
    SELECT r.source_id, r.event_id,
           any_value(r.range) AS range, any_value(r.style) AS style,
           any_value(r.end_ns - r.start_ns) AS range_ns,
           max(l.end_ns) - min(l.start_ns) AS proj_ns,
           count(DISTINCT l.correlation_id) AS gpu_ops
    FROM launched l
    JOIN ranges r ON r.source_id = l.source_id AND r.pid = l.pid AND r.tid = l.tid
                 AND r.start_ns <= l.api_start AND r.end_ns >= l.api_end
    GROUP BY r.source_id, r.event_id
),
children AS (
    SELECT p.source_id, pa.parent_id AS event_id, count(*) AS n
    FROM projection p
    JOIN parents pa ON pa.source_id = p.source_id AND pa.event_id = p.event_id
    GROUP BY p.source_id, pa.parent_id
)
SELECT p.source_id, p.range, p.style,
       sum(p.proj_ns)::BIGINT                   AS total_proj_ns,
       sum(p.range_ns)::BIGINT                  AS total_range_ns,
       count(*)                                 AS range_instances,
       avg(p.proj_ns)                           AS proj_avg_ns,
       quantile_cont(p.proj_ns, 0.5)            AS proj_med_ns,
       min(p.proj_ns)                           AS proj_min_ns,
       max(p.proj_ns)                           AS proj_max_ns,
       coalesce(stddev_samp(p.proj_ns), 0.0)    AS proj_stddev_ns,
       sum(p.gpu_ops)::BIGINT                   AS total_gpu_ops,
       avg(p.gpu_ops)                           AS avg_gpu_ops,
       avg(t.level)                             AS avg_range_lvl,
       avg(coalesce(c.n, 0))                    AS avg_num_child
FROM projection p
LEFT JOIN tree t ON t.source_id = p.source_id AND t.event_id = p.event_id
LEFT JOIN children c ON c.source_id = p.source_id AND c.event_id = p.event_id
GROUP BY p.source_id, p.range, p.style
ORDER BY p.source_id, total_proj_ns DESC, p.range;
