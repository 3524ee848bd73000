-- collectives: every communication kernel (NCCL / RCCL, DeepEP, ...: tk_is_comm_kernel) per rank, with its operation, size, the ranks' skew and bandwidth.
--
-- Definition: one row per communication kernel (`tk_is_comm_kernel`) of a source. Its rank is
-- from `ranks` (a source per rank, or a GPU process per rank of one nsys capture; NULL for a
-- source that is no rank of a job). seq = the kernel's n-th occurrence of that kernel name on the
-- rank (by start), which matches it with the same collective on the other ranks (as in
-- `rank_imbalance`, whose wait_ns, skew_ns and comm_ns it carries).
-- What the collective is comes from torch's `record_param_comms` op of the same source whose
-- External id the kernel carries (Kineto; `events.external_id` = `kernels.external_id`):
-- "Collective name", "Process Group Name", "Group size", dtype, "In msg nelems" / "Out msg
-- nelems"; else the operation from torch's 'nccl:<op>' range (NVTX with emit_nvtx / nsys
-- --pytorch, or record_function) open on the launching thread at the kernel's launch call (an
-- all_to_all that NCCL runs as SendRecv kernels is an all_to_all), else from the kernel name
-- (operation and dtype, `tk_collective_op`, `tk_dtype_bytes`; group and sizes unknown).
--   bytes       = message size: out msg nelems x dtype bytes for all_gather (the gathered
--                 result), in msg nelems x dtype bytes otherwise (NULL without record_param_comms)
--   transfer_ns = comm_ns of `rank_imbalance` (the shortest duration over the ranks: the
--                 collective once every rank has arrived); the kernel's own duration on a rank
--                 without a partner in the store
--   algbw       = bytes / transfer time, GB/s (10^9 bytes per second)
--   busbw       = algbw x NCCL's bus factor for the operation and group size n (nccl-tests'
--                 PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
--                 (n-1)/n; broadcast, reduce, send, recv, send_recv 1
-- Uses: gpu_launches, rank_imbalance, ranks
--
-- Columns:
--   source_id      INTEGER  the source
--   job_id         INTEGER  the job (`ranks`), NULL when the source is no rank
--   rank           INTEGER  the rank, NULL when unknown
--   pid            BIGINT   the launching process
--   device_id      INTEGER  GPU index
--   stream_id      BIGINT   stream
--   name           VARCHAR  kernel name
--   seq            BIGINT   n-th occurrence of this kernel name on the rank
--   operation      VARCHAR  'all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce', 'all_to_all', 'send_recv', 'send', 'recv', 'barrier' or NULL
--   process_group  VARCHAR  torch process group name (record_param_comms)
--   group_size     BIGINT   ranks in the group (record_param_comms)
--   dtype          VARCHAR  element type (record_param_comms, else from the kernel name)
--   bytes          BIGINT   message size, bytes (see above)
--   start_ns       BIGINT   kernel start, ns on the source clock
--   end_ns         BIGINT   kernel end
--   dur_ns         BIGINT   kernel duration, ns (waiting for other ranks included)
--   ranks          BIGINT   ranks in the store that ran this collective (rank_imbalance)
--   wait_ns        BIGINT   how long this rank waited for the last one (rank_imbalance)
--   skew_ns        BIGINT   latest - earliest arrival over the ranks
--   slowest_rank   INTEGER  the rank that arrived last
--   transfer_ns    BIGINT   the collective's own time (see above)
--   algbw_gbps     DOUBLE   bytes / transfer time, GB/s
--   busbw_gbps     DOUBLE   algbw x the bus factor, GB/s
CREATE OR REPLACE VIEW collectives AS
WITH params AS (  -- torch's record_param_comms ops, by External id
    SELECT source_id, external_id,
           any_value(json_extract_string(args, '$."Collective name"')) AS coll_name,
           any_value(json_extract_string(args, '$."Process Group Name"')) AS process_group,
           any_value(try_cast(json_extract_string(args, '$."Group size"') AS BIGINT)) AS group_size,
           any_value(json_extract_string(args, '$.dtype')) AS dtype,
           any_value(try_cast(json_extract_string(args, '$."In msg nelems"') AS BIGINT)) AS in_nelems,
           any_value(try_cast(json_extract_string(args, '$."Out msg nelems"') AS BIGINT)) AS out_nelems
    FROM events
    WHERE name = 'record_param_comms' AND external_id IS NOT NULL
    GROUP BY ALL
),
k AS (
    SELECT k.source_id, r.job_id, r.rank, k.pid, k.device_id, k.stream_id, k.name, k.start_ns, k.end_ns,
           k.dur_ns, k.external_id, r.pid AS rank_pid,
           row_number() OVER (PARTITION BY k.source_id, r.pid, k.name ORDER BY k.start_ns, k.stream_id) AS seq
    FROM kernels k
    LEFT JOIN ranks r ON r.source_id = k.source_id AND (r.pid IS NULL OR r.pid = k.pid)
    WHERE tk_is_comm_kernel(k.name)
),
torch_range AS (  -- the 'nccl:<op>' range (torch) open on the launching thread at the launch call
    SELECT l.source_id, l.device_id, l.stream_id, l.start_ns, l.name,
           arg_max(e.name, e.start_ns) AS range_name
    FROM gpu_launches l
    JOIN events e
      ON e.source_id = l.source_id AND e.pid = l.pid AND e.tid = l.tid AND starts_with(e.name, 'nccl:')
     AND e.start_ns <= l.api_start_ns AND l.api_start_ns < e.end_ns
    WHERE tk_is_comm_kernel(l.name)
    GROUP BY ALL
),
c AS (
    SELECT k.*, coalesce(tk_collective_op(p.coll_name), tk_collective_op(tr.range_name), tk_collective_op(k.name))
               AS operation,
           p.process_group, p.group_size,
           coalesce(p.dtype, regexp_extract(k.name, '_(f32|f16|bf16|f64|i32|i64|u8|i8|u32|u64|f8e4m3|f8e5m2|float|half|double|int8_t|uint8_t|int32_t|uint32_t|int64_t|uint64_t)(_|\(|$)', 1)) AS dtype0,
           p.in_nelems, p.out_nelems
    FROM k LEFT JOIN params p ON p.source_id = k.source_id AND p.external_id = k.external_id
    LEFT JOIN torch_range tr
      ON tr.source_id = k.source_id AND tr.device_id IS NOT DISTINCT FROM k.device_id
     AND tr.stream_id IS NOT DISTINCT FROM k.stream_id AND tr.start_ns = k.start_ns AND tr.name = k.name
),
m AS (
    SELECT c.*, nullif(c.dtype0, '') AS dtype,
           CASE WHEN c.operation = 'all_gather' THEN c.out_nelems ELSE c.in_nelems END
               * tk_dtype_bytes(nullif(c.dtype0, '')) AS bytes,
           ri.ranks, ri.wait_ns, ri.skew_ns, ri.slowest_rank,
           coalesce(ri.comm_ns, c.dur_ns) AS transfer_ns
    FROM c
    LEFT JOIN rank_imbalance ri
      ON ri.job_id = c.job_id AND ri.rank = c.rank AND ri.name = c.name AND ri.seq = c.seq
)
SELECT source_id, job_id, rank, pid, device_id, stream_id, name, seq, operation, process_group, group_size,
       dtype, bytes::BIGINT AS bytes, start_ns, end_ns, dur_ns, ranks, wait_ns, skew_ns, slowest_rank, transfer_ns,
       bytes / nullif(transfer_ns, 0) AS algbw_gbps,
       bytes / nullif(transfer_ns, 0) * CASE
           WHEN operation = 'all_reduce' THEN 2.0 * (coalesce(group_size, ranks) - 1) / coalesce(group_size, ranks)
           WHEN operation IN ('all_gather', 'reduce_scatter', 'all_to_all')
               THEN 1.0 * (coalesce(group_size, ranks) - 1) / coalesce(group_size, ranks)
           WHEN operation IN ('broadcast', 'reduce', 'send', 'recv', 'send_recv') THEN 1.0
       END AS busbw_gbps
FROM m
ORDER BY source_id, rank NULLS LAST, start_ns, stream_id;
