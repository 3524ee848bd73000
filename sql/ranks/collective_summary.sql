-- collective_summary: collectives per job, operation, group and message size, like nsys's nccl_sum: count, bytes, time, waiting, bus bandwidth.
--
-- Definition: the rows of `collectives` grouped by (job_id, or the source_id for a source that is
-- no rank of a job; operation; process_group; dtype; size class). The size class is the power of
-- two at or below the message size ('64 MiB' holds 64 MiB up to 128 MiB; NULL when the size is
-- unknown). Per group, summed over the ranks' rows:
--   calls        = rows (one per collective per rank)
--   bytes        = summed message bytes
--   kernel_ns    = summed kernel durations (waiting for other ranks included)
--   wait_ns      = summed waiting for the last rank to arrive (rank_imbalance)
--   transfer_ns  = summed transfer time (the collective once all ranks are there)
--   busbw_gbps   = bytes-weighted bus bandwidth: sum(busbw x transfer) / sum(transfer), GB/s
--   wait_pct     = 100 * wait_ns / kernel_ns: how much of the collectives' time is waiting
-- Uses: collectives
--
-- Columns:
--   job_id         INTEGER  the job (lowest source_id of its ranks), or the source
--   operation      VARCHAR  the collective (see collectives)
--   process_group  VARCHAR  torch process group name, NULL when unknown
--   dtype          VARCHAR  element type
--   size_class     VARCHAR  power-of-two message size class, e.g. '32 MiB'
--   size_min_bytes BIGINT   lower bound of the class, bytes
--   rank_count     BIGINT   distinct ranks with calls in the group
--   calls          BIGINT   collective kernels (one per collective per rank)
--   bytes          BIGINT   summed message bytes
--   kernel_ns      BIGINT   summed kernel time, ns
--   wait_ns        BIGINT   summed wait for late ranks, ns
--   transfer_ns    BIGINT   summed transfer time, ns
--   busbw_gbps     DOUBLE   bytes-weighted bus bandwidth, GB/s
--   wait_pct       DOUBLE   100 * wait_ns / kernel_ns
CREATE OR REPLACE VIEW collective_summary AS
WITH c AS (
    SELECT coalesce(job_id, source_id) AS job_id, operation, process_group, dtype, rank, bytes, dur_ns,
           wait_ns, transfer_ns, busbw_gbps,
           CASE WHEN bytes > 0 THEN (2::BIGINT ** floor(log2(bytes)))::BIGINT END AS size_min_bytes
    FROM collectives
)
SELECT job_id, operation, process_group, dtype,
       CASE WHEN size_min_bytes IS NULL THEN NULL
            WHEN size_min_bytes >= 1073741824 THEN (size_min_bytes // 1073741824) || ' GiB'
            WHEN size_min_bytes >= 1048576 THEN (size_min_bytes // 1048576) || ' MiB'
            WHEN size_min_bytes >= 1024 THEN (size_min_bytes // 1024) || ' KiB'
            ELSE size_min_bytes || ' B' END AS size_class,
       size_min_bytes, count(DISTINCT rank) AS rank_count, count(*) AS calls, sum(bytes)::BIGINT AS bytes,
       sum(dur_ns)::BIGINT AS kernel_ns, coalesce(sum(wait_ns), 0)::BIGINT AS wait_ns,
       sum(transfer_ns)::BIGINT AS transfer_ns,
       sum(busbw_gbps * transfer_ns) / nullif(sum(transfer_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps,
       100.0 * coalesce(sum(wait_ns), 0) / nullif(sum(dur_ns), 0) AS wait_pct
FROM c
GROUP BY ALL
ORDER BY job_id, kernel_ns DESC, operation, size_min_bytes;
