-- queue_length: per GPU stream, the operations launched and not yet started / not yet finished, over time (HTA's queue length time series).
--
-- A step function per (source_id, device_id, stream_id) over the GPU operations that have
-- their launch call (`gpu_launches`: kernels, memcpy, memset; every kernel of a graph launch is
-- launched by its one call). One row per instant at which the function changes:
--   launched / started / finished = operations of the stream whose launch call starts /
--                                   which start / which end at ts_ns
--   queued      = launched - started, summed over all instants up to and including ts_ns: the
--                 operations waiting in the stream (HTA's queue_length: +1 at the launch
--                 call's start, -1 at the operation's GPU start)
--   outstanding = launched - finished, summed the same way: launched and not finished (the
--                 waiting ones and the one running)
--   dur_ns      = time to the stream's next change (NULL on its last row): the values hold from
--                 ts_ns for dur_ns
-- Unlike HTA, every launch API counts (cuLaunchKernelEx, cudaGraphLaunch, ... ; HTA counts only
-- cudaLaunchKernel(ExC), cuLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync and the HIP ones), and
-- simultaneous changes are one row.
-- Ordered by source_id, device_id, stream_id, ts_ns.
--
-- Uses: gpu_launches
--
-- Columns:
--   source_id    INTEGER  the source
--   device_id    INTEGER  GPU index
--   stream_id    BIGINT   stream
--   ts_ns        BIGINT   when the values change, ns
--   launched     BIGINT   launch calls of this stream's operations starting at ts_ns
--   started      BIGINT   operations starting on the GPU at ts_ns
--   finished     BIGINT   operations ending on the GPU at ts_ns
--   queued       BIGINT   operations launched and not started, from ts_ns on
--   outstanding  BIGINT   operations launched and not finished, from ts_ns on
--   dur_ns       BIGINT   time until the stream's next row, ns (NULL for the last)
CREATE OR REPLACE VIEW queue_length AS
WITH g AS (SELECT source_id, device_id, stream_id, api_start_ns, start_ns, end_ns FROM gpu_launches),
ev AS (
    SELECT source_id, device_id, stream_id, api_start_ns AS ts, 1 AS l, 0 AS s, 0 AS f FROM g
    UNION ALL
    SELECT source_id, device_id, stream_id, start_ns, 0, 1, 0 FROM g
    UNION ALL
    SELECT source_id, device_id, stream_id, end_ns, 0, 0, 1 FROM g
),
per_ts AS (
    SELECT source_id, device_id, stream_id, ts AS ts_ns,
           sum(l)::BIGINT AS launched, sum(s)::BIGINT AS started, sum(f)::BIGINT AS finished
    FROM ev GROUP BY ALL
)
SELECT source_id, device_id, stream_id, ts_ns, launched, started, finished,
       (sum(launched - started) OVER w)::BIGINT AS queued,
       (sum(launched - finished) OVER w)::BIGINT AS outstanding,
       lead(ts_ns) OVER (PARTITION BY source_id, device_id, stream_id ORDER BY ts_ns) - ts_ns AS dur_ns
FROM per_ts
WINDOW w AS (PARTITION BY source_id, device_id, stream_id ORDER BY ts_ns ROWS UNBOUNDED PRECEDING)
ORDER BY source_id, device_id, stream_id, ts_ns;
