-- memop_time_summary: GPU time per memory-operation kind per source (nsys stats cuda_gpu_mem_time_sum).
--
-- One row per (source_id, operation) over all rows of `memops`.
-- Definition (identical to `nsys stats --report cuda_gpu_mem_time_sum`):
--   operation = '[CUDA memset]' for memsets, '[CUDA memcpy <direction>]' for copies, with nsys's
--               direction labels (ENUM_CUDA_MEMCPY_OPER): HtoD -> 'Host-to-Device', DtoH ->
--               'Device-to-Host', DtoD -> 'Device-to-Device', HtoH -> 'Host-to-Host', PtoP ->
--               'Peer-to-Peer', HtoA -> 'Host-to-Array', AtoH -> 'Array-to-Host', AtoA ->
--               'Array-to-Array', AtoD -> 'Array-to-Device', DtoA -> 'Device-to-Array',
--               uvm_HtoD / uvm_DtoH / uvm_DtoD -> 'Unified Host-to-Device' / ..., else 'Unknown'
--               (older nsys printed `[CUDA memcpy HtoD]`; these are the 2023.1+ labels)
--   total_ns  = sum(end_ns - start_ns) of the operations of this kind in this source
--   time_pct  = 100 * total_ns / (sum of total_ns over all operations of the source), a share
--               of memory-operation time (nsys rounds it to 1 decimal, we do not)
--   med_ns    = median (mean of the two middle values for an even count)
--   stddev_ns = sample standard deviation (n - 1); 0 for a single operation
-- Works on Kineto too (copy_kind parsed from `Memcpy HtoD (...)` names).
-- Ordered by source_id, total_ns DESC, count DESC, operation.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id   INTEGER  the source
--   time_pct    DOUBLE   share of the source's total memory-operation time, in percent
--   total_ns    BIGINT   summed duration, ns
--   count       BIGINT   number of operations
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest operation, ns
--   max_ns      BIGINT   longest operation, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   operation   VARCHAR  '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
CREATE OR REPLACE VIEW memop_time_summary AS
WITH ops AS (
    SELECT source_id, dur_ns,
           tk_memop_operation(kind, copy_kind) AS operation  -- sql/lib/summaries.sql
    FROM memops
),
per_op_s AS (
    SELECT source_id, operation,
           tk_stats(dur_ns) AS s  -- sql/lib/summaries.sql
    FROM ops
    GROUP BY source_id, operation
)
SELECT source_id,
       time_pct, total_ns, n AS count, avg_ns, med_ns, min_ns, max_ns, stddev_ns, operation
FROM tk_stats_by('per_op_s')  -- sql/lib/summaries.sql
ORDER BY source_id, total_ns DESC, count DESC, operation;
