-- roofline: the statements of the roofline note: where each phase sits against the device's
-- roofs (phase_roofline), the whole source where it has no phases (roofline), and the matmul
-- shapes that run latency-bound. $parameters as in scopes.sql.

-- phase_roofline: a source's six phases with the most GPU time whose operators' shapes cover at
-- least half of it and that have a verdict (phase_roofline's columns of those names).
--   $sid  the source; $phase  only this phase (NULL: every phase)
SELECT phase, instances, bound, roof, dtype, pct_peak_flops, pct_peak_bytes, mfu_pct,
       coverage_pct, flops, bytes, gpu_ns, intensity, tokens, bytes_per_token, flops_per_token,
       peak_flops_per_s, peak_bytes_per_s
FROM phase_roofline
WHERE source_id = $sid
 AND phase = $phase
 AND bound IS NOT NULL AND coverage_pct >= 50 ORDER BY gpu_ns DESC, phase LIMIT 6;

-- whole_trace: a source's roofline operators summed, where it has operators, both device peaks
-- and GPU time: phase '(whole trace)', instances 1, flops, bytes, gpu_ns, tokens NULL, the compute
-- roof of the dtype with the most FLOPs, the memory roof, pct_peak_flops / pct_peak_bytes (of the
-- summed GPU time), roof and bound (tk_roof, tk_roof_bound: the rule of roofline's rows).
--   $sid  the source; $latency_pct  diagnose's latency_pct
WITH w AS (
    SELECT sum(flops) AS flops, sum(bytes) AS bytes, sum(gpu_ns) AS gpu_ns,
           arg_max(peak_flops_per_s, flops) AS peak_flops_per_s, max(peak_bytes_per_s) AS peak_bytes_per_s
    FROM roofline WHERE source_id = $sid HAVING count(*) > 0
),
p AS (
    SELECT *, 100 * flops / (gpu_ns * 1e-9) / peak_flops_per_s AS pct_peak_flops,
           100 * coalesce(bytes, 0) / (gpu_ns * 1e-9) / peak_bytes_per_s AS pct_peak_bytes,
           flops / nullif(bytes, 0) AS intensity
    FROM w WHERE peak_flops_per_s > 0 AND peak_bytes_per_s > 0 AND gpu_ns > 0
)
SELECT '(whole trace)' AS phase, 1 AS instances, flops, bytes, gpu_ns, NULL AS tokens,
       peak_flops_per_s, peak_bytes_per_s, pct_peak_flops, pct_peak_bytes,
       tk_roof(flops, intensity, peak_flops_per_s, peak_bytes_per_s) AS roof,
       tk_roof_bound(flops, intensity, pct_peak_flops, pct_peak_bytes, peak_flops_per_s,
                     peak_bytes_per_s, $latency_pct) AS bound
FROM p;

-- latency_matmuls: a source's five latency-bound matmul shapes with the most GPU time: op,
-- shapes, dtype, calls, gpu_ns, the mean pct_peak_bytes / pct_peak_flops (summed in one order,
-- as a parallel avg() of thousands of calls differs in its last digits from run to run),
-- pct_of_matmul_ns (share of all matmul time).
--   $sid  the source
SELECT op, shapes, dtype, count(*) AS calls, sum(gpu_ns)::BIGINT AS gpu_ns,
       list_avg(list(pct_peak_bytes ORDER BY pct_peak_bytes)) AS pct_peak_bytes,
       list_avg(list(pct_peak_flops ORDER BY pct_peak_flops)) AS pct_peak_flops,
       100.0 * sum(gpu_ns) / (SELECT sum(gpu_ns) FROM roofline WHERE source_id = $sid AND model = 'matmul')
           AS pct_of_matmul_ns
FROM roofline WHERE source_id = $sid AND model = 'matmul' AND bound = 'latency'
GROUP BY ALL ORDER BY gpu_ns DESC, op, shapes, dtype LIMIT 5;
