-- memop_size_summary: bytes per memory-operation kind per source (nsys stats cuda_gpu_mem_size_sum).
--
-- One row per (source_id, operation) over all rows of `memops`, `operation` named exactly as in
-- `memop_time_summary` ('[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...).
-- Definition (identical to `nsys stats --report cuda_gpu_mem_size_sum`):
--   total_bytes  = sum(bytes) of the operations of this kind in this source
--   med_bytes    = median (mean of the two middle values for an even count)
--   stddev_bytes = sample standard deviation (n - 1); 0 for a single operation
-- Sizes are bytes (nsys prints MB = 10^6 bytes by default: divide by 1e6 to compare).
-- Ordered by source_id, total_bytes DESC, count DESC, operation.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id     INTEGER  the source
--   total_bytes   BIGINT   bytes moved or set
--   count         BIGINT   number of operations
--   avg_bytes     DOUBLE   mean size, bytes
--   med_bytes     DOUBLE   median size, bytes
--   min_bytes     BIGINT   smallest operation, bytes
--   max_bytes     BIGINT   largest operation, bytes
--   stddev_bytes  DOUBLE   sample standard deviation of the size, bytes
--   operation     VARCHAR  '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
CREATE OR REPLACE VIEW memop_size_summary AS
WITH ops AS (
    SELECT source_id, bytes,
           tk_memop_operation(kind, copy_kind) AS operation  -- sql/lib/summaries.sql
    FROM memops
)
SELECT source_id, s.total AS total_bytes, s.n AS count, s.avg AS avg_bytes, s.med AS med_bytes,
       s.min AS min_bytes, s.max AS max_bytes, s.stddev AS stddev_bytes, operation
FROM (SELECT source_id, operation, tk_stats(bytes) AS s FROM ops GROUP BY source_id, operation)
ORDER BY source_id, total_bytes DESC, count DESC, operation;
