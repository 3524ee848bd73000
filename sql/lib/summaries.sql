-- lib/summaries: the statistics and names of the `nsys stats`-style summary views.
--
-- Includes: (none)
--
-- tk_stats(x) -> STRUCT(total BIGINT, n BIGINT, avg DOUBLE, med DOUBLE, min, max, stddev DOUBLE)
--   an aggregate (use it with GROUP BY): the figures `nsys stats` prints per group, with its
--   definitions: total = sum(x), n = the group's rows (count(*)), avg = mean, med = median (the mean of the two
--   middle values for an even count: quantile_cont 0.5), min, max, stddev = sample standard
--   deviation (n - 1), 0 for a single value.
--
-- tk_stats_by(rel) -> TABLE (rel's columns but s, time_pct, total_ns, n, avg_ns, med_ns, min_ns,
--                            max_ns, stddev_ns)
--   the figures of `rel` (the name of a CTE of the calling query, as a string, with the columns
--   source_id and s = tk_stats(...) per group) as columns, and time_pct = 100 * total_ns / the
--   sum of total_ns over the source's rows (NULL when that sum is 0): the body of each
--   `nsys stats`-style summary.
--
-- tk_memop_operation(kind, copy_kind) -> VARCHAR
--   the operation name `nsys stats` gives a memcpy / memset: '[CUDA memset]', or
--   '[CUDA memcpy Host-to-Device]' and so on for each copy_kind ('Unknown' for others).
--
-- tk_api_display_name(raw_name) -> VARCHAR
--   the name `nsys stats` prints for an API call: the recorded name with its last 6 characters
--   dropped when they start with `_v` (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`, while
--   `cuMemcpyHtoDAsync_v2`, `cudaLaunchKernelExC_v11060` and `cudaGraphLaunch_v10000` stay as
--   recorded): what cuda_api_sum and cuda_kern_exec_sum show.
CREATE OR REPLACE MACRO tk_stats(x) AS {
    'total': sum(x)::BIGINT, 'n': count(*), 'avg': avg(x), 'med': quantile_cont(x, 0.5),
    'min': min(x), 'max': max(x), 'stddev': coalesce(stddev_samp(x), 0.0)};

CREATE OR REPLACE MACRO tk_stats_by(rel) AS TABLE
    SELECT * EXCLUDE (s),
           100.0 * s.total / nullif(sum(s.total) OVER (PARTITION BY source_id), 0) AS time_pct,
           s.total AS total_ns, s.n AS n, s.avg AS avg_ns, s.med AS med_ns, s.min AS min_ns,
           s.max AS max_ns, s.stddev AS stddev_ns
    FROM query_table(rel);

CREATE OR REPLACE MACRO tk_memop_operation(kind, copy_kind) AS
    CASE WHEN kind = 'memset' THEN '[CUDA memset]'
         ELSE '[CUDA memcpy ' || CASE copy_kind
             WHEN 'HtoD' THEN 'Host-to-Device'   WHEN 'DtoH' THEN 'Device-to-Host'
             WHEN 'DtoD' THEN 'Device-to-Device' WHEN 'HtoH' THEN 'Host-to-Host'
             WHEN 'PtoP' THEN 'Peer-to-Peer'     WHEN 'HtoA' THEN 'Host-to-Array'
             WHEN 'AtoH' THEN 'Array-to-Host'    WHEN 'AtoA' THEN 'Array-to-Array'
             WHEN 'AtoD' THEN 'Array-to-Device'  WHEN 'DtoA' THEN 'Device-to-Array'
             WHEN 'uvm_HtoD' THEN 'Unified Host-to-Device'
             WHEN 'uvm_DtoH' THEN 'Unified Device-to-Host'
             WHEN 'uvm_DtoD' THEN 'Unified Device-to-Device'
             ELSE 'Unknown' END || ']'
    END;

CREATE OR REPLACE MACRO tk_api_display_name(raw_name) AS
    CASE WHEN length(raw_name) >= 6 AND substr(raw_name, length(raw_name) - 5, 2) = '_v'
         THEN left(raw_name, length(raw_name) - 6)
         ELSE raw_name END;
