-- osrt_summary: time per OS runtime function per source, longest total first (nsys stats osrt_sum).
--
-- One row per (source_id, name) over the `events` of category 'osrt' (nsys: OSRT_API rows of
-- eventClass 27; the eventClass 31/32 start/finish markers are not converted). nsys records
-- only calls of at least OS_RUNTIME_OPTIONS:DURATION_THRESHOLD_NS (default 1000 ns).
-- Definition (identical to `nsys stats --report osrt_sum`):
--   total_ns  = sum(end_ns - start_ns) of the calls of this function in this source
--   time_pct  = 100 * total_ns / (sum of total_ns over all OS runtime functions of the source)
--               (nsys rounds it to 1 decimal, we do not)
--   med_ns    = median (mean of the two middle values for an even count)
--   stddev_ns = sample standard deviation (n - 1); 0 for a single call
-- Ordered by source_id, total_ns DESC, num_calls DESC, name.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id   INTEGER  the source
--   time_pct    DOUBLE   share of the source's total OS runtime time, in percent
--   total_ns    BIGINT   summed call duration, ns
--   num_calls   BIGINT   number of calls
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest call, ns
--   max_ns      BIGINT   longest call, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   name        VARCHAR  function name (`pthread_cond_wait`, `ioctl`, ...)
CREATE OR REPLACE VIEW osrt_summary AS
WITH per_name_s AS (
    SELECT source_id, name,
           tk_stats(dur_ns) AS s  -- sql/lib/summaries.sql
    FROM events
    WHERE category = 'osrt'
    GROUP BY source_id, name
)
SELECT source_id,
       time_pct, total_ns, n AS num_calls, avg_ns, med_ns, min_ns, max_ns, stddev_ns, name
FROM tk_stats_by('per_name_s')  -- sql/lib/summaries.sql
ORDER BY source_id, total_ns DESC, num_calls DESC, name;
