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
--                   (GPU waited for the CPU to launch: launch-bound), sync_wait (the GPU drained
--                   while the host was blocked in a synchronizing call), runtime_compile (the
--                   host was loading / compiling GPU code), kernel_wait, other; see `idle_gaps`
--   outside_ns    = span_ns - busy_ns - the five causes: idle time before the device's first or
--                   after its last operation, which no `idle_gaps` row covers
--   utilization_pct = 100 * busy_ns / span_ns; host_wait_pct = 100 * host_wait_ns / span_ns
-- The op counts are over `phase_ops` of the phase on the device (nested ranges of one phase name
-- would count an op twice): kernels, their summed duration, kernels shorter than their launch
-- call, distinct launch calls, and those that started more than one op (graph launches).
-- Method (no effect on the result): idle_gaps is computed once; its overlaps with the span are
-- found through buckets of the span's start per length class, and the gap that contains a span
-- start through buckets of the gap's own start per length class. gpu_busy's periods are exactly
-- the device's activity window [first op start, last op end] less its idle_gaps (both come from
-- the same merge of the ops), so busy_ns = (span inside that window) - (the five causes). The op
-- counts are summed per launch call first, then per device (the phase carried as a number, its
-- rank in (source, phase, category) order, and put back last); a gap is counted once by leaving
-- out its overlaps with a span interval after the first. Ops are paired with instances once, by
-- the rule of phase_ops and phase_instances (`tk_phase_launches`, sql/lib/phases.sql), and that
-- pairing gives both the instance windows and the op counts.
--
-- Uses: gpu_activity, gpu_launches, idle_gaps
--
-- Columns:
--   source_id        INTEGER  the source
--   phase            VARCHAR  range name without trailing '#N' or per-call ids (tk_phase)
--   category         VARCHAR  'user_annotation' or 'nvtx'
--   device_id        INTEGER  GPU index
--   instances        BIGINT   instances of the phase
--   wall_ns          BIGINT   summed range durations (host side), ns
--   span_ns          BIGINT   union of the instance windows, ns
--   busy_ns          BIGINT   GPU busy inside the span, ns
--   idle_ns          BIGINT   span_ns - busy_ns
--   host_wait_ns     BIGINT   idle inside the span with cause host_wait, ns
--   sync_wait_ns     BIGINT   idle with cause sync_wait, ns
--   runtime_compile_ns BIGINT idle with cause runtime_compile, ns
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
--   graph_launches   BIGINT   launch calls that started more than one op, or graph launches
CREATE OR REPLACE VIEW phase_idle AS
WITH l AS (SELECT * FROM gpu_launches),
po_all AS MATERIALIZED (  -- the rows of phase_ops (its rule, tk_phase_launches), the phase as a number
    SELECT source_id, phase, category,
           dense_rank() OVER (ORDER BY source_id, phase, category) AS pk, event_id, device_id, kind,
           end_ns, dur_ns, dur_ns < api_dur_ns AS shorter_than_launch, pid, tid, correlation_id,
           ops_in_launch > 1 OR tk_is_graph_launch(api_name) AS graph_launch
    FROM tk_phase_launches('l')
),
po AS (SELECT * FROM po_all WHERE device_id IS NOT NULL),
-- the rows of phase_instances (its rule; window_end_ns from the ops of phase_ops, which match
-- launches to instances as phase_instances does), without matching the launches again
pi AS MATERIALIZED (
    SELECT r.source_id, tk_phase(r.name) AS phase, r.category, r.start_ns,
           greatest(r.end_ns, coalesce(g.gpu_end_ns, r.end_ns)) AS window_end_ns, r.dur_ns
    FROM events r
    LEFT JOIN (SELECT source_id, event_id, max(end_ns) AS gpu_end_ns FROM po_all GROUP BY ALL) g
      ON g.source_id = r.source_id AND g.event_id = r.event_id
    WHERE tk_is_phase_range(r.category, r.is_instant, r.name)
      AND r.pid IS NOT NULL
),
devs AS (
    SELECT DISTINCT source_id, phase, category, device_id FROM po
),
w AS (  -- the instances' windows on each device the phase ran on
    SELECT {'source_id': d.source_id, 'phase': d.phase, 'category': d.category, 'device_id': d.device_id} AS key,
           i.start_ns, i.window_end_ns AS end_ns
    FROM devs d JOIN pi i USING (source_id, phase, category)
),
u AS (  -- their union; prev_e: the end of the interval before (for counting a gap that spans both once)
    SELECT key.source_id AS source_id, key.phase AS phase, key.category AS category,
           key.device_id AS device_id, start_ns AS s, end_ns AS e,
           lag(end_ns) OVER (PARTITION BY key ORDER BY start_ns) AS prev_e
    FROM tk_merge_intervals('w')  -- sql/lib/intervals.sql
),
span AS (
    SELECT source_id, phase, category, device_id, sum(e - s)::BIGINT AS span_ns FROM u GROUP BY ALL
),
ig AS MATERIALIZED (
    SELECT source_id, device_id, start_ns, end_ns, cause FROM idle_gaps WHERE scope = 'device'
),
dw AS (  -- the device's activity window [first op start, last op end]
    SELECT source_id, device_id, min(start_ns) AS first_ns, max(end_ns) AS last_ns
    FROM gpu_activity
    WHERE device_id IS NOT NULL AND (source_id, device_id) IN (SELECT source_id, device_id FROM devs)
    GROUP BY ALL
),
-- the gap that contains a span start s: by its own length class (lvl: 2^lvl > length), it
-- starts in bucket (s >> lvl) or the one before
igl AS MATERIALIZED (
    SELECT *, floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl FROM ig
),
iglv AS (SELECT DISTINCT source_id, device_id, lvl FROM igl),
-- overlaps of the span intervals u with the gaps of the device (disjoint): those that start
-- inside u, found through buckets of u's start per length class (level = floor(log2(length)) + 1),
-- and the one that starts before u and reaches into it
ub AS (
    SELECT u.*, (u.s >> u.lvl) + b.d AS bucket
    FROM (SELECT *, floor(log2(greatest(e - s, 1)))::INTEGER + 1 AS lvl FROM u) u
    CROSS JOIN (VALUES (0), (1)) b(d)
),
ulv AS (SELECT DISTINCT source_id, device_id, lvl FROM ub),
idle_pairs AS (
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, g.start_ns, g.end_ns, g.cause,
           false AS repeat
    FROM (SELECT g.*, v.lvl, g.start_ns >> v.lvl AS bucket
          FROM ig g JOIN ulv v ON v.source_id = g.source_id AND v.device_id = g.device_id) g
    JOIN ub u ON u.source_id = g.source_id AND u.device_id = g.device_id AND u.lvl = g.lvl
             AND u.bucket = g.bucket
    WHERE g.start_ns >= u.s AND g.start_ns < u.e AND g.end_ns > u.s
    UNION ALL
    SELECT u.source_id, u.phase, u.category, u.device_id, u.s, u.e, g.start_ns, g.end_ns, g.cause,
           coalesce(g.start_ns < u.prev_e, false)  -- the gap also overlaps the interval before
    FROM (SELECT u.*, v.lvl, (u.s >> v.lvl) - d.d AS bucket
          FROM u JOIN iglv v ON v.source_id = u.source_id AND v.device_id = u.device_id
          CROSS JOIN (VALUES (0), (1)) d(d)) u
    JOIN igl g ON g.source_id = u.source_id AND g.device_id = u.device_id AND g.lvl = u.lvl
              AND (g.start_ns >> g.lvl) = u.bucket
    WHERE g.start_ns < u.s AND g.end_ns > u.s
),
idle AS (
    SELECT source_id, phase, category, device_id, count(*) - count(*) FILTER (WHERE repeat) AS gaps,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'host_wait')::BIGINT AS host_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'sync_wait')::BIGINT AS sync_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'runtime_compile')::BIGINT AS runtime_compile_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'kernel_wait')::BIGINT AS kernel_wait_ns,
           sum(least(e, end_ns) - greatest(s, start_ns)) FILTER (WHERE cause = 'other')::BIGINT AS other_ns
    FROM idle_pairs
    GROUP BY ALL
),
busy AS (  -- the busy time is the span inside the device's window less its idle_gaps
    SELECT u.source_id, u.phase, u.category, u.device_id,
           sum(greatest(least(u.e, w.last_ns) - greatest(u.s, w.first_ns), 0))::BIGINT
               - coalesce(any_value(i.idle_ns), 0) AS busy_ns
    FROM u
    JOIN dw w ON w.source_id = u.source_id AND w.device_id = u.device_id
    LEFT JOIN (SELECT source_id, phase, category, device_id,
                      coalesce(host_wait_ns, 0) + coalesce(sync_wait_ns, 0) + coalesce(runtime_compile_ns, 0)
                          + coalesce(kernel_wait_ns, 0) + coalesce(other_ns, 0) AS idle_ns
               FROM idle) i
      ON i.source_id = u.source_id AND i.phase = u.phase AND i.category = u.category
     AND i.device_id = u.device_id
    GROUP BY u.source_id, u.phase, u.category, u.device_id
),
inst AS (
    SELECT source_id, phase, category, count(*) AS instances, sum(dur_ns)::BIGINT AS wall_ns
    FROM pi GROUP BY ALL
),
launch_ops AS (  -- per launch call first (graph_launch is one value per call), then per device
    SELECT source_id, pk, device_id, pid, tid, correlation_id, count(*) AS n,
           count(*) FILTER (WHERE kind = 'kernel') AS kernels,
           sum(dur_ns) FILTER (WHERE kind = 'kernel') AS kernel_ns,
           sum(dur_ns) FILTER (WHERE kind = 'memcpy') AS memcpy_ns,
           count(*) FILTER (WHERE kind = 'kernel' AND shorter_than_launch) AS short_kernels,
           bool_or(graph_launch) AS graph_launch
    FROM po GROUP BY ALL
),
ops AS (
    SELECT k.source_id, k.phase, k.category, o.device_id, o.gpu_ops, o.kernels, o.kernel_ns,
           o.memcpy_ns, o.short_kernels, o.launch_calls, o.graph_launches
    FROM (SELECT source_id, pk, device_id, sum(n)::BIGINT AS gpu_ops,
                 sum(kernels)::BIGINT AS kernels, coalesce(sum(kernel_ns), 0)::BIGINT AS kernel_ns,
                 coalesce(sum(memcpy_ns), 0)::BIGINT AS memcpy_ns, sum(short_kernels)::BIGINT AS short_kernels,
                 count(*) AS launch_calls, count(*) FILTER (WHERE graph_launch) AS graph_launches
          FROM launch_ops GROUP BY ALL) o
    JOIN (SELECT DISTINCT source_id, pk, phase, category FROM po_all) k
      ON k.source_id = o.source_id AND k.pk = o.pk
)
SELECT s.source_id, s.phase, s.category, s.device_id, n.instances, n.wall_ns, s.span_ns,
       coalesce(b.busy_ns, 0) AS busy_ns, s.span_ns - coalesce(b.busy_ns, 0) AS idle_ns,
       coalesce(i.host_wait_ns, 0) AS host_wait_ns, coalesce(i.sync_wait_ns, 0) AS sync_wait_ns,
       coalesce(i.runtime_compile_ns, 0) AS runtime_compile_ns,
       coalesce(i.kernel_wait_ns, 0) AS kernel_wait_ns, coalesce(i.other_ns, 0) AS other_ns,
       s.span_ns - coalesce(b.busy_ns, 0) - coalesce(i.host_wait_ns, 0) - coalesce(i.sync_wait_ns, 0)
           - coalesce(i.runtime_compile_ns, 0) - coalesce(i.kernel_wait_ns, 0) - coalesce(i.other_ns, 0)
           AS outside_ns,
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
