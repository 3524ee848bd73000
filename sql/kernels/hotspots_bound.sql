-- hotspots_bound: hotspots with the ncu bound of each hot kernel, where ncu profiled it.
--
-- One row per row of `hotspots` (same order, same columns first). The ncu columns come from the
-- ncu results that `ncu_timeline_match` paired (match_quality other than 'unmatched') with
-- kernels of this name in this timeline source, classified by `kernel_bounds`; they are NULL
-- (ncu_launches 0) for kernels that no ncu result matched.
-- Definition:
--   ncu_launches  = number of matched ncu results (over every ncu source of the store)
--   bound         = the most frequent `kernel_bounds.bound` among them (ties: alphabetical);
--                   bound_reason and roofline_bound likewise
--   bounds        = every distinct bound among them, comma-separated (shows a mixed verdict)
--   sm_pct, memory_pct, dram_pct, arithmetic_intensity = means over them
--   match_quality = the best quality among them (exact > key > order > name)
--
-- Uses: hotspots, kernel_bounds, ncu_timeline_match
--
-- Columns:
--   source_id            INTEGER  the source (hotspots)
--   time_pct             DOUBLE   share of the source's kernel time, % (hotspots)
--   total_ns             BIGINT   summed kernel duration, ns (hotspots)
--   instances            BIGINT   kernel executions (hotspots)
--   avg_ns               DOUBLE   mean duration, ns (hotspots)
--   med_ns               DOUBLE   median duration, ns (hotspots)
--   min_ns               BIGINT   shortest duration, ns (hotspots)
--   max_ns               BIGINT   longest duration, ns (hotspots)
--   stddev_ns            DOUBLE   sample standard deviation, ns (hotspots)
--   name                 VARCHAR  full kernel name (hotspots)
--   short_name           VARCHAR  kernel base name (hotspots)
--   ncu_launches         BIGINT   matched ncu results (0 when none)
--   bound                VARCHAR  'memory' | 'compute' | 'latency' | 'balanced' | NULL
--   bound_reason         VARCHAR  the rule that decided (see kernel_bounds)
--   bounds               VARCHAR  distinct bounds of the matched results, comma-separated
--   sm_pct               DOUBLE   mean compute (SM) throughput %, ncu
--   memory_pct           DOUBLE   mean memory throughput %, ncu
--   dram_pct             DOUBLE   mean DRAM throughput %, ncu
--   arithmetic_intensity DOUBLE   mean FLOP per DRAM byte, where the counters exist
--   roofline_bound       VARCHAR  most frequent roofline verdict ('memory' / 'compute')
--   match_quality        VARCHAR  best match quality of the matched results
--   latency_cause        VARCHAR  most frequent latency cause of the matched results (ncu_timeline_match)
--   ncu_results          VARCHAR  the matched results as 'ncu_source_id:id', comma-separated
CREATE OR REPLACE VIEW hotspots_bound AS
WITH m AS (
    SELECT m.timeline_source_id AS source_id, m.kernel_name AS name, m.ncu_source_id, m.ncu_id,
           m.match_quality, b.bound, b.bound_reason, b.roofline_bound, b.sm_pct, b.memory_pct,
           b.dram_pct, b.arithmetic_intensity, m.latency_cause AS cause,
           CASE m.match_quality WHEN 'exact' THEN 1 WHEN 'key' THEN 2 WHEN 'order' THEN 3 ELSE 4 END AS q
    FROM ncu_timeline_match m
    JOIN kernel_bounds b ON b.source_id = m.ncu_source_id AND b.id = m.ncu_id
    WHERE m.match_quality <> 'unmatched'
),
bound_votes AS (
    SELECT source_id, name, bound, count(*) AS n FROM m WHERE bound IS NOT NULL GROUP BY ALL
),
reason_votes AS (
    SELECT source_id, name, bound_reason, count(*) AS n FROM m WHERE bound_reason IS NOT NULL GROUP BY ALL
),
cause_votes AS (
    SELECT source_id, name, cause, count(*) AS n FROM m WHERE cause IS NOT NULL GROUP BY ALL
),
roof_votes AS (
    SELECT source_id, name, roofline_bound, count(*) AS n FROM m WHERE roofline_bound IS NOT NULL GROUP BY ALL
),
agg AS (
    SELECT source_id, name,
           count(*) AS ncu_launches,
           string_agg(DISTINCT bound, ',' ORDER BY bound) AS bounds,
           avg(sm_pct) AS sm_pct, avg(memory_pct) AS memory_pct, avg(dram_pct) AS dram_pct,
           avg(arithmetic_intensity) AS arithmetic_intensity,
           CASE min(q) WHEN 1 THEN 'exact' WHEN 2 THEN 'key' WHEN 3 THEN 'order' ELSE 'name' END AS match_quality,
           string_agg(ncu_source_id || ':' || ncu_id, ',' ORDER BY ncu_source_id, ncu_id) AS ncu_results
    FROM m
    GROUP BY source_id, name
)
SELECT h.*,
       coalesce(a.ncu_launches, 0) AS ncu_launches,
       (SELECT v.bound FROM bound_votes v WHERE v.source_id = h.source_id AND v.name = h.name
        ORDER BY v.n DESC, v.bound LIMIT 1) AS bound,
       (SELECT v.bound_reason FROM reason_votes v WHERE v.source_id = h.source_id AND v.name = h.name
        ORDER BY v.n DESC, v.bound_reason LIMIT 1) AS bound_reason,
       a.bounds, a.sm_pct, a.memory_pct, a.dram_pct, a.arithmetic_intensity,
       (SELECT v.roofline_bound FROM roof_votes v WHERE v.source_id = h.source_id AND v.name = h.name
        ORDER BY v.n DESC, v.roofline_bound LIMIT 1) AS roofline_bound,
       a.match_quality,
       (SELECT v.cause FROM cause_votes v WHERE v.source_id = h.source_id AND v.name = h.name
        ORDER BY v.n DESC, v.cause LIMIT 1) AS latency_cause,
       a.ncu_results
FROM hotspots h
LEFT JOIN agg a ON a.source_id = h.source_id AND a.name = h.name
ORDER BY h.source_id, h.total_ns DESC, h.instances DESC, h.name;
