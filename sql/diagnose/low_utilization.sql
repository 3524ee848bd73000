-- low_utilization: the statements of the low_utilization rule (the GPU busy less than
-- util_low_pct % of its window): where a steady window's idle time went, and the evidence.
-- $parameters as in scopes.sql; a line naming a parameter given as NULL is left out.

-- idle_causes: a device's steady window's idle time per category (time_breakdown, part 'steady'), most first.
--   category  VARCHAR  the idle category
--   ns        BIGINT   its time
--   $sid, $dev  the device
SELECT category, ns FROM time_breakdown WHERE source_id = $sid AND device_id = $dev AND part = 'steady'
    AND state = 'idle' ORDER BY ns DESC, category;

-- steady_state: evidence: a device's steady_state row (the window, its busy time and idle causes).
--   $sid, $dev  the device
SELECT method, step_phases, steps, window_start_ns, window_end_ns, window_ns, busy_ns,
       utilization_pct, host_wait_ns, sync_wait_ns, runtime_compile_ns, kernel_wait_ns, other_ns,
       startup_ns, teardown_ns
FROM steady_state WHERE source_id = $sid AND device_id = $dev;

-- idle_gaps: evidence: the device's idle gaps per cause, inside its steady window.
--   cause       VARCHAR  idle_gaps.cause
--   gaps        BIGINT   gaps of that cause
--   total_ns    BIGINT   their time
--   med_ns      DOUBLE   median gap
--   max_ns      BIGINT   longest gap
--   sync_ns     BIGINT   idle_gaps.sync_ns summed
--   compile_ns  BIGINT   idle_gaps.compile_ns summed
--   $sid, $dev  the device; $w0, $w1  its steady window (NULL: the whole device window)
SELECT cause, count(*) AS gaps, sum(dur_ns)::BIGINT AS total_ns, median(dur_ns) AS med_ns,
       max(dur_ns) AS max_ns, sum(sync_ns)::BIGINT AS sync_ns, sum(compile_ns)::BIGINT AS compile_ns
FROM idle_gaps WHERE scope = 'device' AND source_id = $sid AND device_id = $dev
 AND start_ns >= $w0 AND end_ns <= $w1
GROUP BY cause ORDER BY total_ns DESC;
