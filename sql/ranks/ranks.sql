-- ranks: the ranks of multi-GPU jobs: a source per rank, or a process per rank inside one source.
--
-- Definition: a rank is either
--   * 'source': a source with a known `sources.rank` (Kineto rank files, `--rank`). Sources are
--     ranks of one job when they share world_size (NULL counts as one value) and their spans
--     [start_ns, end_ns] + clock_offset_ns overlap on the common clock; job_id = the lowest
--     source_id among them. All GPU work of the source is the rank's.
--   * 'process': a process with GPU work (`kernels.pid`) in a source without a rank that has at
--     least two such processes (one nsys capture of `torchrun --nproc_per_node=N`, each process
--     driving its GPU). The source is the job (job_id = source_id, world_size = the number of its
--     GPU processes); a process's rank is its position among them ordered by their lowest device
--     id, then pid (torchrun's LOCAL_RANK i uses GPU i). Its GPU work is the kernels it launched.
-- device_id is the rank's GPU (the lowest device id of its kernels; one per rank normally).
-- clock_offset_ns maps the rank's times to the common clock (NULL counts as 0).
--
-- Uses: (tables only)
--
-- Columns:
--   job_id           INTEGER  the job: lowest source_id of its ranks
--   world_size       INTEGER  sources.world_size ('source'), GPU processes of the source ('process')
--   rank             INTEGER  the rank
--   how              VARCHAR  'source' or 'process'
--   source_id        INTEGER  the rank's source
--   pid              BIGINT   the rank's process ('process'); NULL for 'source' (all of its work)
--   device_id        INTEGER  the rank's GPU
--   clock_offset_ns  BIGINT   coalesce(sources.clock_offset_ns, 0)
CREATE OR REPLACE VIEW ranks AS
WITH ranked AS (
    SELECT source_id, rank, world_size, coalesce(clock_offset_ns, 0) AS off,
           start_ns + coalesce(clock_offset_ns, 0) AS s, end_ns + coalesce(clock_offset_ns, 0) AS e
    FROM sources WHERE rank IS NOT NULL
),
by_source AS (
    SELECT a.source_id, a.rank, a.world_size, a.off, min(b.source_id) AS job_id
    FROM ranked a JOIN ranked b
      ON a.world_size IS NOT DISTINCT FROM b.world_size AND b.s <= a.e AND a.s <= b.e
    GROUP BY ALL
),
procs AS (  -- GPU processes of the sources without a rank
    SELECT k.source_id, k.pid, min(k.device_id) AS device_id
    FROM kernels k JOIN sources s USING (source_id)
    WHERE s.rank IS NULL AND k.pid IS NOT NULL
    GROUP BY ALL
),
by_process AS (
    SELECT p.source_id, p.pid, p.device_id, coalesce(s.clock_offset_ns, 0) AS off,
           (row_number() OVER (PARTITION BY p.source_id ORDER BY p.device_id NULLS LAST, p.pid) - 1)::INTEGER AS rank,
           (count(*) OVER (PARTITION BY p.source_id))::INTEGER AS world_size
    FROM procs p JOIN sources s USING (source_id)
),
dev AS (SELECT source_id, min(device_id) AS device_id FROM kernels GROUP BY source_id)
SELECT b.job_id, b.world_size, b.rank, 'source' AS how, b.source_id, NULL::BIGINT AS pid, d.device_id,
       b.off AS clock_offset_ns
FROM by_source b LEFT JOIN dev d USING (source_id)
UNION ALL
SELECT source_id AS job_id, world_size, rank, 'process', source_id, pid, device_id, off
FROM by_process WHERE world_size >= 2
ORDER BY job_id, rank;
