-- kernel_latency: per ncu result, which latency: the stall breakdown, divergence, coalescing, occupancy limiter, and a named cause.
--
-- One row per row of `kernel_bounds` (per `ncu_kernels` row). All inputs are ncu's own counters,
-- by metric id (raw page, .ncu-rep, --metrics) or, where the details page has them, by label:
--   stalls                smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio
--                         (raw page only: the details page draws them as a chart and exports none)
--   threads_per_inst      smsp__thread_inst_executed_per_inst_executed.ratio /
--                         'Avg. Active Threads Per Warp' (32 = no divergence)
--   branch_uniformity_pct smsp__sass_average_branch_targets_threads_uniform.pct / 'Branch Efficiency'
--                         (0 also when the kernel has no branch targets)
--   warp_cycles_per_issue smsp__average_warp_latency_per_inst_issued.ratio /
--                         'Warp Cycles Per Issued Instruction'
--   sectors_ratio         memory_l2_theoretical_sectors_global / ..._ideal: global-memory sectors
--                         moved per sector the access width needs (1 = coalesced; raw page only)
--   occupancy limits      launch__occupancy_limit_{registers,shared_mem,warps,blocks,barriers} /
--                         'Block Limit Registers | Shared Mem | Warps | SM | Barriers' (blocks per SM)
--   grid_blocks, sm_count launch__grid_size / 'Grid Size', device__attribute_multiprocessor_count / '# SMs'
-- stall_breakdown lists each stall reason's share of all stall cycles (reasons >= 1 %), largest
-- first; 'selected' (issuing) and 'not_selected' (eligible, another warp issued) are issue
-- states, not stalls, and are left out; top_stall is the largest of the rest. Without the stall
-- counters (details page), top_stall and top_stall_pct come from ncu's own CPIStall rule result
-- (the stall it names, and its share of the cycles between two issued instructions), and
-- sectors_ratio from its UncoalescedGlobalAccess rule (1 / (1 - excessive share)).
-- pipe_pct = the busier of the tensor pipes (kernel_bounds.tensor_pct) and the highest-utilized
-- pipeline named by ncu's HighPipeUtilization rule.
-- occupancy_limiter = the resource with the fewest blocks per SM (ties in the order registers,
-- shared_mem, warps, blocks, barriers).
-- cause: the first rule of this table that holds (its numbers in cause_evidence):
--   1 small_grid          waves < bound_waves (1) and grid_blocks < sm_count, and neither SM nor
--                         memory throughput reaches bound_low_pct (60 %): the grid cannot fill the GPU;
--                         a report without both throughputs (no SpeedOfLight section) is given
--                         small_grid on the grid alone, and missing says to collect the section
--   2 divergence          threads_per_inst < 24 of 32: warps run their branches one after another
--   3 uncoalesced         sectors_ratio >= 2 (raw page), or, without it, l1_sectors_per_request > 16
--                         (a 4-byte access per thread needs 4, a 16-byte one 16): scattered accesses
--   4 occupancy_<limiter> theoretical occupancy < 25 % and the kernel is latency-bound
--                         (`kernel_bounds.bound` = 'latency'): too few warps to hide latency
--   5 <by top stall>      where DRAM throughput < 60 %, tensor pipes < 50 % and pipe_pct < 80 % (a
--                         kernel saturating DRAM, tensor cores or a pipeline -- a Hopper GEMM's
--                         shared pipe -- has no latency problem to name): long_scoreboard ->
--                         memory_latency, barrier -> barrier_sync, short_scoreboard / mio_throttle ->
--                         shared_memory, wait -> dependency_chain, math_pipe_throttle ->
--                         pipe_throttle, no_instruction -> instruction_fetch, lg_throttle ->
--                         lsu_throttle, branch_resolving -> branch_resolving, membar ->
--                         memory_barrier, tex_throttle -> texture_throttle, dispatch_stall ->
--                         dispatch, drain -> drain, imc_miss -> constant_cache, sleeping ->
--                         sleeping, gmma -> tensor_wait
--   NULL                  none holds (e.g. a GEMM at 90 % of the tensor pipes), or no data
-- remedy: the cause's remedy (the table in sql/kernels/kernel_latency.sql below, `remedies`).
-- missing: what to collect for the rules that lacked data ('' when nothing is missing).
-- Parameters:
--   bound_waves    (kernel_bounds)
--   bound_low_pct  (kernel_bounds)
--
-- Uses: kernel_bounds
--
-- Columns:
--   source_id               INTEGER  the ncu source
--   id                      BIGINT   ncu result ID
--   name                    VARCHAR  kernel name as ncu printed it
--   short_name              VARCHAR  base function name
--   bound                   VARCHAR  kernel_bounds.bound
--   top_stall               VARCHAR  the largest stall reason (ncu's name, e.g. 'long_scoreboard')
--   top_stall_pct           DOUBLE   its share of all stall cycles, %
--   stall_breakdown         VARCHAR  'reason share %, ...' for reasons >= 1 %, largest first
--   warp_cycles_per_issue   DOUBLE   cycles between two issued instructions of a warp
--   threads_per_inst        DOUBLE   active threads per executed warp instruction (of 32)
--   branch_uniformity_pct   DOUBLE   uniform branch targets, %
--   l1_sectors_per_request  DOUBLE   global-load sectors per request (ncu_kernels)
--   sectors_ratio           DOUBLE   global sectors moved / sectors needed
--   pipe_pct                DOUBLE   the busiest pipeline, % (see above)
--   theoretical_occupancy_pct DOUBLE theoretical occupancy, %
--   achieved_occupancy_pct  DOUBLE   achieved occupancy, %
--   occupancy_limiter       VARCHAR  'registers', 'shared_mem', 'warps', 'blocks' or 'barriers'
--   registers_per_thread    DOUBLE   registers per thread
--   waves                   DOUBLE   waves per SM
--   grid_blocks             DOUBLE   blocks in the grid
--   sm_count                DOUBLE   SMs of the GPU
--   cause                   VARCHAR  the named cause (see above) or NULL
--   cause_evidence          VARCHAR  the rule that fired, with its numbers
--   remedy                  VARCHAR  what to do about the cause
--   missing                 VARCHAR  counters not collected, and how to collect them
CREATE OR REPLACE VIEW kernel_latency AS
WITH m AS (  -- the metrics used, keyed by meaning (ids first, details-page labels second)
    SELECT source_id, id, value,
        CASE
            WHEN starts_with(name, 'smsp__average_warps_issue_stalled_')
             AND suffix(name, '_per_issue_active.ratio') THEN 'stall'
            WHEN name = 'smsp__thread_inst_executed_per_inst_executed.ratio' THEN 'threads'
            WHEN name = 'Avg. Active Threads Per Warp' AND body_item IS NULL THEN 'threads_label'
            WHEN name = 'smsp__sass_average_branch_targets_threads_uniform.pct' THEN 'uniform'
            WHEN name = 'Branch Efficiency' AND body_item IS NULL THEN 'uniform_label'
            WHEN name = 'smsp__average_warp_latency_per_inst_issued.ratio' THEN 'cpi'
            WHEN name = 'Warp Cycles Per Issued Instruction' AND body_item IS NULL THEN 'cpi_label'
            WHEN name = 'memory_l2_theoretical_sectors_global' THEN 'sectors'
            WHEN name = 'memory_l2_theoretical_sectors_global_ideal' THEN 'sectors_ideal'
            WHEN name IN ('launch__occupancy_limit_registers', 'Block Limit Registers') THEN 'lim_registers'
            WHEN name IN ('launch__occupancy_limit_shared_mem', 'Block Limit Shared Mem') THEN 'lim_shared_mem'
            WHEN name IN ('launch__occupancy_limit_warps', 'Block Limit Warps') THEN 'lim_warps'
            WHEN name IN ('launch__occupancy_limit_blocks', 'Block Limit SM') THEN 'lim_blocks'
            WHEN name IN ('launch__occupancy_limit_barriers', 'Block Limit Barriers') THEN 'lim_barriers'
            WHEN name IN ('launch__registers_per_thread', 'Registers Per Thread') THEN 'regs'
            WHEN name IN ('launch__grid_size', 'Grid Size') AND body_item IS NULL THEN 'grid'
            WHEN name IN ('device__attribute_multiprocessor_count', '# SMs') THEN 'sms'
        END AS key,
        CASE WHEN starts_with(name, 'smsp__average_warps_issue_stalled_')
             THEN regexp_extract(name, '^smsp__average_warps_issue_stalled_(.*)_per_issue_active\.ratio$', 1)
        END AS reason
    FROM ncu_metrics
    WHERE value IS NOT NULL
),
stalls AS (
    SELECT source_id, id, reason, 100.0 * value / nullif(sum(value) OVER (PARTITION BY source_id, id), 0) AS pct
    FROM m WHERE key = 'stall' AND reason NOT IN ('selected', 'not_selected')
),
stall_sum AS (
    SELECT source_id, id, arg_max(reason, (pct, reason)) AS top_stall, max(pct) AS top_stall_pct,
           string_agg(reason || ' ' || round(pct)::INTEGER || ' %', ', ' ORDER BY pct DESC, reason)
               FILTER (WHERE pct >= 1) AS stall_breakdown
    FROM stalls GROUP BY ALL
),
rules AS (  -- what ncu's own rules say, for pages without the counters (details page)
    SELECT source_id, id,
           arg_max(CASE
                     WHEN contains(description, 'scoreboard dependency on a L1TEX') THEN 'long_scoreboard'
                     WHEN contains(description, 'scoreboard dependency on a MIO') THEN 'short_scoreboard'
                     WHEN contains(description, 'at a CTA barrier') THEN 'barrier'
                     WHEN contains(description, 'fixed latency execution dependency') THEN 'wait'
                     WHEN contains(description, 'MIO (memory input/output) instruction queue') THEN 'mio_throttle'
                     WHEN contains(description, 'L1 instruction queue for local and global') THEN 'lg_throttle'
                     WHEN contains(description, 'execution pipe to be available') THEN 'math_pipe_throttle'
                     WHEN contains(description, 'not having the next instruction fetched') THEN 'no_instruction'
                     WHEN contains(description, 'branch target computation') THEN 'branch_resolving'
                     WHEN contains(description, 'memory barrier') THEN 'membar'
                     WHEN contains(description, 'immediate constant cache') THEN 'imc_miss'
                   END, rule) FILTER (WHERE rule = 'CPIStall' AND starts_with(description, 'On average')) AS top_stall,
           max(try_cast(regexp_extract(description, 'represents about ([0-9.]+)%', 1) AS DOUBLE))
               FILTER (WHERE rule = 'CPIStall' AND starts_with(description, 'On average')) AS top_stall_pct,
           max(1.0 / nullif(1 - try_cast(regexp_extract(description, '\(([0-9.]+)% of the total', 1) AS DOUBLE) / 100, 0))
               FILTER (WHERE rule = 'UncoalescedGlobalAccess') AS sectors_ratio,
           max(try_cast(regexp_extract(description, 'is the highest-utilized pipeline \(([0-9.]+)%\)', 1) AS DOUBLE))
               FILTER (WHERE rule = 'HighPipeUtilization') AS pipe_pct
    FROM ncu_rules
    WHERE rule IN ('CPIStall', 'UncoalescedGlobalAccess', 'HighPipeUtilization')
    GROUP BY ALL
),
p AS (
    SELECT source_id, id,
           coalesce(max(value) FILTER (key = 'threads'), max(value) FILTER (key = 'threads_label')) AS threads,
           coalesce(max(value) FILTER (key = 'uniform'), max(value) FILTER (key = 'uniform_label')) AS uniform,
           coalesce(max(value) FILTER (key = 'cpi'), max(value) FILTER (key = 'cpi_label')) AS cpi,
           max(value) FILTER (key = 'sectors') / nullif(max(value) FILTER (key = 'sectors_ideal'), 0) AS sectors_ratio,
           count(*) FILTER (key = 'sectors_ideal') > 0 AS has_sectors,
           max(value) FILTER (key = 'lim_registers') AS lim_registers,
           max(value) FILTER (key = 'lim_shared_mem') AS lim_shared_mem,
           max(value) FILTER (key = 'lim_warps') AS lim_warps,
           max(value) FILTER (key = 'lim_blocks') AS lim_blocks,
           max(value) FILTER (key = 'lim_barriers') AS lim_barriers,
           max(value) FILTER (key = 'regs') AS regs,
           max(value) FILTER (key = 'grid') AS grid,
           max(value) FILTER (key = 'sms') AS sms
    FROM m WHERE key IS NOT NULL AND key <> 'stall'
    GROUP BY source_id, id
),
k AS (
    SELECT b.source_id, b.id, b.name, b.short_name, b.bound, b.sm_pct, b.memory_pct, b.dram_pct,
           b.tensor_pct, b.waves, b.theoretical_occupancy_pct, b.achieved_occupancy_pct,
           b.l1_sectors_per_request, coalesce(s.top_stall, r.top_stall) AS top_stall,
           coalesce(s.top_stall_pct, r.top_stall_pct) AS top_stall_pct, s.stall_breakdown,
           p.* EXCLUDE (source_id, id, sectors_ratio, has_sectors), coalesce(p.sectors_ratio, r.sectors_ratio) AS sectors_ratio,
           coalesce(p.has_sectors, false) OR r.sectors_ratio IS NOT NULL OR b.l1_sectors_per_request IS NOT NULL
               AS has_sectors,
           greatest(b.tensor_pct, r.pipe_pct) AS pipe_pct,
           CASE least(p.lim_registers, p.lim_shared_mem, p.lim_warps, p.lim_blocks, p.lim_barriers)
               WHEN p.lim_registers THEN 'registers' WHEN p.lim_shared_mem THEN 'shared_mem'
               WHEN p.lim_warps THEN 'warps' WHEN p.lim_blocks THEN 'blocks'
               WHEN p.lim_barriers THEN 'barriers'
           END AS limiter
    FROM kernel_bounds b
    LEFT JOIN stall_sum s USING (source_id, id)
    LEFT JOIN p USING (source_id, id)
    LEFT JOIN rules r USING (source_id, id)
),
c AS (  -- the rule table, in order
    SELECT *,
        CASE
            WHEN waves < try_cast(getvariable('bound_waves') AS DOUBLE) AND grid < sms
             AND coalesce(greatest(sm_pct, memory_pct) < try_cast(getvariable('bound_low_pct') AS DOUBLE), true)
                THEN 'small_grid'
            WHEN threads < 24 THEN 'divergence'
            WHEN sectors_ratio >= 2 OR (sectors_ratio IS NULL AND l1_sectors_per_request > 16) THEN 'uncoalesced'
            WHEN theoretical_occupancy_pct < 25 AND bound = 'latency' AND limiter IS NOT NULL
                THEN 'occupancy_' || limiter
            WHEN top_stall IS NOT NULL AND coalesce(dram_pct, 0) < 60 AND coalesce(tensor_pct, 0) < 50
             AND coalesce(pipe_pct, 0) < 80 THEN
                CASE top_stall
                    WHEN 'long_scoreboard' THEN 'memory_latency' WHEN 'barrier' THEN 'barrier_sync'
                    WHEN 'short_scoreboard' THEN 'shared_memory' WHEN 'mio_throttle' THEN 'shared_memory'
                    WHEN 'wait' THEN 'dependency_chain' WHEN 'math_pipe_throttle' THEN 'pipe_throttle'
                    WHEN 'no_instruction' THEN 'instruction_fetch' WHEN 'lg_throttle' THEN 'lsu_throttle'
                    WHEN 'branch_resolving' THEN 'branch_resolving' WHEN 'membar' THEN 'memory_barrier'
                    WHEN 'tex_throttle' THEN 'texture_throttle' WHEN 'dispatch_stall' THEN 'dispatch'
                    WHEN 'drain' THEN 'drain' WHEN 'imc_miss' THEN 'constant_cache'
                    WHEN 'sleeping' THEN 'sleeping' WHEN 'gmma' THEN 'tensor_wait'
                END
        END AS cause
    FROM k
),
remedies(cause, remedy) AS (VALUES
    ('small_grid', 'The grid fills less than one wave of the GPU: launch more blocks (split-K, smaller tiles, more rows per launch) or batch several calls into one launch.'),
    ('divergence', 'Keep the threads of a warp on one path: sort or bucket the work so neighbouring threads take the same branch, or replace branches by arithmetic / predication.'),
    ('uncoalesced', 'Make neighbouring threads read neighbouring addresses: transpose through shared memory, change the data layout (SoA), or read wider vectors.'),
    ('occupancy_registers', 'Use fewer registers per thread (__launch_bounds__, -maxrregcount, fewer live values, smaller unrolls) so more warps fit an SM.'),
    ('occupancy_shared_mem', 'Use less shared memory per block (smaller tiles, fewer stages) so more blocks fit an SM.'),
    ('occupancy_warps', 'Use smaller blocks, or more of them: the block size limits how many fit an SM.'),
    ('occupancy_blocks', 'Use larger blocks: the per-SM block limit is reached before the warp limit.'),
    ('occupancy_barriers', 'Use fewer named barriers per block, or larger blocks.'),
    ('memory_latency', 'Hide global-memory latency: more independent loads in flight per thread (unroll, vector loads), more warps, prefetch into shared memory (cp.async / TMA).'),
    ('barrier_sync', 'Synchronize less: fewer __syncthreads() (warp-level shuffles for the last reduction steps), more work between barriers, smaller blocks.'),
    ('shared_memory', 'Relieve shared memory: avoid bank conflicts (padding), fewer shared loads per instruction, use registers or shuffles.'),
    ('dependency_chain', 'Break the dependency chains: more independent instructions per thread (interleave several accumulators, unroll), more warps to switch to.'),
    ('pipe_throttle', 'A math pipe is saturated: move work to another pipe (FMA vs ALU, tensor cores) or lower the precision.'),
    ('instruction_fetch', 'Shrink the code the warps run through: less unrolling and inlining, fewer distinct paths.'),
    ('lsu_throttle', 'Issue fewer, wider memory instructions (vector loads) and fewer local-memory spills.'),
    ('branch_resolving', 'Fewer branches and jumps: predicate short branches, hoist conditions out of loops.'),
    ('memory_barrier', 'Fewer memory fences (__threadfence) and atomics on the hot path.'),
    ('texture_throttle', 'Fewer texture / LDG-through-texture requests per instruction.'),
    ('dispatch', 'Dispatch stalls: check for register bank conflicts and unusual instruction mixes.'),
    ('drain', 'Stores wait to drain at the end: write less, or overlap the stores with more work.'),
    ('constant_cache', 'Constant-cache misses: keep per-thread-varying values out of __constant__ memory.'),
    ('sleeping', 'Warps sleep (nanosleep / spin-waits): replace busy-waiting by real synchronization.'),
    ('tensor_wait', 'Warps wait on tensor-core (wgmma) results: deepen the software pipeline.')
)
SELECT c.source_id, c.id, c.name, c.short_name, c.bound, c.top_stall, c.top_stall_pct, c.stall_breakdown,
       c.cpi AS warp_cycles_per_issue, c.threads AS threads_per_inst, c.uniform AS branch_uniformity_pct,
       c.l1_sectors_per_request, c.sectors_ratio, c.pipe_pct, c.theoretical_occupancy_pct, c.achieved_occupancy_pct,
       c.limiter AS occupancy_limiter, c.regs AS registers_per_thread, c.waves, c.grid AS grid_blocks,
       c.sms AS sm_count, c.cause,
       CASE c.cause
           WHEN 'small_grid' THEN printf('%.3g waves: %d block%s for %d SMs; %s',
                                         c.waves, c.grid::BIGINT, CASE WHEN c.grid = 1 THEN '' ELSE 's' END,
                                         c.sms::BIGINT,
                                         CASE WHEN greatest(c.sm_pct, c.memory_pct) IS NULL
                                              THEN 'SM and memory throughput not in the report (collect --section SpeedOfLight to confirm)'
                                              ELSE printf('SM %.0f %%, memory %.0f %%', coalesce(c.sm_pct, 'nan'::DOUBLE),
                                                          coalesce(c.memory_pct, 'nan'::DOUBLE)) END)
           WHEN 'divergence' THEN printf('%.1f of 32 threads active per warp instruction; branch uniformity %.0f %%',
                                         c.threads, coalesce(c.uniform, 'nan'::DOUBLE))
           WHEN 'uncoalesced' THEN CASE WHEN c.sectors_ratio IS NOT NULL
                                        THEN printf('%.2g x the global sectors the accesses need; %.3g sectors per load request',
                                                    c.sectors_ratio, coalesce(c.l1_sectors_per_request, 'nan'::DOUBLE))
                                        ELSE printf('%.3g sectors per global load request', c.l1_sectors_per_request) END
           ELSE CASE WHEN starts_with(c.cause, 'occupancy_')
                     THEN printf('theoretical occupancy %.0f %% (achieved %.0f %%), limited by %s; %d registers per thread',
                                 c.theoretical_occupancy_pct, coalesce(c.achieved_occupancy_pct, 'nan'::DOUBLE), c.limiter,
                                 coalesce(c.regs, 0)::BIGINT)
                     WHEN c.cause IS NOT NULL
                     THEN printf('top stall %s: %.0f %% of %s', c.top_stall, c.top_stall_pct,
                                 coalesce('stall cycles (' || c.stall_breakdown || ')',
                                          'the cycles between two issued instructions (ncu''s CPIStall rule)'))
                END
       END AS cause_evidence,
       r.remedy,
       concat_ws('; ',
           CASE WHEN c.stall_breakdown IS NULL THEN 'stall breakdown: export the raw page (ncu --import R --page raw --csv) or collect --section WarpStateStats into a .ncu-rep' END,
           CASE WHEN c.threads IS NULL THEN 'active threads per warp: --section WarpStateStats' END,
           CASE WHEN c.uniform IS NULL THEN 'branch uniformity: --section SourceCounters' END,
           CASE WHEN NOT c.has_sectors THEN 'sectors per request: --section MemoryWorkloadAnalysis_Tables (raw page for the ideal sectors)' END,
           CASE WHEN c.limiter IS NULL THEN 'occupancy limits: --section Occupancy' END,
           CASE WHEN c.grid IS NULL OR c.waves IS NULL THEN 'grid and waves: --section LaunchStats' END,
           CASE WHEN c.grid IS NOT NULL AND c.waves IS NOT NULL AND c.sms IS NULL
                THEN 'SM count (for small_grid): --section LaunchStats' END,
           CASE WHEN c.cause = 'small_grid' AND greatest(c.sm_pct, c.memory_pct) IS NULL
                THEN 'SM and memory throughput, to confirm small_grid: --section SpeedOfLight' END) AS missing
FROM c LEFT JOIN remedies r USING (cause)
ORDER BY c.source_id, c.id;
