-- rank_imbalance: the statements of rank_imbalance (a rank's kernels waiting in collectives for
-- later ranks, at least imbalance_pct % of its steady window). $parameters as in scopes.sql;
-- $steady is the steady_collectives subquery (given as SQL).

-- steady_collectives: the rank_imbalance rows inside the steady window of the rank's GPU (NCCL's
-- first collectives wait for every rank's initialisation, not for an imbalance); a subquery.
(SELECT r.* FROM rank_imbalance r
 JOIN ranks k ON k.source_id = r.source_id AND k.pid IS NOT DISTINCT FROM r.pid
 JOIN steady_state s ON s.source_id = r.source_id AND s.device_id = r.device_id
 WHERE r.arrival_ns - coalesce(k.clock_offset_ns, 0) >= s.window_start_ns
   AND r.arrival_ns - coalesce(k.clock_offset_ns, 0) < s.window_end_ns);

-- ranks: per job and rank (its source, pid, device): collectives, wait_ns, transfer_ns,
-- comm_kernel_ns, max_skew_ns, times_slowest (collectives it arrived last at).
SELECT job_id, rank, source_id, pid, device_id, count(*) AS collectives, sum(wait_ns)::BIGINT AS wait_ns,
      sum(comm_ns)::BIGINT AS transfer_ns,
      sum(dur_ns)::BIGINT AS comm_kernel_ns, max(skew_ns) AS max_skew_ns,
      count(*) FILTER (WHERE slowest_rank = rank) AS times_slowest
FROM $steady GROUP BY ALL ORDER BY job_id, rank;

-- job_ranks: evidence: a job's ranks (the columns of ranks but transfer_ns).
--   $job  the job
SELECT job_id, rank, source_id, pid, device_id, count(*) AS collectives, sum(wait_ns)::BIGINT AS wait_ns,
       sum(dur_ns)::BIGINT AS comm_kernel_ns, max(skew_ns) AS max_skew_ns,
       count(*) FILTER (WHERE slowest_rank = rank) AS times_slowest
FROM $steady WHERE job_id = $job GROUP BY ALL ORDER BY rank;

-- top_skew: evidence: a job's ten collectives with the largest skew.
--   $job  the job
SELECT name, seq, rank, arrival_ns, dur_ns, wait_ns, skew_ns, comm_ns, slowest_rank
FROM $steady WHERE job_id = $job ORDER BY skew_ns DESC, seq, rank LIMIT 10;

-- slow_rank_path: evidence: a rank's time on its job's steps' critical path (critical_path),
-- communication apart, by kind and category: ns, steps, path_pct (share of the job's path).
--   $job  the job; $rank  the rank
SELECT kind, category, sum(ns)::BIGINT AS ns, count(DISTINCT step) AS steps,
       100.0 * sum(ns) / (SELECT sum(ns) FROM critical_path WHERE job_id = $job) AS path_pct
FROM critical_path WHERE job_id = $job AND rank = $rank AND kind <> 'communication'
GROUP BY ALL ORDER BY ns DESC, kind, category;
