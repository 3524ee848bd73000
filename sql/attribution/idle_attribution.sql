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
-- the open intervals of each kind, and the innermost open event (an event's start makes it the
-- innermost, its end makes its parent the innermost: `events.parent_id`); the last API call's
-- and the last mark's start instant as a running max, their names looked up by it (a running
-- max costs a third of DuckDB's last_value IGNORE NULLS over long runs of NULLs); a range launched GPU
-- work when the running count of API calls with a correlation id grew between its start and end.
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
WITH g AS MATERIALIZED (
    SELECT source_id, device_id, start_ns, end_ns, launch_pid AS pid, launch_tid AS tid,
           start_ns + launch_lag_ns AS launch_ns, sync_ns,
           row_number() OVER (ORDER BY source_id, device_id, start_ns) AS gap_id
    FROM idle_gaps WHERE scope = 'device'
),
late AS MATERIALIZED (
    SELECT * FROM g WHERE launch_ns > start_ns AND pid IS NOT NULL AND tid IS NOT NULL
),
thr AS MATERIALIZED (SELECT DISTINCT source_id, pid, tid, device_id FROM late),
tids AS MATERIALIZED (SELECT DISTINCT source_id, pid, tid FROM thr),
ev AS MATERIALIZED (  -- the threads' ranges, with what their names mark
    SELECT source_id, pid, tid, event_id, parent_id, depth, start_ns, end_ns, name, category,
           CASE WHEN m0 = 'plan' THEN CASE WHEN dur_ns >= getvariable('plan_min_ns')
                                           THEN 'plan' END
                ELSE m0 END AS mark
    FROM (SELECT e.*, tk_host_mark(e.category, e.name) AS m0
          FROM events e
          JOIN tids t ON t.source_id = e.source_id AND t.pid = e.pid AND t.tid = e.tid
          WHERE NOT coalesce(e.is_instant, false) AND e.end_ns > e.start_ns)
),
api AS (
    SELECT a.source_id, a.pid, a.tid, a.start_ns, a.end_ns, a.name,
           CASE WHEN a.correlation_id IS NOT NULL THEN 1 ELSE 0 END AS is_launch,
           CASE WHEN regexp_matches(a.name, '^(cuda|cu|hip)(Malloc|Free|MemAlloc|MemFree|HostAlloc|HostFree|MemHostAlloc|MemHostFree)')
                THEN 1 ELSE 0 END AS is_alloc
    FROM api_calls a
    JOIN tids t ON t.source_id = a.source_id AND t.pid = a.pid AND t.tid = a.tid
    WHERE a.end_ns > a.start_ns
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
    WHERE end_ns - start_ns >= getvariable('plan_min_ns') AND is_alloc = 0
      AND tk_sync_kind(name) IS NULL AND NOT tk_is_graph_launch(name)
),
host AS (  -- the host boundaries: o orders those at one instant (ends, then gaps, then starts)
    SELECT source_id, pid, tid, start_ns AS t, 5 AS o, depth AS sub, event_id AS ev, event_id AS eid,
           false AS is_end, 0 AS is_api, CASE WHEN mark IS NOT NULL THEN 1 ELSE 0 END AS is_mark,
           0 AS d_api, 0 AS d_launch, 0 AS d_alloc, 0 AS d_sync, 0 AS d_copy,
           CASE WHEN mark = 'compile' THEN 1 WHEN mark = 'plan' THEN 4096 ELSE 0 END AS d_comp,  -- plan: 4096
           CASE WHEN mark = 'data' THEN 1 ELSE 0 END AS d_data,
           CASE WHEN mark = 'rank_wait' THEN 1 ELSE 0 END AS d_rank
    FROM ev
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 0, -coalesce(depth, 0), coalesce(parent_id, -1), event_id, true, 0, 0,
           0, 0, 0, 0, 0,
           CASE WHEN mark = 'compile' THEN -1 WHEN mark = 'plan' THEN -4096 ELSE 0 END,
           CASE WHEN mark = 'data' THEN -1 ELSE 0 END,
           CASE WHEN mark = 'rank_wait' THEN -1 ELSE 0 END
    FROM ev
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 0, NULL, NULL, false, 1, 0,
           1 - is_alloc, is_launch, is_alloc, 0, 0, 0, 0, 0
    FROM api
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 0, NULL, NULL, true, 0, 0,
           is_alloc - 1, 0, -is_alloc, 0, 0, 0, 0, 0
    FROM api
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 1, NULL, NULL, false, 0, 0,
           0, 0, 0, 1 - is_copy, is_copy, 0, 0, 0
    FROM syncs
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 1, NULL, NULL, true, 0, 0,
           0, 0, 0, is_copy - 1, -is_copy, 0, 0, 0
    FROM syncs
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 4, 2, NULL, NULL, false, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0
    FROM comp
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 1, 2, NULL, NULL, true, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0
    FROM comp
),
bounds AS (  -- per (thread, GPU): the host boundaries and the late gaps' starts and ends
    SELECT h.*, t.device_id, NULL::BIGINT AS gap
    FROM host h
    JOIN thr t ON t.source_id = h.source_id AND t.pid = h.pid AND t.tid = h.tid
    UNION ALL
    SELECT source_id, pid, tid, start_ns, 3, 0, NULL, NULL, false, 0, 0,
           0, 0, 0, 0, 0, 0, 0, 0, device_id, gap_id
    FROM late
    UNION ALL
    SELECT source_id, pid, tid, end_ns, 2, 0, NULL, NULL, true, 0, 0,
           0, 0, 0, 0, 0, 0, 0, 0, device_id, 0
    FROM late
),
sweep AS MATERIALIZED (
    SELECT source_id, pid, tid, device_id, t, eid, is_end,
           lead(t) OVER (PARTITION BY source_id, pid, tid, device_id ORDER BY t, o, sub, eid) AS next_t,
           last_value(gap IGNORE NULLS) OVER w AS cur_gap,
           last_value(ev IGNORE NULLS) OVER w AS cur_ev,
           max(CASE WHEN is_api = 1 THEN t END) OVER w AS api_t,
           max(CASE WHEN is_mark = 1 THEN t END) OVER w AS mark_t,
           sum(d_api) OVER w AS n_api, sum(d_launch) OVER w AS n_launch, sum(d_alloc) OVER w AS n_alloc,
           sum(d_sync) OVER w AS n_sync, sum(d_copy) OVER w AS n_copy, sum(d_comp) OVER w AS n_comp,
           sum(d_data) OVER w AS n_data, sum(d_rank) OVER w AS n_rank
    FROM bounds
    WINDOW w AS (PARTITION BY source_id, pid, tid, device_id ORDER BY t, o, sub, eid ROWS UNBOUNDED PRECEDING)
),
launched AS (  -- per range: API calls with a correlation id started inside it
    SELECT source_id, pid, tid, device_id, eid,
           max(CASE WHEN is_end THEN n_launch END) - max(CASE WHEN NOT is_end THEN n_launch END) AS launches
    FROM sweep WHERE eid IS NOT NULL
    GROUP BY ALL
),
api_at AS (  -- the API call started last at an instant (the last of those that start together)
    SELECT source_id, pid, tid, start_ns AS t, max(name) AS name FROM api GROUP BY ALL
),
mark_at AS (  -- the marking event started last at an instant (the innermost of those)
    SELECT source_id, pid, tid, start_ns AS t, arg_max(name, depth) AS name FROM ev
    WHERE mark IS NOT NULL GROUP BY ALL
),
pieces AS (
    SELECT s.source_id, s.device_id, s.pid, s.tid, s.cur_gap AS gap_id, s.t AS start_ns, s.next_t AS end_ns,
           CASE WHEN s.n_copy > 0 THEN 'copy'
                WHEN s.n_sync > 0 THEN 'sync'
                WHEN s.n_comp % 4096 > 0 THEN 'compile'
                WHEN s.n_data > 0 THEN 'data'
                WHEN s.n_rank > 0 THEN 'rank_wait'
                WHEN s.n_alloc > 0 THEN 'cpu_op'
                WHEN s.n_comp > 0 THEN 'compile'  -- in a long cuDNN / cuBLAS op (plan), no allocator call
                WHEN s.n_api > 0 THEN 'launch'
                WHEN l.end_ns - l.start_ns < getvariable('dispatch_max_ns') THEN 'launch'
                WHEN e.event_id IS NULL THEN 'untraced'
                WHEN coalesce(n.launches, 0) = 0 OR tk_is_op_range(e.category, e.name) THEN 'cpu_op'
                ELSE 'untraced'
           END AS category,
           CASE WHEN s.n_copy > 0 OR s.n_sync > 0 OR s.n_alloc > 0 OR s.n_api > 0 THEN coalesce(ca.name, e.name)
                WHEN s.n_comp > 0 OR s.n_data > 0 OR s.n_rank > 0 THEN coalesce(cm.name, e.name)
                ELSE e.name END AS host_op,
           -- the host's own code, or a range on its way to a launch: after a draining sync, the
           -- sync's cost
           s.n_copy + s.n_sync + s.n_comp + s.n_data + s.n_rank + s.n_alloc = 0
             AND (s.n_api > 0 OR e.event_id IS NULL OR coalesce(n.launches, 0) > 0) AS own_code,
           l.start_ns AS gap_start_ns, l.end_ns AS gap_end_ns, l.sync_ns
    FROM sweep s
    JOIN late l ON l.gap_id = s.cur_gap
    LEFT JOIN ev e ON e.source_id = s.source_id AND e.pid = s.pid AND e.tid = s.tid AND e.event_id = s.cur_ev
    LEFT JOIN api_at ca ON ca.source_id = s.source_id AND ca.pid = s.pid AND ca.tid = s.tid AND ca.t = s.api_t
    LEFT JOIN mark_at cm ON cm.source_id = s.source_id AND cm.pid = s.pid AND cm.tid = s.tid AND cm.t = s.mark_t
    LEFT JOIN launched n
      ON n.source_id = s.source_id AND n.pid = s.pid AND n.tid = s.tid AND n.device_id = s.device_id
     AND n.eid = s.cur_ev
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
