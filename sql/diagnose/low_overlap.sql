-- low_overlap: the statements of low_overlap (communication mostly not overlapped with compute:
-- less than overlap_low_pct % overlapped, at least overlap_min_pct % of the window exposed).
-- $parameters as in scopes.sql.

-- overlap: a device's overlap row of kind 'comm' (every column).
--   $sid, $dev  the device; $phase  the phase (NULL: the device's window)
SELECT * FROM overlap WHERE source_id = $sid AND device_id = $dev
 AND phase = $phase
 AND kind = 'comm';

-- rank_wait: a device's collectives (rank_imbalance), summed per rank: collectives,
-- comm_kernel_ns (their kernels' time), wait_ns (waiting for other ranks), transfer_ns.
--   $sid, $dev  the device
SELECT rank, count(*) AS collectives, sum(dur_ns)::BIGINT AS comm_kernel_ns,
       sum(wait_ns)::BIGINT AS wait_ns, sum(comm_ns)::BIGINT AS transfer_ns
FROM rank_imbalance WHERE source_id = $sid AND device_id = $dev
GROUP BY rank;
