-- perfetto_check: what a clean import of an exported trace means (tracekit/export/engine.py
-- runs these in Perfetto's trace processor, PerfettoSQL over its own tables, not DuckDB; see
-- /work/shared/reference/perfetto-export.md §4.2). `check_trace` returns each statement's rows
-- (bad_stats, processes, threads) or its one value (the counts).

-- bad_stats: the import stats that mean a lost or misread event: errors and data losses, and the
-- stats of negative or too deep slices, dropped timestamps, flows without a start and a wrong
-- displayTimeUnit.
-- Columns: name, idx, severity, value
SELECT name, idx, severity, value FROM stats WHERE value > 0 AND (severity IN ('error', 'data_loss') OR name IN ('slice_negative_duration', 'slice_max_depth_exceeded', 'trace_sorter_negative_timestamp_dropped', 'flow_end_without_start', 'flow_step_without_start', 'json_display_time_unit'));

-- slices: the number of slices.
SELECT count(*) FROM slice;

-- open_slices: the number of slices never closed (dur = -1).
SELECT count(*) FROM slice WHERE dur = -1;

-- flows: the number of flow arrows.
SELECT count(*) FROM flow;

-- counters: the number of counter values.
SELECT count(*) FROM counter;

-- counter_tracks: the number of counter tracks.
SELECT count(*) FROM counter_track;

-- processes: the named processes.
-- Columns: pid, name
SELECT pid, name FROM process WHERE name IS NOT NULL;

-- threads: the named threads, with their process's pid.
-- Columns: pid, tid, name
SELECT p.pid, t.tid, t.name FROM thread t JOIN process p USING (upid) WHERE t.name IS NOT NULL;
