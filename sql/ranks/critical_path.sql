-- critical_path: per step of a multi-rank job, the step's time along the chain of ranks that ended last, by (rank, what it was doing).
--
-- Definition: the ranks and their common clock are those of `ranks`; every time below is on it
-- (start_ns + clock_offset_ns).
-- A rank's steps are steady_state's rule 1, per rank: the instances (`phase_instances`, of the
-- rank's process for a 'process' rank) that launched GPU work of a phase that is no library's
-- own range (`tk_is_library_range`) and has at least min_step_repeats such instances on the
-- rank; of several such phases, the one with the most summed window time (ProfilerStep rather
-- than the forward inside it). The n-th step of every rank is step n of the job:
--   step_start_ns = the earliest start of step n over the ranks (`phase_instances.start_ns`)
--   step_end_ns   = the latest window end of step n over the ranks (`window_end_ns`); the rank
--                   reaching it is the one that finished last
-- A job whose ranks have no steps is one step (step 0): from the earliest to the latest
-- operation of its ranks' GPUs (`gpu_utilization` windows).
-- The collectives are those of `rank_imbalance` (matched by kernel name and occurrence); one
-- belongs to the step that started last at or before its last arrival (arrival_ns + wait_ns), when
-- that arrival lies before the step's end (steps of a job may overlap). The chain walks back from
-- step_end_ns on the rank that finished last; at each collective it jumps to the rank that arrived
-- at it last (`rank_imbalance.slowest_rank`) at that arrival. Seen forward, with the step's
-- collectives C_1..C_n ordered by last arrival a_i, the chain is: rank slowest(C_1) from
-- step_start_ns to a_1; then for each C_i the collective's transfer on the rank the chain goes on
-- with (slowest(C_i+1), after C_n the rank that finished last) from a_i to that rank's end of C_i;
-- then that rank's own work up to a_i+1 (after C_n up to step_end_ns). Each boundary is clamped
-- between the one before it and the next a (or step_end_ns), so the segments tile the step: per
-- step, sum(ns) = step_ns. Waiting for another rank never lies on the chain (it jumps to the rank
-- waited for); a rank that did not take part in C_i ends the transfer at a_i.
-- What the rank was doing (a row per segment and kind):
--   'communication'  a transfer segment (the collective kernel on the chain's rank, a_i to its end)
--   'compute'        in a work segment, the rank's GPU busy (`gpu_busy`: kernels, copies; a
--                    communication kernel that is no collective on the chain counts here)
--   'idle'           in a work segment, the rank's GPU idle, by `idle_attribution` category
--                    (category: sync, copy, compile, data, rank_wait, launch, cpu_op, untraced,
--                    queued, unknown), or 'outside': before the GPU's first or after its last op
-- The largest row of a step (or the largest sum per rank and kind) is what would shorten it.
-- Method (no effect on the result): a collective's step is found by an ASOF join; the busy and idle time of a work segment are running sums over
-- the GPU's busy periods and over each category's idle pieces (both disjoint), looked up at the
-- segment's two ends (ASOF joins), not a join of the segments with every period.
-- Parameters:
--   min_step_repeats  (steady_state)
--
-- Uses: gpu_busy, gpu_utilization, idle_attribution, phase_instances, rank_imbalance, ranks
--
-- Columns:
--   job_id         INTEGER  the job (`ranks`)
--   step           BIGINT   the step: 1.. (the n-th step of each rank), 0 for a job without steps
--   step_start_ns  BIGINT   earliest start of the step over the ranks, ns (common clock)
--   step_end_ns    BIGINT   latest end of the step over the ranks, ns
--   step_ns        BIGINT   step_end_ns - step_start_ns
--   seg            BIGINT   the segment's place along the chain, 1 = earliest
--   rank           INTEGER  the rank the chain is on
--   source_id      INTEGER  that rank's source
--   device_id      INTEGER  that rank's GPU
--   kind           VARCHAR  'compute', 'communication' or 'idle'
--   category       VARCHAR  for 'idle', the idle_attribution category or 'outside'; NULL otherwise
--   collective     VARCHAR  the collective kernel: transferred ('communication'), or the one the
--                           work segment leads to (NULL after the step's last collective)
--   seq            BIGINT   that collective's occurrence (`rank_imbalance.seq`)
--   seg_start_ns   BIGINT   segment start, ns (common clock)
--   seg_end_ns     BIGINT   segment end, ns
--   ns             BIGINT   time of this kind in the segment, ns
--   pct            DOUBLE   100 * ns / step_ns
CREATE OR REPLACE VIEW critical_path AS
WITH r AS (SELECT job_id, rank, source_id, pid, device_id, clock_offset_ns AS off FROM ranks),
inst AS (  -- each rank's instances of non-library phases that launched GPU work
    SELECT r.job_id, r.rank, i.phase, i.start_ns + r.off AS s, i.window_end_ns + r.off AS e, i.window_ns
    FROM r
    JOIN phase_instances i ON i.source_id = r.source_id AND (r.pid IS NULL OR i.pid = r.pid)
    JOIN events ev ON ev.source_id = i.source_id AND ev.event_id = i.event_id
    WHERE i.gpu_ops > 0 AND NOT tk_is_library_range(ev.domain, i.name)
),
rep AS (  -- each rank's step phase: the repeated one with the most time
    SELECT job_id, rank, arg_max(phase, (tot, phase)) AS phase
    FROM (SELECT job_id, rank, phase, sum(window_ns) AS tot FROM inst GROUP BY ALL
          HAVING count(*) >= getvariable('min_step_repeats'))
    GROUP BY ALL
),
rs AS (
    SELECT i.job_id, i.rank, i.s, i.e,
           row_number() OVER (PARTITION BY i.job_id, i.rank ORDER BY i.s, i.e) AS step
    FROM inst i JOIN rep p ON p.job_id = i.job_id AND p.rank = i.rank AND p.phase = i.phase
),
whole AS (  -- a job without steps: its GPUs' span
    SELECT r.job_id, 0::BIGINT AS step, min(u.window_start_ns + r.off) AS step_start,
           max(u.window_end_ns + r.off) AS step_end,
           arg_max(r.rank, (u.window_end_ns + r.off, r.rank)) AS last_rank
    FROM r
    JOIN gpu_utilization u ON u.source_id = r.source_id AND u.device_id = r.device_id
    LEFT JOIN (SELECT DISTINCT job_id FROM rs) h ON h.job_id = r.job_id
    WHERE h.job_id IS NULL
    GROUP BY r.job_id
),
steps AS (
    SELECT job_id, step, min(s) AS step_start, max(e) AS step_end, arg_max(rank, (e, rank)) AS last_rank
    FROM rs GROUP BY ALL
    UNION ALL
    SELECT * FROM whole
),
coll AS (  -- each collective: its last arrival and the rank that made it
    SELECT job_id, name, seq, max(arrival_ns + wait_ns) AS a, max(slowest_rank) AS slow
    FROM rank_imbalance GROUP BY ALL
),
inc AS (  -- each collective in the step that started last before its last arrival
    SELECT st.job_id, st.step, st.step_start, st.step_end, st.last_rank, c.name, c.seq, c.a, c.slow
    FROM coll c ASOF JOIN steps st ON st.job_id = c.job_id AND c.a >= st.step_start
    WHERE c.a < st.step_end
),
sc AS (  -- the step's collectives in order of last arrival, with the rank the chain goes on with
    SELECT job_id, step, step_start, step_end, name, seq, a, slow,
           row_number() OVER (PARTITION BY job_id, step ORDER BY a, name, seq) AS i,
           coalesce(lead(a) OVER (PARTITION BY job_id, step ORDER BY a, name, seq), step_end) AS next_a,
           coalesce(lead(slow) OVER (PARTITION BY job_id, step ORDER BY a, name, seq), last_rank) AS next_rank
    FROM inc
),
tr AS (  -- the transfer of each collective, ending where the rank the chain goes on with ends it
    SELECT sc.*, least(greatest(coalesce(ri.arrival_ns + ri.dur_ns, sc.a), sc.a), sc.next_a) AS e
    FROM sc
    LEFT JOIN rank_imbalance ri
      ON ri.job_id = sc.job_id AND ri.name = sc.name AND ri.seq = sc.seq AND ri.rank = sc.next_rank
),
segs AS (  -- the chain: work (w) and transfer (t) segments
    SELECT job_id, step, step_start, step_end, 2 * i - 1 AS seg, slow AS rank, 'w' AS t, name, seq,
           coalesce(lag(e) OVER (PARTITION BY job_id, step ORDER BY i), step_start) AS x, a AS y
    FROM tr
    UNION ALL
    SELECT job_id, step, step_start, step_end, 2 * i, next_rank, 't', name, seq, a, e FROM tr
    UNION ALL  -- after the last collective (or the whole step without one)
    SELECT st.job_id, st.step, st.step_start, st.step_end, 2 * coalesce(m.n, 0) + 1, st.last_rank, 'w',
           NULL, NULL, coalesce(m.e, st.step_start), st.step_end
    FROM steps st
    LEFT JOIN (SELECT job_id, step, max(i) AS n, arg_max(e, i) AS e FROM tr GROUP BY ALL) m
      ON m.job_id = st.job_id AND m.step = st.step
),
sg AS (
    SELECT s.*, r.source_id, r.device_id, r.off, s.x - r.off AS lx, s.y - r.off AS ly
    FROM segs s JOIN r ON r.job_id = s.job_id AND r.rank = s.rank
    WHERE s.y > s.x
),
pts AS (  -- both ends of each work segment, on its source's clock
    SELECT job_id, step, seg, source_id, device_id, lx AS t, -1 AS sign FROM sg WHERE t = 'w'
    UNION ALL
    SELECT job_id, step, seg, source_id, device_id, ly, 1 FROM sg WHERE t = 'w'
),
bcum AS (  -- the GPU's busy periods (disjoint), with the busy time before each
    SELECT source_id, device_id, start_ns, end_ns,
           sum(dur_ns) OVER (PARTITION BY source_id, device_id ORDER BY start_ns ROWS UNBOUNDED PRECEDING) - dur_ns
               AS before_ns
    FROM gpu_busy
),
busy AS (  -- busy time up to the segment's end less that up to its start
    SELECT p.job_id, p.step, p.seg,
           sum(p.sign * coalesce(b.before_ns + least(p.t, b.end_ns) - b.start_ns, 0)) AS ns
    FROM pts p
    ASOF LEFT JOIN bcum b ON b.source_id = p.source_id AND b.device_id = p.device_id AND p.t >= b.start_ns
    GROUP BY ALL
),
icum AS (  -- the idle pieces (disjoint) of each category, with that category's time before each
    SELECT source_id, device_id, category, start_ns, end_ns,
           sum(dur_ns) OVER (PARTITION BY source_id, device_id, category ORDER BY start_ns
                             ROWS UNBOUNDED PRECEDING) - dur_ns AS before_ns
    FROM idle_attribution
),
pc AS (  -- each end point with each idle category of its GPU
    SELECT p.*, c.category
    FROM pts p
    JOIN (SELECT DISTINCT source_id, device_id, category FROM icum) c
      ON c.source_id = p.source_id AND c.device_id = p.device_id
),
idle AS (
    SELECT p.job_id, p.step, p.seg, p.category,
           sum(p.sign * coalesce(i.before_ns + least(p.t, i.end_ns) - i.start_ns, 0)) AS ns
    FROM pc p
    ASOF LEFT JOIN icum i
      ON i.source_id = p.source_id AND i.device_id = p.device_id AND i.category = p.category AND p.t >= i.start_ns
    GROUP BY ALL
),
parts AS (
    SELECT job_id, step, seg, 'communication' AS kind, NULL AS category, y - x AS ns FROM sg WHERE t = 't'
    UNION ALL
    SELECT job_id, step, seg, 'compute', NULL, ns FROM busy
    UNION ALL
    SELECT job_id, step, seg, 'idle', category, ns FROM idle
    UNION ALL  -- what neither covers: outside the GPU's first-to-last-op window
    SELECT sg.job_id, sg.step, sg.seg, 'idle', 'outside',
           sg.y - sg.x - coalesce(b.ns, 0) - coalesce(i.ns, 0)
    FROM sg
    LEFT JOIN busy b ON b.job_id = sg.job_id AND b.step = sg.step AND b.seg = sg.seg
    LEFT JOIN (SELECT job_id, step, seg, sum(ns) AS ns FROM idle GROUP BY ALL) i
      ON i.job_id = sg.job_id AND i.step = sg.step AND i.seg = sg.seg
    WHERE sg.t = 'w'
)
SELECT sg.job_id, sg.step, sg.step_start AS step_start_ns, sg.step_end AS step_end_ns,
       sg.step_end - sg.step_start AS step_ns, sg.seg, sg.rank, sg.source_id, sg.device_id,
       p.kind, p.category::VARCHAR AS category, sg.name AS collective, sg.seq,
       sg.x AS seg_start_ns, sg.y AS seg_end_ns, p.ns::BIGINT AS ns,
       100.0 * p.ns / (sg.step_end - sg.step_start) AS pct
FROM sg JOIN parts p ON p.job_id = sg.job_id AND p.step = sg.step AND p.seg = sg.seg
WHERE p.ns > 0
ORDER BY sg.job_id, sg.step, sg.seg, p.kind, p.category;
