-- lib/host_calls: which host API calls synchronize with the GPU, and which load or compile GPU code.
--
-- Includes: names
--
-- The one definition of each class of host call, shared by the views (DuckDB macros, created
-- on every connection before the views, as TEMP macros, so they work on read-only stores).
--
-- tk_sync_kind(name) -> VARCHAR
--   'explicit'       a device/stream/event/context synchronize call: cuda/hip{Device,Stream,
--                    Event,Thread}Synchronize, cu{Ctx,Stream,Event}Synchronize (cudaStreamQuery
--                    does not block and is not one)
--   'blocking_copy'  a synchronous copy API: cudaMemcpy, cudaMemcpy2D/3D, cudaMemcpyTo/FromSymbol,
--                    cuMemcpy, cuMemcpyDtoH/HtoD/DtoD/AtoH/HtoA, hipMemcpy (and their 2D/3D forms)
--   NULL             anything else (a copy into pageable memory is a third kind, 'pageable_copy',
--                    known only from `memops`: see tk_sync_calls)
--
-- tk_sync_calls() -> TABLE (source_id, pid, tid, name, kind, start_ns, end_ns, dur_ns,
--                           correlation_id)
--   every `api_calls` row that blocks its thread until GPU work finishes: the calls of
--   tk_sync_kind, and ('pageable_copy') every call that launched a device-to-host memcpy into
--   pageable memory (`memops.dst_kind = 'pageable'`, same source and correlation id, same pid
--   where the memop's pid is known), which the driver performs synchronously even when called as
--   cudaMemcpyAsync: what tensor.item() / .cpu() / print(tensor) do. The rows of `host_syncs`.
--
-- tk_launch_calls() -> TABLE (source_id, pid, tid, correlation_id, name, start_ns, end_ns, dur_ns,
--                             n_pids, raw_name)
--   the launch call of each (source, process, correlation id): the earliest `api_calls` row with
--   that correlation id in that process (ties: the longer call; calls with the same start and
--   end are one call twice, e.g. a runtime call and the driver call it made, either may be
--   taken). n_pids = the number of processes of the source that issued that correlation id
--   (nsys numbers correlations per process, so they repeat across processes). raw_name: the
--   call's name as recorded (api_calls.raw_name; name is without the version suffix).
--
-- tk_launch_link(op_pid, call_pid, n_pids) -> BOOLEAN
--   the one rule linking a GPU operation (kernels / memops row, same source and correlation id)
--   to its launch call of tk_launch_calls(): the same process, or, where the operation's process
--   is unknown, the only process that issued that correlation id (with several, the link would
--   be a guess, and there is none).
--
-- tk_launched(ops) -> TABLE (every column of ops, call_pid, call_tid, call_name, call_raw_name,
--                            call_start_ns, call_end_ns, call_dur_ns)
--   each row of `ops` (the name of a relation with source_id, pid (NULL where unknown) and
--   correlation_id, as a string) with its launch call: the tk_launch_calls() row that
--   tk_launch_link pairs it with; the call columns are NULL where the trace has no such call.
--   The one launch join every view uses.
--
-- tk_is_compile_call(name) -> BOOLEAN
--   the call loads GPU code into the context, compiling it first where it is PTX or NVRTC
--   source (runtime compilation: cuDNN / cuBLASLt runtime-fused kernels, Triton, jiterator,
--   torch.compile, lazily loaded CUDA modules): cuLibraryLoadData / cuLibraryLoadFromFile,
--   cudaLibraryLoadData / cudaLibraryLoadFromFile, cuModuleLoad / cuModuleLoadData /
--   cuModuleLoadDataEx / cuModuleLoadFatBinary, cuLinkCreate / cuLinkAddData / cuLinkAddFile /
--   cuLinkComplete, nvrtc* and nvJitLink* (when traced), hipModuleLoad* / hiprtc*; any version
--   suffix (_v2 ...) allowed.
--
-- tk_is_compiler_load(name) -> BOOLEAN
--   an `events` row that opens a GPU code compiler library: nsys's OS-runtime 'dlopen(...)' of
--   libnvrtc*, libnvJitLink*, libnvptxcompiler* (cuDNN's runtime-compiled engines, jiterator
--   and Triton open NVRTC before each compilation).
--
-- tk_compile_intervals() -> TABLE (source_id, pid, tid, start_ns, end_ns)
--   the host time spent loading or compiling GPU code, per thread (intervals may overlap):
--   every code-loading call (tk_is_compile_call), and every compilation episode: from a
--   compiler library load (tk_is_compiler_load) to the end of the next code-loading call of the
--   same thread (NVRTC itself is not traced: the time between opening the compiler and loading
--   its output is the compilation). A compiler load with no code-loading call after it on its
--   thread counts for its own duration only.
CREATE OR REPLACE MACRO tk_sync_kind(name) AS
    CASE
      WHEN suffix(name, 'Synchronize')
       AND (regexp_matches(name, '^(cuda|hip)(Device|Stream|Event|Thread)Synchronize$')
            OR regexp_matches(name, '^cu(Ctx|Stream|Event)Synchronize$')) THEN 'explicit'
      WHEN contains(name, 'emcpy')
       AND (regexp_matches(name, '^(cuda|hip)Memcpy(2D|3D)?(ToSymbol|FromSymbol)?$')
            OR regexp_matches(name, '^cuMemcpy(DtoH|HtoD|DtoD|AtoH|HtoA)?$')) THEN 'blocking_copy'
    END;

CREATE OR REPLACE MACRO tk_sync_calls() AS TABLE
    WITH pageable AS (
        SELECT DISTINCT source_id, pid, correlation_id FROM memops
        WHERE kind = 'memcpy' AND copy_kind = 'DtoH' AND dst_kind = 'pageable'
    )
    SELECT * FROM (
        SELECT a.source_id, a.pid, a.tid, a.name,
               coalesce(tk_sync_kind(a.name),
                        CASE WHEN p.correlation_id IS NOT NULL THEN 'pageable_copy' END) AS kind,
               a.start_ns, a.end_ns, a.dur_ns, a.correlation_id
        FROM api_calls a
        LEFT JOIN pageable p
          ON p.source_id = a.source_id AND p.correlation_id = a.correlation_id
         AND (p.pid IS NULL OR p.pid = a.pid)
    ) WHERE kind IS NOT NULL;

CREATE OR REPLACE MACRO tk_launch_calls() AS TABLE
    SELECT source_id, pid, tid, correlation_id, name, start_ns, end_ns, dur_ns,
           count(*) OVER (PARTITION BY source_id, correlation_id) AS n_pids, raw_name
    FROM (SELECT source_id, pid, correlation_id, arg_min(tid, k) AS tid, arg_min(name, k) AS name,
                 min(start_ns) AS start_ns, arg_min(end_ns, k) AS end_ns, arg_min(dur_ns, k) AS dur_ns,
                 arg_min(raw_name, k) AS raw_name
          FROM (SELECT *, start_ns::HUGEINT * 18446744073709551616 - end_ns AS k  -- earliest, then longest
                FROM api_calls WHERE correlation_id IS NOT NULL)
          GROUP BY source_id, pid, correlation_id);

CREATE OR REPLACE MACRO tk_launch_link(op_pid, call_pid, n_pids) AS
    (op_pid = call_pid OR (op_pid IS NULL AND n_pids = 1));

CREATE OR REPLACE MACRO tk_launched(ops) AS TABLE
    SELECT o.*, a.pid AS call_pid, a.tid AS call_tid, a.name AS call_name, a.raw_name AS call_raw_name,
           a.start_ns AS call_start_ns, a.end_ns AS call_end_ns, a.dur_ns AS call_dur_ns
    FROM query_table(ops) o
    LEFT JOIN tk_launch_calls() a
      ON a.source_id = o.source_id AND a.correlation_id = o.correlation_id
     AND tk_launch_link(o.pid, a.pid, a.n_pids);

CREATE OR REPLACE MACRO tk_is_compile_call(name) AS
    (contains(name, 'Load') OR contains(name, 'Link') OR contains(name, 'rtc'))  -- cheap test first
    AND regexp_matches(name, '^(cu(da)?LibraryLoad(Data|FromFile)|cuModuleLoad(Data|DataEx|FatBinary)?|'
                         'cuLink(Create|AddData|AddFile|Complete)|nvrtc[A-Za-z]*|nvJitLink[A-Za-z]*|'
                         'hipModuleLoad(Data|DataEx)?|hiprtc[A-Za-z]*)(_v[0-9]+)?$');

CREATE OR REPLACE MACRO tk_is_compiler_load(name) AS
    starts_with(name, 'dlopen(')
    AND regexp_matches(name, '^dlopen\([^)]*lib(nvrtc|nvJitLink|nvptxcompiler)', 'i');

CREATE OR REPLACE MACRO tk_compile_intervals() AS TABLE
    WITH loads AS (
        SELECT source_id, pid, tid, start_ns, end_ns FROM api_calls
        WHERE tk_is_compile_call(name) AND end_ns >= start_ns
    ),
    opens AS (
        SELECT source_id, pid, tid, start_ns, end_ns FROM events
        WHERE tk_is_compiler_load(name) AND NOT coalesce(is_instant, false) AND end_ns >= start_ns
    )
    SELECT source_id, pid, tid, start_ns, end_ns FROM loads
    UNION ALL
    SELECT o.source_id, o.pid, o.tid, o.start_ns, greatest(o.end_ns, coalesce(l.end_ns, o.end_ns))
    FROM opens o
    ASOF LEFT JOIN loads l
      ON l.source_id = o.source_id AND l.pid = o.pid AND l.tid = o.tid AND l.start_ns >= o.start_ns;

-- tk_host_mark(category, name) -> VARCHAR
--   what a host event (`events` row) says the thread is doing, for the whole of its extent and
--   everything nested in it; NULL for an event that marks nothing (most):
--   'compile'    compiling GPU code or a graph: torch.compile's timed phases ('... (dynamo_timed)'),
--                dynamo's frame conversion, inductor's compile / codegen / autotuning, AOT
--                autograd, Triton's compiler (as Python functions or record_function ranges);
--                not the compiled code's run ('Torch-Compiled Region', 'CompiledFunction',
--                guard checks)
--   'plan'       a cuDNN / cuBLAS / MIOpen / hipBLAS operator (`tk_is_op_range`: a torch op or its
--                --pytorch NVTX range): building an execution plan when it takes long (the view decides how
--                long: idle_attribution's plan_min_ns)
--   'data'       the input pipeline: a DataLoader iterator ('enumerate(DataLoader)#...__next__'),
--                pin_memory, or a user range / NVTX range named with a data word (data, dataset,
--                batch, fetch, collate, prefetch, loader) that is not a torch operator
--   'rank_wait'  waiting for other ranks on the host: c10d / NCCL / Gloo operators and ranges,
--                record_param_comms, barriers and collectives named by the user
CREATE OR REPLACE MACRO tk_host_mark(category, name) AS
    CASE
      WHEN contains(name, '(dynamo_timed)')
        OR regexp_matches(name, 'torch/_dynamo/(convert_frame|output_graph|symbolic_convert)|torch/_inductor/(compile_fx|codecache|graph|scheduler|codegen|async_compile|select_algorithm|autotune)|torch/_functorch/_?aot_autograd|triton/compiler/compiler\.py\([0-9]+\): compile|^(compile_fx|inductor_compile|aot_compile|jit_compile)')
        THEN 'compile'
      WHEN tk_is_op_range(category, name) AND regexp_matches(name, '(?i)cudnn|miopen|cublas|hipblas') THEN 'plan'
      WHEN regexp_matches(name, '(?i)dataloader|pin_memory') THEN 'data'
      WHEN category NOT IN ('cpu_op', 'python_function', 'osrt') AND NOT starts_with(name, 'aten::')
       AND regexp_matches(name, '(?i)(^|[^a-z])(data|dataset|batch|batches|fetch|collate|prefetch|loader)([^a-z]|$)')
        THEN 'data'
      WHEN regexp_matches(name, '(?i)^(nccl:|c10d::|gloo:|record_param_comms)|(^|[^a-z])(barrier|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)([^a-z]|$)')
        THEN 'rank_wait'
    END;
