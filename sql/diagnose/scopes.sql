-- scopes: what `tracekit diagnose` looks at (tracekit/diagnose/scopes.py, registry.py): the
-- sources, the views on the store, and per device its steady window or one phase's time.
-- Each statement names its values as $parameters; the diagnose rules give each one (no defaults:
-- a scope's values, never settings); a line naming a parameter given as NULL is left out (an
-- optional condition). Thresholds stay in tracekit/diagnose/model.py THRESHOLDS (the view
-- parameters among them take their one default from the view that owns them).

-- views: the views on the connection.
--   view_name  VARCHAR  a view's name (DuckDB's own views left out)
SELECT view_name FROM duckdb_views() WHERE NOT internal;

-- sources: every source of the store, in source_id order (the sources table's columns of that name).
SELECT source_id, path, format, rank, world_size, start_ns, end_ns FROM sources ORDER BY source_id;

-- timeline_sources: the sources with GPU activity (kernels, memcpy, memset).
--   source_id  INTEGER
SELECT DISTINCT source_id FROM gpu_activity;

-- phase_sources: the sources with an instance of phase $phase (phase_instances).
--   source_id  INTEGER
--   $phase  the phase name
SELECT DISTINCT source_id FROM phase_instances WHERE phase = $phase;

-- phase_names: every phase name of the store, sorted.
--   phase  VARCHAR
SELECT DISTINCT phase FROM phase_instances ORDER BY phase;

-- source_windows: each source's steady window, summed over its devices.
--   source_id  INTEGER
--   w          BIGINT  sum of steady_state.window_ns
SELECT source_id, sum(window_ns)::BIGINT AS w FROM steady_state GROUP BY source_id;

-- device_windows: each device's steady window (steady_state.window_ns).
SELECT source_id, device_id, window_ns FROM steady_state;

-- steady_scopes: a source's steady_state rows (every column), one per device: a source scope each.
--   $sid  the source
SELECT * FROM steady_state WHERE source_id = $sid ORDER BY device_id;

-- steady_gaps: the device idle gaps inside a device's steady window, per cause.
--   cause     VARCHAR  idle_gaps.cause
--   n         BIGINT   gaps
--   med       DOUBLE   median gap, ns
--   short_ns  BIGINT   time in gaps shorter than $launch_gap_ns
--   $sid, $dev  the device; $w0, $w1  its steady window; $launch_gap_ns  the launch_gap_ns threshold
SELECT cause, count(*) AS n, median(dur_ns) AS med,
       sum(dur_ns) FILTER (WHERE dur_ns < $launch_gap_ns)::BIGINT AS short_ns FROM idle_gaps
WHERE scope = 'device' AND source_id = $sid AND device_id = $dev
  AND start_ns >= $w0 AND end_ns <= $w1 GROUP BY cause;

-- launch_latency: a device's median launch latency (launch_summary.med_latency_ns).
--   $sid, $dev  the device
SELECT med_latency_ns FROM launch_summary WHERE source_id = $sid AND device_id = $dev;

-- phase_scopes: the phase_idle rows (every column) of a source, longest first: a phase scope each.
--   $sid  the source; $phase  only this phase (NULL: every phase); $dev  only this device (NULL: every device)
SELECT * FROM phase_idle WHERE source_id = $sid
  AND phase = $phase
  AND device_id = $dev
ORDER BY span_ns DESC, phase;

-- phase_idle: a phase scope's phase_idle row (evidence of the --phase rules).
--   $sid, $dev  the device; $phase  the phase
SELECT * FROM phase_idle WHERE source_id = $sid AND device_id = $dev
  AND phase = $phase;
