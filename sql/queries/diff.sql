-- diff: the statements of `tracekit diff` (tracekit/diff.py): the numbers of one side, a source
-- ($sid) or the instances of one phase of it ($phase), read from the views.

-- timeline_sources: the sources with GPU work (`gpu_activity`), in order.
-- Columns: source_id
SELECT DISTINCT source_id FROM gpu_activity ORDER BY source_id;

-- utilization: `gpu_utilization`'s rows of source $sid (one per device).
SELECT * FROM gpu_utilization WHERE source_id = $sid;

-- device_gaps: the device-scope idle gaps of source $sid per cause (`idle_gaps`).
-- Columns: cause, n (gaps), ns (their summed length)
SELECT cause, count(*) AS n, sum(dur_ns)::BIGINT AS ns FROM idle_gaps
WHERE scope = 'device' AND source_id = $sid GROUP BY cause;

-- launch_summary: `launch_summary`'s rows of source $sid.
SELECT * FROM launch_summary WHERE source_id = $sid;

-- launches: the launch calls of source $sid (distinct (pid, tid, correlation id) of
-- `gpu_launches`) and those of them that launched a graph (more than one op, or a graph launch
-- API: tk_is_graph_launch).
-- Columns: n, g
SELECT count(DISTINCT (pid, tid, correlation_id)) AS n,
       count(DISTINCT (pid, tid, correlation_id))
           FILTER (WHERE ops_in_launch > 1 OR tk_is_graph_launch(api_name)) AS g
FROM gpu_launches WHERE source_id = $sid;

-- kernels: the kernel executions of source $sid apart from whole-graph rows (a graph-level
-- trace's spans, tk_is_graph_span), and those rows.
-- Columns: kernels, kernel_ns, spans, span_ns
SELECT count(*) FILTER (WHERE NOT tk_is_graph_span(graph_id, graph_node_id)) AS kernels,
       coalesce(sum(dur_ns) FILTER (WHERE NOT tk_is_graph_span(graph_id, graph_node_id)), 0)::BIGINT
           AS kernel_ns,
       count(*) FILTER (WHERE tk_is_graph_span(graph_id, graph_node_id)) AS spans,
       coalesce(sum(dur_ns) FILTER (WHERE tk_is_graph_span(graph_id, graph_node_id)), 0)::BIGINT
           AS span_ns
FROM kernels WHERE source_id = $sid;

-- syncs: the host sync calls of source $sid and their time (`sync_stalls`' total row).
-- Columns: calls, total_ns
SELECT calls, total_ns FROM sync_stalls WHERE source_id = $sid AND name IS NULL;

-- phase_idle: `phase_idle`'s rows of phase $phase of source $sid.
SELECT * FROM phase_idle WHERE source_id = $sid AND phase = $phase;

-- phase_syncs: the host sync calls (`host_syncs`) that start inside an instance of phase $phase
-- on the instance's thread, and their time.
-- Columns: calls, total_ns
SELECT count(*) AS calls, coalesce(sum(h.dur_ns), 0)::BIGINT AS total_ns
FROM host_syncs h JOIN phase_instances i
  ON i.source_id = h.source_id AND i.pid = h.pid AND i.tid = h.tid
 AND h.start_ns >= i.start_ns AND h.start_ns < i.end_ns
WHERE h.source_id = $sid AND i.phase = $phase;

-- phase_kernels: the kernels launched inside phase $phase (`phase_ops`), apart from whole-graph
-- rows (short_name NULL), and those rows.
-- Columns: kernels, kernel_ns, spans, span_ns
SELECT count(*) FILTER (WHERE short_name IS NOT NULL) AS kernels,
       coalesce(sum(dur_ns) FILTER (WHERE short_name IS NOT NULL), 0)::BIGINT AS kernel_ns,
       count(*) FILTER (WHERE short_name IS NULL) AS spans,
       coalesce(sum(dur_ns) FILTER (WHERE short_name IS NULL), 0)::BIGINT AS span_ns
FROM phase_ops WHERE source_id = $sid AND phase = $phase AND kind = 'kernel';

-- kernel_names: per kernel base name of source $sid, executions and time (`hotspots`).
-- Columns: short_name, count, total_ns
SELECT short_name, sum(instances)::BIGINT AS count, sum(total_ns)::BIGINT AS total_ns
FROM hotspots WHERE source_id = $sid GROUP BY short_name;

-- phase_kernel_names: per kernel base name launched inside phase $phase (`phase_ops`),
-- executions and time.
-- Columns: short_name, count, total_ns
SELECT short_name, count(*) AS count, sum(dur_ns)::BIGINT AS total_ns
FROM phase_ops WHERE source_id = $sid AND phase = $phase AND kind = 'kernel'
  AND short_name IS NOT NULL GROUP BY short_name;

-- phases: per phase of source $sid (`phases`), with its GPU span, busy time, host_wait idle
-- and launch calls summed over devices (`phase_idle`).
-- Columns: phase, instances, wall_ns, kernels, kernel_ns, gpu_ns, span_ns, busy_ns,
--   host_wait_ns, launch_calls
SELECT p.phase, p.instances, p.wall_ns, p.kernels, p.kernel_ns, p.gpu_ns,
       i.span_ns, i.busy_ns, i.host_wait_ns, i.launch_calls
FROM phases p LEFT JOIN (
    SELECT source_id, phase, category, sum(span_ns)::BIGINT AS span_ns,
           sum(busy_ns)::BIGINT AS busy_ns, sum(host_wait_ns)::BIGINT AS host_wait_ns,
           sum(launch_calls)::BIGINT AS launch_calls
    FROM phase_idle GROUP BY ALL) i USING (source_id, phase, category)
WHERE p.source_id = $sid;
