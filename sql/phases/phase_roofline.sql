-- phase_roofline: per phase (prefill, decode_step, train_step ...), the FLOPs and bytes of its operator calls against its GPU time, the roof it is under and how close it gets: the verdict 'prefill compute-bound at X % of peak FLOP/s, decode memory-bound at Y % of DRAM bandwidth'.
--
-- Definition:
--   a phase's instances are those of `phase_ops` (record_function / NVTX ranges); its calls are
--   the `roofline` rows whose call started inside an instance on the same thread (nested phases
--   each count them, as in `phases`).
--   flops, bytes  = sums over those calls; gpu_ns = the summed duration of every GPU operation
--     launched inside the instances (`phase_ops`), modelled or not; modelled_gpu_ns = the part
--     launched by calls with a model (`roofline.gpu_ns`); coverage_pct = their ratio.
--   flops_per_s = flops / gpu_ns, bytes_per_s = bytes / gpu_ns (the GPU's busy time, so gaps
--     between kernels do not count: that is `phase_idle`'s question);
--   pct_peak_flops / pct_peak_bytes against the peaks of the calls (the compute peak of the dtype
--     of the FLOP-class call with the most FLOPs, of equally many the earliest; variables
--     peak_tflops / peak_tbps override);
--   mfu_pct = 100 * flops / (sum over instances of the instance's GPU span: first op start to
--     last op end) / peak FLOP/s: model-FLOPs utilisation over the wall time the GPU worked on it;
--   roof = 'compute' when flops / bytes >= the ridge (peak FLOP/s / peak bytes/s), else 'memory';
--   bound = 'latency' when pct_peak_flops and pct_peak_bytes are both below latency_pct
--     (default 40), else the roof (as in `roofline`).
--   tokens = the token ids fed to aten::embedding calls inside the instances (the product of the
--     ids' sizes: batch x sequence), NULL when there is none; *_per_token divide by it.
--   Per instance: divide by `instances` (e.g. bytes / instances = the bytes of one decode step).
-- Parameters (peak_tflops and peak_tbps through roofline):
--   latency_pct  (roofline)
--
-- Uses: roofline, phase_ops
--
-- Columns:
--   source_id        INTEGER  the source
--   phase            VARCHAR  range name without trailing '#N' or per-call ids (tk_phase)
--   instances        BIGINT   instances of the phase with GPU work
--   gpu_ns           BIGINT   summed duration of all GPU operations of the instances, ns
--   span_ns          BIGINT   summed GPU span of the instances (first op start to last op end), ns
--   modelled_gpu_ns  BIGINT   the part of gpu_ns launched by calls with a model, ns
--   coverage_pct     DOUBLE   100 * modelled_gpu_ns / gpu_ns
--   calls            BIGINT   operator calls with GPU work in the instances (roofline rows)
--   flops            DOUBLE   their FLOPs
--   bytes            DOUBLE   their bytes moved (model)
--   intensity        DOUBLE   flops / bytes
--   flops_per_s      DOUBLE   flops / gpu_ns
--   bytes_per_s      DOUBLE   bytes / gpu_ns
--   peak_flops_per_s DOUBLE   compute roof (dtype with the most FLOPs)
--   peak_bytes_per_s DOUBLE   DRAM bandwidth roof
--   pct_peak_flops   DOUBLE   100 * flops_per_s / peak_flops_per_s
--   pct_peak_bytes   DOUBLE   100 * bytes_per_s / peak_bytes_per_s
--   mfu_pct          DOUBLE   100 * flops / span / peak FLOP/s
--   roof             VARCHAR  'compute' or 'memory'
--   bound            VARCHAR  'compute' | 'memory' | 'latency' (NULL: peaks unknown)
--   dtype            VARCHAR  dtype of the peak FLOP/s used
--   tokens           BIGINT   token ids fed to the model inside the instances (NULL: no embedding call)
--   flops_per_token  DOUBLE   flops / tokens
--   bytes_per_token  DOUBLE   bytes / tokens
--   gpu_ns_per_token DOUBLE   gpu_ns / tokens
CREATE OR REPLACE VIEW phase_roofline AS
WITH inst AS (  -- the instances with GPU work: their GPU time and span
    SELECT source_id, phase, event_id, any_value(pid) AS pid, any_value(tid) AS tid,
           sum(dur_ns)::BIGINT AS gpu_ns, max(end_ns) - min(start_ns) AS span_ns
    FROM phase_ops GROUP BY ALL
),
bounds AS (  -- the instances' CPU ranges
    SELECT e.source_id, e.event_id, e.start_ns, e.end_ns
    FROM events e JOIN (SELECT DISTINCT source_id, event_id FROM inst) i USING (source_id, event_id)
),
rng AS (
    SELECT DISTINCT {'s': i.source_id, 'p': i.pid, 't': i.tid} AS key, b.event_id AS range_id,
           b.start_ns, b.end_ns
    FROM inst i JOIN bounds b USING (source_id, event_id)
),
calls AS (SELECT row_number() OVER () AS point_id, * FROM roofline),
pts AS (SELECT {'s': source_id, 'p': pid, 't': tid} AS key, point_id, start_ns AS ts FROM calls),
emb AS (  -- token ids fed to the model
    SELECT source_id, pid, tid, start_ns, tk_numel(tk_op_dims(category, name, args)[2]) AS tokens
    FROM events
    WHERE tk_is_op_range(category, name) AND tk_op_name(category, name) = 'aten::embedding'
),
emb_pts AS (SELECT {'s': source_id, 'p': pid, 't': tid} AS key, row_number() OVER () AS point_id,
                   start_ns AS ts, tokens FROM emb),
c AS (  -- calls per instance
    SELECT i.phase, e.range_id AS instance_id, c.*
    FROM tk_enclosing('rng', 'pts') e
    JOIN calls c ON c.point_id = e.point_id
    JOIN (SELECT DISTINCT source_id, event_id, phase FROM inst) i ON i.event_id = e.range_id AND i.source_id = c.source_id
),
t AS (  -- tokens per phase
    SELECT i.source_id, i.phase, sum(p.tokens) AS tokens
    FROM tk_enclosing('rng', 'emb_pts') e
    JOIN emb_pts p ON p.point_id = e.point_id
    JOIN (SELECT DISTINCT source_id, event_id, phase FROM inst) i ON i.event_id = e.range_id AND i.source_id = p.key.s
    GROUP BY ALL
),
per_phase AS (
    SELECT source_id, phase, count(*) AS calls, sum(flops) AS flops, sum(bytes) AS bytes,
           sum(gpu_ns)::BIGINT AS modelled_gpu_ns,
           arg_max(peak_flops_per_s, (flops, -start_ns, -event_id)) FILTER (model <> 'bytes') AS peak_flops_mm,
           arg_max(dtype, (flops, -start_ns, -event_id)) FILTER (model <> 'bytes') AS dtype_mm,
           max(peak_flops_per_s) FILTER (model = 'bytes') AS peak_flops_other,
           max(peak_bytes_per_s) AS peak_bytes_per_s
    FROM c GROUP BY ALL
),
g AS (SELECT source_id, phase, count(*) AS instances, sum(gpu_ns)::BIGINT AS gpu_ns, sum(span_ns)::BIGINT AS span_ns FROM inst GROUP BY ALL),
j AS (
    SELECT g.source_id, g.phase, g.instances, g.gpu_ns, g.span_ns, p.modelled_gpu_ns, p.calls,
           p.flops, p.bytes, p.flops / nullif(p.bytes, 0) AS intensity,
           p.flops / (g.gpu_ns * 1e-9) AS flops_per_s, p.bytes / (g.gpu_ns * 1e-9) AS bytes_per_s,
           coalesce(p.peak_flops_mm, p.peak_flops_other) AS peak_flops_per_s, p.peak_bytes_per_s,
           CASE WHEN p.peak_flops_mm IS NOT NULL THEN p.dtype_mm ELSE 'fp32' END AS dtype,
           t.tokens
    FROM g JOIN per_phase p USING (source_id, phase)
    LEFT JOIN t USING (source_id, phase)
)
SELECT source_id, phase, instances, gpu_ns, span_ns, modelled_gpu_ns,
       100.0 * modelled_gpu_ns / nullif(gpu_ns, 0) AS coverage_pct, calls, flops, bytes, intensity,
       flops_per_s, bytes_per_s, peak_flops_per_s, peak_bytes_per_s,
       100 * flops_per_s / peak_flops_per_s AS pct_peak_flops,
       100 * bytes_per_s / peak_bytes_per_s AS pct_peak_bytes,
       100 * flops / (span_ns * 1e-9) / peak_flops_per_s AS mfu_pct,
       tk_roof(flops, intensity, peak_flops_per_s, peak_bytes_per_s) AS roof,  -- sql/lib/peaks.sql
       tk_roof_bound(flops, intensity, 100 * flops_per_s / peak_flops_per_s, 100 * bytes_per_s / peak_bytes_per_s,
                     peak_flops_per_s, peak_bytes_per_s, getvariable('latency_pct')) AS bound,
       dtype, tokens::BIGINT AS tokens,
       flops / tokens AS flops_per_token, bytes / tokens AS bytes_per_token, gpu_ns / tokens AS gpu_ns_per_token
FROM j;
