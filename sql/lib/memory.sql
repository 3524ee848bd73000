-- lib/memory: device memory as the allocators saw it.
--
-- Includes: (none)
--
-- tk_is_device_memory(memory_kind) -> BOOLEAN
--   a `memory_events` row of GPU memory: memory_kind 'device', 'device_static' or 'array' (host,
--   pinned, pageable and managed memory are not counted as GPU memory).
--
-- tk_memory_series() -> TABLE (source_id, device_id, allocator, memory_kind, ts_ns, kind, bytes,
--                              address, pid, tid, correlation_id, rid, ord, allocated, reserved,
--                              allocated_before)
--   every device-memory event (`tk_is_device_memory`) with the allocator's totals right after it,
--   per lane = (source_id, device_id, allocator): allocated / reserved = the totals the source
--   recorded (torch.profiler's "Total Allocated" / "Total Reserved"), else (nsys: the driver's
--   view, allocator 'cuda') both = the running sum of allocated minus freed bytes since the capture
--   started. Events are ordered by time, frees before allocations at the same nanosecond, then
--   address and bytes: ord = 1, 2, ... in that order per lane; rid = a row id unique over the
--   table (an identifier, not an order).
--   allocated_before = allocated minus the event's own signed bytes (the level just before it).
CREATE OR REPLACE MACRO tk_is_device_memory(memory_kind) AS memory_kind IN ('device', 'device_static', 'array');

CREATE OR REPLACE MACRO tk_memory_series() AS TABLE
    SELECT source_id, device_id, allocator, memory_kind, ts_ns, kind, bytes, address, pid, tid,
           correlation_id, rid,
           row_number() OVER (PARTITION BY source_id, device_id, allocator ORDER BY ts_ns, kind = 'alloc', address, bytes, rid) AS ord,
           coalesce(allocated_bytes, run) AS allocated,
           coalesce(reserved_bytes, run) AS reserved,
           coalesce(allocated_bytes, run) - CASE kind WHEN 'alloc' THEN bytes ELSE -bytes END AS allocated_before
    FROM (SELECT m.*, sum(CASE kind WHEN 'alloc' THEN bytes ELSE -bytes END) OVER (
                     PARTITION BY source_id, device_id, allocator
                     ORDER BY ts_ns, kind = 'alloc', address, bytes, rid ROWS UNBOUNDED PRECEDING)::BIGINT AS run
          FROM (SELECT *, row_number() OVER () AS rid FROM memory_events
                WHERE tk_is_device_memory(memory_kind) AND device_id IS NOT NULL) m);
