"""Roofline from shapes (`roofline`, `phase_roofline`, sql/lib/ops.sql, sql/lib/peaks.sql).

Real H200 captures of one program (fixtures/gen/decode.py via fixtures/gen/run_roofline.sh): a
4-layer decoder of Llama-7B widths, bf16, 2.14 GB of weights; prefill of 1024 tokens and 4 decode
steps at batch 1 and 16. Each as a torch.profiler trace (record_shapes, no with_flops) and an nsys
capture (--pytorch=autograd-shapes-nvtx, whole program); the program wrote its own facts beside
them (roof_b*_facts.json): torch's with_flops FLOPs of the same region (key_averages), the
parameter bytes. ncu profiled the GEMMs of the batch-1 prefill and decode steps.

What is asserted (issue 18's bar): matmul FLOPs from shapes equal torch's own; a decode step moves
the decode weight bytes within 15 %; prefill is compute-bound and decode memory-bound in both
sources at both batches; ncu's measured roofline class agrees with the estimate.
"""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, need

RF = FIXTURES / "roofline"
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def facts(batch: int) -> dict:
    return json.loads(need(RF / f"roof_b{batch}_facts.json").read_text())


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    import tracekit

    d = tmp_path_factory.mktemp("roof")
    made = {}

    def get(name, *extra):
        key = (name, *extra)
        if key not in made:
            paths = [str(need(RF / name))] + [str(need(RF / x)) for x in extra]
            db = d / f"s{len(made)}.duckdb"
            tracekit.convert(paths, db=str(db), replace=True)
            made[key] = tracekit.open(str(db))
        return made[key]

    yield get
    for s in made.values():
        s.close()


# the calls inside the profiled phases (the nsys capture also holds the unannotated warm-up)
IN_PHASES = """
    SELECT r.* FROM roofline r
    WHERE EXISTS (SELECT 1 FROM phase_instances p
                  WHERE p.source_id = r.source_id AND p.pid = r.pid AND p.tid = r.tid
                    AND r.start_ns >= p.start_ns AND r.start_ns < p.end_ns)"""


@pytest.mark.parametrize("batch", [1, 16])
def test_matmul_flops_equal_torch_with_flops(stores, batch):
    """Kineto trace without with_flops: the GEMMs' FLOPs from "Input Dims" equal torch's own
    with_flops figures of the same region (profile(with_flops=True).key_averages()), call for call."""
    st = stores(f"roof_b{batch}.json.gz")
    torch_ops = facts(batch)["torch_flops"]["per_op"]
    want = sum(torch_ops[o]["flops"] for o in GEMM_OPS if o in torch_ops)
    want_calls = sum(torch_ops[o]["count"] for o in GEMM_OPS if o in torch_ops)
    got, calls = st.one("SELECT sum(flops), count(*) FROM roofline WHERE model = 'matmul'")
    assert want > 1e12
    assert got == pytest.approx(want, rel=0.01)
    assert calls == want_calls  # one linear / matmul call per aten::mm / bmm torch counted
    # no call is counted twice: aten::mm inside aten::linear has no row of its own
    assert st.one("SELECT count(*) FROM roofline WHERE op = 'aten::mm'") == 0


@pytest.mark.parametrize("fmt", ["json.gz", "sqlite"])
def test_matmul_flops_nsys_shapes(stores, fmt):
    """The nsys capture's NVTX shapes give the same GEMM FLOPs inside the phases as torch counted."""
    st = stores(f"roof_b1.{fmt}")
    torch_ops = facts(1)["torch_flops"]["per_op"]
    want = sum(torch_ops[o]["flops"] for o in GEMM_OPS if o in torch_ops)
    got = st.one(f"SELECT sum(flops) FROM ({IN_PHASES}) WHERE model = 'matmul'")
    assert got == pytest.approx(want, rel=0.01)


