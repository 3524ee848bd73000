-- lib/names: what a name or a row says: phase of a range, library range, graph launch or span, communication kernel, kernel type.
--
-- Includes: (none)
--
-- tk_phase(name) -> VARCHAR
--   the phase of an NVTX range or record_function annotation: its name without a trailing
--   '#<number>' (ProfilerStep#12 -> ProfilerStep), so the instances of a step share one phase,
--   and without the per-call fields torch's emit_nvtx appends (from the first ', seq = N',
--   ', stashed seq = N' or ', op_id = N' on: 'prefill, op_id = 3777' -> 'prefill',
--   'MmBackward0, seq = 12' -> 'MmBackward0'), so the calls of one name share one phase.
--
-- tk_is_phase_range(category, is_instant, name) -> BOOLEAN
--   an `events` row that is an instance of a phase: a record_function annotation
--   ('user_annotation') or an NVTX range ('nvtx'), not an instant, and not the NVTX range of one
--   operator (`tk_is_op_range`: torch's emit_nvtx / nsys --pytorch=autograd-nvtx ranges).
--
-- tk_is_op_range(category, name) -> BOOLEAN
--   an `events` row that is one framework operator: a torch.profiler 'cpu_op', or an NVTX range
--   written by torch's emit_nvtx (nsys --pytorch=autograd-nvtx / autograd-shapes-nvtx):
--   '<op>, [seq = N, ]op_id = N[, sizes = [...], input_op_ids = [...]]', or any NVTX range whose
--   name starts with 'aten::'. emit_nvtx writes record_function ranges the same way
--   ('prefill, op_id = 3777'), so under nsys --pytorch those are op ranges too: mark phases with
--   NVTX ranges (torch.cuda.nvtx.range) there.
--
-- tk_is_library_range(domain, name) -> BOOLEAN
--   a range a library writes about its own work, never a step of the program (steady_state
--   looks for steps among the other ranges). The one table of such ranges (RE2, on the `events`
--   row's domain and name; any one matches):
--     NVTX domain  NCCL, RCCL, cuDNN, cuBLAS, cuBLASLt, nvFuser, NVSHMEM (any case)
--     NCCL / RCCL  API ranges (in their domain, or in none where the domain's creation row is
--                  missing): ^(nccl|rccl)[A-Z] -- ncclGroupEnd, ncclSend, ncclAllReduce
--     cuDNN, cuBLAS  API ranges ^(cudnn|cublas|cublasLt)[A-Z] -- cudnnConvolutionForward,
--                  cublasGemmEx, cublasLtMatmul
--     nvFuser      FUSER_PERF_SCOPE ranges, in the default domain:
--                  ^(FusionExecutorCache|FusionKernelRuntime|ExecutorDispatch|KernelExecutor|
--                  ExprEvalExecutor|HostIrExecutor|ExpressionEvaluator|ExecutorRunFusion|
--                  fusion_executor|executor_utils)(::|$) -- ExecutorDispatch::run2,
--                  FusionExecutorCache::runFusionWithInputs, KernelExecutor::runFusion
--     torch        its own record_function ranges: ^(nccl|gloo|mpi|ucc): (nccl:all_reduce),
--                  ^c10d::, record_param_comms, ^Optimizer\.(step|zero_grad)#
--                  (Optimizer.step#AdamW.step), ^enumerate\(DataLoader\)#,
--                  ^(DistributedDataParallel|FullyShardedDataParallel)\., torch.compile's
--                  ^(Torch-Compiled Region|TorchDynamo Cache Lookup|CompiledFunction|## Call
--                  CompiledFxGraph); its emit_nvtx / nsys --pytorch operator ranges are
--                  tk_is_op_range, never phases at all
--     DLProf / PyProf  per-operator markers: ^\{'(traceMarker|mod)':
--
-- tk_is_graph_launch(api_name) -> BOOLEAN
--   the call launches a whole CUDA / HIP graph: cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
--   (any suffix: _v10000, _ptsz ...). One call, many kernels -- or, in an nsys
--   --cuda-graph-trace=graph capture, one whole-graph row.
--
-- tk_is_alloc_call(api_name) -> BOOLEAN
--   the call allocates or frees memory through the driver, device or pinned host memory:
--   ^(cuda|cu|hip)(Malloc|Free|MemAlloc|MemFree|HostAlloc|HostFree|MemHostAlloc|MemHostFree)
--   (so cudaMallocAsync / cudaFreeAsync too, and cudaMallocHost). NULL -> false.
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
--   all_to_allv, ...); a custom all-reduce (cross_device_reduce_*) is an 'all_reduce', DeepEP's
--   dispatch / combine kernels (not notify_*) an 'all_to_all'.
--
-- tk_dtype_bytes(dtype) -> INTEGER
--   bytes per element of a dtype as torch's record_param_comms (Float, BFloat16, Half, Double,
--   Long, Int, Byte, Bool, Float8_e4m3fn, ...), torch.profiler's "Input type" (c10::BFloat16,
--   float, long int, unsigned char, c10::complex<float>, ...) or an NCCL kernel name (f32, bf16,
--   f16, f64, i64, i32, u8, i8, f8e4m3, float, int8_t, half, double, ...) writes it; NULL when
--   unknown (Scalar, ScalarList, TensorList, '').
--
-- tk_dtype_class(dtype) -> VARCHAR
--   the class of the peak table (lib/peaks) that a dtype spelled as above belongs to: 'fp8',
--   'bf16', 'fp16', 'fp32' (tf32 too), 'fp64', 'int8'; NULL for the others (other integers,
--   bool, complex) and for unknown ones.
--   (Both read one table of spellings, _tk_dtype(t) -> STRUCT(class, bytes), on the lower-cased
--   name without 'c10::'.)
--
-- tk_comm_library(name) -> VARCHAR
--   the communication library a kernel name belongs to, NULL for a kernel that is not
--   communication. The one table of communication-kernel name patterns (first match wins; RE2
--   regular expressions on the full kernel name, as nsys and Kineto write it; one combined test
--   of the substrings they need runs first, so a kernel that is not communication costs one pass):
--     library     pattern                                        e.g.
--     'rccl'      rccl (any case; RCCL also runs kernels named    rcclGenericKernel<1, false>(ncclDevKernelArgsStorage<4096ul>)
--                 ncclDevKernel_*: those read as 'nccl')
--     'nccl'      nccl (any case)                                ncclDevKernel_AllReduce_Sum_f32_RING_LL,
--                                                                ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t
--     'deepep'    (deep_ep|dpsk::ep)::(intranode|internode|       deep_ep::intranode::dispatch<...>,
--                 internode_ll):: as a whole namespace, but not   dpsk::ep::internode::notify_dispatch<...>,
--                 get_dispatch_layout (a local count, compute)    deep_ep::internode_ll::combine<...>
--     'nvshmem'   nvshmem (any case), or NVSHMEM's on-stream      barrier_on_stream_kernel_threadgroup<...>,
--                 collectives <coll>_on_stream_kernel             alltoall_on_stream_kernel<...>
--     'custom_all_reduce'  cross_device_reduce_ (the custom      vllm::cross_device_reduce_1stage<...>,
--                 all-reduce of vLLM, SGLang, AITER)              sglang::cross_device_reduce_2stage<...>
--     'torch_symm_mem'  multimem_, one_shot_, two_shot_ kernels   (anonymous namespace)::multimem_all_reduce_kernel<...>,
--                 of PyTorch's symmetric-memory collectives       two_shot_all_reduce_kernel_inplace<...>
--     'mscclpp'   mscclpp:: (the kernel takes MSCCL++ channels:   allreduce7<__nv_bfloat16>(..., mscclpp::DeviceHandle<...>*, ...)
--                 its demangled signature names them)
--   Where each example comes from: tests/sql/test_comm_kernels.py.
--
-- tk_is_comm_kernel(name) -> BOOLEAN
--   a communication kernel: tk_comm_library(name) is not NULL (NCCL / RCCL collectives, DeepEP
--   dispatch / combine / notify, NVSHMEM, vLLM custom all-reduce, PyTorch symmetric memory,
--   MSCCL++).
--
-- tk_kernel_type(kind, name) -> VARCHAR
--   the type of a GPU operation (a `gpu_activity` row), HTA's kernel types (get_kernel_type):
--   'communication'  a kernel of tk_is_comm_kernel (the libraries of tk_comm_library)
--   'memory'         a memcpy or memset operation, or a kernel whose name starts with 'Memcpy',
--                    'Memset' or 'dma' (HTA's memory kernels)
--   'other'          any other kernel whose name contains 'Memcpy' or 'Sync', or starts with
--                    'Memset' (HTA's rule: not computation)
--   'compute'        every other kernel (whole-graph rows of an nsys graph-level capture too)
CREATE OR REPLACE MACRO tk_phase(name) AS
    regexp_replace(regexp_replace(name, ', (stashed seq|seq|op_id) = [0-9]+(,.*)?$', ''), '#[0-9]+$', '');

CREATE OR REPLACE MACRO tk_is_op_range(category, name) AS
    (category = 'cpu_op'
     OR (category = 'nvtx'
         AND coalesce(name LIKE 'aten::%' OR regexp_matches(name, '^[^,]+, (seq = [0-9]+, )?op_id = [0-9]+'), false)));

CREATE OR REPLACE MACRO tk_is_phase_range(category, is_instant, name) AS
    (category IN ('user_annotation', 'nvtx') AND NOT coalesce(is_instant, false)
     AND NOT tk_is_op_range(category, name));

CREATE OR REPLACE MACRO tk_is_library_range(domain, name) AS
    (coalesce(regexp_matches(domain, '(?i)^(nccl|rccl|cudnn|cublas|cublaslt|nvfuser|nvshmem)$'), false)
     OR coalesce(regexp_matches(name,
            '^((nccl|rccl|cudnn|cublas|cublasLt)[A-Z]'
            || '|(FusionExecutorCache|FusionKernelRuntime|ExecutorDispatch|KernelExecutor|ExprEvalExecutor'
            || '|HostIrExecutor|ExpressionEvaluator|ExecutorRunFusion|fusion_executor|executor_utils)(::|$)'
            || '|(nccl|gloo|mpi|ucc):|c10d::|record_param_comms$|Optimizer\.(step|zero_grad)#'
            || '|enumerate\(DataLoader\)#|(DistributedDataParallel|FullyShardedDataParallel)\.'
            || '|Torch-Compiled Region|TorchDynamo Cache Lookup|CompiledFunction|## Call CompiledFxGraph'
            || '|\{''(traceMarker|mod)'':)'), false));

CREATE OR REPLACE MACRO tk_is_graph_launch(api_name) AS
    coalesce(regexp_matches(api_name, '^(cuda|cu|hip)GraphLaunch'), false);

CREATE OR REPLACE MACRO tk_is_alloc_call(api_name) AS
    coalesce(regexp_matches(api_name, '^(cuda|cu|hip)(Malloc|Free|MemAlloc|MemFree|HostAlloc|HostFree|MemHostAlloc|MemHostFree)'), false);

CREATE OR REPLACE MACRO tk_is_graph_span(graph_id, graph_node_id) AS (graph_id IS NOT NULL AND graph_node_id IS NULL);

CREATE OR REPLACE MACRO tk_comm_library(name) AS
    CASE
      -- one pass for what every pattern below needs (most kernels: none), the patterns after it
      WHEN NOT regexp_matches(name, '(?i:ccl|nvshmem)|_on_stream_kernel|deep_ep::|dpsk::ep::|cross_device_reduce_|multimem_|one_shot_|two_shot_')
        THEN NULL
      WHEN regexp_matches(name, '(?i)rccl') THEN 'rccl'
      WHEN regexp_matches(name, '(?i)nccl') THEN 'nccl'
      WHEN regexp_matches(name, '(^|[^A-Za-z0-9_])(deep_ep|dpsk::ep)::(intranode|internode|internode_ll)::')
           AND NOT contains(name, 'get_dispatch_layout') THEN 'deepep'
      WHEN regexp_matches(name, '(?i)nvshmem|(^|[^A-Za-z0-9])[a-z_]+_on_stream_kernel') THEN 'nvshmem'
      WHEN contains(name, 'cross_device_reduce_') THEN 'custom_all_reduce'
      WHEN regexp_matches(name, '(^|[^A-Za-z0-9])(multimem|one_shot|two_shot)_[A-Za-z_]*kernel') THEN 'torch_symm_mem'
      WHEN contains(name, 'mscclpp::') THEN 'mscclpp'
    END;

CREATE OR REPLACE MACRO tk_is_comm_kernel(name) AS (tk_comm_library(name) IS NOT NULL);

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
      WHEN contains(name, 'cross_device_reduce_') THEN 'all_reduce'
      WHEN tk_comm_library(name) = 'deepep' AND regexp_matches(name, '::(dispatch|combine)') THEN 'all_to_all'
    END;

CREATE OR REPLACE MACRO _tk_dtype(t) AS
    CASE
      WHEN t IS NULL THEN NULL
      WHEN regexp_matches(t, '^(float|f32|fp32|tf32|float32)$') THEN {'class': 'fp32', 'bytes': 4}
      WHEN regexp_matches(t, '^(int|i32|int32|uint32|u32|int32_t|uint32_t|unsigned int)$') THEN {'class': NULL, 'bytes': 4}
      WHEN regexp_matches(t, '^(bfloat16|bf16|__nv_bfloat16)$') THEN {'class': 'bf16', 'bytes': 2}
      WHEN regexp_matches(t, '^(half|f16|fp16|float16|__half)$') THEN {'class': 'fp16', 'bytes': 2}
      WHEN regexp_matches(t, '^(short|short int|int16|i16)$') THEN {'class': NULL, 'bytes': 2}
      WHEN regexp_matches(t, '^(double|f64|fp64|float64)$') THEN {'class': 'fp64', 'bytes': 8}
      WHEN regexp_matches(t, '^(long|long int|long long|i64|int64|u64|uint64|int64_t|uint64_t|complex<float>)$') THEN {'class': NULL, 'bytes': 8}
      WHEN regexp_matches(t, '^(f8.*|fp8.*|float8.*)$') THEN {'class': 'fp8', 'bytes': 1}
      WHEN regexp_matches(t, '^(char|i8|s8|int8|int8_t|signed char)$') THEN {'class': 'int8', 'bytes': 1}
      WHEN regexp_matches(t, '^(byte|bool|u8|uint8|uint8_t|unsigned char)$') THEN {'class': NULL, 'bytes': 1}
      WHEN t = 'complex<double>' THEN {'class': NULL, 'bytes': 16}
      WHEN t = 'complex<half>' THEN {'class': NULL, 'bytes': 4}
    END;

CREATE OR REPLACE MACRO tk_dtype_bytes(dtype) AS _tk_dtype(replace(lower(dtype), 'c10::', '')).bytes;

CREATE OR REPLACE MACRO tk_dtype_class(dtype) AS _tk_dtype(replace(lower(dtype), 'c10::', '')).class;

CREATE OR REPLACE MACRO tk_kernel_type(kind, name) AS
    CASE WHEN kind IN ('memcpy', 'memset') THEN 'memory'
         WHEN tk_is_comm_kernel(name) THEN 'communication'
         WHEN regexp_matches(name, '^(Memcpy|Memset|dma)') THEN 'memory'
         WHEN contains(name, 'Memcpy') OR contains(name, 'Sync') THEN 'other'
         ELSE 'compute' END;
