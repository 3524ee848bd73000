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
           CASE WHEN kind = 'memset' THEN '[CUDA memset]'
                ELSE '[CUDA memcpy ' || CASE copy_kind
                    WHEN 'HtoD' THEN 'Host-to-Device'   WHEN 'DtoH' THEN 'Device-to-Host'
                    WHEN 'DtoD' THEN 'Device-to-Device' WHEN 'HtoH' THEN 'Host-to-Host'
                    WHEN 'PtoP' THEN 'Peer-to-Peer'     WHEN 'HtoA' THEN 'Host-to-Array'
                    WHEN 'AtoH' THEN 'Array-to-Host'    WHEN 'AtoA' THEN 'Array-to-Array'
                    WHEN 'AtoD' THEN 'Array-to-Device'  WHEN 'DtoA' THEN 'Device-to-Array'
                    WHEN 'uvm_HtoD' THEN 'Unified Host-to-Device'
                    WHEN 'uvm_DtoH' THEN 'Unified Device-to-Host'
                    WHEN 'uvm_DtoD' THEN 'Unified Device-to-Device'
                    ELSE 'Unknown' END || ']'
           END AS operation
    FROM memops
)
SELECT source_id,
       sum(bytes)::BIGINT                  AS total_bytes,
       count(*)                            AS count,
       avg(bytes)                          AS avg_bytes,
       quantile_cont(bytes, 0.5)           AS med_bytes,
       min(bytes)                          AS min_bytes,
       max(bytes)                          AS max_bytes,
       coalesce(stddev_samp(bytes), 0.0)   AS stddev_bytes,
       operation
FROM ops
GROUP BY source_id, operation
ORDER BY source_id, total_bytes DESC, count DESC, operation;