@pytest.mark.parametrize("fmt", ["json.gz", "sqlite"])
def test_decode_step_bytes_are_the_weights(stores, fmt):
    """At batch 1 a decode step reads the weights once: bytes per step within 15 % of the
    parameter bytes minus the embedding table (of which one row per token is read)."""
    st = stores(f"roof_b1.{fmt}")
    weights = facts(1)["decode_weight_bytes"]
    per_step, instances, tokens = st.one(
        "SELECT bytes / instances, instances, tokens FROM phase_roofline WHERE phase = 'decode_step'")
    assert instances == 4 and tokens == 4
    assert weights == 1_881_219_072
    assert per_step == pytest.approx(weights, rel=0.15)
    assert per_step > weights  # plus the KV cache and activations, never less than the weights


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("fmt", ["json.gz", "sqlite"])
def test_prefill_compute_decode_memory(stores, batch, fmt):
    st = stores(f"roof_b{batch}.{fmt}")
    got = {r[0]: r[1:] for r in st.rows(
        "SELECT phase, bound, roof, pct_peak_flops, pct_peak_bytes, coverage_pct, tokens, dtype FROM phase_roofline")}
    assert got["prefill"][0] == "compute" and got["prefill"][1] == "compute"
    assert got["decode_step"][0] == "memory" and got["decode_step"][1] == "memory"
    assert got["prefill"][2] > 40          # % of the H200's 989 TFLOP/s (bf16 dense)
    assert got["decode_step"][3] > 40      # % of its 4.8 TB/s
    assert got["prefill"][4] > 99 and got["decode_step"][4] > 99  # nearly all GPU time modelled
    assert got["prefill"][5] == 1024 * batch and got["decode_step"][5] == 4 * batch
    assert got["prefill"][6] == "bf16"


def test_sources_agree(stores):
    """Kineto and nsys captures of the same program give the same phase verdicts and FLOPs within
    3 % (nsys records no is_causal: its prefill attention is counted full, see `assumptions`)."""
    k = {r[0]: r[1:] for r in stores("roof_b1.json.gz").rows("SELECT phase, bound, flops / instances FROM phase_roofline")}
    n = {r[0]: r[1:] for r in stores("roof_b1.sqlite").rows("SELECT phase, bound, flops / instances FROM phase_roofline")}
    assert k.keys() == n.keys() == {"prefill", "decode_step"}
    for ph in k:
        assert k[ph][0] == n[ph][0]
        assert n[ph][1] == pytest.approx(k[ph][1], rel=0.03)
    st = stores("roof_b1.sqlite")
    assert st.one("SELECT count(*) FROM roofline WHERE model = 'attention' AND assumptions LIKE '%causal unknown%'") > 0
    assert st.one("SELECT count(*) FROM roofline WHERE assumptions IS NULL") == 0  # nsys: dtype never recorded
    assert stores("roof_b1.json.gz").one(
        "SELECT count(*) FROM roofline WHERE model = 'attention' AND assumptions IS NOT NULL") == 0


def test_batch1_gemvs(stores):
    """Batch-1 decode: the GEMVs are memory-bound, the biggest nearest the roof; the tiny
    element-wise ops between them are latency-bound."""
    st = stores("roof_b1.json.gz")
    rows = {r[0]: r[1:] for r in st.rows(f"""
        SELECT shapes, mode(bound), avg(pct_peak_bytes), avg(bytes) FROM ({IN_PHASES})
        WHERE op = 'aten::linear' AND shapes LIKE '[[1, 1, %' GROUP BY shapes""")}
    lm_head = rows["[[1, 1, 4096], [32000, 4096], []]"]
    assert lm_head[0] == "memory" and lm_head[2] == pytest.approx(2 * 32000 * 4096, rel=0.001)
    assert lm_head[1] > max(v[1] for k, v in rows.items() if "4096, 4096" in k)
    tiny = st.one(f"SELECT count(*) FILTER (WHERE bound = 'latency') / count(*) FROM ({IN_PHASES}) WHERE model = 'bytes' AND bytes < 1e6")
    assert tiny > 0.9


def test_ncu_agrees_in_class(stores):
    """ncu (--set full, a separate run of the same program) on 8 GEMMs of the prefill and 8 of
    the decode steps: its measured roofline class equals the class estimated from shapes for every
    paired call, and the DRAM share estimated for the decode GEMVs is within 15 points of ncu's."""
    st = stores("roof_b1.sqlite", "roof_b1_ncu_prefill_raw.csv.gz", "roof_b1_ncu_decode_step_raw.csv.gz")
    rows = st.rows("""SELECT shapes, roof, bound, ncu_bound, pct_peak_bytes, ncu_dram_pct FROM roofline
                      WHERE ncu_bound IS NOT NULL""")
    assert len(rows) == 16
    assert all(r[1] == r[3] for r in rows)
    assert {r[3] for r in rows if r[0].startswith("[[1, 1024,")} == {"compute"}
    assert {r[3] for r in rows if r[0].startswith("[[1, 1,")} == {"memory"}
    for r in rows:
        if r[3] == "memory":
            assert abs(r[4] - r[5]) < 15


