-- nvtx_summary: time per NVTX range name and style per source (nsys stats nvtx_sum).
--
-- One row per (source_id, range, style) over the range events: category 'nvtx' (nsys NVTX_EVENTS
-- eventType 59/60 and NVTXT 70/71; marks are instants, not ranges) and, for Kineto sources,
-- 'user_annotation' (torch.profiler.record_function ranges: PushPop style).
-- Definition (identical to `nsys stats --report nvtx_sum`):
--   range     = nsys's display name `<domain>:<name>` for NVTX: the default domain (and a domain
--               whose creation row is missing) prints as the empty string, so `:prefill`;
--               user annotations: the name alone
--   style     = 'StartEnd' for eventType 60/71 (`args.eventType`), 'PushPop' otherwise
--   duration  = end_ns - start_ns; a range never closed ends at the largest timestamp of the
--               source's NVTX table (the adapter writes that end; `args.unclosed` = true)
--   total_ns  = sum of the durations; children are not subtracted from their parents
--   time_pct  = 100 * total_ns / (sum of total_ns over all ranges of the source): a share of
--               summed range time, not of wall time (nsys rounds it to 1 decimal, we do not)
--   med_ns    = median (mean of the two middle values for an even count)
--   stddev_ns = sample standard deviation (n - 1); 0 for a single instance
-- Ordered by source_id, total_ns DESC, instances DESC, range.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id   INTEGER  the source
--   time_pct    DOUBLE   share of the source's total range time, in percent
--   total_ns    BIGINT   summed range duration, ns
--   instances   BIGINT   number of ranges
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest range, ns
--   max_ns      BIGINT   longest range, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   style       VARCHAR  'PushPop' or 'StartEnd'
--   range       VARCHAR  display name (see above)
--   domain      VARCHAR  NVTX domain name (NULL for the default domain and for Kineto)
--   name        VARCHAR  range name without the domain
CREATE OR REPLACE VIEW nvtx_summary AS
WITH ranges AS (
    SELECT source_id, dur_ns, domain, name,
           CASE WHEN category = 'nvtx' THEN coalesce(domain, '') || ':' || coalesce(name, '')
                ELSE name END AS range,
           CASE WHEN category = 'nvtx' AND (args ->> 'eventType') IN ('60', '71') THEN 'StartEnd'
                ELSE 'PushPop' END AS style
    FROM events
    WHERE category IN ('nvtx', 'user_annotation') AND NOT coalesce(is_instant, false)
),
per_range_s AS (
    SELECT source_id, range, style,
           any_value(domain)                   AS domain,
           any_value(name)                     AS name,
           tk_stats(dur_ns) AS s  -- sql/lib/summaries.sql
    FROM ranges
    GROUP BY source_id, range, style
)
SELECT source_id,
       time_pct, total_ns, n AS instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, style, range, domain, name
FROM tk_stats_by('per_range_s')  -- sql/lib/summaries.sql
ORDER BY source_id, total_ns DESC, instances DESC, range;
