-- rank_imbalance: per collective call across the ranks of a job, who arrived late and who waited.
--
-- Definition: the ranks of a job are those of `ranks` (a source per rank, or a GPU process per
-- rank in one nsys capture of several processes). The collectives of a rank are its
-- communication kernels (`tk_is_comm_kernel`, sql/lib/names.sql: NCCL / RCCL, DeepEP, ...; for a
-- 'process' rank, those its process launched); the n-th collective kernel of a given name on a
-- rank (by start time) is matched with the n-th of the same name on every other rank (`seq`).
-- Times are put on the common clock: start_ns + clock_offset_ns (clock_offset_ns NULL counts as
-- 0, so such sources are only comparable with each other).
-- For each collective (job_id, name, seq) present on at least two ranks:
--   arrival_ns   = this rank's kernel start (common clock)
--   skew_ns      = latest arrival - earliest arrival over the ranks
--   wait_ns      = latest arrival - this rank's arrival: how long this rank's kernel waited for
--                  the slowest rank (0 for the slowest)
--   comm_ns      = the shortest kernel duration over the ranks: the transfer itself
--                  (TraceLens' comm_latency; the rest of each duration is synchronization)
--   slowest_rank = the rank that arrived last (ties: highest rank)
--
-- Uses: ranks
--
-- Columns:
--   job_id        INTEGER  lowest source_id of the job's ranks
--   world_size    INTEGER  sources.world_size
--   name          VARCHAR  collective kernel name
--   seq           BIGINT   1-based occurrence of that kernel name on each rank
--   ranks         BIGINT   ranks that ran this collective
--   rank          INTEGER  this row's rank
--   source_id     INTEGER  this rank's source
--   pid           BIGINT   this rank's process ('process' ranks; NULL for a source per rank)
--   device_id     INTEGER  this rank's GPU
--   arrival_ns    BIGINT   kernel start on the common clock, ns
--   dur_ns        BIGINT   this rank's kernel duration, ns
--   wait_ns       BIGINT   latest arrival - arrival_ns
--   skew_ns       BIGINT   latest - earliest arrival, ns
--   comm_ns       BIGINT   shortest duration over the ranks, ns
--   slowest_rank  INTEGER  rank that arrived last
CREATE OR REPLACE VIEW rank_imbalance AS
WITH coll AS (
    SELECT r.job_id, r.world_size, r.rank, k.source_id, r.pid, r.device_id, k.name,
           k.start_ns + r.clock_offset_ns AS arrival_ns, k.dur_ns,
           row_number() OVER (PARTITION BY k.source_id, r.pid, k.name ORDER BY k.start_ns, k.stream_id) AS seq
    FROM kernels k
    JOIN ranks r ON r.source_id = k.source_id AND (r.pid IS NULL OR r.pid = k.pid)
    WHERE tk_is_comm_kernel(k.name)
),
per AS (
    SELECT *,
           count(*) OVER w AS ranks,
           max(arrival_ns) OVER w AS last_arrival,
           min(arrival_ns) OVER w AS first_arrival,
           min(dur_ns) OVER w AS comm_ns,
           arg_max(rank, (arrival_ns, rank)) OVER w AS slowest_rank
    FROM coll
    WINDOW w AS (PARTITION BY job_id, name, seq)
)
SELECT job_id, world_size, name, seq, ranks, rank, source_id, pid, device_id, arrival_ns, dur_ns,
       last_arrival - arrival_ns AS wait_ns, last_arrival - first_arrival AS skew_ns,
       comm_ns, slowest_rank
FROM per
WHERE ranks >= 2
ORDER BY job_id, arrival_ns, name, seq, rank;
