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
-- cause: what the host was doing while the GPU sat idle. When the launch call of the operation
-- after the gap (`gpu_launches`' link) started after the gap began, the host was late, and the
-- gap's time is split by what the launching process did meanwhile:
--   sync_ns      the GPU drained while the process was blocked in a synchronizing call
--                (`tk_sync_calls()`, sql/lib/host_calls.sql: explicit synchronize, blocking
--                copy, copy into pageable memory -- what .item(), .cpu() do) that started before
--                the gap and ended at or after its start: the host had waited for exactly this
--                drain, and then had to launch the next work from an empty queue. The part of the
--                gap put on the sync is at most the time the host spent blocked in that call
--                (had it not waited, it could have done that much of its later work while the
--                GPU was still busy): least(dur_ns - compile_ns, sync end - sync start). A short
--                sync before a long pause (start-up, a data-loader wait) is not the pause's cause.
--   compile_ns   the time of the gap covered by the process's loading or compiling of GPU code
--                (`tk_compile_intervals()`: cuLibraryLoadData, cuModuleLoadData ... calls, and
--                the time from opening NVRTC to loading what it built): runtime compilation,
--                e.g. a new cuDNN / Triton kernel for a new shape. (Kineto traces record neither
--                module loads nor library opens: there, such time is host_wait.)
--   the rest     dur_ns - sync_ns - compile_ns: the host was running its own code and launching.
-- and cause is the largest of the three (ties in this order):
--   sync_wait        sync_ns
--   runtime_compile  compile_ns (CUDA graphs would not help: warm up every shape instead)
--   host_wait        the rest: the GPU waited for the CPU (launch-bound; CUDA graphs or fusion
--                    help)
-- Otherwise (the next operation was already launched when the gap began; sync_ns = compile_ns = 0):
--   kernel_wait  the gap is shorter than the parameter kernel_wait_ns (default 30000 ns = HTA's
--                30 µs): launch overhead between back-to-back kernels.
--   other        anything else: the next op was launched before the gap but waited longer
--                (cross-stream dependencies, events, graph internals), or its launch is
--                not in the trace.
-- Differences to HTA's idle-time breakdown: HTA classifies only per stream and has no
-- sync_wait; here sync_wait takes precedence over host_wait, both scopes are listed, each gap
-- is a row (not only totals), and times are exact ns (HTA rounds float traces to µs).
--
-- Method (no effect on the result): busy_until = running maximum end of the earlier operations
-- (ordered by start, end) per device and per stream; a gap is [busy_until, start) of an operation
-- that starts after it. Each operation carries one number for its (stream, name, kind), numbered
-- in that order (NULLs last), so the closing operation comes out of the same running maximum
-- (of end * 2^40 - number: the latest end, then the lowest stream, then the lowest name); for
-- scope 'stream' of a NULL stream it is looked up on the whole device, as for scope 'device'.
-- The launch call is looked up once per operation; the sync test once per late gap start and
-- process (the device and stream scopes share most gap starts): the synchronizing call with the
-- latest end among those started before the gap (ASOF join on a running maximum). The compile
-- intervals of a process are merged into disjoint intervals first.
-- Names (operation and API) travel as numbers and are put back after the sort.
-- Parameters:
--   kernel_wait_ns  30000  a gap shorter than this before an op launched in time is kernel_wait, ns
--
-- Uses: gpu_activity
--
-- Columns:
--   source_id      INTEGER  the source
--   scope          VARCHAR  'device' (all streams merged) or 'stream'
--   device_id      INTEGER  GPU index
--   stream_id      BIGINT   the stream for scope 'stream'; NULL for scope 'device'
--   start_ns       BIGINT   gap start = end of the preceding busy period, ns
--   end_ns         BIGINT   gap end = start of the next operation, ns
--   dur_ns         BIGINT   end_ns - start_ns (> 0)
--   cause          VARCHAR  'sync_wait', 'runtime_compile', 'host_wait', 'kernel_wait' or 'other'
--   before_kind    VARCHAR  kind of the operation before the gap ('kernel', 'memcpy', 'memset')
--   before_name    VARCHAR  its name
--   before_stream  BIGINT   its stream
--   after_kind     VARCHAR  kind of the operation after the gap
--   after_name     VARCHAR  its name
--   after_stream   BIGINT   its stream
--   after_api      VARCHAR  the API call that launched the operation after the gap (NULL if unknown)
--   launch_lag_ns  BIGINT   after-op launch call start minus gap start (> 0 = CPU was late)
--   sync_ns        BIGINT   part of the gap put on a synchronizing call (see cause), ns
--   compile_ns     BIGINT   part of the gap covered by code loading / compiling calls, ns
--   launch_pid     BIGINT   process of the launch call of the operation after the gap (NULL if unknown)
--   launch_tid     BIGINT   thread of that launch call (what `idle_attribution` follows)
CREATE OR REPLACE VIEW idle_gaps AS
WITH combos AS MATERIALIZED (  -- (stream, name, kind) of the ops, numbered in that order (NULLs last)
    SELECT stream_id, name, kind,
           row_number() OVER (ORDER BY stream_id NULLS LAST, name NULLS LAST, kind NULLS LAST) AS cid
    FROM (SELECT DISTINCT stream_id, name, kind FROM gpu_activity WHERE device_id IS NOT NULL)
),
api_names AS MATERIALIZED (  -- names of the launch calls, numbered in name order
    SELECT name, row_number() OVER (ORDER BY name) AS api_id
    FROM (SELECT DISTINCT name FROM api_calls WHERE correlation_id IS NOT NULL AND name IS NOT NULL)
),
launches AS (  -- the launch call of each (source, pid, correlation): the one launch rule
    SELECT a.source_id, a.pid, a.tid, a.correlation_id, a.n_pids, a.start_ns AS api_start_ns, n.api_id
    FROM tk_launch_calls() a LEFT JOIN api_names n USING (name)
),
syncs AS (  -- sync calls per process (any_pid: of all processes), by start: the latest end so far
            -- and the start of the call that has it
    SELECT source_id, any_pid, pid, start_ns,
           max(end_ns) OVER w AS until_ns, arg_max(start_ns, end_ns) OVER w AS until_start_ns
    FROM (SELECT h.source_id, v.any_pid, CASE WHEN v.any_pid THEN 0 ELSE h.pid END AS pid, h.start_ns,
                 max(h.end_ns) AS end_ns
          FROM tk_sync_calls() h CROSS JOIN (VALUES (false), (true)) v(any_pid)
          WHERE v.any_pid OR h.pid IS NOT NULL
          GROUP BY ALL)
    WINDOW w AS (PARTITION BY source_id, any_pid, pid ORDER BY start_ns ROWS UNBOUNDED PRECEDING)
),
compile_calls AS (
    SELECT {'source_id': source_id, 'pid': pid} AS key, start_ns, end_ns
    FROM tk_compile_intervals() WHERE end_ns > start_ns
),
compiles AS (  -- the compile intervals of each process, merged into disjoint intervals
    SELECT key.source_id AS source_id, key.pid AS pid, start_ns, end_ns FROM tk_merge_intervals('compile_calls')
),
ops AS MATERIALIZED (  -- each op with its (stream, name, kind) number, launch call and the sync calls before it
    SELECT a.source_id, a.device_id, a.stream_id, a.start_ns, a.end_ns, c.cid,
           l.api_start_ns, l.api_id, l.pid AS api_pid, l.tid AS api_tid
    FROM gpu_activity a
    JOIN combos c
      ON c.stream_id IS NOT DISTINCT FROM a.stream_id AND c.name IS NOT DISTINCT FROM a.name
     AND c.kind = a.kind
    LEFT JOIN launches l
      ON l.source_id = a.source_id AND l.correlation_id = a.correlation_id
     AND tk_launch_link(a.pid, l.pid, l.n_pids)
    WHERE a.device_id IS NOT NULL
),
dev AS (
    SELECT source_id, device_id, start_ns, cid, api_start_ns, api_id, api_pid, api_tid,
           max(end_ns) OVER w AS until_ns,
           max(end_ns * 1099511627776::HUGEINT - cid) OVER w AS key
    FROM ops
    WINDOW w AS (PARTITION BY source_id, device_id ORDER BY start_ns, end_ns
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
str AS (
    SELECT source_id, device_id, stream_id, start_ns, cid, api_start_ns, api_id, api_pid, api_tid,
           max(end_ns) OVER w AS until_ns,
           max(end_ns * 1099511627776::HUGEINT - cid) OVER w AS key
    FROM ops
    WINDOW w AS (PARTITION BY source_id, device_id, stream_id ORDER BY start_ns, end_ns
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
),
null_before AS (  -- scope 'stream', NULL stream: the closing op is looked up on the whole device
    SELECT source_id, device_id, end_ns, min(cid) AS cid
    FROM ops
    WHERE (source_id, device_id) IN (SELECT source_id, device_id FROM ops WHERE stream_id IS NULL)
    GROUP BY ALL
),
gaps AS (
    SELECT source_id, 'device' AS scope, device_id, NULL::BIGINT AS stream_id, until_ns AS start_ns,
           start_ns AS end_ns, (until_ns * 1099511627776::HUGEINT - key)::BIGINT AS before_cid, cid AS after_cid,
           api_start_ns, api_id, api_pid, api_tid
    FROM dev WHERE until_ns < start_ns
    UNION ALL
    SELECT s.source_id, 'stream', s.device_id, s.stream_id, s.until_ns, s.start_ns,
           CASE WHEN s.stream_id IS NULL THEN nb.cid ELSE (s.until_ns * 1099511627776::HUGEINT - s.key)::BIGINT END,
           s.cid, s.api_start_ns, s.api_id, s.api_pid, s.api_tid
    FROM str s
    LEFT JOIN null_before nb
      ON s.stream_id IS NULL AND nb.source_id = s.source_id AND nb.device_id = s.device_id
     AND nb.end_ns = s.until_ns
    WHERE s.until_ns < s.start_ns
),
comp AS (  -- per late gap, the time covered by the launching process's compile intervals (few)
    SELECT g.source_id, g.scope, g.device_id, g.stream_id, g.start_ns,
           sum(least(c.end_ns, g.end_ns) - greatest(c.start_ns, g.start_ns)) AS compile_ns
    FROM gaps g
    JOIN compiles c
      ON c.source_id = g.source_id AND c.pid = g.api_pid AND c.start_ns < g.end_ns AND c.end_ns > g.start_ns
    WHERE g.api_start_ns > g.start_ns
    GROUP BY ALL
),
late AS (  -- late gaps (next op launched after the gap began): the sync the GPU drained during,
           -- once per (process, gap start): the device and stream scopes share most gap starts
    SELECT g.source_id, g.api_pid, g.start_ns,
           CASE WHEN s.until_ns >= g.start_ns THEN s.until_ns - s.until_start_ns END AS blocked_ns
    FROM (SELECT DISTINCT source_id, api_pid, start_ns FROM gaps WHERE api_start_ns > start_ns) g
    ASOF JOIN syncs s
      ON s.source_id = g.source_id AND s.any_pid = (g.api_pid IS NULL)
     AND s.pid = coalesce(g.api_pid, 0) AND g.start_ns > s.start_ns
),
parts AS (
    SELECT g.*, g.end_ns - g.start_ns AS dur_ns, coalesce(g.api_start_ns > g.start_ns, false) AS is_late,
           coalesce(c.compile_ns, 0)::BIGINT AS compile_ns,
           CASE WHEN g.api_start_ns > g.start_ns AND l.blocked_ns IS NOT NULL  -- (least() would skip a NULL)
                THEN least(g.end_ns - g.start_ns - coalesce(c.compile_ns, 0), l.blocked_ns)
                ELSE 0 END::BIGINT AS sync_ns
    FROM gaps g
    LEFT JOIN late l
      ON l.source_id = g.source_id AND l.api_pid IS NOT DISTINCT FROM g.api_pid AND l.start_ns = g.start_ns
    LEFT JOIN comp c
      ON c.source_id = g.source_id AND c.scope = g.scope AND c.device_id = g.device_id
     AND c.stream_id IS NOT DISTINCT FROM g.stream_id AND c.start_ns = g.start_ns
),
result AS (
    SELECT source_id, scope, device_id, stream_id, start_ns, end_ns, dur_ns,
           CASE
             WHEN is_late AND sync_ns > 0 AND sync_ns >= compile_ns
              AND sync_ns >= dur_ns - sync_ns - compile_ns THEN 'sync_wait'
             WHEN is_late AND compile_ns > 0 AND compile_ns >= dur_ns - sync_ns - compile_ns THEN 'runtime_compile'
             WHEN is_late THEN 'host_wait'
             WHEN api_start_ns IS NOT NULL
              AND dur_ns < getvariable('kernel_wait_ns') THEN 'kernel_wait'
             ELSE 'other'
           END AS cause,
           before_cid, after_cid, api_id, api_start_ns - start_ns AS launch_lag_ns, sync_ns, compile_ns,
           api_pid, api_tid
    FROM parts
    ORDER BY source_id, scope, device_id, stream_id, start_ns
)
SELECT source_id, scope, device_id, stream_id, start_ns, end_ns, dur_ns, cause,
       c[before_cid].kind AS before_kind, c[before_cid].name AS before_name, c[before_cid].stream_id AS before_stream,
       c[after_cid].kind AS after_kind, c[after_cid].name AS after_name, c[after_cid].stream_id AS after_stream,
       an[api_id] AS after_api, launch_lag_ns, sync_ns, compile_ns, api_pid AS launch_pid, api_tid AS launch_tid
FROM result, (SELECT coalesce(list({'kind': kind, 'name': name, 'stream_id': stream_id} ORDER BY cid), []) AS c FROM combos),
     (SELECT coalesce(list(name ORDER BY api_id), []) AS an FROM api_names);
