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
--   ordinal   = rank of the launch within its key: ncu by result ID (profiling order); the
--               timeline by launch order = start of the launching API call (same source, pid and
--               correlation_id; the kernel start when there is none), then kernel start, then
--               correlation_id. Launch order, not kernel start: concurrent streams reorder starts.
--   The k-th ncu launch of a key is paired with the k-th timeline launch of the same key.
--   match_quality:
--     'exact'     same full name (whitespace-insensitive), same grid and block dims, and the key
--                 has as many launches on both sides
--     'key'       same base name and geometry, same launch count on both sides (names spelled
--                 differently by the tools, or only grid/block sizes known)
--     'order'     same key but the launch counts differ (the runs covered different launches, e.g.
--                 ncu --launch-skip/--launch-count): paired by launch order, a best guess
--     'name'      ncu has no geometry: paired by base name and launch order only
--     'unmatched' no timeline launch left for it in this key (or no timeline source)
--   timeline_ranges = the ranges open on the launching thread at the launch call, outermost first,
--               '/'-joined: NVTX ranges (nsys) and record_function annotations (Kineto); evidence
--               only, not used for pairing. nvtx_agrees = the innermost of them equals the innermost
--               range of ncu's NVTX stack (NULL when either side has none).
--   Only timeline kernels whose base name ncu profiled are read (no effect on the result).
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
           count(*) OVER (PARTITION BY ncu_source_id, short_name, geometry) AS ncu_launches
    FROM ncu
),
tl_kernels AS (  -- timeline kernels of the base names ncu profiled (the only ones a result can pair with)
    SELECT * FROM kernels WHERE short_name IN (SELECT short_name FROM ncu_kernels)
),
launch AS (
    SELECT source_id, pid, correlation_id, min(start_ns) AS launch_ns, arg_min(tid, start_ns) AS launch_tid
    FROM api_calls
    WHERE correlation_id IN (SELECT correlation_id FROM tl_kernels)
    GROUP BY ALL
),
tl AS (  -- timeline kernels, each under its three geometry spellings
    SELECT k.source_id, k.name, k.short_name, k.device_id, k.stream_id, k.pid, k.correlation_id,
           k.start_ns, k.end_ns, k.dur_ns, coalesce(l.launch_ns, k.start_ns) AS launch_ns,
           l.launch_ns AS api_ns, l.launch_tid, g.geometry
    FROM tl_kernels k
    LEFT JOIN launch l ON l.source_id = k.source_id AND l.pid IS NOT DISTINCT FROM k.pid
                      AND l.correlation_id = k.correlation_id
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
tl_ranked AS (
    SELECT *,
           row_number() OVER (PARTITION BY source_id, short_name, geometry
                              ORDER BY launch_ns, start_ns, correlation_id, stream_id) AS key_ordinal,
           count(*) OVER (PARTITION BY source_id, short_name, geometry) AS timeline_launches
    FROM tl
),
tl_sources AS (SELECT DISTINCT source_id FROM kernels),
tl_counts AS (
    SELECT DISTINCT source_id, short_name, geometry, timeline_launches FROM tl_ranked
)
SELECT n.ncu_source_id, n.ncu_id, n.ncu_name, n.short_name, n.geometry, n.ncu_nvtx,
       s.source_id AS timeline_source_id, n.key_ordinal, n.ncu_launches,
       CASE WHEN s.source_id IS NULL THEN NULL ELSE coalesce(c.timeline_launches, 0) END AS timeline_launches,
       t.name AS kernel_name, t.device_id, t.stream_id, t.pid, t.correlation_id,
       t.start_ns, t.end_ns, t.dur_ns, n.ncu_dur_ns, r.ranges AS timeline_ranges,
       CASE WHEN r.ranges IS NULL OR n.ncu_nvtx IS NULL THEN NULL
            ELSE regexp_extract(r.ranges, '([^/]*)$', 1) = regexp_extract(n.ncu_nvtx, '([^/;@]*)$', 1)
       END AS nvtx_agrees,
       CASE
           WHEN t.source_id IS NULL THEN 'unmatched'
           WHEN n.geometry = '*' THEN 'name'
           WHEN c.timeline_launches <> n.ncu_launches THEN 'order'
           WHEN n.geometry NOT LIKE 'n%' AND regexp_replace(n.ncu_name, '\s+', '', 'g')
                                          = regexp_replace(t.name, '\s+', '', 'g') THEN 'exact'
           ELSE 'key'
       END AS match_quality
FROM ncu_ranked n
LEFT JOIN tl_sources s ON true
LEFT JOIN tl_counts c ON c.source_id = s.source_id AND c.short_name = n.short_name AND c.geometry = n.geometry
LEFT JOIN tl_ranked t ON t.source_id = s.source_id AND t.short_name = n.short_name
                     AND t.geometry = n.geometry AND t.key_ordinal = n.key_ordinal
LEFT JOIN LATERAL (
    SELECT string_agg(e.name, '/' ORDER BY e.start_ns, e.end_ns DESC, e.event_id) AS ranges
    FROM events e
    WHERE e.source_id = t.source_id AND e.pid = t.pid AND e.tid = t.launch_tid
      AND e.category IN ('nvtx', 'user_annotation') AND NOT coalesce(e.is_instant, false)
      AND e.start_ns <= t.api_ns AND t.api_ns < e.end_ns
) r ON t.api_ns IS NOT NULL
ORDER BY n.ncu_source_id, s.source_id, n.ncu_id;
