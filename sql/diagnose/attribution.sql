-- attribution: the statements of the findings from where a steady window's idle time went
-- (tracekit/diagnose/attribution.py: one finding per idle category of time_breakdown holding at
-- least cause_min_pct % of the window). $parameters as in scopes.sql; $sid, $dev the device,
-- $w0, $w1 its steady window (idle_attribution rows whose gap starts inside it).

-- breakdown: a device's time_breakdown rows of part 'steady'.
SELECT state, category, ns, pct, part_start_ns, part_end_ns, part_ns FROM time_breakdown
WHERE source_id = $sid AND device_id = $dev AND part = 'steady';

-- queued: the idle time of category 'queued' in gaps of at least $kernel_wait_ns (dependencies;
-- shorter ones are the GPU's own latency between queued kernels).
--   ns  BIGINT
SELECT coalesce(sum(dur_ns), 0)::BIGINT AS ns FROM idle_attribution
WHERE source_id = $sid AND device_id = $dev AND start_ns >= $w0 AND start_ns < $w1 AND category = 'queued'
  AND gap_end_ns - gap_start_ns >= $kernel_wait_ns;

-- host_ops: evidence: a category's idle time by host operation (host_op), its ten largest:
-- gaps (distinct gaps), ns.
--   $category  the idle category
SELECT host_op, count(DISTINCT gap_start_ns) AS gaps, sum(dur_ns)::BIGINT AS ns
FROM idle_attribution WHERE source_id = $sid AND device_id = $dev AND start_ns >= $w0 AND start_ns < $w1 AND category = $category
GROUP BY host_op ORDER BY ns DESC, host_op LIMIT 10;

-- alloc_share: the share (0..1) of a category's idle time the host spent in driver allocator
-- calls (`tk_is_alloc_call`).
--   $category  the idle category
SELECT coalesce(sum(dur_ns) FILTER (WHERE tk_is_alloc_call(host_op)) / nullif(sum(dur_ns), 0), 0) AS share
FROM idle_attribution WHERE source_id = $sid AND device_id = $dev AND start_ns >= $w0 AND start_ns < $w1 AND category = $category;

-- gaps: evidence: a category's ten gaps with the most of its time: gap_start_ns, gap_end_ns,
-- gap_ns, ns (the category's time in it), host_op (the longest one).
--   $category  the idle category
SELECT gap_start_ns, gap_end_ns, gap_end_ns - gap_start_ns AS gap_ns, sum(dur_ns)::BIGINT AS ns,
       arg_max(host_op, dur_ns) AS host_op
FROM idle_attribution WHERE source_id = $sid AND device_id = $dev AND start_ns >= $w0 AND start_ns < $w1 AND category = $category
GROUP BY ALL ORDER BY ns DESC, gap_start_ns LIMIT 10;

-- gap_stats: a category's gaps and their median length (med_gap_ns).
--   $category  the idle category
SELECT count(DISTINCT gap_start_ns) AS gaps, median(gap_end_ns - gap_start_ns) AS med_gap_ns
FROM idle_attribution WHERE source_id = $sid AND device_id = $dev AND start_ns >= $w0 AND start_ns < $w1 AND category = $category;

-- launch_summary: evidence of launch_bound: the device's launch_summary row (every column).
SELECT * FROM launch_summary WHERE source_id = $sid AND device_id = $dev;

-- sync_stalls: evidence of sync_stall: a source's synchronizing calls by call, most time first.
SELECT name, kind, call_site, calls, total_ns, max_ns, gpu_ops_waited
FROM sync_stalls WHERE source_id = $sid AND name IS NOT NULL
ORDER BY total_ns DESC;

-- time_breakdown: evidence: a device's time_breakdown (every part).
SELECT part, state, category, ns, pct FROM time_breakdown
WHERE source_id = $sid AND device_id = $dev;
