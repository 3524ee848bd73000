-- idle_gaps: every interval with no GPU activity, per device and per stream, with its cause.
--
-- Definition: GPU activity is `gpu_activity` (kernels, memcpy, memset; `syncs` records are
-- not activity). For scope 'device' the activity of all streams of a (source_id, device_id) is
-- merged; for scope 'stream' each (source_id, device_id, stream_id) separately. The window is
-- [first activity start, last activity end] of that device or stream: no gap is reported before
-- the first or after the last operation. A gap is a maximal interval in the window covered by
-- no operation; zero-length gaps (back-to-back operations) are not listed.
-- `before_*` is the operation whose end closes the busy period before the gap (ties: lowest
-- stream, then name); `after_*` the operation that starts at end_ns (same ties).
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
WITH act AS (
    SELECT 'device' AS scope, NULL::BIGINT AS scope_stream, * FROM gpu_activity
    WHERE device_id IS NOT NULL
    UNION ALL
    SELECT 'stream', stream_id, * FROM gpu_activity
    WHERE device_id IS NOT NULL
),
ordered AS (
    SELECT *,
           max(end_ns) OVER (PARTITION BY scope, source_id, device_id, scope_stream
                             ORDER BY start_ns, end_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
    FROM act
),
gaps AS (
    SELECT scope, scope_stream, source_id, device_id, busy_until AS start_ns, start_ns AS end_ns,
           kind AS after_kind, name AS after_name, stream_id AS after_stream,
           pid AS after_pid, correlation_id AS after_corr,
           row_number() OVER (PARTITION BY scope, source_id, device_id, scope_stream, start_ns
                              ORDER BY stream_id, name) AS rn
    FROM ordered
    WHERE busy_until < start_ns
),
launches AS (  -- one launch call per (source, pid, correlation)
    SELECT source_id, pid, correlation_id, min(api_start_ns) AS api_start_ns,
           arg_min(api_name, api_start_ns) AS api_name
    FROM gpu_launches GROUP BY ALL
),
gaps1 AS (
    SELECT g.*, l.api_start_ns, l.api_name AS after_api, l.pid AS launch_pid
    FROM gaps g
    LEFT JOIN launches l
      ON l.source_id = g.source_id AND l.correlation_id = g.after_corr
     AND (g.after_pid IS NULL OR l.pid = g.after_pid)
    WHERE g.rn = 1
)
SELECT g.source_id, g.scope, g.device_id, g.scope_stream AS stream_id, g.start_ns, g.end_ns,
       g.end_ns - g.start_ns AS dur_ns,
       CASE
         WHEN g.api_start_ns > g.start_ns
          AND EXISTS (SELECT 1 FROM host_syncs s
                       WHERE s.source_id = g.source_id
                         AND (g.launch_pid IS NULL OR s.pid = g.launch_pid)
                         AND s.start_ns < g.end_ns AND s.end_ns > g.start_ns) THEN 'sync_wait'
         WHEN g.api_start_ns > g.start_ns THEN 'host_wait'
         WHEN g.api_start_ns IS NOT NULL
          AND g.end_ns - g.start_ns < coalesce(getvariable('kernel_wait_ns'), 30000) THEN 'kernel_wait'
         ELSE 'other'
       END AS cause,
       b.kind AS before_kind, b.name AS before_name, b.stream_id AS before_stream,
       g.after_kind, g.after_name, g.after_stream, g.after_api,
       g.api_start_ns - g.start_ns AS launch_lag_ns
FROM gaps1 g
LEFT JOIN LATERAL (
    SELECT kind, name, stream_id FROM gpu_activity a
    WHERE a.source_id = g.source_id AND a.device_id = g.device_id AND a.end_ns = g.start_ns
      AND (g.scope_stream IS NULL OR a.stream_id = g.scope_stream)
    ORDER BY a.stream_id, a.name LIMIT 1
) b ON true
ORDER BY g.source_id, g.scope, g.device_id, g.scope_stream, g.start_ns;
