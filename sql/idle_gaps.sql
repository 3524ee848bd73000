-- idle_gaps: every interval with no GPU activity, per device and per stream, with its cause.
--
-- Definition: GPU activity is `gpu_activity` (kernels, memcpy, memset; `syncs` records are
-- not activity). For scope 'device' the activity of all streams of a (source_id, device_id) is
-- merged; for scope 'stream' each (source_id, device_id, stream_id) separately. The window is
-- [first activity start, last activity end] of that device or stream: no gap is reported before
-- the first or after the last operation. A gap is a maximal interval in the window covered by
-- no operation; zero-length gaps (back-to-back operations) are not listed.
-- `before_*` is the operation whose end closes the busy period before the gap (ties: lowest
-- stream, then name); `after_*` the operation that starts at end_ns (of several, the one that
-- ends first).
--
-- cause (first that applies), from the launch of the operation after the gap (`gpu_launches`):
--   sync_wait    the next operation was launched after the gap began, and a synchronizing
--                host call of the launching process (`host_syncs`: explicit synchronize,
--                blocking copy, copy into pageable memory — what .item(), .cpu() do) overlaps
--                the gap: the host waited for the GPU to drain and only then issued more work.
--                (A sync that overlaps gaps between ops launched before it, e.g. inside a CUDA
--                graph, is not their cause.)
--   host_wait    the launch call of the next operation started after the gap began: the GPU
--                waited for the CPU (launch-bound; CUDA graphs or fusion help).
--   kernel_wait  the next operation was already launched, and the gap is shorter than the
--                parameter kernel_wait_ns (default 30000 ns = HTA's 30 µs): launch overhead
--                between back-to-back kernels.
--   other        anything else: the next op was launched before the gap but waited longer
--                (cross-stream dependencies, events, graph internals), or its launch is
--                not in the trace.
-- Differences to HTA's idle-time breakdown: HTA classifies only per stream and has no
-- sync_wait; here sync_wait takes precedence over host_wait, both scopes are listed, each gap
-- is a row (not only totals), and times are exact ns (HTA rounds float traces to µs).
--
-- Method (no effect on the result): busy_until = running maximum end of the earlier operations
-- (ordered by start, end) per device and per stream; a gap is [busy_until, start) of an operation
-- that starts after it. The sync test looks up, per process, the latest end among the
-- synchronizing calls started before the gap ends (ASOF join), instead of testing every call.
-- Operation names travel as their rank in name order and are put back at the end.
--
-- Parameters: kernel_wait_ns (DuckDB variable; `tracekit sql --param kernel_wait_ns=N`).
--
-- Columns:
--   source_id      INTEGER  the source
--   scope          VARCHAR  'device' (all streams merged) or 'stream'
--   device_id      INTEGER  GPU index
--   stream_id      BIGINT   the stream for scope 'stream'; NULL for scope 'device'
--   start_ns       BIGINT   gap start = end of the preceding busy period, ns
--   end_ns         BIGINT   gap end = start of the next operation, ns
--   dur_ns         BIGINT   end_ns - start_ns (> 0)
--   cause          VARCHAR  'sync_wait', 'host_wait', 'kernel_wait' or 'other'
--   before_kind    VARCHAR  kind of the operation before the gap ('kernel', 'memcpy', 'memset')
--   before_name    VARCHAR  its name
--   before_stream  BIGINT   its stream
--   after_kind     VARCHAR  kind of the operation after the gap
--   after_name     VARCHAR  its name
--   after_stream   BIGINT   its stream
--   after_api      VARCHAR  the API call that launched the operation after the gap (NULL if unknown)
--   launch_lag_ns  BIGINT   after-op launch call start minus gap start (> 0 = CPU was late)
CREATE OR REPLACE VIEW idle_gaps AS
WITH names AS (  -- op names as numbers in name order (rows carry numbers; names are put back last)
    SELECT name, row_number() OVER (ORDER BY name) AS name_id
    FROM (SELECT DISTINCT name FROM gpu_activity WHERE device_id IS NOT NULL AND name IS NOT NULL)
),
act AS (
    SELECT a.source_id, a.device_id, a.stream_id, a.start_ns, a.end_ns, a.kind, n.name_id, a.pid,
           a.correlation_id
    FROM gpu_activity a LEFT JOIN names n ON n.name = a.name
    WHERE a.device_id IS NOT NULL
),
ordered AS (  -- busy_until: running max end of the earlier ops, per device and per stream
    SELECT source_id, device_id, stream_id, start_ns, kind, name_id, pid, correlation_id,
           max(end_ns) OVER (PARTITION BY source_id, device_id ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS dev_until,
           max(end_ns) OVER (PARTITION BY source_id, device_id, stream_id ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS stream_until
    FROM act
),
gaps AS (
    SELECT 'device' AS scope, NULL::BIGINT AS scope_stream, source_id, device_id,
           dev_until AS start_ns, start_ns AS end_ns, kind AS after_kind, name_id AS after_name_id,
           stream_id AS after_stream, pid AS after_pid, correlation_id AS after_corr
    FROM ordered WHERE dev_until < start_ns
    UNION ALL
    SELECT 'stream', stream_id, source_id, device_id, stream_until, start_ns, kind, name_id,
           stream_id, pid, correlation_id
    FROM ordered WHERE stream_until < start_ns
),
launches AS (  -- one launch call per (source, pid, correlation)
    SELECT source_id, pid, correlation_id, min(start_ns) AS api_start_ns,
           arg_min(name, start_ns) AS api_name
    FROM api_calls WHERE correlation_id IS NOT NULL GROUP BY ALL
),
gaps1 AS (
    SELECT g.*, l.api_start_ns, l.api_name AS after_api, l.pid AS launch_pid
    FROM gaps g
    LEFT JOIN launches l
      ON l.source_id = g.source_id AND l.correlation_id = g.after_corr
     AND (g.after_pid IS NULL OR l.pid = g.after_pid)
),
syncs AS (  -- host_syncs per process (any_pid: of all processes): latest end among the calls started up to start_ns
    SELECT *, max(end_ns) OVER (PARTITION BY source_id, any_pid, pid ORDER BY start_ns
                                ROWS UNBOUNDED PRECEDING) AS until_ns
    FROM (SELECT h.source_id, v.any_pid, CASE WHEN v.any_pid THEN 0 ELSE h.pid END AS pid, h.start_ns,
                 max(h.end_ns) AS end_ns
          FROM host_syncs h CROSS JOIN (VALUES (false), (true)) v(any_pid)
          WHERE v.any_pid OR h.pid IS NOT NULL
          GROUP BY ALL)
),
sync_gaps AS (  -- gaps before a late launch that a sync call of the launching process overlaps
    SELECT w.source_id, w.launch_pid, w.start_ns, w.end_ns
    FROM (SELECT DISTINCT source_id, launch_pid, start_ns, end_ns FROM gaps1
          WHERE api_start_ns > start_ns) w
    ASOF JOIN syncs s
      ON s.source_id = w.source_id AND s.any_pid = (w.launch_pid IS NULL)
     AND s.pid = coalesce(w.launch_pid, 0) AND w.end_ns > s.start_ns
    WHERE s.until_ns > w.start_ns
),
last_dev AS (  -- ops ending at a time: the lowest stream of the device (NULL streams last)
    SELECT source_id, device_id, end_ns, min(stream_id) AS stream_id
    FROM act GROUP BY ALL
),
last_stream AS (  -- ... and on that stream, the lowest name (NULL names last)
    SELECT source_id, device_id, stream_id, end_ns, min(name_id) AS name_id,
           coalesce(arg_min(kind, name_id), any_value(kind)) AS kind
    FROM act GROUP BY ALL
),
result AS (
    SELECT g.source_id, g.scope, g.device_id, g.scope_stream AS stream_id, g.start_ns, g.end_ns,
           g.end_ns - g.start_ns AS dur_ns,
           CASE
             WHEN g.api_start_ns > g.start_ns AND sg.start_ns IS NOT NULL THEN 'sync_wait'
             WHEN g.api_start_ns > g.start_ns THEN 'host_wait'
             WHEN g.api_start_ns IS NOT NULL
              AND g.end_ns - g.start_ns < coalesce(getvariable('kernel_wait_ns'), 30000) THEN 'kernel_wait'
             ELSE 'other'
           END AS cause,
           b.kind AS before_kind, b.name_id AS before_name_id, b.stream_id AS before_stream,
           g.after_kind, g.after_name_id, g.after_stream, g.after_api,
           g.api_start_ns - g.start_ns AS launch_lag_ns
    FROM gaps1 g
    LEFT JOIN sync_gaps sg
      ON sg.source_id = g.source_id AND sg.launch_pid IS NOT DISTINCT FROM g.launch_pid
     AND sg.start_ns = g.start_ns AND sg.end_ns = g.end_ns
    LEFT JOIN last_dev d
      ON g.scope_stream IS NULL AND d.source_id = g.source_id AND d.device_id = g.device_id
     AND d.end_ns = g.start_ns
    LEFT JOIN last_stream b
      ON b.source_id = g.source_id AND b.device_id = g.device_id AND b.end_ns = g.start_ns
     AND b.stream_id IS NOT DISTINCT FROM coalesce(g.scope_stream, d.stream_id)
)
SELECT source_id, scope, device_id, stream_id, start_ns, end_ns, dur_ns, cause,
       before_kind, nm[before_name_id] AS before_name, before_stream,
       after_kind, nm[after_name_id] AS after_name, after_stream, after_api, launch_lag_ns
FROM result, (SELECT coalesce(list(name ORDER BY name_id), []) AS nm FROM names)
ORDER BY source_id, scope, device_id, stream_id, start_ns;
