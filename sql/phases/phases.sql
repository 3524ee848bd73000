-- phases: time per NVTX range / user annotation name (e.g. prefill vs decode_step), with the GPU work each launched.
--
-- Definition: one row per (source_id, phase, category) of `phase_instances` (ranges of category
-- 'user_annotation' — torch.profiler record_function — or 'nvtx', grouped by the name without
-- a trailing '#<number>': ProfilerStep#12 → ProfilerStep). The GPU work of a phase is
-- `phase_ops`: every GPU op whose launch call started on the same thread inside one of its
-- ranges (nested ranges all count the work; children are not subtracted).
--   wall_ns          summed host-side range durations
--   gpu_ns           summed duration of the launched GPU ops (concurrent streams count twice)
--   utilization_pct  100 * busy / span summed over the phase's GPUs, as in `phase_idle`:
--                    span = union of the instance windows [range start, max(range end, end of
--                    its last GPU op)], busy = GPU busy time inside that span
--   host_wait_pct    share of that span idle because the GPU waited for the CPU (`phase_idle`)
--   top_kernels      the 3 kernel short names with the most time in the phase
-- Method (no effect on the result): instances and wall time are counted from `events` with
-- phase_instances' rule (duplicated for speed: that view also matches every instance's GPU
-- work; tests/sql/test_views.py guards it).
--
-- Uses: phase_idle, phase_ops
--
-- Columns:
--   source_id        INTEGER    the source
--   phase            VARCHAR    range name without trailing '#N' or per-call ids (tk_phase)
--   category         VARCHAR    'user_annotation' or 'nvtx'
--   instances        BIGINT     range instances
--   wall_ns          BIGINT     summed range durations (host side), ns
--   avg_wall_ns      DOUBLE     mean range duration, ns
--   gpu_ops          BIGINT     GPU operations launched inside the ranges
--   kernels          BIGINT     kernels among them
--   gpu_ns           BIGINT     summed GPU op durations, ns
--   kernel_ns        BIGINT     summed kernel durations, ns
--   utilization_pct  DOUBLE     GPU busy share of the phase's GPU span (NULL without GPU work)
--   host_wait_pct    DOUBLE     host-wait idle share of that span (NULL without GPU work)
--   top_kernels      VARCHAR[]  up to 3 kernel short names by total time
CREATE OR REPLACE VIEW phases AS
WITH po AS MATERIALIZED (  -- phase_ops summed per kind and kernel name (the ops and top_kernels come from it)
    SELECT source_id, phase, category, kind, short_name, count(*) AS n, sum(dur_ns) AS ns
    FROM phase_ops GROUP BY ALL
),
inst AS (  -- the rows of phase_instances (its rule; that view also matches every instance's GPU work)
    SELECT source_id, tk_phase(name) AS phase, category, count(*) AS instances,
           sum(dur_ns)::BIGINT AS wall_ns, avg(dur_ns) AS avg_wall_ns
    FROM events
    WHERE tk_is_phase_range(category, is_instant, name) AND pid IS NOT NULL
    GROUP BY ALL
),
ops AS (
    SELECT source_id, phase, category, sum(n)::BIGINT AS gpu_ops,
           coalesce(sum(n) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernels, sum(ns)::BIGINT AS gpu_ns,
           coalesce(sum(ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns
    FROM po GROUP BY ALL
),
top AS (
    SELECT source_id, phase, category, list(short_name ORDER BY ns DESC, short_name)[1:3] AS top_kernels
    FROM (SELECT source_id, phase, category, short_name, sum(ns) AS ns
          FROM po WHERE kind = 'kernel' GROUP BY ALL)
    GROUP BY ALL
),
util AS (
    SELECT source_id, phase, category,
           100.0 * sum(busy_ns) / nullif(sum(span_ns), 0) AS utilization_pct,
           100.0 * sum(host_wait_ns) / nullif(sum(span_ns), 0) AS host_wait_pct
    FROM phase_idle GROUP BY ALL
)
SELECT i.source_id, i.phase, i.category, i.instances, i.wall_ns, i.avg_wall_ns,
       coalesce(o.gpu_ops, 0) AS gpu_ops, coalesce(o.kernels, 0) AS kernels,
       coalesce(o.gpu_ns, 0) AS gpu_ns, coalesce(o.kernel_ns, 0) AS kernel_ns,
       u.utilization_pct, u.host_wait_pct, t.top_kernels
FROM inst i
LEFT JOIN ops o USING (source_id, phase, category)
LEFT JOIN top t USING (source_id, phase, category)
LEFT JOIN util u USING (source_id, phase, category)
ORDER BY i.source_id, i.wall_ns DESC;
