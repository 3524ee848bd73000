-- launch_latency: per GPU operation launched by an API call, how long from the call to the GPU start.
--
-- Definition: one row per `gpu_launches` row (kernel, memcpy, memset with its launch call).
--   latency_ns = GPU start - call start
--   queue_ns   = max(GPU start - call end, 0)   (HTA's "launch delay", clipped at 0)
-- For a graph launch (ops_in_launch > 1) only the first operation (launch_index = 1) measures
-- the launch: `first_in_launch` marks it; the later kernels of the graph wait for their
-- predecessors, not for the CPU. All launch APIs count (runtime, driver, graph), unlike HTA,
-- which only counts cudaLaunchKernel(ExC).
-- `shorter_than_launch` (HTA's short kernel): the GPU op ran for less time than its launch call
-- took on the CPU — the CPU cannot keep such a stream fed; many of them argue for CUDA graphs
-- or kernel fusion.
--
-- Uses: gpu_launches
--
-- Columns:
--   source_id            INTEGER  the source
--   pid                  BIGINT   launching process
--   tid                  BIGINT   launching thread
--   api_name             VARCHAR  launch call
--   api_start_ns         BIGINT   call start, ns
--   api_end_ns           BIGINT   call end, ns
--   api_dur_ns           BIGINT   call duration, ns
--   device_id            INTEGER  GPU index
--   stream_id            BIGINT   stream
--   kind                 VARCHAR  'kernel', 'memcpy' or 'memset'
--   name                 VARCHAR  GPU op name
--   start_ns             BIGINT   GPU start, ns
--   dur_ns               BIGINT   GPU duration, ns
--   correlation_id       BIGINT   correlation id
--   latency_ns           BIGINT   start_ns - api_start_ns
--   queue_ns             BIGINT   greatest(start_ns - api_end_ns, 0)
--   first_in_launch      BOOLEAN  launch_index = 1 (the op that measures this launch)
--   ops_in_launch        BIGINT   ops sharing the launch call (> 1: graph launch)
--   shorter_than_launch  BOOLEAN  dur_ns < api_dur_ns
CREATE OR REPLACE VIEW launch_latency AS
SELECT source_id, pid, tid, api_name, api_start_ns, api_end_ns, api_dur_ns, device_id, stream_id,
       kind, name, start_ns, dur_ns, correlation_id,
       start_ns - api_start_ns AS latency_ns,
       greatest(start_ns - api_end_ns, 0) AS queue_ns,
       launch_index = 1 AS first_in_launch,
       ops_in_launch,
       dur_ns < api_dur_ns AS shorter_than_launch
FROM gpu_launches;
