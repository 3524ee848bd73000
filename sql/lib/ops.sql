-- lib/ops: framework operators: their shapes as each source records them, and the work (FLOPs,
-- bytes moved) a model of the operator derives from those shapes. The one place the per-op models
-- live; `roofline` applies them. Element sizes per dtype are `tk_dtype_bytes` (lib/names).
--
-- Includes: (none)
--
-- Shapes of an operator, one mapping per format:
--   Kineto (torch.profiler record_shapes=True): the cpu_op's args "Input Dims", "Input type",
--     "Concrete Inputs" (the values of scalar and int-list arguments), "flops" (with_flops, where
--     the trace carries it).
--   nsys --pytorch=autograd-shapes-nvtx (torch's emit_nvtx(record_shapes=True)): the NVTX text
--     '<op>, seq = N, op_id = N, sizes = [[...], ...], input_op_ids = [...]': sizes only, no
--     dtypes and no argument values.
--
-- tk_op_name(category, name) -> VARCHAR
--   the operator of an op range (`tk_is_op_range`): the cpu_op name, or the NVTX text before its
--   first comma ('aten::mm, seq = 3, ...' -> 'aten::mm').
--
-- tk_op_dims(category, name, args) -> BIGINT[][]
--   the input sizes, one list per input ([] for a non-tensor argument), from "Input Dims" or the
--   NVTX 'sizes = [...]'; a TensorList argument (cat, stack, foreach ops) is flattened into its
--   tensors, so positions after it shift. NULL when the row has no shapes.
--
-- tk_op_types(category, args) -> VARCHAR[]
--   the input dtypes as torch names them (c10::BFloat16, float, long int, Scalar, ''), one per
--   input of tk_op_dims; NULL for nsys (not recorded) and when an input is a TensorList (positions
--   would not line up).
--
-- tk_op_concrete(category, args) -> VARCHAR[]
--   the "Concrete Inputs" (argument values as text; '' for tensors); NULL for nsys.
--
-- tk_op_args_json(args) -> JSON[]
--   the parts of a Kineto op's args the models read, parsed once: ["Input Dims", "Input type",
--   "Concrete Inputs", "flops"] (each NULL where absent).
--
-- tk_op_dims_json(category, name, a), tk_op_types_json(category, a), tk_op_concrete_json(category, a)
--   -> JSON; tk_op_torch_flops(a) -> DOUBLE
--   with a = tk_op_args_json(args): the raw JSON text each of tk_op_dims, tk_op_types and
--   tk_op_concrete reads (their first step), and torch's own "flops" figure (with_flops; NULL
--   where the trace has none); tk_dims_of_json(j), tk_types_of_json(j), tk_concrete_of_json(j) ->
--   their second step, so that a view can parse each args once and each distinct text once:
--   tk_op_dims(c, n, args) = tk_dims_of_json(tk_op_dims_json(c, n, tk_op_args_json(args))),
--   likewise the others.
--
-- tk_numel(dims) -> BIGINT
--   elements of a tensor of these sizes; 0 for [] (a scalar or non-tensor argument) and NULL.
--
-- tk_op_class(op) -> VARCHAR
--   the FLOP-counting class of an operator: 'matmul' (mm, addmm, bmm, baddbmm, matmul, linear,
--   mv, addmv, _scaled_mm, _grouped_mm, _scaled_grouped_mm), 'attention' (scaled_dot_product_attention
--   and its _scaled_dot_product_{flash,efficient,cudnn}_attention[_backward] backends), 'conv'
--   (conv1d/2d/3d, convolution, _convolution, cudnn_convolution) or NULL (bytes only).
--
-- tk_op_flops(op, d, c) -> DOUBLE
--   FLOPs of one call (a multiply-add counts 2), from its input sizes d (tk_op_dims) and argument
--   values c (tk_op_concrete, may be NULL); 0 for operators of no class. With [.., M, K] x [K, N]:
--     mm, _scaled_mm: 2*M*K*N; addmm, addmv (bias first): 2*M*K*N of inputs 2, 3; mv: 2*M*K
--     bmm: 2*B*M*K*N; baddbmm: that of inputs 2, 3
--     linear(x[..., K], W[N, K]): 2*numel(x)*N
--     matmul(a, b): 2*batch*M*K*N, batch = the product of the broadcast batch dims of a and b
--     _grouped_mm / _scaled_grouped_mm: 2*M_total*K*N for a 2-D x 3-D [G, K, N], 2*G*M*K*N for 3-D x 3-D
--     attention q[B, H, Lq, E], k[.., Lk, E], v[.., Lk, Ev]: forward 2*B*H*P*(E + Ev), backward
--       2*B*H*P*(3E + 2Ev) (S = QK^T recomputed, dV, dP, dQ, dK), with P = Lq*Lk query-key pairs,
--       or when is_causal is True (its argument value, Kineto only) the pairs under torch's
--       top-left causal mask: sum over i = 1..Lq of min(i, Lk). nsys records no argument values:
--       there attention is counted as non-causal (see tk_op_assumptions).
--     conv (input[N, C, *S], weight[Co, C/g, *k]): 2*N*prod(out S)*numel(weight), out size per
--       spatial dim floor((S + 2p - dil*(k - 1) - 1) / stride) + 1 with stride / padding /
--       dilation from the argument values where given, else stride 1, 'same' padding (out = in).
--   Backward GEMMs are the aten::mm calls autograd makes (counted as mm).
--
-- tk_op_bytes(op, d, eb, e, c) -> DOUBLE
--   bytes one call moves to and from memory (each input read once, each output written once; no
--   cache reuse across calls), with eb the element size per input (from tk_op_types; NULL
--   entries and a NULL eb take e, the op's element size). in = sum over inputs of
--   numel * element size; out = output elements * eb of the first input:
--     matmul / attention / conv classes: in + out (the output's size from the formulas above;
--       attention backward writes dQ, dK, dV)
--     embedding(weight[V, D], ids): reads and writes numel(ids) rows of D, plus the ids (8 bytes)
--     index_select(self, dim, index) / gather(self, dim, index): the selected elements read and
--       written, plus the index (8 bytes each)
--     cat / stack: 2 * in (every input read, the output written)
--     copy_(self, src): in (src read, self written)
--     fill_ / zero_ / normal_ / uniform_ / random_ / bernoulli_: numel(self) * eb (written)
--     reductions (sum, mean, amax, amin, max, min, argmax, argmin, prod, norm, var, std, all,
--       any, logsumexp, linalg_vector_norm): in (the output is small)
--     any other op with a tensor input (element-wise, norms, softmax, activations, in-place ops):
--       in + the largest input's numel * eb[1] (the output, broadcast)
--   NULL when the op has no tensor input (factories: empty, zeros, arange ...), and for operators
--   outside torch's aten namespace with no FLOP class (custom ops: vllm::, flash_attn::, triton
--   kernels): their inputs are often buffers they write a few rows of (a KV cache), so "every input
--   read once" would count gigabytes a call never touches.
--
-- tk_op_assumptions(op, types, concrete) -> VARCHAR
--   what a model had to assume for this row, ';'-joined, NULL when nothing: 'dtype not recorded'
--   (nsys: the element size came from the kernel names), 'causal unknown: counted full'
--   (attention without argument values).
--
-- tk_kernel_dtype(name) -> VARCHAR
--   the data type a GPU kernel's name spells, as one of 'fp8', 'bf16', 'fp16', 'fp32', 'fp64'
--   (the narrowest one named wins: 'splitKreduce_kernel<..., float, __nv_bfloat16>' is bf16);
--   NULL when it names none (cuBLAS's nvjet_* names carry no dtype).
--
-- Private helpers of the formulas above (not for views):
--   _tk_prod(l) product of a size list (1 for []); _tk_mm_nb(a, b) the batch dims of matmul(a, b)
--   (the sizes before the last two, the longer of a's and b's); _tk_bcast_at(x, n, i) batch size i
--   of x right-aligned to n batch dims (1 where x has none);
--   _tk_mm_batch(a, b) the broadcast batch product of matmul(a, b); _tk_mm_m(a), _tk_mm_n(b) M and
--   N; _tk_causal_arg(op) the 1-based position of is_causal in an attention op's arguments;
--   _tk_is_causal(op, c) its value; _tk_attn_pairs(q, k, causal) the query-key pairs;
--   _tk_conv_arg(op, c, what) stride ('s') / padding ('p') / dilation ('d') argument of a
--   convolution; _tk_conv_out(x, w, s, p, dl) output spatial elements; _tk_out_numel(op, d, c)
--   output elements of a FLOP-class call (_tk_conv_out_numel(op, d, c): of a convolution);
--   _tk_in_bytes(d, eb, e) bytes of all inputs.
CREATE OR REPLACE MACRO tk_op_name(category, name) AS
    CASE WHEN category = 'nvtx' THEN regexp_extract(name, '^([^,]+)', 1) ELSE name END;

CREATE OR REPLACE MACRO tk_op_args_json(args) AS
    json_extract(args, ['$."Input Dims"', '$."Input type"', '$."Concrete Inputs"', '$.flops']);

CREATE OR REPLACE MACRO tk_op_dims_json(category, name, a) AS
    CASE WHEN category = 'nvtx'
         THEN TRY_CAST(nullif(regexp_extract(name, 'sizes = (\[.*?\])(, input_op_ids = |$)', 1), '') AS JSON)
         ELSE a[1] END;

CREATE OR REPLACE MACRO tk_op_torch_flops(a) AS TRY_CAST(json_extract_string(a[4], '$') AS DOUBLE);

CREATE OR REPLACE MACRO tk_dims_of_json(j) AS
    flatten(list_transform(
        TRY_CAST(j AS JSON[]),
        lambda x: CASE WHEN json_type(x, '$[0]') = 'ARRAY' THEN TRY_CAST(x AS BIGINT[][])
                       ELSE [TRY_CAST(x AS BIGINT[])] END));

CREATE OR REPLACE MACRO tk_op_dims(category, name, args) AS
    tk_dims_of_json(tk_op_dims_json(category, name, tk_op_args_json(args)));

CREATE OR REPLACE MACRO tk_op_types_json(category, a) AS CASE WHEN category = 'cpu_op' THEN a[2] END;

CREATE OR REPLACE MACRO tk_types_of_json(j) AS
    CASE WHEN NOT coalesce(list_contains(TRY_CAST(j AS VARCHAR[]), 'TensorList'), false)
         THEN TRY_CAST(j AS VARCHAR[]) END;

CREATE OR REPLACE MACRO tk_op_types(category, args) AS tk_types_of_json(tk_op_types_json(category, tk_op_args_json(args)));

CREATE OR REPLACE MACRO tk_op_concrete_json(category, a) AS CASE WHEN category = 'cpu_op' THEN a[3] END;

CREATE OR REPLACE MACRO tk_concrete_of_json(j) AS TRY_CAST(j AS VARCHAR[]);

CREATE OR REPLACE MACRO tk_op_concrete(category, args) AS
    tk_concrete_of_json(tk_op_concrete_json(category, tk_op_args_json(args)));

CREATE OR REPLACE MACRO tk_numel(dims) AS
    CASE WHEN dims IS NULL OR len(dims) = 0 THEN 0
         ELSE list_reduce(dims, lambda a, b: a * b, 1::BIGINT) END;

CREATE OR REPLACE MACRO tk_op_class(op) AS
    CASE
      WHEN op IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::matmul',
                  'aten::linear', 'aten::mv', 'aten::addmv', 'aten::_scaled_mm',
                  'aten::_grouped_mm', 'aten::_scaled_grouped_mm') THEN 'matmul'
      WHEN regexp_matches(op, '^aten::(scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?)$') THEN 'attention'
      WHEN regexp_matches(op, '^aten::(conv[123]d|convolution|_convolution|cudnn_convolution)$') THEN 'conv'
    END;

