-- roofline: each framework operator call with its FLOPs and bytes from shapes, its GPU time, and how far it is from the device's roof.
--
-- Needs shapes in the trace: torch.profiler with record_shapes=True, or nsys with
-- --pytorch=autograd-shapes-nvtx. No ncu needed; where ncu profiled the operator's main kernel (a
-- store holding both, paired by `ncu_timeline_match`), its measured class is shown beside.
--
-- Definition:
--   operator call = an `events` row of an op range (`tk_is_op_range`) whose shapes are known
--     (`tk_op_dims`), with a model: a FLOP class (`tk_op_class`) or a bytes model (`tk_op_bytes`:
--     torch's aten ops with a tensor input; custom ops have none, their kernels go to the
--     enclosing modelled call if any, else stay unmodelled: `phase_roofline.coverage_pct`).
--   its GPU work   = the GPU operations (`gpu_launches`: kernels, memcpy, memset) whose launch call
--     started inside the call on the same thread (`tk_enclosing`). A launch inside several modelled
--     calls belongs to one: the OUTERMOST enclosing call of a FLOP class (aten::linear over
--     aten::matmul over aten::mm; scaled_dot_product_attention over its cuDNN / flash backend and
--     their internal ops; conv2d over cudnn_convolution), else the INNERMOST enclosing call with
--     a bytes model (the op that launched it). So each kernel counts once, a GEMM's split-K
--     reduction and workspace memset count with the GEMM, and FLOPs are counted once per call.
--     Calls that got no GPU work have no row (views, factories, an aten::mm inside a counted
--     aten::linear).
--   flops, bytes   = `tk_op_flops` / `tk_op_bytes` (sql/lib/ops.sql) of the call's shapes; torch's
--     own "flops" arg where the trace carries it (with_flops) replaces the modelled FLOPs.
--     Element sizes from "Input type"; where the trace has none (nsys) from the dtype the
--     call's kernel names spell most often (`tk_kernel_dtype`; of equally many, the narrowest),
--     else the source's most common kernel dtype (likewise).
--   intensity      = flops / bytes (FLOP per byte)
--   peaks          = `tk_device_peaks()` matched on the GPU's name (devices.name), the compute
--     peak for the call's dtype (`tk_peak_flops`; FLOP-class calls: their dtype, others: fp32);
--     the DuckDB variables peak_tflops / peak_tbps override them.
--   achieved       = flops / gpu time and bytes / gpu time, gpu_ns = the sum of its GPU
--     operations' durations
--   roof           = 'compute' when intensity >= ridge = peak FLOP/s / peak bytes/s, else 'memory'
--   bound          = 'latency' when both pct_peak_flops and pct_peak_bytes are below latency_pct
--     (DuckDB variable, default 40: far below both roofs, the time goes to fixed costs -- launch,
--     ramp-up, tails, too few blocks); else the roof. NULL when the device's peaks are unknown.
--   ncu_*          = where `ncu_timeline_match` paired an ncu result with the call's main kernel
--     (its longest): `kernel_bounds`' measured roofline class, DRAM and SM throughput.
-- Parameters:
--   latency_pct  40    a call below this % of both roofs is 'latency' bound
--   peak_tflops  NULL  the compute roof, dense TFLOP/s (NULL: tk_device_peaks' for the device)
--   peak_tbps    NULL  the memory roof, TB/s (NULL: tk_device_peaks' for the device)
-- Method (no effect on the result): each call's args are parsed once (`tk_op_args_json`: shapes,
--   types, values and torch's FLOPs together); the shape lists are then read and the FLOPs and
--   bytes modelled once per distinct (operator, shapes text, types text, values text, kernel
--   dtypes), not once per call (a decode step repeats the same few hundred).
--
-- Uses: gpu_launches, ncu_timeline_match, kernel_bounds
--
-- Columns:
--   source_id          INTEGER  the source
--   event_id           BIGINT   the call's events.event_id
--   op                 VARCHAR  operator ('aten::linear', 'aten::scaled_dot_product_attention', ...)
--   shapes             VARCHAR  input sizes as the trace gives them ('[[1, 4096], [11008, 4096], []]')
--   dtype              VARCHAR  dtype class of the call ('bf16', 'fp32', ...; `tk_dtype_class`)
--   model              VARCHAR  'matmul' | 'attention' | 'conv' (FLOPs and bytes) or 'bytes' (bytes only)
--   assumptions        VARCHAR  what the model had to assume (`tk_op_assumptions`), NULL when nothing
--   flops_from         VARCHAR  'shapes' or 'torch' (the trace's with_flops figure)
--   pid                BIGINT   process
--   tid                BIGINT   thread
--   start_ns           BIGINT   call start on the CPU, ns
--   end_ns             BIGINT   call end on the CPU, ns
--   device_id          INTEGER  GPU of its main kernel
--   kernel             VARCHAR  its main GPU operation's name: the longest (the earliest of equally long ones)
--   gpu_ops            BIGINT   GPU operations it launched (as defined above)
--   gpu_ns             BIGINT   their summed duration, ns
--   gpu_start_ns       BIGINT   first of them starts, ns
--   gpu_end_ns         BIGINT   last of them ends, ns
--   flops              DOUBLE   floating-point operations (multiply-add = 2)
--   bytes              DOUBLE   bytes moved (model), NULL when no bytes model applies
--   intensity          DOUBLE   flops / bytes
--   flops_per_s        DOUBLE   flops / gpu time
--   bytes_per_s        DOUBLE   bytes / gpu time
--   peak_flops_per_s   DOUBLE   compute roof for this dtype
--   peak_bytes_per_s   DOUBLE   DRAM bandwidth roof
--   pct_peak_flops     DOUBLE   100 * flops_per_s / peak_flops_per_s
--   pct_peak_bytes     DOUBLE   100 * bytes_per_s / peak_bytes_per_s
--   roof               VARCHAR  'compute' or 'memory': the roof its intensity puts it under
--   bound              VARCHAR  'compute' | 'memory' | 'latency' (NULL: device peaks unknown)
--   device             VARCHAR  the peak table's device (NULL: no match; peaks from the variables)
--   ncu_bound          VARCHAR  ncu's measured roofline class of the main kernel (kernel_bounds.roofline_bound)
--   ncu_dram_pct       DOUBLE   ncu DRAM throughput, % of peak
--   ncu_sm_pct         DOUBLE   ncu compute (SM) throughput, % of peak
CREATE OR REPLACE VIEW roofline AS
WITH op0 AS (  -- op ranges with their args parsed once (lib/ops: tk_op_args_json)
    SELECT source_id, event_id, pid, tid, start_ns, end_ns, category, name, tk_op_args_json(args) AS a
    FROM events
    WHERE tk_is_op_range(category, name) AND pid IS NOT NULL AND end_ns > start_ns
),
op AS MATERIALIZED (  -- op ranges with the raw text of their shapes, types and argument values, as each format
         -- records them (lib/ops), and torch's own FLOPs
    SELECT source_id, event_id, pid, tid, start_ns, end_ns, tk_op_name(category, name) AS op,
           tk_op_dims_json(category, name, a) AS dims_json, tk_op_types_json(category, a) AS types_json,
           tk_op_concrete_json(category, a) AS concrete_json, tk_op_torch_flops(a) AS torch_flops
    FROM op0
),
shape AS (  -- each distinct (operator, shapes text) once: its sizes, class and whether it has a model
    SELECT op, dims_json, dims, cls,
           dims IS NOT NULL
           AND (cls IS NOT NULL
                OR (op LIKE 'aten::%' AND list_sum(list_transform(dims, lambda x: tk_numel(x))) > 0)) AS modelled
    FROM (SELECT op, dims_json, tk_dims_of_json(dims_json) AS dims, tk_op_class(op) AS cls
          FROM (SELECT DISTINCT op, dims_json FROM op WHERE dims_json IS NOT NULL))
),
m AS (  -- the calls with a model
    SELECT op.source_id, op.event_id, op.pid, op.tid, op.start_ns, op.end_ns, op.op, op.dims_json,
           op.types_json, op.concrete_json, op.torch_flops, shape.cls
    FROM op JOIN shape ON shape.op = op.op AND shape.dims_json = op.dims_json
    WHERE shape.modelled
),
rng AS (SELECT {'s': source_id, 'p': pid, 't': tid} AS key, event_id AS range_id, start_ns, end_ns FROM m),
l AS (SELECT row_number() OVER () AS point_id, * FROM gpu_launches),
kd AS (  -- the dtype each GPU operation's name spells, once per distinct name
    SELECT name, dtype, tk_dtype_bytes(dtype) AS dtype_bytes
    FROM (SELECT name, tk_kernel_dtype(name) AS dtype FROM (SELECT DISTINCT name FROM l))
),
pts AS (SELECT {'s': source_id, 'p': pid, 't': tid} AS key, point_id, api_start_ns AS ts FROM l),
pick AS (  -- each launch's call: outermost FLOP-class call, else innermost modelled call
    SELECT e.point_id, e.range_id AS event_id
    FROM tk_enclosing('rng', 'pts') e
    JOIN l ON l.point_id = e.point_id
    JOIN m ON m.source_id = l.source_id AND m.event_id = e.range_id
    QUALIFY row_number() OVER (
        PARTITION BY e.point_id
        ORDER BY (m.cls IS NOT NULL) DESC,
                 CASE WHEN m.cls IS NOT NULL THEN m.start_ns END ASC,
                 CASE WHEN m.cls IS NOT NULL THEN m.end_ns END DESC,
                 m.start_ns DESC, m.end_ns ASC) = 1
),
work AS (  -- the GPU work of each call
    SELECT l.source_id, p.event_id, count(*) AS gpu_ops, sum(l.dur_ns)::BIGINT AS gpu_ns,
           min(l.start_ns) AS gpu_start_ns, max(l.end_ns) AS gpu_end_ns,
           -- the longest kernel (the earliest of equally long ones); the dtype most kernels name
           -- (of equally many, the narrowest: fp8, then bf16 / fp16, fp32, fp64)
           arg_max({'name': l.name, 'device_id': l.device_id, 'start_ns': l.start_ns},
                   (l.dur_ns, -l.start_ns)) AS main,
           mode(kd.dtype ORDER BY kd.dtype_bytes, kd.dtype) FILTER (l.kind = 'kernel') AS kernel_dtype
    FROM pick p JOIN l USING (point_id)
    LEFT JOIN kd ON kd.name = l.name
    GROUP BY ALL
),
src_dtype AS (  -- the source's most common kernel dtype (element size where the trace has none)
    SELECT k.source_id, mode(kd.dtype ORDER BY kd.dtype_bytes, kd.dtype) AS dtype
    FROM kernels k LEFT JOIN kd ON kd.name = k.name GROUP BY ALL
),
peaks AS (  -- each GPU's peaks: the first pattern of tk_device_peaks() its name matches
    SELECT d.source_id, d.device_id, p.device,
           {'fp8': p.fp8, 'bf16': p.bf16, 'fp16': p.fp16, 'tf32': p.tf32, 'fp32': p.fp32,
            'fp64': p.fp64, 'int8': p.int8} AS pk,
           coalesce(p.bytes_per_s, d.memory_bandwidth_bytes_per_s) AS bytes_per_s
    FROM devices d
    LEFT JOIN tk_device_peaks() p ON regexp_matches(d.name, p.pattern, 'i')
    QUALIFY row_number() OVER (PARTITION BY d.source_id, d.device_id ORDER BY p.priority NULLS LAST) = 1
),
mw AS (  -- the calls with work
    SELECT m.source_id, m.event_id, m.pid, m.tid, m.start_ns, m.end_ns, m.cls, m.op, m.dims_json,
           m.types_json, m.concrete_json, m.torch_flops,
           w.gpu_ops, w.gpu_ns, w.gpu_start_ns, w.gpu_end_ns, w.main.name AS kernel,
           w.main.device_id AS device_id, w.main.start_ns AS kernel_start_ns,
           w.kernel_dtype, s.dtype AS src_dtype
    FROM m JOIN work w USING (source_id, event_id)
    LEFT JOIN src_dtype s ON s.source_id = m.source_id
),
model_in AS (  -- each distinct (call shapes, types, values, kernel dtypes) once
    SELECT op, cls, dims_json, types_json, concrete_json, kernel_dtype, src_dtype, dims,
           tk_types_of_json(types_json) AS types, tk_concrete_of_json(concrete_json) AS concrete
    FROM (SELECT DISTINCT mw.op, mw.cls, mw.dims_json, mw.types_json, mw.concrete_json, mw.kernel_dtype,
                          mw.src_dtype, shape.dims
          FROM mw JOIN shape ON shape.op = mw.op AND shape.dims_json = mw.dims_json)
),
model_dt AS (
    SELECT *, list_transform(types, lambda t: tk_dtype_bytes(nullif(t, ''))) AS eb,
           coalesce(tk_dtype_class(first_type), kernel_dtype, src_dtype) AS dtype
    FROM (SELECT *, list_filter(types, lambda t: tk_dtype_bytes(nullif(t, '')) IS NOT NULL)[1] AS first_type
          FROM model_in)
),
model_e AS (SELECT *, tk_dtype_bytes(dtype) AS e FROM model_dt),  -- the op's element size
model AS (  -- their dtype, FLOPs (from shapes) and bytes
    SELECT *, tk_op_flops(op, dims, concrete) AS shape_flops,
           tk_op_bytes(op, dims, eb, e, concrete) AS bytes,
           tk_op_assumptions(op, types, concrete) AS assumptions
    FROM model_e
),
f AS (
    SELECT mw.*, md.dims, md.types, md.dtype, md.assumptions,
           coalesce(mw.torch_flops, md.shape_flops) AS flops, md.bytes,
           coalesce(getvariable('peak_tflops') * 1e12,
                    tk_peak_flops(pk.pk, CASE WHEN mw.cls IS NOT NULL THEN md.dtype ELSE 'fp32' END)) AS peak_flops_per_s,
           coalesce(getvariable('peak_tbps') * 1e12, pk.bytes_per_s) AS peak_bytes_per_s,
           pk.device
    FROM mw
    JOIN model md ON md.op = mw.op AND md.dims_json = mw.dims_json
                 AND md.types_json IS NOT DISTINCT FROM mw.types_json
                 AND md.concrete_json IS NOT DISTINCT FROM mw.concrete_json
                 AND md.kernel_dtype IS NOT DISTINCT FROM mw.kernel_dtype
                 AND md.src_dtype IS NOT DISTINCT FROM mw.src_dtype
    LEFT JOIN peaks pk ON pk.source_id = mw.source_id AND pk.device_id = mw.device_id
),
r AS (
    SELECT f.*,
           flops / nullif(bytes, 0) AS intensity,
           flops / (gpu_ns * 1e-9) AS flops_per_s,
           bytes / (gpu_ns * 1e-9) AS bytes_per_s,
           100 * flops / (gpu_ns * 1e-9) / peak_flops_per_s AS pct_peak_flops,
           100 * bytes / (gpu_ns * 1e-9) / peak_bytes_per_s AS pct_peak_bytes
    FROM f WHERE gpu_ns > 0
),
ncu AS (  -- ncu's measured class of a timeline kernel, where paired
    SELECT t.timeline_source_id AS source_id, t.start_ns, t.device_id, b.roofline_bound, b.dram_pct, b.sm_pct
    FROM ncu_timeline_match t
    JOIN kernel_bounds b ON b.source_id = t.ncu_source_id AND b.id = t.ncu_id
    WHERE t.match_quality <> 'unmatched'
)
SELECT r.source_id, r.event_id, r.op, CAST(r.dims AS VARCHAR) AS shapes, r.dtype,
       coalesce(r.cls, 'bytes') AS model, r.assumptions,
       CASE WHEN r.torch_flops IS NOT NULL THEN 'torch' ELSE 'shapes' END AS flops_from,
       r.pid, r.tid, r.start_ns, r.end_ns, r.device_id, r.kernel, r.gpu_ops, r.gpu_ns,
       r.gpu_start_ns, r.gpu_end_ns, r.flops, r.bytes, r.intensity, r.flops_per_s, r.bytes_per_s,
       r.peak_flops_per_s, r.peak_bytes_per_s, r.pct_peak_flops, r.pct_peak_bytes,
       tk_roof(r.flops, r.intensity, r.peak_flops_per_s, r.peak_bytes_per_s) AS roof,  -- sql/lib/peaks.sql
       tk_roof_bound(r.flops, r.intensity, r.pct_peak_flops, r.pct_peak_bytes, r.peak_flops_per_s,
                     r.peak_bytes_per_s, getvariable('latency_pct')) AS bound,
       r.device,
       n.roofline_bound AS ncu_bound, n.dram_pct AS ncu_dram_pct, n.sm_pct AS ncu_sm_pct
FROM r
LEFT JOIN ncu n ON n.source_id = r.source_id AND n.start_ns = r.kernel_start_ns AND n.device_id = r.device_id;
