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