def test_peaks_and_override(stores):
    st = stores("roof_b1.json.gz")
    peaks = st.rows("SELECT DISTINCT device, dtype, peak_flops_per_s, peak_bytes_per_s FROM roofline"
                    " WHERE model = 'matmul' ORDER BY dtype")
    # the 145 GEMMs are bf16; the 5 rotary-embedding outer products (inv_freq x positions, sgemm) fp32
    assert peaks == [("NVIDIA H200 SXM", "bf16", 989.4e12, 4.8e12), ("NVIDIA H200 SXM", "fp32", 66.9e12, 4.8e12)]
    st.con.execute("SET VARIABLE peak_tbps = 2.4")
    try:
        pct2 = st.one("SELECT pct_peak_bytes FROM phase_roofline WHERE phase = 'decode_step'")
    finally:
        st.con.execute("RESET VARIABLE peak_tbps")
    pct = st.one("SELECT pct_peak_bytes FROM phase_roofline WHERE phase = 'decode_step'")
    assert pct2 == pytest.approx(2 * pct)


def test_diagnose_states_the_verdicts(stores):
    from tracekit.diagnose import diagnose

    d = diagnose(stores("roof_b1.json.gz"))
    f = next(f for f in d.findings if f.code == "roofline")
    assert f.severity == "info"
    assert "prefill compute-bound at" in f.summary and "decode_step memory-bound at" in f.summary
    assert f.metrics["phases"]["decode_step"]["bound"] == "memory"
    assert not [x for x in d.findings if x.severity == "high" and x.code == "roofline"]


def test_no_shapes_no_rows(convert):
    """A capture without shapes (nsys without --pytorch=autograd-shapes-nvtx) has no roofline rows
    and no phase verdicts, though it has phases and kernels."""
    st = convert(need(FIXTURES / "nsys" / "decode_b1.sqlite"))
    assert st.one("SELECT count(*) FROM phase_instances") > 0
    assert st.one("SELECT count(*) FROM roofline") == 0
    assert st.one("SELECT count(*) FROM phase_roofline") == 0


# -- the per-op models on shapes real captures do not have (synthetic edge cases) --------------

def _lib():
    import duckdb

    from tracekit import schema, views

    con = duckdb.connect()
    for t in schema.TABLES:
        con.execute(t.ddl())
    views.register_library(con)
    return con


