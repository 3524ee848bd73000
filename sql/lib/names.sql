-- lib/names: what a name or a row says: phase of a range, graph launch or span, communication kernel.
--
-- tk_phase(name) -> VARCHAR
--   the phase of an NVTX range or record_function annotation: its name without a trailing
--   '#<number>' (ProfilerStep#12 -> ProfilerStep), so the instances of a step share one phase.
--
-- tk_is_phase_range(category, is_instant) -> BOOLEAN
--   an `events` row that is an instance of a phase: a record_function annotation
--   ('user_annotation') or an NVTX range ('nvtx'), not an instant.
--
-- tk_is_graph_launch(api_name) -> BOOLEAN
--   the call launches a whole CUDA / HIP graph: cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
--   (any suffix: _v10000, _ptsz ...). One call, many kernels -- or, in an nsys
--   --cuda-graph-trace=graph capture, one whole-graph row.
--
-- tk_is_graph_span(graph_id, graph_node_id) -> BOOLEAN
--   a `kernels` row that is a whole graph, not a kernel: graph_id set and graph_node_id NULL
--   (nsys --cuda-graph-trace=graph: `[CUDA graph N]`, the graph's span with its internal gaps).
--
-- tk_collective_op(name) -> VARCHAR
--   the collective a name denotes, in one spelling: 'all_reduce', 'all_gather', 'reduce_scatter',
--   'broadcast', 'reduce', 'all_to_all', 'send_recv', 'send', 'recv', 'barrier' (NULL when none).
--   Reads NCCL / RCCL kernel names of every generation (ncclDevKernel_AllReduce_Sum_f32_RING_LL,
--   ncclKernel_AllReduce_RING_LL_Sum_float, ncclAllReduceRingLLKernel_sum_f32) and torch's
--   record_param_comms "Collective name" (allreduce, _allgather_base, reduce_scatter_tensor_coalesced,
--   all_to_allv, ...).
--
-- tk_dtype_bytes(dtype) -> INTEGER
--   bytes per element of a dtype as torch's record_param_comms (Float, BFloat16, Half, Double,
--   Long, Int, Byte, Bool, Float8_e4m3fn, ...) or an NCCL kernel name (f32, bf16, f16, f64, i64,
--   i32, u8, i8, f8e4m3, float, int8_t, half, double, ...) writes it; NULL when unknown.
--
-- tk_is_comm_kernel(name) -> BOOLEAN
--   a collective-communication kernel: the name contains 'nccl' or 'rccl' in any case
--   (ncclKernel_*, ncclDevKernel_*, rccl*).
CREATE OR REPLACE MACRO tk_phase(name) AS regexp_replace(name, '#[0-9]+$', '');

CREATE OR REPLACE MACRO tk_is_phase_range(category, is_instant) AS
    (category IN ('user_annotation', 'nvtx') AND NOT coalesce(is_instant, false));

CREATE OR REPLACE MACRO tk_is_graph_launch(api_name) AS
    coalesce(regexp_matches(api_name, '^(cuda|cu|hip)GraphLaunch'), false);

CREATE OR REPLACE MACRO tk_is_graph_span(graph_id, graph_node_id) AS (graph_id IS NOT NULL AND graph_node_id IS NULL);

CREATE OR REPLACE MACRO tk_is_comm_kernel(name) AS (name ILIKE '%nccl%' OR name ILIKE '%rccl%');

CREATE OR REPLACE MACRO tk_collective_op(name) AS
    CASE
      WHEN regexp_matches(lower(name), 'all_?reduce') THEN 'all_reduce'
      WHEN regexp_matches(lower(name), 'all_?gather') THEN 'all_gather'
      WHEN regexp_matches(lower(name), 'reduce_?scatter') THEN 'reduce_scatter'
      WHEN regexp_matches(lower(name), 'all_?to_?all') THEN 'all_to_all'
      WHEN regexp_matches(lower(name), 'send_?recv') THEN 'send_recv'
      WHEN regexp_matches(lower(name), 'broadcast') THEN 'broadcast'
      WHEN regexp_matches(lower(name), '(nccl|rccl)(dev)?(kernel_)?reduce|^_?reduce(_|$)') THEN 'reduce'
      WHEN regexp_matches(lower(name), '(nccl|rccl)(dev)?(kernel_)?send|^send') THEN 'send'
      WHEN regexp_matches(lower(name), '(nccl|rccl)(dev)?(kernel_)?recv|^recv') THEN 'recv'
      WHEN regexp_matches(lower(name), '^_?barrier') THEN 'barrier'
    END;

CREATE OR REPLACE MACRO tk_dtype_bytes(dtype) AS
    CASE
      WHEN dtype IS NULL THEN NULL
      WHEN regexp_matches(lower(dtype), '^(float|f32|float32|int|i32|int32|uint32|u32|int32_t|uint32_t)$') THEN 4
      WHEN regexp_matches(lower(dtype), '^(bfloat16|bf16|half|f16|float16|short|int16|i16)$') THEN 2
      WHEN regexp_matches(lower(dtype), '^(double|f64|float64|long|i64|int64|u64|uint64|int64_t|uint64_t)$') THEN 8
      WHEN regexp_matches(lower(dtype), '^(byte|char|bool|u8|i8|int8|uint8|int8_t|uint8_t|f8.*|float8.*)$') THEN 1
    END;
