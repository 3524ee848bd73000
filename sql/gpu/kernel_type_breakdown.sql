-- kernel_type_breakdown: GPU time per kernel type (compute, communication, memory, other) per GPU (HTA's kernel type breakdown).
--
-- One row per (source_id, device_id, kernel_type) for each of the four types, over the GPU
-- operations of `gpu_activity` (kernels, memcpy, memset; sync records are not work) on that
-- device, typed by tk_kernel_type (sql/lib/names.sql: 'communication' = the kernels of the
-- communication libraries of tk_comm_library: NCCL / RCCL, DeepEP, NVSHMEM, vLLM custom
-- all-reduce, PyTorch symmetric memory, MSCCL++; 'memory' = memcpy / memset, 'other' = kernels HTA does not count as computation, names with
-- 'Memcpy' / 'Sync', 'compute' = every other kernel).
-- Definition, per device (span = first op start to last op end of the device; busy = the union
-- of all its ops, sql/lib/intervals.sql):
--   ops           = operations of this type; total_ns = sum of their durations
--   union_ns      = length of the union of this type's operations (time at least one runs)
--   exclusive_ns  = time when this type runs and no other type does (HTA's per-type row of
--                   get_gpu_kernel_breakdown; its "X overlapping Y" rows are overlapped_ns)
--   overlapped_ns = union_ns - exclusive_ns (this type running at once with another type)
--   busy_pct      = 100 * union_ns / busy_ns; exclusive_pct = 100 * exclusive_ns / busy_ns (HTA's
--                   percentage; the four exclusive shares and the share of the time when two or
--                   more types run add up to 100)
--   span_pct      = 100 * union_ns / span_ns (HTA's get_temporal_breakdown for 'compute':
--                   compute_time_pctg)
-- rank: the rank whose GPU this is (`ranks`), NULL when unknown. Types without operations on the
-- device have a row of zeros.
-- Ordered by source_id, device_id, union_ns DESC, kernel_type.
-- Method (no effect on the result): one time-ordered pass over the edges of the per-type unions
-- gives the set of types running in each segment: exclusive_ns from the segments where one type
-- runs, busy_ns from those where any does (the union of all ops is the union of the per-type
-- unions); span_ns from the per-type unions' first start and last end.
--
-- Uses: gpu_activity, ranks
--
-- Columns:
--   source_id      INTEGER  the source
--   rank           INTEGER  the rank of that GPU (ranks.rank), NULL when unknown
--   device_id      INTEGER  GPU index
--   kernel_type    VARCHAR  'compute', 'communication', 'memory' or 'other'
--   ops            BIGINT   operations of this type
--   total_ns       BIGINT   summed duration of those operations, ns
--   union_ns       BIGINT   time at least one of them runs, ns
--   exclusive_ns   BIGINT   time only this type runs, ns
--   overlapped_ns  BIGINT   time this type runs together with another type, ns
--   busy_ns        BIGINT   time any operation runs on the device, ns
--   span_ns        BIGINT   first start to last end on the device, ns
--   busy_pct       DOUBLE   100 * union_ns / busy_ns
--   exclusive_pct  DOUBLE   100 * exclusive_ns / busy_ns
--   span_pct       DOUBLE   100 * union_ns / span_ns
CREATE OR REPLACE VIEW kernel_type_breakdown AS
WITH ops AS (
    SELECT source_id, device_id, start_ns, end_ns, dur_ns,
           tk_kernel_type(kind, name) AS kernel_type  -- sql/lib/names.sql
    FROM gpu_activity
    WHERE device_id IS NOT NULL AND end_ns >= start_ns
),
by_type AS (
    SELECT {'source_id': source_id, 'device_id': device_id, 'kernel_type': kernel_type} AS key,
           start_ns, end_ns FROM ops
),
u AS (  -- disjoint union intervals per type (sql/lib/intervals.sql)
    SELECT key.source_id AS source_id, key.device_id AS device_id, key.kernel_type AS kernel_type,
           start_ns, end_ns
    FROM tk_merge_intervals('by_type')
),
types AS (
    SELECT * FROM (VALUES ('compute', 1), ('communication', 2), ('memory', 4), ('other', 8)) t(kernel_type, bit)
),
steps AS (  -- each type's union edges as +bit / -bit; the running sum is the set of types running
    SELECT u.source_id, u.device_id, u.start_ns AS ts, t.bit AS delta
    FROM u JOIN types t USING (kernel_type)
    UNION ALL
    SELECT u.source_id, u.device_id, u.end_ns, -t.bit
    FROM u JOIN types t USING (kernel_type)
),
segs AS (  -- the mask sums all edges up to ts (its peers too), so of edges at one ts, the one whose
           -- len reaches the next ts has the mask after all of them (the others have len 0)
    SELECT source_id, device_id,
           sum(delta) OVER (PARTITION BY source_id, device_id ORDER BY ts) AS mask,
           lead(ts) OVER (PARTITION BY source_id, device_id ORDER BY ts) - ts AS len
    FROM steps
),
excl AS (
    SELECT s.source_id, s.device_id, t.kernel_type, sum(s.len)::BIGINT AS exclusive_ns
    FROM segs s JOIN types t ON t.bit = s.mask
    WHERE s.len > 0
    GROUP BY ALL
),
busy AS (  -- the union of all the device's ops: the time some type runs (mask <> 0)
    SELECT d.source_id, d.device_id, coalesce(b.busy_ns, 0)::BIGINT AS busy_ns, d.span_ns
    FROM (SELECT source_id, device_id, max(end_ns) - min(start_ns) AS span_ns FROM u GROUP BY ALL) d
    LEFT JOIN (SELECT source_id, device_id, sum(len)::BIGINT AS busy_ns
               FROM segs WHERE mask <> 0 AND len > 0 GROUP BY ALL) b
      ON b.source_id = d.source_id AND b.device_id = d.device_id
),
uni AS (
    SELECT source_id, device_id, kernel_type, sum(end_ns - start_ns)::BIGINT AS union_ns FROM u GROUP BY ALL
),
cnt AS (
    SELECT source_id, device_id, kernel_type, count(*) AS ops, sum(dur_ns)::BIGINT AS total_ns
    FROM ops GROUP BY ALL
),
rk AS (
    SELECT source_id, device_id, min(rank) AS rank FROM ranks GROUP BY ALL
)
SELECT b.source_id, rk.rank, b.device_id, t.kernel_type,
       coalesce(c.ops, 0) AS ops, coalesce(c.total_ns, 0) AS total_ns,
       coalesce(n.union_ns, 0) AS union_ns, coalesce(x.exclusive_ns, 0) AS exclusive_ns,
       coalesce(n.union_ns, 0) - coalesce(x.exclusive_ns, 0) AS overlapped_ns,
       b.busy_ns, b.span_ns,
       100.0 * coalesce(n.union_ns, 0) / nullif(b.busy_ns, 0) AS busy_pct,
       100.0 * coalesce(x.exclusive_ns, 0) / nullif(b.busy_ns, 0) AS exclusive_pct,
       100.0 * coalesce(n.union_ns, 0) / nullif(b.span_ns, 0) AS span_pct
FROM busy b
CROSS JOIN types t
LEFT JOIN cnt c ON c.source_id = b.source_id AND c.device_id = b.device_id AND c.kernel_type = t.kernel_type
LEFT JOIN uni n ON n.source_id = b.source_id AND n.device_id = b.device_id AND n.kernel_type = t.kernel_type
LEFT JOIN excl x ON x.source_id = b.source_id AND x.device_id = b.device_id AND x.kernel_type = t.kernel_type
LEFT JOIN rk ON rk.source_id = b.source_id AND rk.device_id = b.device_id
ORDER BY b.source_id, b.device_id, union_ns DESC, t.kernel_type;
