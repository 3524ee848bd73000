-- api_summary: time per CUDA API function per source, longest total first (nsys stats cuda_api_sum).
--
-- One row per (source_id, raw_name) over all rows of `api_calls`: runtime AND driver calls
-- (nsys: every row of CUPTI_ACTIVITY_KIND_RUNTIME, eventClass 0 and 1; Kineto: cuda_runtime and
-- cuda_driver events; HIP runtime calls too).
-- Definition (identical to `nsys stats --report cuda_api_sum`, which groups by the recorded name):
--   total_ns  = sum(end_ns - start_ns) of the calls with this recorded name in this source
--   time_pct  = 100 * total_ns / (sum of total_ns over all API names of the source); a share of
--               API time, not of wall time (nsys rounds it to 1 decimal, we do not)
--   med_ns    = median; for an even count the mean of the two middle values
--   stddev_ns = sample standard deviation (n - 1); 0 for a single call
--   name      = raw_name with nsys's display rule: the last 6 characters are dropped when they
--               start with `_v` (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`, while
--               `cuMemcpyHtoDAsync_v2` and `cudaGraphLaunch_v10000` stay as recorded)
-- avg/med/stddev are not rounded (nsys prints them with 1 decimal).
-- Difference from nsys: captures with `--cudabacktrace` also hold eventClass-67 "CUDA backtrace"
-- rows in RUNTIME (a wrapper around the real call, same correlation id), which nsys's report
-- counts as extra calls; tracekit keeps them as `events` (category cuda_backtrace), not here.
-- Ordered by source_id, total_ns DESC, num_calls DESC, name.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id   INTEGER  the source (sources.source_id)
--   time_pct    DOUBLE   share of the source's total API time, in percent
--   total_ns    BIGINT   summed call duration, ns
--   num_calls   BIGINT   number of calls
--   avg_ns      DOUBLE   mean duration, ns
--   med_ns      DOUBLE   median duration, ns
--   min_ns      BIGINT   shortest call, ns
--   max_ns      BIGINT   longest call, ns
--   stddev_ns   DOUBLE   sample standard deviation of the duration, ns
--   name        VARCHAR  function name as nsys displays it (see above)
--   raw_name    VARCHAR  function name as recorded (api_calls.raw_name)
--   api         VARCHAR  api_calls.api: cuda_runtime, cuda_driver, hip_runtime, ...
CREATE OR REPLACE VIEW api_summary AS
WITH per_name_s AS (
    SELECT source_id,
           raw_name,
           any_value(api)                      AS api,
           tk_stats(dur_ns) AS s  -- sql/lib/summaries.sql
    FROM api_calls
    GROUP BY source_id, raw_name
)
SELECT source_id,
       time_pct, total_ns, n AS num_calls, avg_ns, med_ns, min_ns, max_ns, stddev_ns,
       tk_api_display_name(raw_name) AS name,  -- sql/lib/summaries.sql
       raw_name, api
FROM tk_stats_by('per_name_s')  -- sql/lib/summaries.sql
ORDER BY source_id, total_ns DESC, num_calls DESC, name;