-- 1-based position of is_causal in an attention operator's arguments (Kineto "Concrete Inputs")
CREATE OR REPLACE MACRO _tk_causal_arg(op) AS
    CASE op
      WHEN 'aten::scaled_dot_product_attention' THEN 6
      WHEN 'aten::_scaled_dot_product_flash_attention' THEN 5
      WHEN 'aten::_scaled_dot_product_efficient_attention' THEN 7
      WHEN 'aten::_scaled_dot_product_cudnn_attention' THEN 7
      WHEN 'aten::_scaled_dot_product_flash_attention_backward' THEN 12
      WHEN 'aten::_scaled_dot_product_efficient_attention_backward' THEN 12
      WHEN 'aten::_scaled_dot_product_cudnn_attention_backward' THEN 15
    END;

-- query-key pairs of attention: q, k sizes; causal under torch's top-left mask
CREATE OR REPLACE MACRO _tk_attn_pairs(q, k, causal) AS
    tk_numel(q[1:len(q) - 2])::DOUBLE
    * CASE WHEN causal THEN
             (CASE WHEN q[-2] <= k[-2] THEN q[-2] * (q[-2] + 1) / 2
                   ELSE k[-2] * (k[-2] + 1) / 2 + (q[-2] - k[-2]) * k[-2] END)::DOUBLE
           ELSE (q[-2] * k[-2])::DOUBLE END;

