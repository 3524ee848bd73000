-- sync_stall: the statements of the --phase rule sync_stall (the GPU drained while the host was
-- blocked in synchronizing calls for at least sync_wait_pct % of the phase's window).
-- $parameters as in scopes.sql.

-- host_syncs: the synchronizing calls made inside the instances of a phase, by call, most time first.
--   name, kind, call_site  host_syncs' columns
--   calls           BIGINT  calls
--   total_ns        BIGINT  their time
--   max_ns          BIGINT  the longest
--   gpu_ops_waited  BIGINT  host_syncs.gpu_ops_waited summed
--   $sid  the source; $phase  the phase
SELECT h.name, h.kind, h.call_site, count(*) AS calls, sum(h.dur_ns)::BIGINT AS total_ns,
       max(h.dur_ns) AS max_ns, sum(h.gpu_ops_waited)::BIGINT AS gpu_ops_waited
FROM host_syncs h JOIN phase_instances i
  ON i.source_id = h.source_id AND i.pid = h.pid AND i.tid = h.tid
 AND h.start_ns >= i.start_ns AND h.start_ns < i.end_ns
WHERE h.source_id = $sid AND i.phase = $phase
GROUP BY ALL ORDER BY total_ns DESC;
