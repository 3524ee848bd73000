-- startup: the statements of the startup note (start-up and tear-down outside the repeated
-- steps, not judged). $parameters as in scopes.sql.

-- outside_phases: the phases with GPU work that start outside a steady window, first first.
--   phase  VARCHAR  the phase
--   s      BIGINT   its first instance's start
--   $sid  the source; $w0, $w1  the steady window
SELECT phase, min(start_ns) AS s FROM phase_instances
WHERE source_id = $sid AND gpu_ops > 0
  AND (start_ns < $w0 OR start_ns >= $w1)
GROUP BY phase ORDER BY s;

-- steady_state: evidence: a device's steady_state row (every column).
--   $sid, $dev  the device
SELECT * FROM steady_state WHERE source_id = $sid AND device_id = $dev;
