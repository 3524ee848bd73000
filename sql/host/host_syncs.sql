-- host_syncs: every host API call that blocks its thread until GPU work finishes.
--
-- Definition (the rule is `tk_sync_calls()` of sql/lib/host_calls.sql): an `api_calls` row is
-- synchronizing when
--   * kind 'explicit': its name is a device/stream/event/context synchronize call
--     (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, cudaStreamQuery is
--     NOT included; cu{Ctx,Stream,Event}Synchronize; hip{Device,Stream,Event}Synchronize), or
--   * kind 'blocking_copy': it is a synchronous copy API (cudaMemcpy, cudaMemcpy2D/3D,
--     cudaMemcpyToSymbol/FromSymbol, cuMemcpyDtoH/HtoD/DtoD, hipMemcpy), or
--   * kind 'pageable_copy': it launched a device-to-host memcpy into pageable memory
--     (`memops.dst_kind = 'pageable'`), which the driver performs synchronously even when called
--     as cudaMemcpyAsync. This is what `tensor.item()` / `.cpu()` / `print(tensor)` do.
-- `call_site` is the innermost `events` range (torch op, annotation, NVTX) on the same thread
-- that encloses the call (start_ns <= call start, end_ns >= call end, not an instant; innermost =
-- greatest depth, events without depth last, then latest start), e.g.
-- `aten::_local_scalar_dense` for `.item()`.
-- `gpu_ops_waited` / `last_gpu_op` describe the GPU operations (`gpu_activity`) of the same
-- process (or without a known process) that ended while the call was blocked, i.e. with
-- start_ns < end <= end_ns (the work it waited for); last_gpu_op is the one that ended last
-- (ties: the lowest name).
-- Method (no effect on the result): enclosing ranges are found through buckets of their start
-- (per length class), the ops through running counts per end time, so the cost grows with the
-- number of events and ops, not with their product with the number of calls.
--
-- Uses: gpu_activity
--
-- Columns:
--   source_id       INTEGER  the source
--   pid             BIGINT   process
--   tid             BIGINT   thread
--   name            VARCHAR  API name
--   kind            VARCHAR  'explicit', 'blocking_copy' or 'pageable_copy'
--   start_ns        BIGINT   call start, ns
--   end_ns          BIGINT   call end, ns
--   dur_ns          BIGINT   time the thread was blocked, ns
--   correlation_id  BIGINT   the call's correlation id
--   call_site       VARCHAR  innermost enclosing host range on the thread (NULL if none)
--   gpu_ops_waited  BIGINT   GPU ops of this process that ended during the call
--   last_gpu_op     VARCHAR  name of the last of them to end
CREATE OR REPLACE VIEW host_syncs AS
WITH calls AS (SELECT * FROM tk_sync_calls()),  -- the rule: sql/lib/host_calls.sql
keys AS (SELECT DISTINCT source_id, pid, tid, start_ns, end_ns FROM calls),
-- call_site. An enclosing range has length >= the call's and starts at most its length before
-- the call: ranges are bucketed by level = floor(log2(length)) + 1 (2^level > length) and
-- bucket = start >> level, so those enclosing a call lie in buckets (call start >> level) and
-- the one before, of each level present on the thread
levels AS (  -- the length classes of the ranges of each thread with calls
    SELECT DISTINCT source_id, pid, tid, floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl
    FROM events
    WHERE NOT is_instant AND (source_id, pid, tid) IN (SELECT source_id, pid, tid FROM keys)
),
probes AS (
    SELECT k.*, l.lvl, (k.start_ns >> l.lvl) - b.d AS bucket
    FROM keys k
    JOIN levels l USING (source_id, pid, tid)
    CROSS JOIN (VALUES (0), (1)) b(d)
),
site AS (
    SELECT q.source_id, q.pid, q.tid, q.start_ns, q.end_ns,
           arg_max(e.name, {'known': e.depth IS NOT NULL, 'depth': e.depth, 'start': e.start_ns}) AS call_site
    FROM probes q
    JOIN (SELECT source_id, pid, tid, name, depth, start_ns, end_ns,
                 floor(log2(greatest(end_ns - start_ns, 1)))::INTEGER + 1 AS lvl
          FROM events WHERE NOT is_instant) e
      ON e.source_id = q.source_id AND e.pid = q.pid AND e.tid = q.tid AND e.lvl = q.lvl
     AND (e.start_ns >> e.lvl) = q.bucket
    WHERE e.start_ns <= q.start_ns AND e.end_ns >= q.end_ns
    GROUP BY ALL
),
-- GPU ops that ended during the call: per (source, pid; ops without pid apart) the number of ops
-- ended up to each end time, looked up at the call's start and end (ASOF)
ends AS (
    SELECT *, (sum(n) OVER (PARTITION BY source_id, no_pid, pidk ORDER BY end_ns
                            ROWS UNBOUNDED PRECEDING))::BIGINT AS upto
    FROM (SELECT source_id, pid IS NULL AS no_pid, coalesce(pid, 0) AS pidk, end_ns, count(*) AS n
          FROM gpu_activity
          WHERE source_id IN (SELECT source_id FROM keys)
          GROUP BY ALL)
),
waited AS (
    SELECT k.source_id, k.pid, k.start_ns, k.end_ns,
           coalesce(h1.upto, 0) - coalesce(l1.upto, 0) + coalesce(h2.upto, 0) - coalesce(l2.upto, 0) AS n,
           greatest(CASE WHEN h1.end_ns > k.start_ns THEN h1.end_ns END,
                    CASE WHEN h2.end_ns > k.start_ns THEN h2.end_ns END) AS last_end
    FROM (SELECT DISTINCT source_id, pid, start_ns, end_ns FROM keys) k
    ASOF LEFT JOIN ends h1 ON h1.source_id = k.source_id AND NOT h1.no_pid AND h1.pidk = k.pid AND k.end_ns >= h1.end_ns
    ASOF LEFT JOIN ends l1 ON l1.source_id = k.source_id AND NOT l1.no_pid AND l1.pidk = k.pid AND k.start_ns >= l1.end_ns
    ASOF LEFT JOIN ends h2 ON h2.source_id = k.source_id AND h2.no_pid AND k.end_ns >= h2.end_ns
    ASOF LEFT JOIN ends l2 ON l2.source_id = k.source_id AND l2.no_pid AND k.start_ns >= l2.end_ns
),
last_op AS (  -- the name of the last of them (ties: the lowest name)
    SELECT w.source_id, w.pid, w.start_ns, w.end_ns, min(g.name) AS name
    FROM waited w
    JOIN gpu_activity g
      ON g.source_id = w.source_id AND g.end_ns = w.last_end AND (g.pid IS NULL OR g.pid = w.pid)
    GROUP BY ALL
)
SELECT c.source_id, c.pid, c.tid, c.name, c.kind, c.start_ns, c.end_ns, c.dur_ns, c.correlation_id,
       s.call_site, coalesce(w.n, 0)::BIGINT AS gpu_ops_waited, o.name AS last_gpu_op
FROM calls c
LEFT JOIN site s
  ON s.source_id = c.source_id AND s.pid = c.pid AND s.tid = c.tid AND s.start_ns = c.start_ns
 AND s.end_ns = c.end_ns
LEFT JOIN waited w
  ON w.source_id = c.source_id AND w.pid IS NOT DISTINCT FROM c.pid AND w.start_ns = c.start_ns
 AND w.end_ns = c.end_ns
LEFT JOIN last_op o
  ON o.source_id = c.source_id AND o.pid IS NOT DISTINCT FROM c.pid AND o.start_ns = c.start_ns
 AND o.end_ns = c.end_ns;
