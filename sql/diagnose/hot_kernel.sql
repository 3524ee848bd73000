-- hot_kernel: the statements of hot_kernel (one kernel name, not a collective, with at least
-- hot_kernel_pct % of the kernel time): the top kernels of a source, or of one phase.
-- $parameters as in scopes.sql. Columns of both: time_pct (share of the kernel time), total_ns,
-- instances, avg_ns, med_ns, short_name, name, comm (tk_is_comm_kernel: a collective).

-- hotspots: a source's ten kernels with the most time (hotspots).
--   $sid  the source
SELECT time_pct, total_ns, instances, avg_ns, med_ns, short_name, name,
       tk_is_comm_kernel(name) AS comm
FROM hotspots WHERE source_id = $sid ORDER BY total_ns DESC, name LIMIT 10;

-- phase_ops: the ten kernels with the most time inside a phase's instances (phase_ops).
--   $sid  the source; $phase  the phase
SELECT 100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER () AS time_pct, sum(dur_ns)::BIGINT AS total_ns,
       count(*) AS instances, avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns,
       any_value(short_name) AS short_name, name, tk_is_comm_kernel(name) AS comm
FROM phase_ops WHERE source_id = $sid AND phase = $phase AND kind = 'kernel'
  AND short_name IS NOT NULL
GROUP BY name ORDER BY total_ns DESC, name LIMIT 10;
