-- ncu_timeline_match: each ncu result paired with the timeline kernel (nsys / Kineto) it profiled.
--
-- ncu and the timeline are two different runs of the program: there is no shared id, and ncu's
-- durations are replay durations. One row per (ncu result, timeline source), where a timeline
-- source is any source with rows in `kernels`; with no timeline source in the store, one row per
-- ncu result with the timeline columns NULL. Unmatched results are listed, never dropped.
--
-- Definition:
--   key       = (short_name, geometry): the base function name (tracekit.names.short_kernel_name,
--               which reads ncu's, nsys's and Kineto's spellings alike) and the launch geometry:
--               'GXxGYxGZ/BXxBYxBZ' when ncu has grid and block dims; else 'nGRID/nBLOCK' from the
--               grid and block sizes (products; the 2020 CSV has only those); else '*' (name only).
--   range     = the innermost NVTX range of the launch: on the ncu side the last element of ncu's
--               NVTX stack (`ncu_kernels.nvtx`), on the timeline side the innermost of the ranges
--               open on the launching thread at the launch call (`timeline_ranges`, below).
--   ordinal   = rank of the launch within its group: ncu by result ID (profiling order); the
--               timeline by launch order = start of the launch call (`tk_launch_calls()` /
--               `tk_launch_link`; the kernel start when there is none), then kernel start, then
--               correlation_id. Launch order, not kernel start: concurrent streams reorder starts.
--   paired_by = 'nvtx_range' when the ncu result has an NVTX range and the timeline source has
--               ranges at its launches: the k-th ncu launch of (key, range) is paired with the k-th
--               timeline launch of the same key inside a range of the same name (ncu
--               --nvtx-include "decode_step/" profiles decode kernels, which launch order alone
--               would pair with the prefill's launches of the same kernels); else 'launch_order':
--               the k-th ncu launch of a key with the k-th timeline launch of the key.
--   ncu_launches / timeline_launches count the launches of the group the pair was made in.
--   match_quality:
--     'exact'     same full name (whitespace-insensitive), same grid and block dims, the group
--                 has as many launches on both sides, and the ranges do not disagree
--     'key'       same base name and geometry, same launch count on both sides (names spelled
--                 differently by the tools, or only grid/block sizes known)
--     'order'     same key but the launch counts differ (the runs covered different launches, e.g.
--                 ncu --launch-skip/--launch-count), or the innermost ranges differ
--                 (nvtx_agrees false): paired by launch order, a best guess
--     'name'      ncu has no geometry: paired by base name and launch order only
--     'unmatched' no timeline launch left for it in this key (or no timeline source)
--   timeline_ranges = the ranges open on the launching thread at the launch call, outermost first,
--               '/'-joined: NVTX ranges (nsys) and record_function annotations (Kineto).
--               nvtx_agrees = the innermost of them equals the innermost range of ncu's NVTX
--               stack (NULL when either side has none).
--   Only timeline kernels whose base name ncu profiled are read (no effect on the result).
--
-- Uses: kernel_latency
--
-- Columns:
--   ncu_source_id      INTEGER  the ncu source
--   ncu_id             BIGINT   ncu result ID (ncu_kernels.id)
--   ncu_name           VARCHAR  kernel name as ncu printed it
--   short_name         VARCHAR  base function name (the name part of the key)
--   geometry           VARCHAR  the geometry part of the key (see above)
--   ncu_nvtx           VARCHAR  ncu's NVTX range stack of the launch, where collected
--   timeline_source_id INTEGER  the nsys / Kineto source (NULL when the store has none)
--   key_ordinal        BIGINT   1-based rank of the launch within its key (ncu side)
--   ncu_launches       BIGINT   launches of the key in the ncu source
--   timeline_launches  BIGINT   launches of the key in the timeline source (0 when none)
--   kernel_name        VARCHAR  matched timeline kernel's full name (kernels.name)
--   device_id          INTEGER  matched kernel's GPU
--   stream_id          BIGINT   matched kernel's stream
--   pid                BIGINT   matched kernel's process
--   correlation_id     BIGINT   matched kernel's correlation id
--   start_ns           BIGINT   matched kernel's start (timeline source clock)
--   end_ns             BIGINT   matched kernel's end
--   dur_ns             BIGINT   matched kernel's duration on the timeline, ns
--   ncu_dur_ns         BIGINT   the launch's duration under ncu replay, ns
--   timeline_ranges    VARCHAR  ranges open at the matched kernel's launch call (see above)
--   nvtx_agrees        BOOLEAN  innermost timeline range = innermost ncu NVTX range
--   match_quality      VARCHAR  'exact' | 'key' | 'order' | 'name' | 'unmatched'
--   paired_by          VARCHAR  'nvtx_range' or 'launch_order' (see above)
--   latency_cause      VARCHAR  the ncu result's `kernel_latency.cause` (which latency), brought to the
--                               timeline kernel it is paired with
CREATE OR REPLACE VIEW ncu_timeline_match AS
WITH sizes AS (  -- grid / block sizes (products) where ncu has no dims
    SELECT source_id, id,
           max(value) FILTER (name = 'launch__grid_size' OR (name = 'Grid Size' AND section = 'Launch Statistics')) AS grid_size,
           max(value) FILTER (name = 'launch__block_size' OR (name = 'Block Size' AND section = 'Launch Statistics')) AS block_size
    FROM ncu_metrics
    WHERE name IN ('launch__grid_size', 'launch__block_size', 'Grid Size', 'Block Size') AND value IS NOT NULL
    GROUP BY source_id, id
),
ncu AS (
    SELECT k.source_id AS ncu_source_id, k.id AS ncu_id, k.name AS ncu_name, k.short_name, k.nvtx AS ncu_nvtx,
           k.dur_ns AS ncu_dur_ns, k.grid_x, k.block_x,
           nullif(regexp_extract(k.nvtx, '([^/;@]*)$', 1), '') AS ncu_range,
           CASE
               WHEN k.grid_x IS NOT NULL AND k.block_x IS NOT NULL THEN
                   printf('%dx%dx%d/%dx%dx%d', k.grid_x, coalesce(k.grid_y, 1), coalesce(k.grid_z, 1),
                          k.block_x, coalesce(k.block_y, 1), coalesce(k.block_z, 1))
               WHEN s.grid_size IS NOT NULL AND s.block_size IS NOT NULL THEN
                   printf('n%d/n%d', s.grid_size::BIGINT, s.block_size::BIGINT)
               ELSE '*'
           END AS geometry
    FROM ncu_kernels k
    LEFT JOIN sizes s USING (source_id, id)
),
ncu_ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY ncu_source_id, short_name, geometry ORDER BY ncu_id) AS key_ordinal,
           count(*) OVER (PARTITION BY ncu_source_id, short_name, geometry) AS key_launches,
           row_number() OVER (PARTITION BY ncu_source_id, short_name, geometry, ncu_range ORDER BY ncu_id)
               AS range_ordinal,
           count(*) OVER (PARTITION BY ncu_source_id, short_name, geometry, ncu_range) AS range_launches
    FROM ncu
),
tl_kernels AS (  -- timeline kernels of the base names ncu profiled (the only ones a result can pair with)
    SELECT * FROM kernels WHERE short_name IN (SELECT short_name FROM ncu_kernels)
),
launch AS (  -- the one launch rule (sql/lib/host_calls.sql)
    SELECT source_id, pid, correlation_id, n_pids, start_ns AS launch_ns, tid AS launch_tid
    FROM tk_launch_calls()
    WHERE correlation_id IN (SELECT correlation_id FROM tl_kernels)
),
tl AS (  -- timeline kernels, each under its three geometry spellings
    SELECT k.source_id, k.name, k.short_name, k.device_id, k.stream_id, k.pid, k.correlation_id,
           k.start_ns, k.end_ns, k.dur_ns, coalesce(l.launch_ns, k.start_ns) AS launch_ns,
           l.launch_ns AS api_ns, l.launch_tid, g.geometry
    FROM tl_kernels k
    LEFT JOIN launch l ON l.source_id = k.source_id AND l.correlation_id = k.correlation_id
                      AND tk_launch_link(k.pid, l.pid, l.n_pids)
    CROSS JOIN LATERAL (
        SELECT unnest([
            CASE WHEN k.grid_x IS NOT NULL AND k.block_x IS NOT NULL THEN
                printf('%dx%dx%d/%dx%dx%d', k.grid_x, coalesce(k.grid_y, 1), coalesce(k.grid_z, 1),
                       k.block_x, coalesce(k.block_y, 1), coalesce(k.block_z, 1)) END,
            CASE WHEN k.grid_x IS NOT NULL AND k.block_x IS NOT NULL THEN
                printf('n%d/n%d', k.grid_x::BIGINT * coalesce(k.grid_y, 1) * coalesce(k.grid_z, 1),
                       k.block_x::BIGINT * coalesce(k.block_y, 1) * coalesce(k.block_z, 1)) END,
            '*']) AS geometry
    ) g
    WHERE g.geometry IS NOT NULL
),
tl_ranges AS MATERIALIZED (  -- the ranges open on the launching thread at each launch call
    SELECT t.source_id, t.correlation_id, t.pid, t.api_ns, t.launch_tid,
           string_agg(e.name, '/' ORDER BY e.start_ns, e.end_ns DESC, e.event_id) AS ranges
    FROM (SELECT DISTINCT source_id, correlation_id, pid, api_ns, launch_tid FROM tl WHERE api_ns IS NOT NULL) t
    JOIN events e
      ON e.source_id = t.source_id AND e.pid = t.pid AND e.tid = t.launch_tid
     AND tk_is_phase_range(e.category, e.is_instant, e.name)
     AND e.start_ns <= t.api_ns AND t.api_ns < e.end_ns
    GROUP BY ALL
),
tl_r AS (
    SELECT t.*, r.ranges, nullif(regexp_extract(r.ranges, '([^/]*)$', 1), '') AS tl_range
    FROM tl t
    LEFT JOIN tl_ranges r
      ON r.source_id = t.source_id AND r.correlation_id = t.correlation_id AND r.pid IS NOT DISTINCT FROM t.pid
     AND r.api_ns = t.api_ns AND r.launch_tid = t.launch_tid
),
tl_sources AS (
    SELECT source_id, bool_or(ranges IS NOT NULL) AS has_ranges
    FROM (SELECT DISTINCT source_id FROM kernels) LEFT JOIN tl_r USING (source_id)
    GROUP BY source_id
),
tl_ranked AS (  -- each timeline launch in its two groups: its key (pair_range ''), and key + range
    SELECT *,
           row_number() OVER (PARTITION BY source_id, short_name, geometry, pair_range
                              ORDER BY launch_ns, start_ns, correlation_id, stream_id) AS ordinal,
           count(*) OVER (PARTITION BY source_id, short_name, geometry, pair_range) AS timeline_launches
    FROM (SELECT *, '' AS pair_range FROM tl_r
          UNION ALL
          SELECT *, tl_range FROM tl_r WHERE tl_range IS NOT NULL)
),
tl_counts AS (
    SELECT DISTINCT source_id, short_name, geometry, pair_range, timeline_launches FROM tl_ranked
),
pairs AS (  -- each ncu result per timeline source, with the group it is paired in
    SELECT n.*, s.source_id AS tl_source_id,
           coalesce(n.ncu_range IS NOT NULL AND s.has_ranges, false) AS by_range
    FROM ncu_ranked n LEFT JOIN tl_sources s ON true
)
SELECT p.ncu_source_id, p.ncu_id, p.ncu_name, p.short_name, p.geometry, p.ncu_nvtx,
       p.tl_source_id AS timeline_source_id,
       CASE WHEN p.by_range THEN p.range_ordinal ELSE p.key_ordinal END AS key_ordinal,
       CASE WHEN p.by_range THEN p.range_launches ELSE p.key_launches END AS ncu_launches,
       CASE WHEN p.tl_source_id IS NULL THEN NULL ELSE coalesce(c.timeline_launches, 0) END AS timeline_launches,
       t.name AS kernel_name, t.device_id, t.stream_id, t.pid, t.correlation_id,
       t.start_ns, t.end_ns, t.dur_ns, p.ncu_dur_ns, t.ranges AS timeline_ranges,
       CASE WHEN t.tl_range IS NULL OR p.ncu_range IS NULL THEN NULL ELSE t.tl_range = p.ncu_range END AS nvtx_agrees,
       CASE
           WHEN t.source_id IS NULL THEN 'unmatched'
           WHEN p.geometry = '*' THEN 'name'
           WHEN c.timeline_launches <> CASE WHEN p.by_range THEN p.range_launches ELSE p.key_launches END
             OR (t.tl_range IS NOT NULL AND p.ncu_range IS NOT NULL AND t.tl_range <> p.ncu_range) THEN 'order'
           WHEN p.geometry NOT LIKE 'n%' AND regexp_replace(p.ncu_name, '\s+', '', 'g')
                                          = regexp_replace(t.name, '\s+', '', 'g') THEN 'exact'
           ELSE 'key'
       END AS match_quality,
       CASE WHEN p.tl_source_id IS NULL THEN NULL WHEN p.by_range THEN 'nvtx_range' ELSE 'launch_order' END AS paired_by,
       lc.cause AS latency_cause
FROM pairs p
LEFT JOIN kernel_latency lc ON lc.source_id = p.ncu_source_id AND lc.id = p.ncu_id
LEFT JOIN tl_counts c
  ON c.source_id = p.tl_source_id AND c.short_name = p.short_name AND c.geometry = p.geometry
 AND c.pair_range = CASE WHEN p.by_range THEN p.ncu_range ELSE '' END
LEFT JOIN tl_ranked t
  ON t.source_id = p.tl_source_id AND t.short_name = p.short_name AND t.geometry = p.geometry
 AND t.pair_range = CASE WHEN p.by_range THEN p.ncu_range ELSE '' END
 AND t.ordinal = CASE WHEN p.by_range THEN p.range_ordinal ELSE p.key_ordinal END
ORDER BY p.ncu_source_id, p.tl_source_id, p.ncu_id;
