-- sync_stalls: host time blocked in synchronizing calls, per call and call site, and in total.
--
-- Definition: aggregates `host_syncs` (explicit synchronize calls, blocking copies, copies into
-- pageable memory such as tensor.item()) per (source_id, name, kind, call_site); the row with
-- name NULL is the total of the source. share_pct is the blocked time as a share of the
-- source's span (sources.end_ns - sources.start_ns).
--
-- Uses: host_syncs
--
-- Columns:
--   source_id       INTEGER  the source
--   name            VARCHAR  API name (NULL on the total row)
--   kind            VARCHAR  'explicit', 'blocking_copy', 'pageable_copy' (NULL on the total row)
--   call_site       VARCHAR  innermost enclosing host range (NULL on the total row or if none)
--   calls           BIGINT   number of calls
--   total_ns        BIGINT   summed blocked time, ns
--   avg_ns          DOUBLE   mean blocked time, ns
--   max_ns          BIGINT   longest call, ns
--   share_pct       DOUBLE   100 * total_ns / source span
--   gpu_ops_waited  BIGINT   GPU operations that finished while the calls were blocked
CREATE OR REPLACE VIEW sync_stalls AS
SELECT h.source_id, h.name, h.kind, h.call_site, count(*) AS calls, sum(h.dur_ns)::BIGINT AS total_ns,
       avg(h.dur_ns) AS avg_ns, max(h.dur_ns) AS max_ns,
       100.0 * sum(h.dur_ns) / nullif(any_value(s.end_ns - s.start_ns), 0) AS share_pct,
       sum(h.gpu_ops_waited)::BIGINT AS gpu_ops_waited
FROM host_syncs h JOIN sources s USING (source_id)
GROUP BY GROUPING SETS ((h.source_id, h.name, h.kind, h.call_site), (h.source_id))
ORDER BY h.source_id, h.name NULLS FIRST, total_ns DESC;
