-- bounds: the statements of memory_bound / compute_bound / latency_bound (ncu's Speed-of-Light
-- verdict of the ncu-profiled kernels with at least bound_min_pct % of the kernel time).
-- $parameters as in scopes.sql; $kernels is a condition on kernel_bounds / kernel_latency (given as SQL).

-- hotspots_bound: a source's kernels with an ncu verdict (hotspots_bound, every column), most time first.
--   $sid  the source
SELECT * FROM hotspots_bound WHERE source_id = $sid AND ncu_launches > 0
AND bound IS NOT NULL ORDER BY total_ns DESC;

-- phase_bound: as hotspots_bound, with total_ns, instances and time_pct those inside a phase (phase_ops).
--   $sid  the source; $phase  the phase
SELECT h.* EXCLUDE (total_ns, instances, time_pct),
       p.total_ns, p.instances, 100.0 * p.total_ns / p.all_ns AS time_pct
FROM hotspots_bound h JOIN (
    SELECT name, sum(dur_ns)::BIGINT AS total_ns, count(*) AS instances,
           sum(sum(dur_ns)) OVER () AS all_ns
    FROM phase_ops WHERE source_id = $sid AND phase = $phase AND kind = 'kernel'
      AND short_name IS NOT NULL
    GROUP BY name) p USING (name)
WHERE h.source_id = $sid AND h.ncu_launches > 0 AND h.bound IS NOT NULL
ORDER BY p.total_ns DESC;

-- kernel: evidence: one kernel's hotspots_bound row.
--   $sid  the source; $name  the kernel name
SELECT time_pct, total_ns, instances, short_name, ncu_launches, bound, bound_reason, bounds,
       sm_pct, memory_pct, dram_pct, arithmetic_intensity, roofline_bound, match_quality,
       latency_cause, ncu_results
FROM hotspots_bound WHERE source_id = $sid AND name = $name;

-- ncu_kernels: an ncu source's results by kernel, by ncu's own time (no timeline in the store, or
-- only the results no timeline kernel matched): launches, total_ns, time_pct, the most frequent
-- bound / bound_reason / roofline_bound, every bound seen (bounds), the mean SOL figures.
--   $sid  the source; $unmatched_sid  the same source, to keep only its unmatched results (NULL: all)
SELECT short_name, count(*) AS ncu_launches, sum(dur_ns)::BIGINT AS total_ns,
       100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER () AS time_pct,
       mode(bound) AS bound, mode(bound_reason) AS bound_reason,
       string_agg(DISTINCT bound, ',' ORDER BY bound) AS bounds,
       avg(sm_pct) AS sm_pct, avg(memory_pct) AS memory_pct, avg(dram_pct) AS dram_pct,
       mode(roofline_bound) AS roofline_bound, any_value(name) AS name
FROM kernel_bounds WHERE source_id = $sid
 AND id NOT IN (SELECT ncu_id FROM ncu_timeline_match WHERE ncu_source_id = $unmatched_sid AND match_quality <> 'unmatched')
GROUP BY short_name ORDER BY total_ns DESC;

-- ncu_kernel: the condition selecting one kernel's results of ncu_kernels (a $kernels condition).
--   $sid, $unmatched_sid  as ncu_kernels; $short_name  the kernel
source_id = $sid
 AND id NOT IN (SELECT ncu_id FROM ncu_timeline_match WHERE ncu_source_id = $unmatched_sid AND match_quality <> 'unmatched')
 AND short_name = $short_name;

-- kernel_bounds: evidence: the kernel_bounds rows of the results $kernels selects.
--   $kernels  a condition on source_id, id, short_name
SELECT source_id, id, short_name, dur_ns, bound, bound_reason, dominant, sm_pct, memory_pct,
       dram_pct, memory_level, waves, achieved_occupancy_pct, arithmetic_intensity, ridge,
       roofline_bound, ncu_bottleneck
FROM kernel_bounds WHERE $kernels ORDER BY source_id, id;

-- kernel_latency: evidence: the kernel_latency rows (which latency, its remedy) of the results $kernels selects.
--   $kernels  a condition on source_id, id, short_name
SELECT source_id, id, short_name, cause, cause_evidence, top_stall, top_stall_pct, stall_breakdown,
       threads_per_inst, sectors_ratio, theoretical_occupancy_pct, occupancy_limiter, missing, remedy
FROM kernel_latency WHERE $kernels ORDER BY source_id, id;

-- ncu_results: the condition selecting the ncu results of a hotspots_bound row (a $kernels condition).
--   $ids  its ncu_results as SQL row values: (source_id, id), ... ((NULL, NULL): none)
(source_id, id) IN ($ids);
