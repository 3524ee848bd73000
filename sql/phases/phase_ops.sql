-- phase_ops: every GPU operation launched inside an instance of a phase, with the instance.
--
-- Definition: the join of `phase_instances` and `gpu_launches` that `phases` sums: an op belongs
-- to an instance when its launch call started on the instance's thread (same source, pid, tid)
-- inside [start_ns, end_ns) of the range. Nested ranges all claim the op (one row per instance).
-- The pairing is the one rule of sql/lib/phases.sql (`tk_phase_launches`).
-- short_name is the kernel's base name (`kernels.short_name`); NULL for memcpy / memset and for
-- the whole-graph rows of an nsys `--cuda-graph-trace=graph` capture (`[CUDA graph N]`: graph_id
-- set, graph_node_id NULL), which are not kernel executions (as in `hotspots`).
-- `shorter_than_launch`: the op ran for less time than its launch call took on the CPU (as in
-- `launch_latency`).
--
-- Uses: gpu_launches
--
-- Columns:
--   source_id            INTEGER  the source
--   phase                VARCHAR  range name without trailing '#N' or per-call ids (tk_phase)
--   category             VARCHAR  'user_annotation' or 'nvtx'
--   event_id             BIGINT   the instance (phase_instances.event_id)
--   device_id            INTEGER  GPU index
--   stream_id            BIGINT   stream
--   kind                 VARCHAR  'kernel', 'memcpy' or 'memset'
--   name                 VARCHAR  GPU op name
--   short_name           VARCHAR  kernel base name (NULL for memops and whole-graph rows)
--   start_ns             BIGINT   GPU start, ns
--   end_ns               BIGINT   GPU end, ns
--   dur_ns               BIGINT   GPU duration, ns
--   correlation_id       BIGINT   correlation id of the launch
--   pid                  BIGINT   launching process
--   tid                  BIGINT   launching thread
--   api_name             VARCHAR  launch call
--   api_start_ns         BIGINT   launch call start, ns
--   api_dur_ns           BIGINT   launch call duration, ns
--   first_in_launch      BOOLEAN  the first op of its launch call (graph launches start many)
--   ops_in_launch        BIGINT   ops sharing the launch call
--   shorter_than_launch  BOOLEAN  dur_ns < api_dur_ns
CREATE OR REPLACE VIEW phase_ops AS
WITH l AS (SELECT * FROM gpu_launches),
names AS (
    SELECT source_id, name, any_value(short_name) AS short_name FROM kernels
    WHERE graph_id IS NULL OR graph_node_id IS NOT NULL
    GROUP BY ALL
)
SELECT l.source_id, l.phase, l.category, l.event_id, l.device_id, l.stream_id, l.kind, l.name,
       CASE WHEN l.kind = 'kernel' THEN n.short_name END AS short_name,
       l.start_ns, l.end_ns, l.dur_ns, l.correlation_id, l.pid, l.tid, l.api_name, l.api_start_ns,
       l.api_dur_ns, l.launch_index = 1 AS first_in_launch, l.ops_in_launch,
       l.dur_ns < l.api_dur_ns AS shorter_than_launch
FROM tk_phase_launches('l') l
LEFT JOIN names n ON n.source_id = l.source_id AND n.name = l.name AND l.kind = 'kernel';
