-- kernel_bounds: per profiled kernel (ncu result), memory-, compute- or latency-bound, with the evidence.
--
-- One row per row of `ncu_kernels`. Inputs are ncu's own ratios (Speed-of-Light % of peak,
-- roofline counters), never the timeline's durations: ncu replays each kernel with flushed
-- caches, so its time is not the timeline's, but its ratios are what ncu reports.
--
-- Definition of `bound` (ncu's SOLBottleneck rule, same thresholds in its 2019-2025 rule scripts;
-- sm = sm_pct, mem = memory_pct, checked in this order):
--   1. sm >= HIGH or mem >= HIGH       -> 'memory' if mem > sm else 'compute'   ('high throughput')
--   2. sm <  LOW  and mem <  LOW       -> 'latency'   ('small grid' when waves < WAVES, else
--                                         'latency issue': too few warps or stalls hide nothing)
--   3. |sm - mem| >= GAP               -> the larger one ('compute > memory' / 'memory > compute')
--   4. otherwise                       -> 'balanced'
--   NULL when sm or mem was not collected (bound_reason says so).
-- HIGH, LOW, GAP and the waves limit are the parameters below (ncu's values as defaults).
-- `dominant` is the larger of the two SOL units regardless of the thresholds ('memory' on ties
-- goes to 'compute', as in ncu). `memory_level` names the busiest memory unit of dram/l2/l1 %.
--
-- Roofline (only where the counters were collected; ids from the raw page, a .ncu-rep or
-- --metrics; the 2025 details page's roofline body items):
--   ops/s per class: fp32 = (fadd + fmul + 2*ffma), fp64 = (dadd + dmul + 2*dfma),
--     fp16 = (2*hadd + 2*hmul + 4*hfma) thread instructions (count / duration, or per-cycle
--     rate * SM clock), tensor_<src> = sm__ops_path_tensor_src_<src>.sum (per second, or / duration)
--   peak per class: 2*ffma / 2*dfma / 4*hfma peak_sustained (inst/cycle) * SM clock;
--     tensor: sm__ops_path_tensor_src_<src>.sum.peak_sustained * SM clock
--   flop_per_s = sum over classes; compute_class = the class with the most ops/s
--   dram_bytes_per_s = dram__bytes.sum.per_second, else dram bytes / duration
--   arithmetic_intensity = flop_per_s / dram_bytes_per_s                    (FLOP per DRAM byte)
--   peak_dram_bytes_per_s = dram__bytes.sum.peak_sustained * DRAM clock
--   ridge = peak of compute_class / peak_dram_bytes_per_s
--   roofline_bound = 'memory' if arithmetic_intensity < ridge else 'compute'
--   pct_of_peak_flop = 100 * ops/s of compute_class / its peak
-- (Tensor "ops" count each multiply-add as 2; int8/int1 tensor ops count as ops.)
--
-- Parameters:
--   bound_high_pct  80.0  SOL % above which a unit is 'high throughput' (ncu's value)
--   bound_low_pct   60.0  both SOL units below this %: latency bound
--   bound_gap_pct   10.0  the SOL difference that makes a verdict, percentage points
--   bound_waves     1.0   fewer waves than this: 'small grid'
--
-- Uses: (tables only)
--
-- Columns:
--   source_id              INTEGER  the ncu source
--   id                     BIGINT   ncu result ID (ncu_kernels.id)
--   name                   VARCHAR  kernel name as ncu printed it
--   short_name             VARCHAR  base function name
--   dur_ns                 BIGINT   duration under ncu replay, ns
--   bound                  VARCHAR  'memory' | 'compute' | 'latency' | 'balanced' | NULL
--   bound_reason           VARCHAR  which rule decided: 'high throughput', 'small grid', 'latency issue',
--                                   'compute > memory', 'memory > compute', 'balanced',
--                                   'no Speed-of-Light metrics'
--   dominant               VARCHAR  'compute' or 'memory': the larger SOL %
--   sm_pct                 DOUBLE   compute (SM) throughput, % of peak
--   memory_pct             DOUBLE   memory throughput, % of peak (max of DRAM, L2, L1)
--   dram_pct               DOUBLE   DRAM throughput, % of peak
--   l2_pct                 DOUBLE   L2 throughput, % of peak
--   l1_pct                 DOUBLE   L1/TEX throughput, % of peak (active)
--   memory_level           VARCHAR  'DRAM' | 'L2' | 'L1': the busiest of the three
--   tensor_pct             DOUBLE   tensor pipe active, % of peak (elapsed)
--   waves                  DOUBLE   waves per SM of the launch
--   achieved_occupancy_pct DOUBLE   achieved occupancy %
--   theoretical_occupancy_pct DOUBLE theoretical occupancy %
--   l1_sectors_per_request DOUBLE   global-load sectors per request (4 = coalesced fp32, 32 = scattered)
--   flop_per_s             DOUBLE   achieved operations per second (all classes)
--   compute_class          VARCHAR  'fp32', 'fp64', 'fp16' or 'tensor_<src>' with the most ops/s
--   pct_of_peak_flop       DOUBLE   ops/s of compute_class as % of its peak
--   dram_bytes_per_s       DOUBLE   achieved DRAM bandwidth, byte/s
--   arithmetic_intensity   DOUBLE   FLOP per DRAM byte
--   peak_flop_per_s        DOUBLE   peak ops/s of compute_class
--   peak_dram_bytes_per_s  DOUBLE   peak DRAM bandwidth, byte/s
--   ridge                  DOUBLE   peak_flop_per_s / peak_dram_bytes_per_s, FLOP/byte
--   roofline_bound         VARCHAR  'memory' or 'compute' by arithmetic intensity vs ridge
--   ncu_bottleneck         VARCHAR  ncu's own SOLBottleneck rule text, when present
CREATE OR REPLACE VIEW kernel_bounds AS
WITH params AS (
    SELECT try_cast(getvariable('bound_high_pct') AS DOUBLE) AS high,
           try_cast(getvariable('bound_low_pct') AS DOUBLE) AS low,
           try_cast(getvariable('bound_gap_pct') AS DOUBLE) AS gap,
           try_cast(getvariable('bound_waves') AS DOUBLE) AS waves
),
mv AS (  -- the metrics used below, keyed by meaning (ids first, details-page labels second)
    SELECT source_id, id, value,
        CASE
            WHEN name = 'launch__waves_per_multiprocessor' THEN 'waves'
            WHEN name = 'Waves Per SM' AND body_item IS NULL THEN 'waves_label'
            WHEN name = 'lts__throughput.avg.pct_of_peak_sustained_elapsed' THEN 'l2_pct'
            WHEN name IN ('L2 Cache Throughput', 'SOL L2') AND body_item IS NULL
                 AND section LIKE 'GPU Speed Of Light%' THEN 'l2_pct_label'
            WHEN name = 'l1tex__throughput.avg.pct_of_peak_sustained_active' THEN 'l1_pct'
            WHEN name IN ('L1/TEX Cache Throughput', 'SOL TEX') AND body_item IS NULL
                 AND section LIKE 'GPU Speed Of Light%' THEN 'l1_pct_label'
            WHEN name = 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed' THEN 'tensor_pct'
            WHEN name = 'SM: Pipe Tensor Cycles Active' THEN 'tensor_pct_label'
            WHEN name IN ('sm__cycles_elapsed.avg.per_second', 'smsp__cycles_elapsed.avg.per_second') THEN 'sm_hz'
            WHEN name = 'SM Frequency' THEN 'sm_hz_label'
            WHEN name = 'dram__cycles_elapsed.avg.per_second' THEN 'dram_hz'
            WHEN name IN ('DRAM Frequency', 'Memory Frequency') THEN 'dram_hz_label'
            WHEN name = 'dram__bytes.sum.peak_sustained' THEN 'dram_peak_bpc'
            WHEN name = 'Theoretical DRAM Bytes Accessible' THEN 'dram_peak_bpc'
            WHEN name = 'dram__bytes.sum.per_second' THEN 'dram_bps'
            WHEN name = 'DRAM Bandwidth' AND unit = 'byte/s' THEN 'dram_bps_label'
            WHEN name = 'Memory Throughput' AND unit = 'byte/s'
                 AND section = 'Memory Workload Analysis' THEN 'dram_bps_label'
            WHEN name = 'dram__bytes.sum' THEN 'dram_bytes'
            WHEN name = 'dram__bytes_read.sum' THEN 'dram_read'
            WHEN name = 'dram__bytes_write.sum' THEN 'dram_write'
            WHEN regexp_matches(name, '^(sm|smsp)__sass_thread_inst_executed_op_[dfh](add|mul|fma)_pred_on\.sum$')
                THEN regexp_extract(name, 'op_([dfh](add|mul|fma))_pred_on', 1)
            WHEN name LIKE 'smsp__sass_thread_inst_executed_op\___%\_pred_on.sum.per_cycle_elapsed' ESCAPE '\'
                 AND regexp_matches(name, 'op_[dfh](add|mul|fma)_pred_on')
                THEN regexp_extract(name, 'op_([dfh](add|mul|fma))_pred_on', 1) || '_pc'
            WHEN regexp_matches(name, '^Predicated-On [DFH](ADD|MUL|FMA) Thread Instructions Executed Per Cycle$')
                THEN lower(regexp_extract(name, '^Predicated-On ([DFH](ADD|MUL|FMA))', 1)) || '_pc'
            WHEN regexp_matches(name, '^sm__sass_thread_inst_executed_op_[dfh]fma_pred_on\.sum\.peak_sustained$')
                THEN regexp_extract(name, 'op_([dfh]fma)_pred_on', 1) || '_peak'
            WHEN regexp_matches(name, '^Theoretical Predicated-On [DFH]FMA Thread Instructions Executed$')
                THEN lower(regexp_extract(name, '([DFH]FMA)', 1)) || '_peak'
        END AS key
    FROM ncu_metrics
    WHERE value IS NOT NULL
),
p AS (
    SELECT source_id, id,
           coalesce(max(value) FILTER (key = 'waves'), max(value) FILTER (key = 'waves_label')) AS waves,
           coalesce(max(value) FILTER (key = 'l2_pct'), max(value) FILTER (key = 'l2_pct_label')) AS l2_pct,
           coalesce(max(value) FILTER (key = 'l1_pct'), max(value) FILTER (key = 'l1_pct_label')) AS l1_pct,
           coalesce(max(value) FILTER (key = 'tensor_pct'), max(value) FILTER (key = 'tensor_pct_label')) AS tensor_pct,
           coalesce(max(value) FILTER (key = 'sm_hz'), max(value) FILTER (key = 'sm_hz_label')) AS sm_hz,
           coalesce(max(value) FILTER (key = 'dram_hz'), max(value) FILTER (key = 'dram_hz_label')) AS dram_hz,
           max(value) FILTER (key = 'dram_peak_bpc') AS dram_peak_bpc,
           coalesce(max(value) FILTER (key = 'dram_bps'), max(value) FILTER (key = 'dram_bps_label')) AS dram_bps,
           coalesce(max(value) FILTER (key = 'dram_bytes'),
                    max(value) FILTER (key = 'dram_read') + max(value) FILTER (key = 'dram_write')) AS dram_bytes,
           max(value) FILTER (key = 'fadd') AS fadd, max(value) FILTER (key = 'fmul') AS fmul,
           max(value) FILTER (key = 'ffma') AS ffma, max(value) FILTER (key = 'dadd') AS dadd,
           max(value) FILTER (key = 'dmul') AS dmul, max(value) FILTER (key = 'dfma') AS dfma,
           max(value) FILTER (key = 'hadd') AS hadd, max(value) FILTER (key = 'hmul') AS hmul,
           max(value) FILTER (key = 'hfma') AS hfma,
           max(value) FILTER (key = 'fadd_pc') AS fadd_pc, max(value) FILTER (key = 'fmul_pc') AS fmul_pc,
           max(value) FILTER (key = 'ffma_pc') AS ffma_pc, max(value) FILTER (key = 'dadd_pc') AS dadd_pc,
           max(value) FILTER (key = 'dmul_pc') AS dmul_pc, max(value) FILTER (key = 'dfma_pc') AS dfma_pc,
           max(value) FILTER (key = 'hadd_pc') AS hadd_pc, max(value) FILTER (key = 'hmul_pc') AS hmul_pc,
           max(value) FILTER (key = 'hfma_pc') AS hfma_pc,
           max(value) FILTER (key = 'ffma_peak') AS ffma_peak, max(value) FILTER (key = 'dfma_peak') AS dfma_peak,
           max(value) FILTER (key = 'hfma_peak') AS hfma_peak
    FROM mv
    WHERE key IS NOT NULL
    GROUP BY source_id, id
),
k AS (
    SELECT k.source_id, k.id, k.name, k.short_name, k.dur_ns,
           k.sm_throughput_pct AS sm_pct, k.memory_throughput_pct AS memory_pct,
           k.dram_throughput_pct AS dram_pct, k.achieved_occupancy_pct, k.theoretical_occupancy_pct,
           k.l1_sectors_per_request, k.bottleneck_rule,
           p.* EXCLUDE (source_id, id),
           nullif(k.dur_ns, 0) * 1e-9 AS dur_s
    FROM ncu_kernels k
    LEFT JOIN p USING (source_id, id)
),
classes AS (  -- achieved and peak ops/s per compute class
    SELECT source_id, id, 'fp32' AS class,
           coalesce(CASE WHEN coalesce(fadd, fmul, ffma) IS NOT NULL
                         THEN (coalesce(fadd, 0) + coalesce(fmul, 0) + 2 * coalesce(ffma, 0)) / dur_s END,
                    CASE WHEN coalesce(fadd_pc, fmul_pc, ffma_pc) IS NOT NULL
                         THEN (coalesce(fadd_pc, 0) + coalesce(fmul_pc, 0) + 2 * coalesce(ffma_pc, 0)) * sm_hz END) AS rate,
           2 * ffma_peak * sm_hz AS peak
    FROM k
    UNION ALL
    SELECT source_id, id, 'fp64',
           coalesce(CASE WHEN coalesce(dadd, dmul, dfma) IS NOT NULL
                         THEN (coalesce(dadd, 0) + coalesce(dmul, 0) + 2 * coalesce(dfma, 0)) / dur_s END,
                    CASE WHEN coalesce(dadd_pc, dmul_pc, dfma_pc) IS NOT NULL
                         THEN (coalesce(dadd_pc, 0) + coalesce(dmul_pc, 0) + 2 * coalesce(dfma_pc, 0)) * sm_hz END),
           2 * dfma_peak * sm_hz
    FROM k
    UNION ALL
    SELECT source_id, id, 'fp16',
           coalesce(CASE WHEN coalesce(hadd, hmul, hfma) IS NOT NULL
                         THEN (2 * coalesce(hadd, 0) + 2 * coalesce(hmul, 0) + 4 * coalesce(hfma, 0)) / dur_s END,
                    CASE WHEN coalesce(hadd_pc, hmul_pc, hfma_pc) IS NOT NULL
                         THEN (2 * coalesce(hadd_pc, 0) + 2 * coalesce(hmul_pc, 0) + 4 * coalesce(hfma_pc, 0)) * sm_hz END),
           4 * hfma_peak * sm_hz
    FROM k
    UNION ALL
    SELECT t.source_id, t.id, 'tensor_' || t.src,
           coalesce(t.per_s, t.ops / k.dur_s), t.peak_pc * k.sm_hz
    FROM (
        SELECT source_id, id, regexp_extract(name, '^sm__ops_path_tensor_src_([a-z0-9_]+)\.sum', 1) AS src,
               max(value) FILTER (name LIKE '%.sum') AS ops,
               max(value) FILTER (name LIKE '%.sum.per_second') AS per_s,
               max(value) FILTER (name LIKE '%.sum.peak_sustained') AS peak_pc
        FROM ncu_metrics
        WHERE value IS NOT NULL
          AND regexp_matches(name, '^sm__ops_path_tensor_src_[a-z0-9_]+\.sum(\.per_second|\.peak_sustained)?$')
        GROUP BY ALL
    ) t
    JOIN k USING (source_id, id)
),
roof AS (
    SELECT source_id, id,
           sum(rate) AS flop_per_s,
           arg_max(class, rate) FILTER (rate > 0) AS compute_class,
           arg_max(rate, rate) FILTER (rate > 0) AS class_rate,
           arg_max(peak, rate) FILTER (rate > 0) AS peak_flop_per_s
    FROM classes
    WHERE rate IS NOT NULL
    GROUP BY source_id, id
),
v AS (
    SELECT k.*, r.flop_per_s, r.compute_class, r.peak_flop_per_s,
           100 * r.class_rate / nullif(r.peak_flop_per_s, 0) AS pct_of_peak_flop,
           coalesce(k.dram_bps, k.dram_bytes / k.dur_s) AS dram_bytes_per_s,
           k.dram_peak_bpc * k.dram_hz AS peak_dram_bytes_per_s,
           pr.high, pr.low, pr.gap, pr.waves AS waves_min
    FROM k
    LEFT JOIN roof r USING (source_id, id)
    CROSS JOIN params pr
)
SELECT source_id, id, name, short_name, dur_ns,
       CASE
           WHEN sm_pct IS NULL OR memory_pct IS NULL THEN NULL
           WHEN sm_pct >= high OR memory_pct >= high THEN CASE WHEN memory_pct > sm_pct THEN 'memory' ELSE 'compute' END
           WHEN sm_pct < low AND memory_pct < low THEN 'latency'
           WHEN abs(sm_pct - memory_pct) >= gap THEN CASE WHEN memory_pct > sm_pct THEN 'memory' ELSE 'compute' END
           ELSE 'balanced'
       END AS bound,
       CASE
           WHEN sm_pct IS NULL OR memory_pct IS NULL THEN 'no Speed-of-Light metrics'
           WHEN sm_pct >= high OR memory_pct >= high THEN 'high throughput'
           WHEN sm_pct < low AND memory_pct < low THEN
                CASE WHEN waves < waves_min THEN 'small grid' ELSE 'latency issue' END
           WHEN abs(sm_pct - memory_pct) >= gap THEN
                CASE WHEN memory_pct > sm_pct THEN 'memory > compute' ELSE 'compute > memory' END
           ELSE 'balanced'
       END AS bound_reason,
       CASE WHEN sm_pct IS NULL OR memory_pct IS NULL THEN NULL
            WHEN memory_pct > sm_pct THEN 'memory' ELSE 'compute' END AS dominant,
       sm_pct, memory_pct, dram_pct, l2_pct, l1_pct,
       CASE WHEN coalesce(dram_pct, l2_pct, l1_pct) IS NULL THEN NULL
            WHEN coalesce(dram_pct, -1) >= coalesce(l2_pct, -1) AND coalesce(dram_pct, -1) >= coalesce(l1_pct, -1) THEN 'DRAM'
            WHEN coalesce(l2_pct, -1) >= coalesce(l1_pct, -1) THEN 'L2'
            ELSE 'L1' END AS memory_level,
       tensor_pct, waves, achieved_occupancy_pct, theoretical_occupancy_pct, l1_sectors_per_request,
       flop_per_s, compute_class, pct_of_peak_flop, dram_bytes_per_s,
       flop_per_s / nullif(dram_bytes_per_s, 0) AS arithmetic_intensity,
       peak_flop_per_s, peak_dram_bytes_per_s,
       peak_flop_per_s / nullif(peak_dram_bytes_per_s, 0) AS ridge,
       CASE WHEN flop_per_s IS NULL OR dram_bytes_per_s IS NULL OR dram_bytes_per_s = 0
                 OR peak_flop_per_s IS NULL OR peak_dram_bytes_per_s IS NULL THEN NULL
            WHEN flop_per_s / dram_bytes_per_s < peak_flop_per_s / peak_dram_bytes_per_s THEN 'memory'
            ELSE 'compute' END AS roofline_bound,
       bottleneck_rule AS ncu_bottleneck
FROM v
ORDER BY source_id, id;
