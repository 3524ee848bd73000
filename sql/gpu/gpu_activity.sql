-- gpu_activity: every GPU operation (kernel, memcpy, memset) as one interval row.
--
-- The single definition of "GPU activity" used by the busy/idle views: the union of the
-- `kernels` and `memops` tables. `syncs` rows are NOT activity (a sync record marks a wait,
-- not work; HTA counts them because they carry a stream, we do not).
--
-- Uses: (tables only)
--
-- Columns:
--   source_id       INTEGER  the source
--   device_id       INTEGER  GPU index
--   stream_id       BIGINT   stream
--   start_ns        BIGINT   start, ns on the source clock
--   end_ns          BIGINT   end (exclusive), ns
--   dur_ns          BIGINT   end_ns - start_ns
--   kind            VARCHAR  'kernel', 'memcpy' or 'memset'
--   name            VARCHAR  kernel name or memop display name
--   pid             BIGINT   launching host process (where known)
--   correlation_id  BIGINT   link to api_calls (same source and pid)
CREATE OR REPLACE VIEW gpu_activity AS
SELECT source_id, device_id, stream_id, start_ns, end_ns, dur_ns, 'kernel' AS kind, name, pid,
       correlation_id
FROM kernels
UNION ALL
SELECT source_id, device_id, stream_id, start_ns, end_ns, dur_ns, kind, name, pid, correlation_id
FROM memops;
