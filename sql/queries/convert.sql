-- convert: the statements of a source's conversion (tracekit/store/convert.py): its id, the
-- launching process of GPU rows that carry none, and the source's time span.
-- {{table}} is one of the GPU tables (schema.GPU_TABLES: kernels, memops); $sid the source.

-- next_source_id: the source_id the next source of the store gets.
-- Columns: id
SELECT coalesce(max(source_id), -1) + 1 AS id FROM sources;

-- pid_contradicted: take back a GPU row's pid that a launch call of its correlation contradicts
-- (the reader filled it from the calls it had seen; an UPDATE of no rows, as a rule).
UPDATE {{table}} AS g SET pid = NULL FROM api_calls AS a
WHERE g.source_id = $sid AND a.source_id = $sid AND g.pid IS NOT NULL
  AND a.correlation_id = g.correlation_id AND a.pid <> g.pid;

-- pid_missing: one row when some GPU row of the source has a correlation and no pid.
-- Columns: one (1)
SELECT 1 AS one FROM {{table}} WHERE source_id = $sid AND pid IS NULL AND correlation_id IS NOT NULL
LIMIT 1;

-- pid_wanted: the correlations of the source's GPU rows without a pid.
-- Columns: correlation_id
SELECT correlation_id FROM {{table}} WHERE source_id = $sid AND pid IS NULL;

-- corr_pid: the launch process of each wanted correlation ({{wanted}}: pid_wanted of the tables
-- that lack pids, UNION ALL): the one pid of the source's API calls with that correlation
-- (none when several processes have calls with it: the same rule as tk_launch_link).
CREATE OR REPLACE TEMP TABLE __tk_corr_pid AS
SELECT correlation_id, any_value(pid) AS pid FROM api_calls
WHERE source_id = $sid AND correlation_id IS NOT NULL AND correlation_id IN ({{wanted}})
GROUP BY correlation_id HAVING count(DISTINCT pid) = 1;

-- fill_pid: the GPU rows without a pid get their correlation's launch process (corr_pid).
UPDATE {{table}} AS g SET pid = a.pid FROM __tk_corr_pid AS a
WHERE g.source_id = $sid AND g.pid IS NULL AND g.correlation_id = a.correlation_id;

-- span: the first and last instant of each table of the source (NULL where it has no rows).
-- Columns: lo, hi
SELECT min(start_ns) AS lo, max(end_ns) AS hi FROM kernels WHERE source_id = $sid
UNION ALL SELECT min(start_ns), max(end_ns) FROM memops WHERE source_id = $sid
UNION ALL SELECT min(start_ns), max(end_ns) FROM api_calls WHERE source_id = $sid
UNION ALL SELECT min(start_ns), max(end_ns) FROM events WHERE source_id = $sid
UNION ALL SELECT min(start_ns), max(end_ns) FROM syncs WHERE source_id = $sid
UNION ALL SELECT min(ts_ns), max(ts_ns) FROM counters WHERE source_id = $sid;
