-- phase_ops: every GPU operation launched inside an instance of a phase, with the instance.
--
-- Definition: the join of `phase_instances` and `gpu_launches` that `phases` sums: an op belongs
-- to an instance when its launch call started on the instance's thread (same source, pid, tid)
-- inside [start_ns, end_ns) of the range. Nested ranges all claim the op (one row per instance).
-- (Method, no effect on the result: matched through buckets of the range start per length class,
-- as in `phase_instances`; the instances are selected from `events` with phase_instances' rule
-- here, as that view also computes the GPU work of each instance, which is not needed.)
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
WITH ib AS (  -- the instances of phase_instances (its rule, without its GPU columns) by length class
    SELECT i.source_id, i.phase, i.category, i.event_id, i.pid, i.tid, i.start_ns, i.end_ns, i.lvl,
           (i.start_ns >> i.lvl) + b.d AS bucket
    FROM (SELECT source_id, tk_phase(name) AS phase, category, event_id, pid,
                 tid, start_ns, end_ns, floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl
          FROM events
          WHERE tk_is_phase_range(category, is_instant, name)
            AND pid IS NOT NULL) i
    CROSS JOIN (VALUES (0), (1)) b(d)
),
names AS (
    SELECT source_id, name, any_value(short_name) AS short_name FROM kernels
    WHERE graph_id IS NULL OR graph_node_id IS NOT NULL
    GROUP BY ALL
)
SELECT i.source_id, i.phase, i.category, i.event_id, l.device_id, l.stream_id, l.kind, l.name,
       CASE WHEN l.kind = 'kernel' THEN n.short_name END AS short_name,
       l.start_ns, l.end_ns, l.dur_ns, l.correlation_id, l.pid, l.tid, l.api_name, l.api_start_ns,
       l.api_dur_ns, l.launch_index = 1 AS first_in_launch, l.ops_in_launch,
       l.dur_ns < l.api_dur_ns AS shorter_than_launch
FROM ib i
JOIN (SELECT l.*, v.lvl, l.api_start_ns >> v.lvl AS bucket
      FROM gpu_launches l
      JOIN (SELECT DISTINCT source_id, pid, tid, lvl FROM ib) v
        ON v.source_id = l.source_id AND v.pid = l.pid AND v.tid = l.tid) l
  ON l.source_id = i.source_id AND l.pid = i.pid AND l.tid = i.tid AND l.lvl = i.lvl
 AND l.bucket = i.bucket
LEFT JOIN names n ON n.source_id = l.source_id AND n.name = l.name AND l.kind = 'kernel'
WHERE l.api_start_ns >= i.start_ns AND l.api_start_ns < i.end_ns;
