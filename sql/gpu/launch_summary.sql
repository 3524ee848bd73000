-- launch_summary: per source and GPU, the evidence for "launch-bound: use CUDA graphs or fusion".
--
-- Definition: over the `launch_latency` rows of kernels (memops excluded) of a
-- (source_id, device_id):
--   kernels              all kernels of the device (`kernels`), launched or not
--   launched             kernels with a launch call in the trace
--   graph_launches       distinct launch calls that started > 1 kernel or are graph launches
--                        (`tk_is_graph_launch`: a graph-level trace has one row per launch)
--   med_latency_ns, p90_latency_ns, med_queue_ns: over first_in_launch rows only
--   short_kernels        kernels that ran shorter than their launch call (HTA's rule), over all
--                        launched kernels
--   tiny_kernels         kernels under tiny_kernel_ns (default 10000 ns = TraceLens' 10 µs)
--   med_kernel_ns        median kernel duration
--   kernel_ns            summed kernel duration
--   launch_api_ns        summed duration of the launch calls (each call once)
-- Parameters:
--   tiny_kernel_ns  10000  kernels shorter than this are tiny, ns
--
-- Uses: launch_latency
--
-- Columns:
--   source_id         INTEGER  the source
--   device_id         INTEGER  GPU index
--   kernels           BIGINT   kernels on the device
--   launched          BIGINT   kernels with a known launch call
--   graph_launches    BIGINT   launch calls that started more than one kernel, or graph launches
--   med_latency_ns    DOUBLE   median call start → kernel start, first kernel of each launch
--   p90_latency_ns    DOUBLE   90th percentile of the same
--   med_queue_ns      DOUBLE   median max(kernel start - call end, 0), first kernel of each launch
--   short_kernels     BIGINT   launched kernels shorter than their launch call
--   short_pct         DOUBLE   100 * short_kernels / launched
--   tiny_kernels      BIGINT   kernels shorter than tiny_kernel_ns
--   med_kernel_ns     DOUBLE   median kernel duration
--   kernel_ns         BIGINT   summed kernel duration
--   launch_api_ns     BIGINT   summed duration of distinct launch calls
CREATE OR REPLACE VIEW launch_summary AS
WITH k AS (
    SELECT source_id, device_id, count(*) AS kernels,
           count(*) FILTER (WHERE dur_ns < getvariable('tiny_kernel_ns')) AS tiny_kernels,
           quantile_cont(dur_ns, 0.5) AS med_kernel_ns, sum(dur_ns)::BIGINT AS kernel_ns
    FROM kernels WHERE device_id IS NOT NULL GROUP BY ALL
),
l AS (
    SELECT source_id, device_id, count(*) AS launched,
           count(DISTINCT (pid, tid, correlation_id))
               FILTER (WHERE ops_in_launch > 1 OR tk_is_graph_launch(api_name)) AS graph_launches,
           quantile_cont(latency_ns, 0.5) FILTER (WHERE first_in_launch) AS med_latency_ns,
           quantile_cont(latency_ns, 0.9) FILTER (WHERE first_in_launch) AS p90_latency_ns,
           quantile_cont(queue_ns, 0.5) FILTER (WHERE first_in_launch) AS med_queue_ns,
           count(*) FILTER (WHERE shorter_than_launch) AS short_kernels,
           sum(api_dur_ns) FILTER (WHERE first_in_launch)::BIGINT AS launch_api_ns
    FROM launch_latency WHERE kind = 'kernel' GROUP BY ALL
)
SELECT k.source_id, k.device_id, k.kernels, coalesce(l.launched, 0) AS launched,
       coalesce(l.graph_launches, 0) AS graph_launches, l.med_latency_ns, l.p90_latency_ns,
       l.med_queue_ns, coalesce(l.short_kernels, 0) AS short_kernels,
       100.0 * l.short_kernels / nullif(l.launched, 0) AS short_pct,
       k.tiny_kernels, k.med_kernel_ns, k.kernel_ns, l.launch_api_ns
FROM k LEFT JOIN l USING (source_id, device_id)
ORDER BY k.source_id, k.device_id;
