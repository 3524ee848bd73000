-- phase_idle: per phase and GPU, how busy the GPU was during the phase, and why it sat idle.
--
-- Definition: for each (source_id, phase, category) of `phase_instances` and each GPU that ran at
-- least one op launched in the phase (`phase_ops`), the phase's time on that GPU is the union of
-- the windows of all its instances (a union, so overlapping windows — work queued ahead, e.g.
-- CUDA graph replays — count once):
--   span_ns       = length of that union
--   busy_ns       = length of (union ∩ `gpu_busy` periods of the device): any operation of any
--                   stream running, whoever launched it
--   <cause>_ns    = length of (union ∩ `idle_gaps` of scope 'device' with that cause): host_wait
--                   (GPU waited for the CPU to launch: launch-bound), sync_wait (host blocked in
--                   a synchronizing call), kernel_wait, other; see `idle_gaps`
--   outside_ns    = span_ns - busy_ns - the four causes: idle time before the device's first or
--                   after its last operation, which no `idle_gaps` row covers
--   utilization_pct = 100 * busy_ns / span_ns; host_wait_pct = 100 * host_wait_ns / span_ns
-- The op counts are over `phase_ops` of the phase on the device (nested ranges of one phase name
-- would count an op twice): kernels, their summed duration, kernels shorter than their launch
-- call, distinct launch calls, and those that started more than one op (graph launches).
-- Method (no effect on the result): idle_gaps and gpu_busy are computed once; their overlaps with
-- the span are found through buckets of the span's start per length class plus one ASOF lookup.
--
-- Columns:
--   source_id        INTEGER  the source
--   phase            VARCHAR  range name without trailing '#N'
--   category         VARCHAR  'user_annotation' or 'nvtx'
--   device_id        INTEGER  GPU index
--   instances        BIGINT   instances of the phase
--   wall_ns          BIGINT   summed range durations (host side), ns
--   span_ns          BIGINT   union of the instance windows, ns
--   busy_ns          BIGINT   GPU busy inside the span, ns
--   idle_ns          BIGINT   span_ns - busy_ns
--   host_wait_ns     BIGINT   idle inside the span with cause host_wait, ns
--   sync_wait_ns     BIGINT   idle with cause sync_wait, ns
--   kernel_wait_ns   BIGINT   idle with cause kernel_wait, ns
--   other_ns         BIGINT   idle with cause other, ns
--   outside_ns       BIGINT   idle outside the device's activity window, ns
--   gaps             BIGINT   idle_gaps rows overlapping the span
--   utilization_pct  DOUBLE   100 * busy_ns / span_ns
--   host_wait_pct    DOUBLE   100 * host_wait_ns / span_ns
--   gpu_ops          BIGINT   ops launched in the phase on this device
--   kernels          BIGINT   kernels among them
--   kernel_ns        BIGINT   their summed duration, ns
--   memcpy_ns        BIGINT   summed memcpy duration, ns
--   short_kernels    BIGINT   kernels shorter than their launch call
--   launch_calls     BIGINT   distinct launch calls
--   graph_launches   BIGINT   launch calls that started more than one op
CREATE OR REPLACE VIEW phase_idle AS
WITH po AS MATERIALIZED (  -- each view used once (each use would compute it again)
    SELECT source_id, phase, category, device_id, kind, dur_ns, shorter_than_launch, pid, tid,
           correlation_id, ops_in_launch
    FROM phase_ops WHERE device_id IS NOT NULL
),
pi AS MATERIALIZED (
    SELECT source_id, phase, category, start_ns, window_end_ns, dur_ns FROM phase_instances
),
devs AS (
    SELECT DISTINCT source_id, phase, category, device_id FROM po
),
w AS (
    SELECT d.source_id, d.phase, d.category, d.device_id, i.start_ns AS s, i.window_end_ns AS e
    FROM devs d JOIN pi i USING (source_id, phase, category)
),
o AS (
    SELECT *, max(e) OVER (PARTITION BY source_id, phase, category, device_id ORDER BY s, e
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM w
),
isl AS (
    SELECT *, sum(CASE WHEN prev_e IS NULL OR s > prev_e THEN 1 ELSE 0 END)
                  OVER (PARTITION BY source_id, phase, category, device_id ORDER BY s, e
                        ROWS UNBOUNDED PRECEDING) AS island
    FROM o
),
u AS (
    SELECT source_id, phase, category, device_id, min(s) AS s, max(e) AS e
    FROM isl GROUP BY source_id, phase, category, device_id, island
),
span AS (
    SELECT source_id, phase, category, device_id, sum(e - s)::BIGINT AS span_ns FROM u GROUP BY ALL
),
gb AS MATERIALIZED (SELECT source_id, device_id, start_ns, end_ns FROM gpu_busy),
ig AS MATERIALIZED (
    SELECT source_id, device_id, start_ns, end_ns, cause FROM idle_gaps WHERE scope = 'device'
),
-- overlaps of the span intervals u with the busy periods / gaps of the device (each set
-- disjoint): those that start inside u, found through buckets of u's start per length class
-- (level = floor(log2(length)) + 1), and the one that starts before u and reaches into it (ASOF)
ub AS (
    SELECT u.*, (u.s >> u.lvl) + b.d AS bucket
    FROM (SELECT *, floor(log2(greatest(e - s, 1)))::INTEGER + 1 AS lvl FROM u) u
    CROSS JOIN (VALUES (0), (1)) b(d)
),
ulv AS (SELECT DISTINCT source_id, device_id, lvl FROM ub),
busy_pairs AS (
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, b.start_ns, b.end_ns
    FROM (SELECT b.*, v.lvl, b.start_ns >> v.lvl AS bucket
          FROM gb b JOIN ulv v ON v.source_id = b.source_id AND v.device_id = b.device_id) b
    JOIN ub u ON u.source_id = b.source_id AND u.device_id = b.device_id AND u.lvl = b.lvl
             AND u.bucket = b.bucket
    WHERE b.start_ns >= u.s AND b.start_ns < u.e AND b.end_ns > u.s
    UNION ALL
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, b.start_ns, b.end_ns
    FROM u ASOF JOIN gb b ON b.source_id = u.source_id AND b.device_id = u.device_id AND u.s > b.start_ns
    WHERE b.end_ns > u.s
),
busy AS (
    SELECT source_id, phase, category, device_id,
           sum(least(e, end_ns) - greatest(s, start_ns))::BIGINT AS busy_ns
    FROM busy_pairs
    GROUP BY ALL
),
idle_pairs AS (
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, g.start_ns, g.end_ns, g.cause
    FROM (SELECT g.*, v.lvl, g.start_ns >> v.lvl AS bucket
          FROM ig g JOIN ulv v ON v.source_id = g.source_id AND v.device_id = g.device_id) g
    JOIN ub u ON u.source_id = g.source_id AND u.device_id = g.device_id AND u.lvl = g.lvl
             AND u.bucket = g.bucket
    WHERE g.start_ns >= u.s AND g.start_ns < u.e AND g.end_ns > u.s
    UNION ALL
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, g.start_ns, g.end_ns, g.cause
    FROM u ASOF JOIN ig g ON g.source_id = u.source_id AND g.device_id = u.device_id AND u.s > g.start_ns
    WHERE g.end_ns > u.s
),
idle AS (
    SELECT source_id, phase, category, device_id, count(DISTINCT start_ns) AS gaps,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'host_wait')::BIGINT AS host_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'sync_wait')::BIGINT AS sync_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'kernel_wait')::BIGINT AS kernel_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'other')::BIGINT AS other_ns
    FROM idle_pairs
    GROUP BY ALL
),
inst AS (
    SELECT source_id, phase, category, count(*) AS instances, sum(dur_ns)::BIGINT AS wall_ns
    FROM pi GROUP BY ALL
),
ops AS (
    SELECT source_id, phase, category, device_id, count(*) AS gpu_ops,
           count(*) FILTER (WHERE kind = 'kernel') AS kernels,
           coalesce(sum(dur_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns,
           coalesce(sum(dur_ns) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS memcpy_ns,
           count(*) FILTER (WHERE kind = 'kernel' AND shorter_than_launch) AS short_kernels,
           count(DISTINCT (pid, tid, correlation_id)) AS launch_calls,
           count(DISTINCT (pid, tid, correlation_id)) FILTER (WHERE ops_in_launch > 1) AS graph_launches
    FROM po GROUP BY ALL
)
SELECT s.source_id, s.phase, s.category, s.device_id, n.instances, n.wall_ns, s.span_ns,
       coalesce(b.busy_ns, 0) AS busy_ns, s.span_ns - coalesce(b.busy_ns, 0) AS idle_ns,
       coalesce(i.host_wait_ns, 0) AS host_wait_ns, coalesce(i.sync_wait_ns, 0) AS sync_wait_ns,
       coalesce(i.kernel_wait_ns, 0) AS kernel_wait_ns, coalesce(i.other_ns, 0) AS other_ns,
       s.span_ns - coalesce(b.busy_ns, 0) - coalesce(i.host_wait_ns, 0) - coalesce(i.sync_wait_ns, 0)
           - coalesce(i.kernel_wait_ns, 0) - coalesce(i.other_ns, 0) AS outside_ns,
       coalesce(i.gaps, 0) AS gaps,
       100.0 * coalesce(b.busy_ns, 0) / nullif(s.span_ns, 0) AS utilization_pct,
       100.0 * coalesce(i.host_wait_ns, 0) / nullif(s.span_ns, 0) AS host_wait_pct,
       o.gpu_ops, o.kernels, o.kernel_ns, o.memcpy_ns, o.short_kernels, o.launch_calls, o.graph_launches
FROM span s
JOIN inst n USING (source_id, phase, category)
LEFT JOIN busy b USING (source_id, phase, category, device_id)
LEFT JOIN idle i USING (source_id, phase, category, device_id)
LEFT JOIN ops o USING (source_id, phase, category, device_id)
ORDER BY s.source_id, s.span_ns DESC, s.phase, s.device_id;
