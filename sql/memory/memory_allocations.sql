-- memory_allocations: every device-memory allocation with its free (its lifetime), the op or API call that made it, and the allocator's totals after it.
--
-- Definition: the `memory_events` of device memory (`tk_memory_series()`, sql/lib/memory.sql:
-- memory_kind 'device', 'device_static', 'array'), per source, GPU and allocator:
--   free_ns      = the first 'free' of the same address after the allocation (same source, GPU,
--                  allocator); NULL when the trace ends first (still live, or freed after it).
--   allocated_bytes / reserved_bytes = the allocator's totals right after the allocation
--                  (`tk_memory_series()`: as torch.profiler recorded them; for nsys the running sum
--                  of the driver's allocations: the framework's reserved pool plus the buffers
--                  libraries allocate on their own).
--   op           = who allocated: the innermost operator range (`tk_is_op_range`: torch cpu_op, or
--                  an emit_nvtx range under nsys --pytorch) open on the allocating thread, as
--                  `tk_op_name`; else, for nsys, the API call (cudaMalloc, cuMemAlloc, ...) of its
--                  correlation id (the launch rule, `tk_launched`); else NULL. The allocating thread: the event's own (Kineto), or
--                  the API call's (nsys).
-- Frees appear only as free_ns; a free with no allocation in the trace (made before the
-- capture) has no row here but counts in the running sums of `memory_timeline`.
--
-- Uses: (tables only)
--
-- Columns:
--   source_id        INTEGER  the source
--   device_id        INTEGER  GPU index
--   allocator        VARCHAR  'pytorch' (caching allocator blocks) or 'cuda' (driver allocations)
--   memory_kind      VARCHAR  'device', 'device_static' or 'array'
--   address          BIGINT   block address
--   bytes            BIGINT   bytes allocated
--   alloc_ns         BIGINT   allocation time, ns
--   free_ns          BIGINT   free time, ns (NULL: not freed inside the trace)
--   lifetime_ns      BIGINT   free_ns - alloc_ns
--   allocated_bytes  BIGINT   allocator's bytes in use right after the allocation
--   reserved_bytes   BIGINT   allocator's reserved bytes right after it
--   pid              BIGINT   allocating process
--   tid              BIGINT   allocating thread (NULL when unknown)
--   op               VARCHAR  the operator (or API call) that allocated
CREATE OR REPLACE VIEW memory_allocations AS
WITH run AS (  -- each event with its lane's totals (lib/memory) and the next event of its address
    SELECT m.*,
           lead(CASE kind WHEN 'free' THEN ts_ns END) OVER (
               PARTITION BY source_id, device_id, allocator, address ORDER BY ord) AS next_free_ns,
           lead(kind) OVER (PARTITION BY source_id, device_id, allocator, address ORDER BY ord) AS next_kind
    FROM tk_memory_series() m
),
allocs AS (SELECT * FROM run WHERE kind = 'alloc'),
a AS (  -- each allocation with its API call (the one launch rule: tk_launched)
    SELECT r.*, coalesce(r.tid, r.call_tid) AS thread, r.call_name AS api_name,
           coalesce(r.call_start_ns, r.ts_ns) AS at_ns
    FROM tk_launched('allocs') r
),
ops AS (
    SELECT {'s': source_id, 'p': pid, 't': tid} AS key, event_id AS range_id, start_ns, end_ns, source_id,
           tk_op_name(category, name) AS op
    FROM events WHERE tk_is_op_range(category, name) AND pid IS NOT NULL
),
pts AS (SELECT {'s': source_id, 'p': pid, 't': thread} AS key, rid AS point_id, at_ns AS ts FROM a),
inner_op AS (
    SELECT e.point_id, arg_max(o.op, o.start_ns) AS op
    FROM tk_enclosing('ops', 'pts') e
    JOIN ops o ON o.range_id = e.range_id
    JOIN a ON a.rid = e.point_id AND a.source_id = o.source_id
    GROUP BY e.point_id
)
SELECT a.source_id, a.device_id, a.allocator, a.memory_kind, a.address, a.bytes, a.ts_ns AS alloc_ns,
       CASE WHEN a.next_kind = 'free' THEN a.next_free_ns END AS free_ns,
       CASE WHEN a.next_kind = 'free' THEN a.next_free_ns - a.ts_ns END AS lifetime_ns,
       a.allocated AS allocated_bytes, a.reserved AS reserved_bytes,
       a.pid, a.thread AS tid, coalesce(o.op, a.api_name) AS op
FROM a LEFT JOIN inner_op o ON o.point_id = a.rid;
