-- idle_attribution: every nanosecond of every GPU idle gap, put on what the launching host thread was doing then.
--
-- Definition: the gaps are `idle_gaps` of scope 'device' (time when no kernel, memcpy or memset
-- runs on the GPU, inside its first-to-last-operation window). The thread followed through a gap
-- is the one whose API call launched the operation after the gap (idle_gaps.launch_pid /
-- launch_tid). Each gap is cut into pieces at every start and end of that thread's host events
-- (`events`, not instants) and API calls (`api_calls`) inside it, and each piece gets exactly
-- one category; the pieces of a gap cover it exactly, so per gap sum(dur_ns) = its dur_ns.
--
-- When the operation after the gap was launched AFTER the gap began (the host was late), a
-- piece's category is the first that holds of what the thread was inside:
--   copy       a blocking copy call or a copy into pageable memory (`tk_sync_calls()` kinds
--              'blocking_copy', 'pageable_copy': .cpu(), .item()'s copy, cudaMemcpy)
--   sync       an explicit synchronize call (`tk_sync_calls()` kind 'explicit')
--   compile    loading or compiling GPU code (`tk_compile_intervals()`: module / library loads,
--              NVRTC episodes), an event that `tk_host_mark` calls 'compile' (torch.compile's
--              dynamo / inductor / AOT phases, Triton's compiler), a cuDNN / cuBLAS operator
--              (mark 'plan') lasting at least plan_min_ns (building an execution plan; but an
--              allocator call inside such an operator is 'cpu_op', the allocation), or an API
--              call lasting at least plan_min_ns that is not a sync, copy, allocator call or
--              graph launch (a launch that loads its module lazily, CUDA_MODULE_LOADING=LAZY;
--              cuKernelSetAttribute on a freshly built kernel)
--   data       an event marked 'data' (DataLoader iteration, pin_memory, ranges named for data)
--   rank_wait  an event marked 'rank_wait' (c10d / NCCL / Gloo host calls, barriers)
--   cpu_op     an allocator call (cudaMalloc, cudaFree, cuMemAlloc, ... : host_op names it)
--   launch     any other API call (cudaLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync, event
--              records ...); or, in a gap shorter than dispatch_max_ns, any other host time
--              (the framework's dispatch from one launch to the next: launch overhead)
--   untraced   no event at all on the thread (plain Python / C++ the profiler did not trace),
--              or only a user range (record_function, NVTX, Python function) that itself
--              launched GPU work (its own time between the launches: the user's code, e.g.
--              the steps' ranges)
--   cpu_op     a framework operator (`tk_is_op_range`) or a range that launched no GPU work:
--              named host work (host_op names the innermost such event)
-- A gap that opened while the thread was blocked in a synchronizing call (idle_gaps.sync_ns > 0:
-- the sync drained the GPU's queue) is the sync's cost while the host runs its own code after
-- it: its pieces in no event, in an API call, or in a range that launched GPU work (the host's
-- own code and its re-launching after the drain: 'untraced', 'launch', and 'cpu_op' of a
-- framework operator on its way to a launch), in time order, become 'sync' ('copy' when the gap
-- opened inside a copy call: the transfer's cost) up to idle_gaps.sync_ns (the time the host
-- was blocked in that call, less what the gap already spends in sync and copy calls); a named
-- activity after the sync (copy, compile, data, rank_wait, cpu_op) stays its own cause.
-- When the operation after the gap was already launched when the gap began, the host was not
-- the cause: the whole gap is one piece 'queued' (the GPU waited on a dependency between
-- streams, an event, or its own launch latency). When that operation's launch is not in the
-- trace (or its thread is unknown), the gap is one piece 'unknown'.
-- Method (no effect on the result): one time-ordered pass per (thread, GPU) over the boundaries
-- of the thread's events, API calls, sync / compile intervals and late gaps: running counts of
-- the open intervals of each kind and of the launches so far (nine counters, two to a running
-- sum, x * 2^32 + y: a count is at most the pass's rows, so neither spills into the other), the
-- gap open (a running max: gaps are disjoint and numbered in time order), the innermost open
-- event (an event's start makes it the innermost, its end makes its parent the innermost:
-- `events.parent_id`), whose nearest marked ancestor-or-self is the innermost open marking
-- event (passed down `parent_id` from each marking event); the last API call's start instant as
-- a running max, its name looked up by it (a running max costs a third of DuckDB's last_value
-- IGNORE NULLS over long runs of NULLs); a range launched GPU work when the running count of API
-- calls with a correlation id grew between its start and end. Event and API names are
-- classified once per distinct name.
-- Rows are in no particular order.
-- Parameters (kernel_wait_ns, idle_gaps' own, has no effect here):
--   plan_min_ns      1000000  a cuDNN / cuBLAS op or an API call at least this long builds a plan, ns
--   dispatch_max_ns  200000   in a gap shorter than this, host time between launches is 'launch', ns
--
-- Uses: idle_gaps
--
-- Columns:
--   source_id     INTEGER  the source
--   device_id     INTEGER  GPU index
--   gap_start_ns  BIGINT   the gap's start (idle_gaps.start_ns), ns
--   gap_end_ns    BIGINT   the gap's end, ns
--   start_ns      BIGINT   this piece's start, ns
--   end_ns        BIGINT   this piece's end, ns
--   dur_ns        BIGINT   end_ns - start_ns (> 0)
--   category      VARCHAR  'sync', 'copy', 'compile', 'data', 'rank_wait', 'launch', 'cpu_op',
--                          'untraced', 'queued' or 'unknown'
--   host_op       VARCHAR  the innermost host event the thread was in (the marking event for
--                          compile / data / rank_wait; the API call inside one); NULL when none
--   pid           BIGINT   the launching process (NULL for 'queued' and 'unknown')
--   tid           BIGINT   the launching thread (NULL for 'queued' and 'unknown')
CREATE OR REPLACE VIEW idle_attribution AS
WITH RECURSIVE g AS MATERIALIZED (
    SELECT source_id, device_id, start_ns, end_ns, launch_pid AS pid, launch_tid AS tid,
           start_ns + launch_lag_ns AS launch_ns, sync_ns,
           row_number() OVER (ORDER BY source_id, device_id, start_ns) AS gap_id
    FROM idle_gaps WHERE scope = 'device'
),
late AS MATERIALIZED (
    SELECT * FROM g WHERE launch_ns > start_ns AND pid IS NOT NULL AND tid IS NOT NULL
),
thr AS MATERIALIZED (  -- k numbers the (thread, GPU) pairs: the pass's one partition key
    SELECT *, row_number() OVER (ORDER BY source_id, pid, tid, device_id) AS k
    FROM (SELECT DISTINCT source_id, pid, tid, device_id FROM late)
),
tids AS MATERIALIZED (SELECT DISTINCT source_id, pid, tid FROM thr),
ev0 AS MATERIALIZED (
    SELECT e.source_id, e.pid, e.tid, e.event_id, e.parent_id, e.depth, e.start_ns, e.end_ns, e.dur_ns,
           e.name, e.category
    FROM events e
    JOIN tids t ON t.source_id = e.source_id AND t.pid = e.pid AND t.tid = e.tid
    WHERE NOT coalesce(e.is_instant, false) AND e.end_ns > e.start_ns
),
ev_names AS (  -- what each distinct event name marks, decided once per name
    SELECT category, name, tk_host_mark(category, name) AS m0, tk_is_op_range(category, name) AS is_op
    FROM (SELECT DISTINCT category, name FROM ev0)
),
ev AS MATERIALIZED (  -- the threads' ranges, with what their names mark
    SELECT e.*, n.is_op,
           CASE WHEN n.m0 = 'plan' THEN CASE WHEN e.dur_ns >= getvariable('plan_min_ns') THEN 'plan' END
                ELSE n.m0 END AS mark
    FROM ev0 e
    JOIN ev_names n ON n.category IS NOT DISTINCT FROM e.category AND n.name IS NOT DISTINCT FROM e.name
),
api0 AS MATERIALIZED (
    SELECT a.source_id, a.pid, a.tid, a.start_ns, a.end_ns, a.name,
           CASE WHEN a.correlation_id IS NOT NULL THEN 1 ELSE 0 END AS is_launch
    FROM api_calls a
    JOIN tids t ON t.source_id = a.source_id AND t.pid = a.pid AND t.tid = a.tid
    WHERE a.end_ns > a.start_ns
),
api_names AS (  -- each distinct API name classified once
    SELECT name,
           CASE WHEN tk_is_alloc_call(name) THEN 1 ELSE 0 END AS is_alloc,
           tk_sync_kind(name) IS NULL AND NOT tk_is_graph_launch(name) AS may_plan
    FROM (SELECT DISTINCT name FROM api0)
),
api AS MATERIALIZED (
    SELECT a.*, n.is_alloc, n.may_plan
    FROM api0 a JOIN api_names n ON n.name IS NOT DISTINCT FROM a.name
),
syncs AS (
    SELECT s.source_id, s.pid, s.tid, s.start_ns, s.end_ns,
           CASE WHEN s.kind = 'explicit' THEN 0 ELSE 1 END AS is_copy
    FROM tk_sync_calls() s
    JOIN tids t ON t.source_id = s.source_id AND t.pid = s.pid AND t.tid = s.tid
    WHERE s.end_ns > s.start_ns
),
comp AS (
    SELECT c.source_id, c.pid, c.tid, c.start_ns, c.end_ns
    FROM tk_compile_intervals() c
    JOIN tids t ON t.source_id = c.source_id AND t.pid = c.pid AND t.tid = c.tid
    WHERE c.end_ns > c.start_ns
    UNION ALL  -- a long launch or attribute call: lazy module loading, a library's plan being built
    SELECT source_id, pid, tid, start_ns, end_ns FROM api
    WHERE end_ns - start_ns >= getvariable('plan_min_ns') AND is_alloc = 0 AND may_plan
),
-- The host boundaries. o orders those at one instant (ends, then gaps, then starts); d1 ... d5
-- are the changes of the nine counters, two to a BIGINT (x * 2^32 + y): d1 the launches so far,
-- d2 open API calls * 2^32 + allocator calls, d3 syncs * 2^32 + copies, d4 compile * 2^32 +
-- plan, d5 data * 2^32 + rank_wait.
host AS (
    SELECT source_id, pid, tid, start_ns AS t, 5 AS o, depth AS sub, event_id AS ev, event_id AS eid,
           false AS is_end, false AS is_api,
           0::BIGINT AS d1, 0::BIGINT AS d2, 0::BIGINT AS d3,
           CASE mark WHEN 'compile' THEN 4294967296 WHEN 'plan' THEN 1 ELSE 0 END::BIGINT AS d4,
           CASE mark WHEN 'data' THEN 4294967296 WHEN 'rank_wait' THEN 1 ELSE 0 END::BIGINT AS d5
    FROM ev
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 0, -coalesce(depth, 0), coalesce(parent_id, -1), event_id,
           true, false, 0, 0, 0,
           CASE mark WHEN 'compile' THEN -4294967296 WHEN 'plan' THEN -1 ELSE 0 END,
           CASE mark WHEN 'data' THEN -4294967296 WHEN 'rank_wait' THEN -1 ELSE 0 END
    FROM ev
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 0, NULL, NULL, false, true, is_launch,
           CASE WHEN is_alloc = 1 THEN 1 ELSE 4294967296 END, 0, 0, 0
    FROM api
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 0, NULL, NULL, true, false, 0,
           CASE WHEN is_alloc = 1 THEN -1 ELSE -4294967296 END, 0, 0, 0
    FROM api
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 1, NULL, NULL, false, false, 0, 0,
           CASE WHEN is_copy = 1 THEN 1 ELSE 4294967296 END, 0, 0
    FROM syncs
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 1, NULL, NULL, true, false, 0, 0,
           CASE WHEN is_copy = 1 THEN -1 ELSE -4294967296 END, 0, 0
    FROM syncs
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 2, NULL, NULL, false, false, 0, 0, 0, 4294967296, 0
    FROM comp
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 2, NULL, NULL, true, false, 0, 0, 0, -4294967296, 0
    FROM comp
),
bounds AS (  -- per (thread, GPU) k: the host boundaries and the late gaps' starts and ends
    SELECT t.k, h.t, h.o, h.sub, h.ev, h.eid, h.is_end, h.is_api, h.d1, h.d2, h.d3, h.d4, h.d5,
           NULL::BIGINT AS gap
    FROM host h
    JOIN thr t ON t.source_id = h.source_id AND t.pid = h.pid AND t.tid = h.tid
    UNION ALL
    SELECT t.k, l.start_ns, 3, 0, NULL, NULL, false, false, 0, 0, 0, 0, 0, 2 * l.gap_id
    FROM late l JOIN thr t USING (source_id, pid, tid, device_id)
    UNION ALL
    SELECT t.k, l.end_ns, 2, 0, NULL, NULL, true, false, 0, 0, 0, 0, 0, 2 * l.gap_id + 1
    FROM late l JOIN thr t USING (source_id, pid, tid, device_id)
),
sweep AS MATERIALIZED (  -- the order (t, o, sub NULLS LAST, eid) as one HUGEINT key and eid
    SELECT k, t, eid, is_end, next_t, cur_ev, api_t,
           CASE WHEN g % 2 = 0 THEN g // 2 ELSE 0 END AS cur_gap,
           s1 AS n_launch, s2 // 4294967296 AS n_api, s2 % 4294967296 AS n_alloc,
           s3 // 4294967296 AS n_sync, s3 % 4294967296 AS n_copy,
           s4 // 4294967296 AS n_comp, s4 % 4294967296 AS n_plan,
           s5 // 4294967296 AS n_data, s5 % 4294967296 AS n_rank
    FROM (SELECT k, t, eid, is_end,
                 lead(t) OVER (PARTITION BY k ORDER BY key, eid) AS next_t,
                 max(gap) OVER w AS g,
                 last_value(ev IGNORE NULLS) OVER w AS cur_ev,
                 max(CASE WHEN is_api THEN t END) OVER w AS api_t,
                 (sum(d1) OVER w)::BIGINT AS s1, (sum(d2) OVER w)::BIGINT AS s2, (sum(d3) OVER w)::BIGINT AS s3,
                 (sum(d4) OVER w)::BIGINT AS s4, (sum(d5) OVER w)::BIGINT AS s5
          FROM (SELECT *, t::HUGEINT * 68719476736 + o * 8589934592
                          + coalesce(sub::BIGINT + 2147483648, 4294967296) AS key
                FROM bounds)
          WINDOW w AS (PARTITION BY k ORDER BY key, eid ROWS UNBOUNDED PRECEDING))
),
api_at AS (  -- the API call started last at an instant (the last of those that start together)
    SELECT source_id, pid, tid, start_ns AS t, max(name) AS name FROM api GROUP BY ALL
),
marks(source_id, event_id, name) AS (  -- each range under a marking event (or one itself), with the
                                       -- innermost marking event open with it: down from the marks
    SELECT source_id, event_id, name FROM ev WHERE mark IS NOT NULL
    UNION ALL
    SELECT e.source_id, e.event_id, m.name
    FROM marks m JOIN ev e ON e.source_id = m.source_id AND e.parent_id = m.event_id
    WHERE e.mark IS NULL
),
launched AS (  -- per range of a pass: its name, the API calls with a correlation id started inside
                -- it, and the innermost marking event open with it (where a piece needs one)
    SELECT n.k, n.eid, n.launches, e.name, e.is_op, m.name AS mark_name
    FROM (SELECT k, eid,
                 max(CASE WHEN is_end THEN n_launch END) - max(CASE WHEN NOT is_end THEN n_launch END) AS launches
          FROM sweep WHERE eid IS NOT NULL
          GROUP BY ALL) n
    JOIN thr th ON th.k = n.k
    JOIN ev e ON e.source_id = th.source_id AND e.event_id = n.eid  -- event_id: unique in a source
    LEFT JOIN marks m ON m.source_id = th.source_id AND m.event_id = n.eid
),
pieces AS (
    SELECT th.source_id, th.device_id, th.pid, th.tid, s.cur_gap AS gap_id, s.t AS start_ns, s.next_t AS end_ns,
           CASE WHEN s.n_copy > 0 THEN 'copy'
                WHEN s.n_sync > 0 THEN 'sync'
                WHEN s.n_comp > 0 THEN 'compile'
                WHEN s.n_data > 0 THEN 'data'
                WHEN s.n_rank > 0 THEN 'rank_wait'
                WHEN s.n_alloc > 0 THEN 'cpu_op'
                WHEN s.n_plan > 0 THEN 'compile'  -- in a long cuDNN / cuBLAS op (plan), no allocator call
                WHEN s.n_api > 0 THEN 'launch'
                WHEN l.end_ns - l.start_ns < getvariable('dispatch_max_ns') THEN 'launch'
                WHEN e.eid IS NULL THEN 'untraced'
                WHEN coalesce(e.launches, 0) = 0 OR e.is_op THEN 'cpu_op'
                ELSE 'untraced'
           END AS category,
           CASE WHEN s.n_copy > 0 OR s.n_sync > 0 OR s.n_alloc > 0 OR s.n_api > 0 THEN coalesce(ca.name, e.name)
                WHEN s.n_comp > 0 OR s.n_plan > 0 OR s.n_data > 0 OR s.n_rank > 0 THEN coalesce(e.mark_name, e.name)
                ELSE e.name END AS host_op,
           -- the host's own code, or a range on its way to a launch: after a draining sync, the
           -- sync's cost
           s.n_copy + s.n_sync + s.n_comp + s.n_plan + s.n_data + s.n_rank + s.n_alloc = 0
             AND (s.n_api > 0 OR e.eid IS NULL OR coalesce(e.launches, 0) > 0) AS own_code,
           l.start_ns AS gap_start_ns, l.end_ns AS gap_end_ns, l.sync_ns
    FROM sweep s
    JOIN thr th ON th.k = s.k
    JOIN late l ON l.gap_id = s.cur_gap
    LEFT JOIN launched e ON e.k = s.k AND e.eid = s.cur_ev
    LEFT JOIN api_at ca ON ca.source_id = th.source_id AND ca.pid = th.pid AND ca.tid = th.tid AND ca.t = s.api_t
    WHERE s.cur_gap > 0 AND s.next_t > s.t
),
drained AS (  -- gaps a sync drained: the host's own code after it is the sync's, up to sync_ns
    SELECT *,
           CASE WHEN own_code THEN
                greatest(0, least(end_ns - start_ns,
                                  greatest(sync_ns - sync_in_gap, 0) - coalesce(before, 0)))::BIGINT
                ELSE 0 END AS moved
    FROM (SELECT *,
                 first_value(category) OVER (PARTITION BY gap_id ORDER BY start_ns) AS first_cat,
                 sum(CASE WHEN category IN ('sync', 'copy') THEN end_ns - start_ns ELSE 0 END)
                     OVER (PARTITION BY gap_id) AS sync_in_gap,
                 sum(CASE WHEN own_code THEN end_ns - start_ns ELSE 0 END)
                     OVER (PARTITION BY gap_id ORDER BY start_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
          FROM pieces WHERE coalesce(sync_ns, 0) > 0)
)
SELECT source_id, device_id, gap_start_ns, gap_end_ns, start_ns, end_ns, end_ns - start_ns AS dur_ns,
       category, host_op, pid, tid
FROM pieces WHERE coalesce(sync_ns, 0) <= 0
UNION ALL
SELECT source_id, device_id, gap_start_ns, gap_end_ns, start_ns, start_ns + moved, moved,
       CASE WHEN first_cat = 'copy' THEN 'copy' ELSE 'sync' END, host_op, pid, tid
FROM drained WHERE moved > 0
UNION ALL
SELECT source_id, device_id, gap_start_ns, gap_end_ns, start_ns + moved, end_ns, end_ns - start_ns - moved,
       category, host_op, pid, tid
FROM drained WHERE end_ns - start_ns - moved > 0
UNION ALL
SELECT source_id, device_id, start_ns, end_ns, start_ns, end_ns, end_ns - start_ns,
       CASE WHEN launch_ns IS NULL OR launch_ns > start_ns THEN 'unknown' ELSE 'queued' END, NULL, NULL, NULL
FROM g WHERE NOT coalesce(launch_ns > start_ns AND pid IS NOT NULL AND tid IS NOT NULL, false);
