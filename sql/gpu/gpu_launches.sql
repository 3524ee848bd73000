-- gpu_launches: each GPU operation joined to the host API call that launched it.
--
-- Definition: a GPU operation (`gpu_activity`: kernel, memcpy, memset) is linked to its launch
-- call by the one launch rule of sql/lib/host_calls.sql: the earliest `api_calls` row of the
-- same source and correlation_id in the operation's process (`tk_launched`), or, where the
-- operation's pid is unknown, of the only process that issued that correlation id
-- (`tk_launch_link`; nsys correlation ids repeat across processes). A CUDA/HIP graph
-- launch has one correlation for all kernels of the graph: every kernel links to the one
-- `cudaGraphLaunch` call, and `launch_index` numbers them by start time (1 = first).
-- Operations whose launch is not in the trace (launched before the capture window, or a
-- windowed export) have no row here.
-- (Method, no effect on the result: names travel as their rank in name order and are put back last.)
--
-- Uses: gpu_activity
--
-- Columns:
--   source_id       INTEGER  the source
--   device_id       INTEGER  GPU index
--   stream_id       BIGINT   stream
--   kind            VARCHAR  'kernel', 'memcpy' or 'memset'
--   name            VARCHAR  kernel / memop name
--   start_ns        BIGINT   GPU start, ns
--   end_ns          BIGINT   GPU end, ns
--   dur_ns          BIGINT   GPU duration, ns
--   correlation_id  BIGINT   the shared correlation id
--   pid             BIGINT   launching process
--   tid             BIGINT   launching thread
--   api_name        VARCHAR  launching call (cudaLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync, ...)
--   api_start_ns    BIGINT   call start, ns
--   api_end_ns      BIGINT   call end, ns
--   api_dur_ns      BIGINT   call duration, ns
--   launch_index    BIGINT   position of this op among the ops of the same launch call (1 = first)
--   ops_in_launch   BIGINT   number of GPU ops of that launch call (> 1 for graph launches)
CREATE OR REPLACE VIEW gpu_launches AS
WITH acts AS (SELECT * FROM gpu_activity),
names AS (  -- op names as their rank in name order (rows carry the rank; names are put back last)
    SELECT name, row_number() OVER (ORDER BY name) AS name_rank
    FROM (SELECT DISTINCT name FROM gpu_activity WHERE name IS NOT NULL)
),
l AS (
    SELECT g.source_id, g.device_id, g.stream_id, g.kind, n.name_rank, g.start_ns, g.end_ns, g.dur_ns,
           g.correlation_id, g.call_pid AS pid, g.call_tid AS tid, g.call_name AS api_name,
           g.call_start_ns AS api_start_ns, g.call_end_ns AS api_end_ns, g.call_dur_ns AS api_dur_ns,
           row_number() OVER (PARTITION BY g.source_id, g.call_pid, g.call_tid, g.correlation_id
                              ORDER BY g.start_ns, g.stream_id, n.name_rank) AS launch_index,
           count(*) OVER (PARTITION BY g.source_id, g.call_pid, g.call_tid, g.correlation_id) AS ops_in_launch
    FROM tk_launched('acts') g
    LEFT JOIN names n ON n.name = g.name
    WHERE g.call_start_ns IS NOT NULL
)
SELECT l.source_id, l.device_id, l.stream_id, l.kind, n.name, l.start_ns, l.end_ns, l.dur_ns,
       l.correlation_id, l.pid, l.tid, l.api_name, l.api_start_ns, l.api_end_ns, l.api_dur_ns,
       l.launch_index, l.ops_in_launch
FROM l LEFT JOIN names n ON n.name_rank = l.name_rank;
