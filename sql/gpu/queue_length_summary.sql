-- queue_length_summary: per GPU stream, how many operations waited in it, on average and at most (HTA's queue length summary).
--
-- One row per (source_id, device_id, stream_id) of `queue_length`, over the stream's window
-- from its first launch call to its last operation's end (window_ns); averages are weighted by
-- time (each value for as long as it held), not per change as HTA's describe() of the series:
--   ops             = operations launched on the stream
--   avg_queued      = sum(queued * dur_ns) / window_ns; max_queued = its highest value
--   avg_outstanding = sum(outstanding * dur_ns) / window_ns; max_outstanding = its highest value
--   empty_ns        = time in the window with nothing outstanding (the stream had no work: the
--                     host did not launch ahead)
--   empty_pct       = 100 * empty_ns / window_ns
--   deep_ns         = time with at least 2 operations queued (the host ran ahead of the GPU: the
--                     launch overhead is hidden)
-- rank: the rank whose GPU this is (`ranks`), NULL when unknown.
-- Ordered by source_id, device_id, stream_id.
--
-- Uses: queue_length, ranks
--
-- Columns:
--   source_id        INTEGER  the source
--   rank             INTEGER  the rank of that GPU (ranks.rank), NULL when unknown
--   device_id        INTEGER  GPU index
--   stream_id        BIGINT   stream
--   ops              BIGINT   operations launched on the stream
--   start_ns         BIGINT   first launch call start, ns
--   end_ns           BIGINT   last operation end, ns
--   window_ns        BIGINT   end_ns - start_ns
--   avg_queued       DOUBLE   time-weighted mean of queued
--   max_queued       BIGINT   highest queued
--   avg_outstanding  DOUBLE   time-weighted mean of outstanding
--   max_outstanding  BIGINT   highest outstanding
--   empty_ns         BIGINT   time with outstanding = 0, ns
--   empty_pct        DOUBLE   100 * empty_ns / window_ns
--   deep_ns          BIGINT   time with queued >= 2, ns
CREATE OR REPLACE VIEW queue_length_summary AS
WITH s AS (
    SELECT source_id, device_id, stream_id,
           sum(launched)::BIGINT AS ops, min(ts_ns) AS start_ns, max(ts_ns) AS end_ns,
           sum(queued * coalesce(dur_ns, 0)) AS q_area,
           max(queued) AS max_queued,
           sum(outstanding * coalesce(dur_ns, 0)) AS o_area,
           max(outstanding) AS max_outstanding,
           coalesce(sum(dur_ns) FILTER (WHERE outstanding = 0), 0)::BIGINT AS empty_ns,
           coalesce(sum(dur_ns) FILTER (WHERE queued >= 2), 0)::BIGINT AS deep_ns
    FROM queue_length
    GROUP BY ALL
),
rk AS (
    SELECT source_id, device_id, min(rank) AS rank FROM ranks GROUP BY ALL
)
SELECT s.source_id, rk.rank, s.device_id, s.stream_id, s.ops, s.start_ns, s.end_ns,
       s.end_ns - s.start_ns AS window_ns,
       s.q_area / nullif(s.end_ns - s.start_ns, 0) AS avg_queued, s.max_queued,
       s.o_area / nullif(s.end_ns - s.start_ns, 0) AS avg_outstanding, s.max_outstanding,
       s.empty_ns, 100.0 * s.empty_ns / nullif(s.end_ns - s.start_ns, 0) AS empty_pct,
       s.deep_ns
FROM s
LEFT JOIN rk ON rk.source_id = s.source_id AND rk.device_id = s.device_id
ORDER BY s.source_id, s.device_id, s.stream_id;
