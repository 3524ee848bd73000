-- host_syncs: every host API call that blocks its thread until GPU work finishes.
--
-- Definition: an `api_calls` row is synchronizing when
--   * kind 'explicit': its name is a device/stream/event/context synchronize call
--     (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, cudaStreamQuery is
--     NOT included; cu{Ctx,Stream,Event}Synchronize; hip{Device,Stream,Event}Synchronize), or
--   * kind 'blocking_copy': it is a synchronous copy API (cudaMemcpy, cudaMemcpy2D/3D,
--     cudaMemcpyToSymbol/FromSymbol, cuMemcpyDtoH/HtoD/DtoD, hipMemcpy), or
--   * kind 'pageable_copy': it launched a device-to-host memcpy into pageable memory
--     (`memops.dst_kind = 'pageable'`), which the driver performs synchronously even when called
--     as cudaMemcpyAsync. This is what `tensor.item()` / `.cpu()` / `print(tensor)` do.
-- `call_site` is the innermost `events` range (torch op, annotation, NVTX) on the same thread
-- that encloses the call, e.g. `aten::_local_scalar_dense` for `.item()`.
-- `gpu_ops_waited` / `last_gpu_op` describe the GPU operations of the same process that ended
-- while the call was blocked (the work it waited for).
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
WITH pageable AS (
    SELECT DISTINCT source_id, pid, correlation_id FROM memops
    WHERE kind = 'memcpy' AND copy_kind = 'DtoH' AND dst_kind = 'pageable'
),
calls AS (
    SELECT a.source_id, a.pid, a.tid, a.name, a.start_ns, a.end_ns, a.dur_ns, a.correlation_id,
           CASE
             WHEN regexp_matches(a.name, '^(cuda|hip)(Device|Stream|Event|Thread)Synchronize$')
               OR regexp_matches(a.name, '^cu(Ctx|Stream|Event)Synchronize$') THEN 'explicit'
             WHEN regexp_matches(a.name, '^(cuda|hip)Memcpy(2D|3D)?(ToSymbol|FromSymbol)?$')
               OR regexp_matches(a.name, '^cuMemcpy(DtoH|HtoD|DtoD|AtoH|HtoA)?$') THEN 'blocking_copy'
             WHEN p.correlation_id IS NOT NULL THEN 'pageable_copy'
           END AS kind
    FROM api_calls a
    LEFT JOIN pageable p
      ON p.source_id = a.source_id AND p.correlation_id = a.correlation_id
     AND (p.pid IS NULL OR p.pid = a.pid)
)
SELECT c.source_id, c.pid, c.tid, c.name, c.kind, c.start_ns, c.end_ns, c.dur_ns, c.correlation_id,
       (SELECT e.name FROM events e
         WHERE e.source_id = c.source_id AND e.pid = c.pid AND e.tid = c.tid
           AND e.start_ns <= c.start_ns AND e.end_ns >= c.end_ns AND NOT e.is_instant
         ORDER BY e.depth DESC NULLS LAST, e.start_ns DESC LIMIT 1) AS call_site,
       (SELECT count(*) FROM gpu_activity g
         WHERE g.source_id = c.source_id AND (g.pid IS NULL OR g.pid = c.pid)
           AND g.end_ns > c.start_ns AND g.end_ns <= c.end_ns) AS gpu_ops_waited,
       (SELECT g.name FROM gpu_activity g
         WHERE g.source_id = c.source_id AND (g.pid IS NULL OR g.pid = c.pid)
           AND g.end_ns > c.start_ns AND g.end_ns <= c.end_ns
         ORDER BY g.end_ns DESC LIMIT 1) AS last_gpu_op
FROM calls c
WHERE c.kind IS NOT NULL;