@pytest.mark.parametrize("op,dims,concrete,flops", [
    ("aten::mm", [[128, 256], [256, 64]], None, 2 * 128 * 256 * 64),
    ("aten::addmm", [[64], [128, 256], [256, 64], [], []], None, 2 * 128 * 256 * 64),
    ("aten::bmm", [[8, 128, 256], [8, 256, 64]], None, 2 * 8 * 128 * 256 * 64),
    ("aten::baddbmm", [[8, 128, 64], [8, 128, 256], [8, 256, 64], [], []], None, 2 * 8 * 128 * 256 * 64),
    ("aten::linear", [[4, 16, 256], [64, 256], [64]], None, 2 * 4 * 16 * 256 * 64),
    ("aten::matmul", [[4, 1, 16, 256], [3, 256, 64]], None, 2 * 12 * 16 * 256 * 64),  # broadcast batch
    ("aten::matmul", [[256], [256, 64]], None, 2 * 256 * 64),
    ("aten::mv", [[128, 256], [256]], None, 2 * 128 * 256),
    ("aten::_grouped_mm", [[96, 256], [4, 256, 64], [4]], None, 2 * 96 * 256 * 64),
    # attention: B=2, H=4, Lq=Lk=8, E=Ev=16; causal keeps 8*9/2 of the 64 pairs
    ("aten::scaled_dot_product_attention", [[2, 4, 8, 16]] * 3 + [[]] * 5,
     ["", "", "", "", "0.", "False", "", "False"], 2 * 2 * 4 * 64 * 32),
    ("aten::scaled_dot_product_attention", [[2, 4, 8, 16]] * 3 + [[]] * 5,
     ["", "", "", "", "0.", "True", "", "False"], 2 * 2 * 4 * 36 * 32),
    # causal with Lq > Lk (top-left mask): rows 1..4 see 1..4 keys, rows 5..6 see all 4
    ("aten::_scaled_dot_product_flash_attention", [[1, 1, 6, 8], [1, 1, 4, 8], [1, 1, 4, 8]] + [[]] * 4,
     ["", "", "", "0.", "True", "False", ""], 2 * (10 + 8) * 16),
    ("aten::_scaled_dot_product_flash_attention_backward",
     [[1, 1, 8, 16]] * 6 + [[]] * 9, None, 2 * 64 * (3 * 16 + 2 * 16)),
    # conv2d 3x3, stride 2, padding 1: 32x32 -> 16x16
    ("aten::conv2d", [[2, 3, 32, 32], [8, 3, 3, 3], [8], [], [], [], []],
     ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"], 2 * 2 * 8 * 16 * 16 * 27),
    ("aten::conv2d", [[2, 3, 32, 32], [8, 3, 3, 3], [8], [], [], [], []], None, 2 * 2 * 8 * 32 * 32 * 27),
    ("aten::add", [[4, 4], [4, 4], []], ["", "", "1"], 0),
])
def test_op_flops(op, dims, concrete, flops):
    con = _lib()
    got = con.execute("SELECT tk_op_flops(?, ?::BIGINT[][], ?::VARCHAR[])", [op, dims, concrete]).fetchall()[0][0]
    assert got == flops


@pytest.mark.parametrize("op,dims,types,bytes_", [
    ("aten::mm", [[128, 256], [256, 64]], ["c10::BFloat16"] * 2, 2 * (128 * 256 + 256 * 64 + 128 * 64)),
    ("aten::copy_", [[4, 8], [4, 8], []], ["float", "c10::BFloat16", "Scalar"], 4 * 32 + 2 * 32),
    ("aten::embedding", [[32000, 64], [2, 5], [], [], []], ["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"],
     2 * 10 * 64 * 2 + 8 * 10),
    ("aten::cat", [[1, 4, 10, 8], [1, 4, 1, 8], []], None, 2 * 2 * (320 + 32)),
    ("aten::add", [[4, 8], [8], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"], 2 * (32 + 8) + 2 * 32),
    ("aten::mean", [[4, 8], [], [], []], ["float", "ScalarList", "Scalar", ""], 4 * 32),
    ("aten::fill_", [[4, 8], []], ["c10::BFloat16", "Scalar"], 2 * 32),
    ("aten::empty", [[], [], []], ["ScalarList", "Scalar", ""], None),
])
def test_op_bytes(op, dims, types, bytes_):
    con = _lib()
    got = con.execute("""SELECT tk_op_bytes(?, ?::BIGINT[][], list_transform(?::VARCHAR[], lambda t: tk_dtype_bytes(nullif(t, ''))),
                                            2, NULL::VARCHAR[])""", [op, dims, types]).fetchall()[0][0]
    assert got == bytes_


def test_nvtx_op_ranges_are_not_phases():
    con = _lib()
    q = "SELECT tk_is_op_range('nvtx', ?), tk_is_phase_range('nvtx', false, ?), tk_op_name('nvtx', ?), tk_op_dims('nvtx', ?, NULL)"
    for name, op, dims in [
        ("aten::mm, op_id = 486, sizes = [[1024, 4096], [4096, 4096]], input_op_ids = [(484,0), (480,0)]",
         "aten::mm", [[1024, 4096], [4096, 4096]]),
        ("aten::addmm, seq = 12, op_id = 3, sizes = [[64], [8, 32], [32, 64], [], []], input_op_ids = [(1,0)]",
         "aten::addmm", [[64], [8, 32], [32, 64], [], []]),
        ("prefill, op_id = 3777", "prefill", None),
        ("aten::relu", "aten::relu", None),
    ]:
        is_op, is_phase, got_op, got_dims = con.execute(q, [name] * 4).fetchall()[0]
        assert is_op and not is_phase and got_op == op and got_dims == dims
    assert con.execute(q, ["decode_step"] * 4).fetchall()[0][:2] == (False, True)