-- product of a (possibly empty) size list: 1 for []
CREATE OR REPLACE MACRO _tk_prod(l) AS list_reduce(l, lambda a, b: a * b, 1::BIGINT);

-- batch, M and N of matmul(a, b) with broadcasting (K = a[-1])
CREATE OR REPLACE MACRO _tk_mm_nb(a, b) AS greatest(len(a) - 2, len(b) - 2, 0);
CREATE OR REPLACE MACRO _tk_bcast_at(x, n, i) AS CASE WHEN len(x) - 2 - n + i >= 1 THEN x[len(x) - 2 - n + i] ELSE 1 END;
CREATE OR REPLACE MACRO _tk_mm_batch(a, b) AS
    _tk_prod(list_transform(range(1, _tk_mm_nb(a, b) + 1), lambda i:
        greatest(_tk_bcast_at(a, _tk_mm_nb(a, b), i), _tk_bcast_at(b, _tk_mm_nb(a, b), i))));
CREATE OR REPLACE MACRO _tk_mm_m(a) AS CASE WHEN len(a) >= 2 THEN a[-2] ELSE 1 END;
CREATE OR REPLACE MACRO _tk_mm_n(b) AS CASE WHEN len(b) >= 2 THEN b[-1] ELSE 1 END;

-- output spatial elements of a convolution: input x, weight w, stride/padding/dilation lists
CREATE OR REPLACE MACRO _tk_conv_out(x, w, s, p, dl) AS
    _tk_prod(list_transform(range(3, len(x) + 1), lambda i:
        CASE WHEN s IS NULL AND p IS NULL THEN x[i]
             ELSE (x[i] + 2 * coalesce(p[i - 2], p[1], (w[i] - 1) // 2)
                   - coalesce(dl[i - 2], dl[1], 1) * (w[i] - 1) - 1) // coalesce(s[i - 2], s[1], 1) + 1 END));

-- stride / padding / dilation of a convolution call, from its argument values (NULL when not given)
CREATE OR REPLACE MACRO _tk_conv_arg(op, c, what) AS
    TRY_CAST(c[CASE WHEN op = 'aten::cudnn_convolution'
                    THEN CASE what WHEN 's' THEN 4 WHEN 'p' THEN 3 ELSE 5 END
                    ELSE CASE what WHEN 's' THEN 4 WHEN 'p' THEN 5 ELSE 6 END END] AS BIGINT[]);

CREATE OR REPLACE MACRO _tk_is_causal(op, c) AS coalesce(c[_tk_causal_arg(op)] = 'True', false);

-- output elements of a convolution call
CREATE OR REPLACE MACRO _tk_conv_out_numel(op, d, c) AS
    (d[1][1] * d[2][1] * _tk_conv_out(d[1], d[2], _tk_conv_arg(op, c, 's'), _tk_conv_arg(op, c, 'p'),
                                      _tk_conv_arg(op, c, 'd')))::DOUBLE;

-- output elements of a FLOP-class op (NULL for others)
CREATE OR REPLACE MACRO _tk_out_numel(op, d, c) AS
    CASE
      WHEN op IN ('aten::mm', 'aten::_scaled_mm') THEN (d[1][1] * d[2][2])::DOUBLE
      WHEN op IN ('aten::addmm') THEN (d[2][1] * d[3][2])::DOUBLE
      WHEN op = 'aten::mv' THEN d[1][1]::DOUBLE
      WHEN op = 'aten::addmv' THEN d[2][1]::DOUBLE
      WHEN op = 'aten::bmm' THEN (d[1][1] * d[1][2] * d[2][3])::DOUBLE
      WHEN op = 'aten::baddbmm' THEN (d[2][1] * d[2][2] * d[3][3])::DOUBLE
      WHEN op = 'aten::linear' THEN (tk_numel(d[1]) // d[1][-1] * d[2][1])::DOUBLE
      WHEN op = 'aten::matmul' THEN (_tk_mm_batch(d[1], d[2]) * _tk_mm_m(d[1]) * _tk_mm_n(d[2]))::DOUBLE
      WHEN op IN ('aten::_grouped_mm', 'aten::_scaled_grouped_mm') THEN
           CASE WHEN len(d[1]) = 2 THEN (d[1][1] * d[2][3])::DOUBLE ELSE (d[1][1] * d[1][2] * d[2][3])::DOUBLE END
      WHEN tk_op_class(op) = 'attention' AND op LIKE '%_backward' THEN
           (tk_numel(d[2]) + tk_numel(d[3]) + tk_numel(d[4]))::DOUBLE
      WHEN tk_op_class(op) = 'attention' THEN (tk_numel(d[1]) // d[1][-1] * d[3][-1])::DOUBLE
      WHEN tk_op_class(op) = 'conv' THEN _tk_conv_out_numel(op, d, c)
    END;

CREATE OR REPLACE MACRO tk_op_flops(op, d, c) AS
    CASE
      WHEN d IS NULL THEN NULL
      WHEN op IN ('aten::mm', 'aten::_scaled_mm') THEN 2.0 * d[1][1] * d[1][2] * d[2][2]
      WHEN op = 'aten::addmm' THEN 2.0 * d[2][1] * d[2][2] * d[3][2]
      WHEN op = 'aten::mv' THEN 2.0 * d[1][1] * d[1][2]
      WHEN op = 'aten::addmv' THEN 2.0 * d[2][1] * d[2][2]
      WHEN op = 'aten::bmm' THEN 2.0 * d[1][1] * d[1][2] * d[1][3] * d[2][3]
      WHEN op = 'aten::baddbmm' THEN 2.0 * d[2][1] * d[2][2] * d[2][3] * d[3][3]
      WHEN op = 'aten::linear' THEN 2.0 * tk_numel(d[1]) * d[2][1]
      WHEN op = 'aten::matmul' THEN
           2.0 * _tk_mm_batch(d[1], d[2]) * _tk_mm_m(d[1]) * d[1][-1] * _tk_mm_n(d[2])
      WHEN op IN ('aten::_grouped_mm', 'aten::_scaled_grouped_mm') THEN
           CASE WHEN len(d[1]) = 2 THEN 2.0 * d[1][1] * d[1][2] * d[2][3]
                ELSE 2.0 * d[1][1] * d[1][2] * d[1][3] * d[2][3] END
      WHEN tk_op_class(op) = 'attention' AND op LIKE '%_backward' THEN
           2.0 * _tk_attn_pairs(d[2], d[3], _tk_is_causal(op, c)) * (3 * d[2][-1] + 2 * d[4][-1])
      WHEN tk_op_class(op) = 'attention' THEN
           2.0 * _tk_attn_pairs(d[1], d[2], _tk_is_causal(op, c)) * (d[1][-1] + d[3][-1])
      WHEN tk_op_class(op) = 'conv' THEN 2.0 * _tk_conv_out_numel(op, d, c) // d[2][1] * tk_numel(d[2])
      ELSE 0.0
    END;

-- bytes of all inputs: numel * element size (eb per input, e where unknown)
CREATE OR REPLACE MACRO _tk_in_bytes(d, eb, e) AS
    list_sum(list_transform(d, lambda x, i: tk_numel(x) * coalesce(eb[i], e)))::DOUBLE;

CREATE OR REPLACE MACRO tk_op_bytes(op, d, eb, e, c) AS
    CASE
      WHEN d IS NULL OR coalesce(_tk_in_bytes(d, eb, e), 0) = 0 THEN NULL
      WHEN tk_op_class(op) IS NULL AND NOT op LIKE 'aten::%' THEN NULL
      WHEN tk_op_class(op) IS NOT NULL THEN _tk_in_bytes(d, eb, e) + _tk_out_numel(op, d, c) * coalesce(eb[1], e)
      WHEN op = 'aten::embedding' THEN 2.0 * tk_numel(d[2]) * d[1][-1] * coalesce(eb[1], e) + 8.0 * tk_numel(d[2])
      WHEN op = 'aten::index_select' THEN
           2.0 * tk_numel(d[1]) // greatest(d[1][coalesce(TRY_CAST(c[2] AS INTEGER), 0) + 1], 1)
               * tk_numel(d[3]) * coalesce(eb[1], e) + 8.0 * tk_numel(d[3])
      WHEN op = 'aten::gather' THEN 2.0 * tk_numel(d[3]) * coalesce(eb[1], e) + 8.0 * tk_numel(d[3])
      WHEN op IN ('aten::cat', 'aten::stack', 'aten::_cat') THEN 2.0 * _tk_in_bytes(d, eb, e)
      WHEN op = 'aten::copy_' THEN _tk_in_bytes(d, eb, e)
      WHEN regexp_matches(op, '^aten::(fill_|zero_|normal_|uniform_|random_|bernoulli_)$') THEN tk_numel(d[1]) * coalesce(eb[1], e)
      WHEN regexp_matches(op, '^aten::(sum|mean|amax|amin|max|min|argmax|argmin|prod|norm|var|std|all|any|logsumexp|linalg_vector_norm)$')
           THEN _tk_in_bytes(d, eb, e)
      ELSE _tk_in_bytes(d, eb, e) + list_max(list_transform(d, lambda x: tk_numel(x))) * coalesce(eb[1], e)
    END;

CREATE OR REPLACE MACRO tk_op_assumptions(op, types, concrete) AS
    nullif(concat_ws('; ',
        CASE WHEN types IS NULL THEN 'dtype not recorded' END,
        CASE WHEN tk_op_class(op) = 'attention' AND concrete IS NULL THEN 'causal unknown: counted full' END), '');

CREATE OR REPLACE MACRO tk_kernel_dtype(name) AS
    CASE
      WHEN name IS NULL THEN NULL
      WHEN regexp_matches(name, '(?i)(float8|e4m3|e5m2|fp8)') THEN 'fp8'
      WHEN regexp_matches(name, '(?i)(bfloat16|bf16)') THEN 'bf16'
      WHEN regexp_matches(name, '(c10::Half|__half\b|\bhalf\b|(?i:fp16|f16)[^0-9])') THEN 'fp16'
      WHEN regexp_matches(name, '(?i)(\bfloat\b|fp32|f32[^0-9]|tf32)') THEN 'fp32'
      WHEN regexp_matches(name, '(?i)(\bdouble\b|fp64|f64)') THEN 'fp64'
    END;
