-- temporal_breakdown: per GPU, its span split into idle, compute and non-compute time (HTA's get_temporal_breakdown).
--
-- One row per (source_id, device_id) with GPU operations, from `kernel_type_breakdown`:
--   span_ns        = first operation start to last operation end on the device (HTA's kernel_time)
--   idle_ns        = span_ns - busy_ns (no kernel, memcpy or memset running)
--   compute_ns     = time at least one compute kernel runs (the union of kernel_type 'compute')
--   non_compute_ns = busy_ns - compute_ns: communication, memory and other operations running
--                    while no compute kernel does
--   *_pct          = 100 * the time / span_ns (the three add up to 100)
-- Difference from HTA: HTA counts the trace's sync records (cuda_sync 'Event Sync' / 'Stream Sync'
-- on a stream) as GPU time; tracekit does not (`gpu_activity`), so on traces with waits HTA's
-- idle time is smaller (bench/hta_compare.py measures it).
-- Ordered by source_id, device_id.
--
-- Uses: kernel_type_breakdown
--
-- Columns:
--   source_id        INTEGER  the source
--   rank             INTEGER  the rank of that GPU (ranks.rank), NULL when unknown
--   device_id        INTEGER  GPU index
--   span_ns          BIGINT   first operation start to last operation end, ns
--   busy_ns          BIGINT   time any operation runs, ns
--   idle_ns          BIGINT   span_ns - busy_ns
--   compute_ns       BIGINT   time a compute kernel runs, ns
--   non_compute_ns   BIGINT   busy_ns - compute_ns
--   idle_pct         DOUBLE   100 * idle_ns / span_ns
--   compute_pct      DOUBLE   100 * compute_ns / span_ns
--   non_compute_pct  DOUBLE   100 * non_compute_ns / span_ns
CREATE OR REPLACE VIEW temporal_breakdown AS
SELECT source_id, rank, device_id, span_ns, busy_ns,
       span_ns - busy_ns AS idle_ns,
       union_ns AS compute_ns,
       busy_ns - union_ns AS non_compute_ns,
       100.0 * (span_ns - busy_ns) / nullif(span_ns, 0) AS idle_pct,
       100.0 * union_ns / nullif(span_ns, 0) AS compute_pct,
       100.0 * (busy_ns - union_ns) / nullif(span_ns, 0) AS non_compute_pct
FROM kernel_type_breakdown
WHERE kernel_type = 'compute'
ORDER BY source_id, device_id;
