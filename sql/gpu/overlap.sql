-- overlap: per GPU, how much communication and memcpy time is hidden under compute.
--
-- Definition: on each (source_id, device_id), three classes of GPU operations, each merged
-- into a union of intervals across all streams:
--   compute  kernels that are not communication (memset is not compute, as in HTA; TraceLens
--            counts it as compute)
--   comm     communication kernels (`tk_is_comm_kernel`, sql/lib/names.sql: the kernel-name
--            table of tk_comm_library: NCCL / RCCL, DeepEP, NVSHMEM, vLLM custom all-reduce,
--            PyTorch symmetric memory, MSCCL++)
--   memcpy   memcpy operations
-- One row per device and kind in ('comm', 'memcpy'):
--   kind_ns      = length of the union of that kind
--   compute_ns   = length of the compute union
--   overlap_ns   = length of (kind union ∩ compute union)
--   exposed_ns   = kind_ns - overlap_ns (TraceLens' exposed_comm / exposed_memcpy, except that
--                  TraceLens subtracts comm from memcpy too)
--   overlap_pct  = 100 * overlap_ns / kind_ns (HTA's comm/comp overlap %; NULL without that kind)
--
-- Uses: gpu_activity
--
-- Columns:
--   source_id    INTEGER  the source
--   device_id    INTEGER  GPU index
--   kind         VARCHAR  'comm' or 'memcpy'
--   kind_ns      BIGINT   union length of that kind, ns
--   compute_ns   BIGINT   union length of compute kernels, ns
--   overlap_ns   BIGINT   time both ran at once, ns
--   exposed_ns   BIGINT   kind_ns - overlap_ns
--   overlap_pct  DOUBLE   100 * overlap_ns / kind_ns
CREATE OR REPLACE VIEW overlap AS
WITH ops AS (
    SELECT source_id, device_id, start_ns, end_ns,
           CASE WHEN kind = 'kernel' AND tk_is_comm_kernel(name) THEN 'comm'
                WHEN kind = 'kernel' THEN 'compute'
                WHEN kind = 'memcpy' THEN 'memcpy' END AS cls
    FROM gpu_activity WHERE device_id IS NOT NULL AND kind <> 'memset'
),
keyed AS (
    SELECT {'source_id': source_id, 'device_id': device_id, 'cls': cls} AS key, start_ns, end_ns FROM ops
),
u AS (  -- disjoint union intervals per class (sql/lib/intervals.sql)
    SELECT key.source_id AS source_id, key.device_id AS device_id, key.cls AS cls, start_ns AS s, end_ns AS e
    FROM tk_merge_intervals('keyed')
),
tot AS (
    SELECT source_id, device_id, cls, sum(e - s)::BIGINT AS ns FROM u GROUP BY ALL
),
devs AS (SELECT DISTINCT source_id, device_id FROM ops),
kinds AS (SELECT * FROM (VALUES ('comm'), ('memcpy')) t(kind)),
ov AS (
    SELECT x.source_id, x.device_id, x.cls AS kind,
           sum(least(x.e, c.e) - greatest(x.s, c.s))::BIGINT AS overlap_ns
    FROM u x JOIN u c
      ON c.source_id = x.source_id AND c.device_id = x.device_id AND c.cls = 'compute'
     AND x.cls IN ('comm', 'memcpy') AND c.s < x.e AND c.e > x.s
    GROUP BY ALL
)
SELECT d.source_id, d.device_id, k.kind,
       coalesce(t.ns, 0) AS kind_ns, coalesce(c.ns, 0) AS compute_ns,
       coalesce(ov.overlap_ns, 0) AS overlap_ns,
       coalesce(t.ns, 0) - coalesce(ov.overlap_ns, 0) AS exposed_ns,
       100.0 * coalesce(ov.overlap_ns, 0) / nullif(t.ns, 0) AS overlap_pct
FROM devs d CROSS JOIN kinds k
LEFT JOIN tot t ON t.source_id = d.source_id AND t.device_id = d.device_id AND t.cls = k.kind
LEFT JOIN tot c ON c.source_id = d.source_id AND c.device_id = d.device_id AND c.cls = 'compute'
LEFT JOIN ov ON ov.source_id = d.source_id AND ov.device_id = d.device_id AND ov.kind = k.kind
ORDER BY d.source_id, d.device_id, k.kind;
