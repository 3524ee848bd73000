-- steady_state: per GPU, the capture's steady state (first to last repeated step) and its start-up / tear-down.
--
-- Definition: a *step* is, in this order of precedence:
-- 1. ranges ('steps'): an instance (`phase_instances`) of a repeated phase: an NVTX range or
--    record_function name ('#N' dropped, so ProfilerStep#3 is phase ProfilerStep), not a
--    library's own range (`tk_is_library_range` on the range's domain and name: NCCL's, cuDNN's,
--    cuBLAS's and nvFuser's ranges, torch's nccl:*, Optimizer.step#*, DataLoader, DDP and
--    torch.compile ranges, ...), with at least min_step_repeats instances (parameter, default 3)
--    that launched GPU work, in the source. The *lead* phase is the repeated phase whose first
--    instance starts first (the outermost: ProfilerStep, a training step; then the longer first
--    instance, then by name); its *warm-up* instances are its first instances while their host
--    time (end_ns - start_ns) is more than warmup_step_factor times the median host time of its
--    instances, when their host time over that median adds up to at least warmup_min_pct % of
--    the phase's span (its first start to its last window end): a first step that pays
--    first-call costs (lazy module loading, library plans and heuristics, allocator growth, a
--    DataLoader's first batch) is start-up, not steady state; a few microseconds more in the
--    first of many short asynchronous steps is not.
--    The steady window of the source is [start of the lead phase's first instance after its
--    warm-up (of the first step when there is none), end of its last step's window]
--    (`phase_instances.window_end_ns`: the step's host end or the end of its last GPU op,
--    whichever is later); `steps` counts the repeated phases' instances that start in it.
-- 2. the kernel sequence ('kernels'), on a device of a source without such ranges: its kernels in
--    start order (then stream, name) are numbered 1..n; a kernel name *recurs at distance d* when
--    its next kernel of the same name is d kernels later. The period P is the longest d at which
--    some name recurs at least min_step_repeats - 1 times, those recurrences covering at least
--    half of the kernels from that name's first occurrence on (n_recurrences x d >= (n - first
--    + 1) / 2); the anchor is the name recurring at distance P first (then by name). A step is
--    an occurrence of the anchor followed by the next one P kernels later, or the last
--    occurrence when it came P kernels after the one before and P kernels follow it; with at
--    least min_step_repeats steps the window reaches from the first step's anchor back over the
--    kernels whose name the kernel P later has too, and from the last step's P-th kernel on over
--    the kernels whose name the kernel P before has: [start of the first of those kernels,
--    latest end of them]. Start-up is what precedes the first repetition of the sequence,
--    tear-down what follows its last.
-- What lies before the window is start-up (model loading, copies of the weights, first-call
-- initialisation and warm-up, NCCL set-up), what lies after tear-down; neither is steady-state
-- behaviour, and `tracekit diagnose` judges the steady window. A device with neither has method
-- 'whole': the window is the whole device window, as `gpu_utilization`'s.
-- Per device, the window is that steady window clipped to the device's activity window
-- [first op start, last op end] (`gpu_utilization`), and:
--   busy_ns           = length of (window ∩ `gpu_busy` periods)
--   <cause>_ns        = length of (window ∩ `idle_gaps` of scope 'device' with that cause)
--   ops in the window = `gpu_activity` ops that start in it: kernels, kernel_ns, memcpy_ns;
--   launched, short_kernels (kernels shorter than their launch call), launch_calls and
--   graph_launches (calls that started more than one op, or `tk_is_graph_launch`) over their
--   `gpu_launches` rows;
--   med_kernel_ns = the median kernel duration
--   exposed_memcpy_ns = memcpy time in the window not covered by a compute kernel (a kernel whose
--                       name is not a collective's, `tk_is_comm_kernel`) of the device
--   startup_ns / teardown_ns = device window time before / after the window, startup_busy_ns
--   the GPU busy time in the start-up part, startup_compile_calls / startup_compile_ns the
--   code-loading calls (`tk_is_compile_call`) started before the window.
-- Method (no effect on the result): of the compute kernels only those over some copy are merged
-- (what covers a copy is the union of those alone), found by an ASOF join on the copies' running
-- maximum end (a kernel overlaps a copy when the copies that start before it ends reach past
-- its start).
-- Parameters:
--   min_step_repeats    3  the fewest instances of a phase (or repeats of a kernel sequence) that make steps
--   warmup_step_factor  4  the lead phase's first instances longer on the host than this times its median are warm-up
--   warmup_min_pct      5  ... when their host time over the median is at least this % of the phase's span
--
-- Uses: gpu_activity, gpu_busy, gpu_launches, gpu_utilization, idle_gaps, phase_instances
--
-- Columns:
--   source_id              INTEGER  the source
--   device_id              INTEGER  GPU index
--   method                 VARCHAR  'steps' (repeated ranges), 'kernels' (a repeated kernel sequence) or 'whole'
--   step_phases            VARCHAR  'steps': the repeated phases, comma-separated; 'kernels':
--                                   'kernel sequence of P kernels from <anchor short_name>'; NULL for 'whole'
--   steps                  BIGINT   the steps (phase instances starting in the window, or repetitions of the sequence)
--   warmup_steps           BIGINT   'steps': the lead phase's first instances left to the start-up as warm-up; 0 otherwise
--   window_start_ns        BIGINT   steady window start on this device, ns
--   window_end_ns          BIGINT   steady window end, ns
--   window_ns              BIGINT   window_end_ns - window_start_ns
--   busy_ns                BIGINT   GPU busy inside the window, ns
--   host_wait_ns           BIGINT   idle in the window with cause host_wait, ns
--   sync_wait_ns           BIGINT   ... sync_wait, ns
--   runtime_compile_ns     BIGINT   ... runtime_compile, ns
--   kernel_wait_ns         BIGINT   ... kernel_wait, ns
--   other_ns               BIGINT   ... other, ns
--   utilization_pct        DOUBLE   100 * busy_ns / window_ns
--   kernels                BIGINT   kernels starting in the window
--   kernel_ns              BIGINT   their summed duration, ns
--   med_kernel_ns          DOUBLE   their median duration, ns
--   memcpy_ns              BIGINT   summed duration of memcpys starting in the window, ns
--   exposed_memcpy_ns      BIGINT   memcpy time not overlapped by compute kernels, ns
--   launched               BIGINT   kernels in the window with a known launch call
--   short_kernels          BIGINT   launched kernels shorter than their launch call
--   launch_calls           BIGINT   distinct launch calls of the window's ops
--   graph_launches         BIGINT   launch calls that started more than one op, or graph launches
--   device_start_ns        BIGINT   the device's first op start, ns
--   device_end_ns          BIGINT   the device's last op end, ns
--   startup_ns             BIGINT   window_start_ns - device_start_ns
--   teardown_ns            BIGINT   device_end_ns - window_end_ns
--   startup_busy_ns        BIGINT   GPU busy time before the window, ns
--   startup_compile_calls  BIGINT   code-loading calls of the source started before the window
--   startup_compile_ns     BIGINT   their summed duration, ns
CREATE OR REPLACE VIEW steady_state AS
WITH inst AS (  -- the instances of phases that launched GPU work, libraries' own ranges left out
    SELECT i.source_id, i.phase, i.start_ns, i.end_ns, i.window_end_ns
    FROM phase_instances i
    JOIN events e ON e.source_id = i.source_id AND e.event_id = i.event_id
    WHERE i.gpu_ops > 0 AND NOT tk_is_library_range(e.domain, i.name)
),
rep AS (  -- the repeated phases of each source, with their median host time per instance
    SELECT source_id, phase, quantile_cont(end_ns - start_ns, 0.5) AS med
    FROM inst
    GROUP BY ALL HAVING count(*) >= getvariable('min_step_repeats')
),
steps AS (  -- per source: the repeated phases' instances (one scan, so that an engine that inlines
            -- CTEs reads them once); per phase: first_ok0 its first instance not longer than
            -- warmup_step_factor x its median, excess the extra host time of the ones before it,
            -- first_ok that instance where the excess is at least warmup_min_pct % of the phase's
            -- span (else its first); rk 1 is the lead phase; s the steady window's start
    SELECT source_id, string_agg(DISTINCT phase, ',' ORDER BY phase) AS step_phases,
           count(*) FILTER (WHERE start_ns >= s) AS steps,
           count(*) FILTER (WHERE rk = 1 AND start_ns < first_ok) AS warmup_steps,
           max(s) AS s, max(window_end_ns) AS e
    FROM (SELECT *, greatest(min(start_ns) OVER (PARTITION BY source_id),
                             coalesce(max(CASE WHEN rk = 1 THEN first_ok END) OVER (PARTITION BY source_id),
                                      min(start_ns) OVER (PARTITION BY source_id))) AS s
          FROM (SELECT *, CASE WHEN excess >= getvariable('warmup_min_pct') / 100.0 * (span_end - first_ns)
                               THEN first_ok0 ELSE first_ns END AS first_ok,
                       dense_rank() OVER (PARTITION BY source_id ORDER BY first_ns, first_dur DESC, phase) AS rk
                FROM (SELECT *, max(CASE WHEN start_ns = first_ns THEN dur END)
                                    OVER (PARTITION BY source_id, phase) AS first_dur,
                             sum(CASE WHEN start_ns < first_ok0 THEN dur - med ELSE 0 END)
                                 OVER (PARTITION BY source_id, phase) AS excess
                      FROM (SELECT i.source_id, i.phase, i.start_ns, i.window_end_ns, i.end_ns - i.start_ns AS dur, r.med,
                                   min(i.start_ns) OVER (PARTITION BY i.source_id, i.phase) AS first_ns,
                                   max(i.window_end_ns) OVER (PARTITION BY i.source_id, i.phase) AS span_end,
                                   min(CASE WHEN i.end_ns - i.start_ns <= getvariable('warmup_step_factor') * r.med
                                            THEN i.start_ns END) OVER (PARTITION BY i.source_id, i.phase) AS first_ok0
                            FROM inst i JOIN rep r ON r.source_id = i.source_id AND r.phase = i.phase))))
    GROUP BY source_id
),
seq AS MATERIALIZED (  -- the kernel sequence of each device of a source without repeated ranges
    SELECT k.source_id, k.device_id, k.name, k.short_name, k.start_ns, k.end_ns,
           row_number() OVER (PARTITION BY k.source_id, k.device_id ORDER BY k.start_ns, k.stream_id, k.name) AS i
    FROM kernels k
    LEFT JOIN steps st ON st.source_id = k.source_id
    WHERE st.source_id IS NULL
),
occ AS (  -- each kernel with the distance, in kernels, to the next and from the previous of its name
    SELECT source_id, device_id, name, short_name, i,
           lead(i) OVER (PARTITION BY source_id, device_id, name ORDER BY i) - i AS nxt,
           i - lag(i) OVER (PARTITION BY source_id, device_id, name ORDER BY i) AS prv
    FROM seq
),
tot AS (SELECT source_id, device_id, max(i) AS n FROM seq GROUP BY ALL),
rec AS (  -- per name and distance: how often the name recurs at that distance, from where
    SELECT source_id, device_id, name, nxt AS d, count(*) AS times, min(i) AS first_i
    FROM occ WHERE nxt IS NOT NULL
    GROUP BY ALL
),
anchor AS (  -- the period (the longest distance that qualifies) and the name that recurs at it first
    SELECT source_id, device_id, name, d FROM (
        SELECT r.source_id, r.device_id, r.name, r.d,
               row_number() OVER (PARTITION BY r.source_id, r.device_id ORDER BY r.d DESC, r.first_i, r.name) AS rk
        FROM rec r JOIN tot t ON t.source_id = r.source_id AND t.device_id = r.device_id
        WHERE r.times >= getvariable('min_step_repeats') - 1
          AND 2 * r.times * r.d >= t.n - r.first_i + 1)
    WHERE rk = 1
),
kspan AS (  -- the anchor's occurrences that start a step
    SELECT o.source_id, o.device_id, a.d, any_value(o.short_name) AS short_name, count(*) AS steps,
           min(o.i) AS i0, max(o.i) + a.d - 1 AS i1
    FROM occ o
    JOIN anchor a ON a.source_id = o.source_id AND a.device_id = o.device_id AND a.name = o.name
    JOIN tot t ON t.source_id = o.source_id AND t.device_id = o.device_id
    WHERE o.nxt = a.d OR (o.nxt IS NULL AND o.prv = a.d AND o.i + a.d - 1 <= t.n)
    GROUP BY o.source_id, o.device_id, a.d
    HAVING count(*) >= getvariable('min_step_repeats')
),
reach AS (  -- how far the repetition reaches before the first step and after the last: back
             -- while a kernel has the name of the kernel P later, on while it has the name P before
    SELECT p.source_id, p.device_id,
           coalesce(max(q.i) FILTER (WHERE q.i < p.i0 AND b.name IS DISTINCT FROM q.name), 0) + 1 AS j0,
           coalesce(min(q.i) FILTER (WHERE q.i > p.i1 AND f.name IS DISTINCT FROM q.name), max(t.n) + 1) - 1 AS j1
    FROM kspan p
    JOIN tot t ON t.source_id = p.source_id AND t.device_id = p.device_id
    JOIN seq q ON q.source_id = p.source_id AND q.device_id = p.device_id AND (q.i < p.i0 OR q.i > p.i1)
    LEFT JOIN seq b ON b.source_id = q.source_id AND b.device_id = q.device_id AND b.i = q.i + p.d
    LEFT JOIN seq f ON f.source_id = q.source_id AND f.device_id = q.device_id AND f.i = q.i - p.d
    GROUP BY p.source_id, p.device_id
),
ksteps AS (  -- the steady window of the kernel sequence
    SELECT p.source_id, p.device_id, p.steps,
           'kernel sequence of ' || p.d || ' kernels from ' || coalesce(p.short_name, '?') AS step_phases,
           min(q.start_ns) AS s, max(q.end_ns) AS e
    FROM kspan p
    LEFT JOIN reach r ON r.source_id = p.source_id AND r.device_id = p.device_id
    JOIN seq q ON q.source_id = p.source_id AND q.device_id = p.device_id
              AND q.i >= coalesce(r.j0, p.i0) AND q.i <= coalesce(r.j1, p.i1)
    GROUP BY p.source_id, p.device_id, p.steps, p.d, p.short_name
),
w AS (
    SELECT u.source_id, u.device_id,
           CASE WHEN st.source_id IS NOT NULL THEN 'steps' WHEN ks.source_id IS NOT NULL THEN 'kernels'
                ELSE 'whole' END AS method,
           coalesce(st.step_phases, ks.step_phases) AS step_phases, coalesce(st.steps, ks.steps) AS steps,
           coalesce(st.warmup_steps, 0) AS warmup_steps,
           u.window_start_ns AS device_start_ns, u.window_end_ns AS device_end_ns,
           greatest(u.window_start_ns, coalesce(st.s, ks.s, u.window_start_ns)) AS ws,
           greatest(greatest(u.window_start_ns, coalesce(st.s, ks.s, u.window_start_ns)),
                    least(u.window_end_ns, coalesce(st.e, ks.e, u.window_end_ns))) AS we
    FROM gpu_utilization u
    LEFT JOIN steps st USING (source_id)
    LEFT JOIN ksteps ks ON ks.source_id = u.source_id AND ks.device_id = u.device_id
),
busy AS (
    SELECT w.source_id, w.device_id,
           coalesce(sum(least(b.end_ns, w.we) - greatest(b.start_ns, w.ws)) FILTER (WHERE b.end_ns > w.ws), 0)::BIGINT
               AS busy_ns,
           sum(least(b.end_ns, w.ws) - b.start_ns) FILTER (WHERE b.start_ns < w.ws)::BIGINT AS startup_busy_ns
    FROM w JOIN gpu_busy b
      ON b.source_id = w.source_id AND b.device_id = w.device_id AND b.start_ns < w.we
    GROUP BY ALL
),
idle AS (
    SELECT w.source_id, w.device_id, g.cause, sum(least(g.end_ns, w.we) - greatest(g.start_ns, w.ws))::BIGINT AS ns
    FROM w JOIN idle_gaps g
      ON g.scope = 'device' AND g.source_id = w.source_id AND g.device_id = w.device_id
     AND g.start_ns < w.we AND g.end_ns > w.ws
    GROUP BY ALL
),
ops AS (  -- the ops starting in the window, with their launch calls
    SELECT a.source_id, a.device_id, a.kind, a.name, a.start_ns, a.end_ns, a.dur_ns,
           l.api_dur_ns, l.pid, l.tid, l.correlation_id, l.ops_in_launch, l.api_name, l.api_name IS NOT NULL AS has_launch
    FROM gpu_activity a
    JOIN w ON w.source_id = a.source_id AND w.device_id = a.device_id
          AND a.start_ns >= w.ws AND a.start_ns < w.we
    LEFT JOIN gpu_launches l
      ON l.source_id = a.source_id AND l.device_id = a.device_id AND l.stream_id IS NOT DISTINCT FROM a.stream_id
     AND l.start_ns = a.start_ns AND l.end_ns = a.end_ns AND l.kind = a.kind
     AND l.correlation_id IS NOT DISTINCT FROM a.correlation_id
),
counts AS (
    SELECT source_id, device_id,
           count(*) FILTER (WHERE kind = 'kernel') AS kernels,
           coalesce(sum(dur_ns) FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_ns,
           quantile_cont(dur_ns, 0.5) FILTER (WHERE kind = 'kernel') AS med_kernel_ns,
           coalesce(sum(dur_ns) FILTER (WHERE kind = 'memcpy'), 0)::BIGINT AS memcpy_ns,
           count(*) FILTER (WHERE kind = 'kernel' AND has_launch) AS launched,
           count(*) FILTER (WHERE kind = 'kernel' AND dur_ns < api_dur_ns) AS short_kernels,
           count(DISTINCT (pid, tid, correlation_id)) FILTER (WHERE has_launch) AS launch_calls,
           count(DISTINCT (pid, tid, correlation_id))
               FILTER (WHERE has_launch AND (ops_in_launch > 1 OR tk_is_graph_launch(api_name)))
               AS graph_launches
    FROM ops GROUP BY ALL
),
copies AS (SELECT source_id, device_id, start_ns, end_ns FROM ops WHERE kind = 'memcpy'),
compute_kernels AS (  -- the compute kernels over some copy, to merge (what covers a copy is the
                      -- union of those alone: a kernel over no copy adds nothing inside one)
    SELECT {'source_id': k.source_id, 'device_id': k.device_id} AS key, k.start_ns, k.end_ns
    FROM kernels k
    ASOF JOIN (SELECT source_id, device_id, start_ns,  -- copies by start: the latest end so far
                      max(end_ns) OVER (PARTITION BY source_id, device_id ORDER BY start_ns
                                        RANGE UNBOUNDED PRECEDING) AS until_ns
               FROM copies) c
      ON c.source_id = k.source_id AND c.device_id = k.device_id AND k.end_ns > c.start_ns
    WHERE NOT tk_is_comm_kernel(k.name) AND c.until_ns > k.start_ns
),
covered AS (  -- per copy, the union of the compute kernels over it (kernels merged first)
    SELECT c.source_id, c.device_id, c.start_ns, c.end_ns,
           sum(least(k.e, c.end_ns) - greatest(k.s, c.start_ns)) AS ns
    FROM copies c
    JOIN (SELECT key.source_id AS source_id, key.device_id AS device_id, start_ns AS s, end_ns AS e
          FROM tk_merge_intervals('compute_kernels')) k
      ON k.source_id = c.source_id AND k.device_id = c.device_id AND k.s < c.end_ns AND k.e > c.start_ns
    GROUP BY ALL
),
exposed AS (
    SELECT c.source_id, c.device_id, sum(c.end_ns - c.start_ns - coalesce(v.ns, 0))::BIGINT AS exposed_memcpy_ns
    FROM copies c
    LEFT JOIN covered v USING (source_id, device_id, start_ns, end_ns)
    GROUP BY ALL
),
comp AS (
    SELECT w.source_id, w.device_id, count(a.start_ns) AS calls, coalesce(sum(a.dur_ns), 0)::BIGINT AS ns
    FROM w LEFT JOIN api_calls a
      ON a.source_id = w.source_id AND a.start_ns < w.ws AND tk_is_compile_call(a.name)
    GROUP BY ALL
)
SELECT w.source_id, w.device_id, w.method, w.step_phases, w.steps, w.warmup_steps,
       w.ws AS window_start_ns, w.we AS window_end_ns, w.we - w.ws AS window_ns,
       coalesce(b.busy_ns, 0) AS busy_ns,
       coalesce(max(i.ns) FILTER (WHERE i.cause = 'host_wait'), 0) AS host_wait_ns,
       coalesce(max(i.ns) FILTER (WHERE i.cause = 'sync_wait'), 0) AS sync_wait_ns,
       coalesce(max(i.ns) FILTER (WHERE i.cause = 'runtime_compile'), 0) AS runtime_compile_ns,
       coalesce(max(i.ns) FILTER (WHERE i.cause = 'kernel_wait'), 0) AS kernel_wait_ns,
       coalesce(max(i.ns) FILTER (WHERE i.cause = 'other'), 0) AS other_ns,
       100.0 * coalesce(b.busy_ns, 0) / nullif(w.we - w.ws, 0) AS utilization_pct,
       coalesce(c.kernels, 0) AS kernels, coalesce(c.kernel_ns, 0) AS kernel_ns, c.med_kernel_ns,
       coalesce(c.memcpy_ns, 0) AS memcpy_ns, coalesce(x.exposed_memcpy_ns, 0) AS exposed_memcpy_ns,
       coalesce(c.launched, 0) AS launched, coalesce(c.short_kernels, 0) AS short_kernels,
       coalesce(c.launch_calls, 0) AS launch_calls, coalesce(c.graph_launches, 0) AS graph_launches,
       w.device_start_ns, w.device_end_ns, w.ws - w.device_start_ns AS startup_ns,
       w.device_end_ns - w.we AS teardown_ns, coalesce(b.startup_busy_ns, 0) AS startup_busy_ns,
       m.calls AS startup_compile_calls, m.ns AS startup_compile_ns
FROM w
LEFT JOIN busy b USING (source_id, device_id)
LEFT JOIN idle i USING (source_id, device_id)
LEFT JOIN counts c USING (source_id, device_id)
LEFT JOIN exposed x USING (source_id, device_id)
LEFT JOIN comp m USING (source_id, device_id)
GROUP BY ALL
ORDER BY w.source_id, w.device_id;
