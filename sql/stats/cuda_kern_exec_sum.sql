-- cuda_kern_exec_sum: launch and execution time per launching API and kernel (nsys stats cuda_kern_exec_sum).
--
-- One row per (source_id, pid, tid, device_id, raw API name, kernel name) over the `kernels` rows
-- that have their launch call (the one launch rule, tk_launched of
-- sql/lib/host_calls.sql: correlation id within the process, as `gpu_launches`; graph launches:
-- every kernel of the graph with its one cudaGraphLaunch call). The whole-graph rows of an nsys `--cuda-graph-trace=graph` capture
-- (graph_id set, graph_node_id NULL) are left out, as nsys reads only its KERNEL table.
-- Per kernel execution (nsys's cuda_kern_exec_trace):
--   api    = api_end_ns - api_start_ns              (the launch call on the CPU)
--   queue  = start_ns - api_end_ns, only where > 0   (waiting in the stream after the call)
--   kernel = end_ns - start_ns
--   total  = greatest(api_end_ns, end_ns) - api_start_ns
-- Definition (identical to `nsys stats --report cuda_kern_exec_sum`):
--   count       = kernel executions in the group; queue_count = those with a queue > 0
--   t_*, a_*, k_* = avg, median (mean of the two middle values for an even count), min, max and
--                 sample standard deviation (n - 1; 0 for one) of total, api and kernel
--   q_*         = the same over the queue_count executions only (NULL when there is none;
--                 q_stddev_ns 0)
--   api_name    = the raw name with nsys's display rule (tk_api_display_name: `_v7000` dropped,
--                 `cudaLaunchKernelExC_v11060` kept)
-- avg/med/stddev are not rounded (nsys prints 1 decimal). Kernels whose launch call is not in the
-- trace are not here (nsys leaves them out too). Works on Kineto sources (runtime and driver
-- launch calls, correlation ids).
-- Ordered by source_id, t_avg_ns DESC, count DESC, api_name, kernel_name.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id     INTEGER  the source
--   pid           BIGINT   launching process
--   tid           BIGINT   launching thread
--   device_id     INTEGER  GPU index
--   count         BIGINT   kernel executions
--   queue_count   BIGINT   executions that waited in the queue (queue > 0)
--   t_avg_ns      DOUBLE   mean total (launch call start to the later of call end and kernel end), ns
--   t_med_ns      DOUBLE   median total, ns
--   t_min_ns      BIGINT   shortest total, ns
--   t_max_ns      BIGINT   longest total, ns
--   t_stddev_ns   DOUBLE   sample standard deviation of total, ns
--   a_avg_ns      DOUBLE   mean launch call duration, ns
--   a_med_ns      DOUBLE   median launch call duration, ns
--   a_min_ns      BIGINT   shortest launch call, ns
--   a_max_ns      BIGINT   longest launch call, ns
--   a_stddev_ns   DOUBLE   sample standard deviation of the launch call duration, ns
--   q_avg_ns      DOUBLE   mean queue time of the queued executions, ns
--   q_med_ns      DOUBLE   median queue time of the queued executions, ns
--   q_min_ns      BIGINT   shortest queue time (> 0), ns
--   q_max_ns      BIGINT   longest queue time, ns
--   q_stddev_ns   DOUBLE   sample standard deviation of the queue time, ns (0 with fewer than 2)
--   k_avg_ns      DOUBLE   mean kernel duration, ns
--   k_med_ns      DOUBLE   median kernel duration, ns
--   k_min_ns      BIGINT   shortest kernel, ns
--   k_max_ns      BIGINT   longest kernel, ns
--   k_stddev_ns   DOUBLE   sample standard deviation of the kernel duration, ns
--   api_name      VARCHAR  launch call as nsys displays it (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch_v10000, ...)
--   kernel_name   VARCHAR  full (demangled) kernel name
--   raw_api_name  VARCHAR  launch call as recorded (api_calls.raw_name)
CREATE OR REPLACE VIEW cuda_kern_exec_sum AS
WITH kern AS (SELECT * FROM kernels),
k AS (
    SELECT k.source_id, k.call_pid AS pid, k.call_tid AS tid, k.device_id, k.name AS kernel_name,
           k.call_raw_name AS raw_api_name,
           greatest(k.call_end_ns, k.end_ns) - k.call_start_ns AS total_ns,
           k.call_end_ns - k.call_start_ns AS api_ns,
           CASE WHEN k.start_ns > k.call_end_ns THEN k.start_ns - k.call_end_ns END AS queue_ns,
           k.end_ns - k.start_ns AS kernel_ns
    FROM tk_launched('kern') k  -- the one launch rule (sql/lib/host_calls.sql)
    WHERE k.call_start_ns IS NOT NULL
      AND NOT tk_is_graph_span(k.graph_id, k.graph_node_id)  -- sql/lib/names.sql
),
s AS (
    SELECT source_id, pid, tid, device_id, raw_api_name, kernel_name,
           count(queue_ns) AS queue_count,
           tk_stats(total_ns) AS t, tk_stats(api_ns) AS a, tk_stats(queue_ns) AS q,  -- sql/lib/summaries.sql
           tk_stats(kernel_ns) AS kk
    FROM k
    GROUP BY source_id, pid, tid, device_id, raw_api_name, kernel_name
)
SELECT source_id, pid, tid, device_id, kk.n AS count, queue_count,
       t.avg AS t_avg_ns, t.med AS t_med_ns, t.min AS t_min_ns, t.max AS t_max_ns, t.stddev AS t_stddev_ns,
       a.avg AS a_avg_ns, a.med AS a_med_ns, a.min AS a_min_ns, a.max AS a_max_ns, a.stddev AS a_stddev_ns,
       q.avg AS q_avg_ns, q.med AS q_med_ns, q.min AS q_min_ns, q.max AS q_max_ns, q.stddev AS q_stddev_ns,
       kk.avg AS k_avg_ns, kk.med AS k_med_ns, kk.min AS k_min_ns, kk.max AS k_max_ns, kk.stddev AS k_stddev_ns,
       tk_api_display_name(raw_api_name) AS api_name,  -- sql/lib/summaries.sql
       kernel_name, raw_api_name
FROM s
ORDER BY source_id, t_avg_ns DESC, count DESC, api_name, kernel_name;
