-- report: the statements of `tracekit report --html` (tracekit/report.py): the rows each plot
-- of source $sid draws, read from the views.

-- utilization: GPU utilization per device and bucket of source $sid
-- (`gpu_utilization_timeline`), times from the device's first operation (`gpu_utilization`).
-- Columns: device_id, t_ns (bucket start), e_ns (bucket end), utilization_pct
SELECT t.device_id, t.bucket_start_ns - u.window_start_ns AS t_ns,
       t.bucket_end_ns - u.window_start_ns AS e_ns, t.utilization_pct
FROM gpu_utilization_timeline t JOIN gpu_utilization u USING (source_id, device_id)
WHERE t.source_id = $sid ORDER BY t.device_id, t.bucket;

-- top_kernels: the 15 kernels of source $sid with the most GPU time (`hotspots`).
-- Columns: short_name, name, total_ns, instances, time_pct, med_ns
SELECT short_name, name, total_ns, instances, time_pct, med_ns FROM hotspots
WHERE source_id = $sid ORDER BY total_ns DESC LIMIT 15;

-- gaps: the device-scope idle gaps of source $sid (`idle_gaps`).
-- Columns: cause, dur_ns
SELECT cause, dur_ns FROM idle_gaps WHERE scope = 'device' AND source_id = $sid;

-- phase_time: per phase of source $sid, instances, GPU busy time, idle time by cause, time
-- outside the GPU window and span, summed over devices (`phase_idle`); shortest span first.
-- Columns: phase, instances, busy_ns, host_wait_ns, sync_wait_ns, runtime_compile_ns,
--   kernel_wait_ns, other_ns, outside_ns, span_ns
SELECT phase, sum(instances) AS instances, sum(busy_ns) AS busy_ns,
       sum(host_wait_ns) AS host_wait_ns, sum(sync_wait_ns) AS sync_wait_ns,
       sum(runtime_compile_ns) AS runtime_compile_ns,
       sum(kernel_wait_ns) AS kernel_wait_ns, sum(other_ns) AS other_ns,
       sum(outside_ns) AS outside_ns, sum(span_ns) AS span_ns
FROM phase_idle WHERE source_id = $sid GROUP BY phase ORDER BY span_ns;

-- kernel_bounds: `kernel_bounds`' rows of source $sid, in order.
SELECT * FROM kernel_bounds WHERE source_id = $sid ORDER BY id;

-- op_roofline: per operator, shapes and dtype of source $sid with FLOPs and bytes
-- (`roofline`): calls, intensity (FLOP/byte), FLOP/s over its GPU time, GPU time, its most
-- frequent bound and the GPU's peaks (pf FLOP/s, pb bytes/s); the 200 with most GPU time.
-- Columns: op, shapes, dtype, calls, intensity, flops_per_s, gpu_ns, bound, pf, pb
SELECT op, shapes, dtype, count(*) AS calls, sum(flops) / sum(bytes) AS intensity,
       sum(flops) / (sum(gpu_ns) * 1e-9) AS flops_per_s, sum(gpu_ns) AS gpu_ns, mode(bound) AS bound,
       max(peak_flops_per_s) AS pf, max(peak_bytes_per_s) AS pb
FROM roofline WHERE source_id = $sid AND flops > 0 AND bytes > 0
GROUP BY ALL ORDER BY gpu_ns DESC LIMIT 200;

-- phase_roofline: the phases of source $sid with FLOPs and bytes (`phase_roofline`).
-- Columns: phase, intensity, flops_per_s, bound, pct_peak_flops, pct_peak_bytes, pf, pb
SELECT phase, intensity, flops_per_s, bound, pct_peak_flops, pct_peak_bytes, peak_flops_per_s AS pf,
       peak_bytes_per_s AS pb
FROM phase_roofline WHERE source_id = $sid AND flops > 0 AND bytes > 0;
