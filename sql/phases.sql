-- phases: time per NVTX range / user annotation name (e.g. prefill vs decode_step), with the GPU work each launched.
--
-- Definition: a range instance is an `events` row of category 'user_annotation'
-- (torch.profiler record_function) or 'nvtx' (NVTX push/pop or start/end range). Its GPU work
-- is every `gpu_launches` op whose launch call started on the same thread (pid, tid) inside
-- [start_ns, end_ns) of the range (the projection of nsys's nvtx_gpu_proj_sum; nested ranges
-- all count the work, children are not subtracted). Instances are grouped by `phase` =
-- the range name without a trailing '#<number>' (ProfilerStep#12 → ProfilerStep).
--   window of an instance = [range start, max(range end, end of its last GPU op)]: the GPU work
--                           of a range may finish after the CPU left it
--   gpu_ns                = summed duration of its GPU ops (not a union: concurrent streams
--                           count twice)
--   utilization_pct       = 100 * sum(gpu_ns) / sum(window_ns)
--   top_kernels           = the 3 kernel short names with the most time in the phase
--
-- Columns:
--   source_id        INTEGER    the source
--   phase            VARCHAR    range name without trailing '#N'
--   category         VARCHAR    'user_annotation' or 'nvtx'
--   instances        BIGINT     range instances
--   wall_ns          BIGINT     summed range durations (host side), ns
--   avg_wall_ns      DOUBLE     mean range duration, ns
--   window_ns        BIGINT     summed windows (range plus its GPU tail), ns
--   gpu_ops          BIGINT     GPU operations launched inside the ranges
--   kernels          BIGINT     kernels among them
--   gpu_ns           BIGINT     summed GPU op durations, ns
--   kernel_ns        BIGINT     summed kernel durations, ns
--   utilization_pct  DOUBLE     100 * gpu_ns / window_ns
--   top_kernels      VARCHAR[]  up to 3 kernel short names by total time
CREATE OR REPLACE VIEW phases AS
WITH r AS (
    SELECT source_id, event_id, pid, tid, start_ns, end_ns, dur_ns, category,
           regexp_replace(name, '#[0-9]+$', '') AS phase
    FROM events
    WHERE category IN ('user_annotation', 'nvtx') AND NOT is_instant AND pid IS NOT NULL
),
ops AS (
    SELECT r.source_id, r.event_id, r.phase, r.category, l.kind, l.name, l.dur_ns, l.end_ns
    FROM r JOIN gpu_launches l
      ON l.source_id = r.source_id AND l.pid = r.pid AND l.tid = r.tid
     AND l.api_start_ns >= r.start_ns AND l.api_start_ns < r.end_ns
),
inst AS (
    SELECT r.source_id, r.phase, r.category, r.dur_ns,
           greatest(r.end_ns, max(o.end_ns)) - r.start_ns AS window_ns,
           count(o.kind) AS gpu_ops, count(o.kind) FILTER (WHERE o.kind = 'kernel') AS kernels,
           coalesce(sum(o.dur_ns), 0) AS gpu_ns,
           coalesce(sum(o.dur_ns) FILTER (WHERE o.kind = 'kernel'), 0) AS kernel_ns
    FROM r LEFT JOIN ops o ON o.source_id = r.source_id AND o.event_id = r.event_id
    GROUP BY r.source_id, r.event_id, r.phase, r.category, r.dur_ns, r.start_ns, r.end_ns
),
top AS (
    SELECT source_id, phase, category,
           list(kname ORDER BY ns DESC, kname)[1:3] AS top_kernels
    FROM (SELECT o.source_id, o.phase, o.category, k.short_name AS kname, sum(o.dur_ns) AS ns
          FROM ops o JOIN (SELECT DISTINCT name, short_name FROM kernels) k ON k.name = o.name
          WHERE o.kind = 'kernel' GROUP BY ALL)
    GROUP BY ALL
)
SELECT i.source_id, i.phase, i.category, count(*) AS instances, sum(i.dur_ns)::BIGINT AS wall_ns,
       avg(i.dur_ns) AS avg_wall_ns, sum(i.window_ns)::BIGINT AS window_ns,
       sum(i.gpu_ops)::BIGINT AS gpu_ops, sum(i.kernels)::BIGINT AS kernels,
       sum(i.gpu_ns)::BIGINT AS gpu_ns, sum(i.kernel_ns)::BIGINT AS kernel_ns,
       100.0 * sum(i.gpu_ns) / nullif(sum(i.window_ns), 0) AS utilization_pct,
       any_value(t.top_kernels) AS top_kernels
FROM inst i LEFT JOIN top t USING (source_id, phase, category)
GROUP BY i.source_id, i.phase, i.category
ORDER BY i.source_id, wall_ns DESC;
