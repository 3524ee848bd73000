-- cuda_gpu_sum: GPU time per kernel name and per memory-operation kind together (nsys stats cuda_gpu_sum).
--
-- One row per (source_id, category, operation): the rows of `hotspots` (category 'CUDA_KERNEL',
-- operation = the kernel name; whole-graph rows left out) and of `memop_time_summary` (category
-- 'MEMORY_OPER', operation = '[CUDA memset]', '[CUDA memcpy Host-to-Device]', ...), with their
-- figures unchanged (total, instances, avg, median, min, max, sample stddev: see those views).
-- Definition (identical to `nsys stats --report cuda_gpu_sum`):
--   time_pct = 100 * total_ns / (sum of total_ns over all rows of the source, kernels and
--              memory operations together): a share of GPU operation time, not of wall time,
--              so a kernel's share is smaller here than in `hotspots` (nsys rounds it to 1
--              decimal, we do not)
-- Ordered by source_id, total_ns DESC, instances DESC, category, operation.
--
-- Uses: hotspots, memop_time_summary
--
-- Columns:
--   source_id   INTEGER  the source
--   time_pct    DOUBLE   share of the source's total GPU operation time (kernels + memory operations), in percent
--   total_ns    BIGINT   summed duration, ns
--   instances   BIGINT   number of executions
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest, ns
--   max_ns      BIGINT   longest, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   category    VARCHAR  'CUDA_KERNEL' or 'MEMORY_OPER'
--   operation   VARCHAR  kernel name (full, demangled) or memory operation ('[CUDA memset]', ...)
CREATE OR REPLACE VIEW cuda_gpu_sum AS
WITH ops AS (
    SELECT source_id, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns,
           'CUDA_KERNEL' AS category, name AS operation
    FROM hotspots
    UNION ALL
    SELECT source_id, total_ns, count, avg_ns, med_ns, min_ns, max_ns, stddev_ns,
           'MEMORY_OPER', operation
    FROM memop_time_summary
)
SELECT source_id,
       100.0 * total_ns / nullif(sum(total_ns) OVER (PARTITION BY source_id), 0) AS time_pct,
       total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, category, operation
FROM ops
ORDER BY source_id, total_ns DESC, instances DESC, category, operation;
