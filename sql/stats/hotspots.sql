-- hotspots: GPU time per kernel name per source, hottest first (nsys stats cuda_gpu_kern_sum).
--
-- One row per (source_id, name) over the rows of `kernels` that are kernel executions: the
-- whole-graph rows of an nsys `--cuda-graph-trace=graph` capture (`[CUDA graph N]`: graph_id
-- set, graph_node_id NULL) are left out, as nsys's report reads only the KERNEL table (the
-- graph's time is in `kernels` / `gpu_activity`).
-- Definition (identical to `nsys stats --report cuda_gpu_kern_sum`, which groups by the
-- demangled name only, over all devices and streams of the capture):
--   total_ns  = sum(end_ns - start_ns) of the kernels with this name in this source
--   time_pct  = 100 * total_ns / (sum of total_ns over all kernel names of the source);
--               a share of kernel time, not of wall time (nsys rounds it to 1 decimal, we do not)
--   med_ns    = median; for an even count the mean of the two middle values
--   stddev_ns = sample standard deviation (n - 1); 0 for a single instance
-- Ordered by source_id, total_ns DESC, instances DESC, name.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id   INTEGER  the source (sources.source_id)
--   time_pct    DOUBLE   share of the source's total kernel time, in percent
--   total_ns    BIGINT   summed kernel duration, ns
--   instances   BIGINT   number of kernel executions
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest duration, ns
--   max_ns      BIGINT   longest duration, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   name        VARCHAR  full (demangled) kernel name
--   short_name  VARCHAR  base function name (kernels.short_name)
CREATE OR REPLACE VIEW hotspots AS
WITH per_name_s AS (
    SELECT source_id,
           name,
           any_value(short_name)               AS short_name,
           tk_stats(dur_ns) AS s  -- sql/lib/summaries.sql
    FROM kernels
    WHERE NOT tk_is_graph_span(graph_id, graph_node_id)
    GROUP BY source_id, name
)
SELECT source_id,
       time_pct, total_ns, n AS instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, name, short_name
FROM tk_stats_by('per_name_s')  -- sql/lib/summaries.sql
ORDER BY source_id, total_ns DESC, instances DESC, name;
