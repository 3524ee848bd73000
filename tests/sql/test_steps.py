"""Where the steps come from (issue 50): never from a library's own ranges (NCCL's, nvFuser's,
torch's Optimizer.step#..., DLProf's markers, ...); from user ranges and ProfilerStep first, and
without those from the repetition of the kernel sequence (steady_state, sql/phases/steady_state.sql;
the range table is tk_is_library_range in sql/lib/names.sql)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, REALWORLD, need

LIB = [  # (domain, name, library range?): names as the captures write them
    (None, "ncclGroupEnd", True),                    # nsys-ai mfu_2gpu_before.sqlite (NCCL's API ranges)
    ("NCCL", "ncclAllReduce", True),
    (None, "ExecutorDispatch::run2", True),          # nvFuser's FUSER_PERF_SCOPE (NVIDIA/Fuser csrc,
    (None, "FusionExecutorCache::runFusionWithInputs", True),  # nsys stats quoted in its tests)
    (None, "fusion_executor::allocations::allocateOutputs", True),
    (None, "Optimizer.step#AdamW.step", True),       # fixtures/attribution/train.json.gz
    (None, "nccl:all_reduce", True),                 # ../shared/realworld/kineto/hta__sampled_rank-0
    (None, "DistributedDataParallel.forward", True),  # fixtures/kineto/ddp_rank0.json.gz
    (None, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", True),
    (None, "{'traceMarker': ['dummy_network.py:34']}", True),  # DLProf (MohanadOdema nsys_profile)
    ("cuDNN", "anything", True),
    (None, "cublasLtMatmul", True),
    (None, "ProfilerStep#3", False),
    (None, "step", False),                           # fixtures/attribution/train.json.gz's own steps
    (None, "## decoder fp8 None ##", False),         # hta__sampled_rank-0: the model's ranges
    (None, "decode_step", False),
    (None, "saxpy", False),                          # pipit saxpy-mpi: the user's NVTX range
]


@pytest.fixture(scope="module")
def empty(empty_store):
    return empty_store


@pytest.mark.parametrize("domain,name,want", LIB)
def test_library_ranges(empty, domain, name, want):
    assert empty.one("select tk_is_library_range(?, ?)", [domain, name]) is want


def test_optimizer_step_is_no_step(convert):
    """A training loop with its own 'step' range (10 instances) and torch's
    Optimizer.step#AdamW.step record_function (12 with GPU work, warm-up included): the steps
    are the 10 'step' ranges; before issue 50 both phases were steps and the window began at the
    first warm-up optimizer step."""
    st = convert(FIXTURES / "attribution" / "train.json.gz")
    assert st.rows("select phase, count(*) from phase_instances where gpu_ops > 0 group by all order by 1") \
        == [("Optimizer.step#AdamW.step", 12), ("step", 10)]
    method, phases, steps, ws = st.rows("select method, step_phases, steps, window_start_ns from steady_state")[0]
    assert (method, phases, steps) == ("steps", "step", 10)
    assert ws == st.one("select min(start_ns) from phase_instances where phase = 'step' and gpu_ops > 0")


def _first_repetition(names, p):
    """Independent of the view: the first index from which the next p kernels repeat at once."""
    return next(j for j in range(len(names) - 2 * p + 1) if names[j:j + p] == names[j + p:j + 2 * p])


@pytest.mark.slow
def test_steps_from_the_kernel_sequence_when_only_library_ranges(convert):
    """Two real nsys captures with library ranges and no user steps:
    * nsys-ai's mfu_2gpu_before (a 300 ms cut of FastVideo training on 2 H100s): NCCL's API ranges
      (ncclGroupEnd 66 times, 64 with GPU work) were the steps (14.8 ms of 'start-up' set aside);
      the kernel sequence repeats every 119 kernels from the first kernel on, 16 whole times;
    * nsys-ai's h100_2gpu_1s (1 s of Wan inference, emit_nvtx operator ranges only): no steps
      before; the sequence repeats every 62 kernels from the second kernel on, 23 times.
    Start-up is only what precedes the first repetition: the window starts at the first kernel
    from which the sequence repeats (found here by comparing the names directly)."""
    d = REALWORLD / "nsys"
    st = convert(need(d / "GindaChen__nsys-ai__mfu_2gpu_before.sqlite"),
                 need(d / "GindaChen__nsys-ai__h100_2gpu_1s.sqlite"))
    assert st.one("select count(*) from phase_instances where source_id = 0 and phase = 'ncclGroupEnd' "
                  "and gpu_ops > 0") == 64
    rows = st.rows("""select source_id, device_id, method, step_phases, steps, window_start_ns, startup_ns,
                             device_start_ns from steady_state order by all""")
    want = {0: (119, 16, 0), 1: (62, 23, 1)}  # source: period, steps, first repeated kernel
    assert [(r[0], r[1]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for sid, dev, method, phases, steps, ws, startup, dstart in rows:
        p, n, j = want[sid]
        assert method == "kernels" and phases.startswith(f"kernel sequence of {p} kernels from ")
        assert steps == n
        with_src = st.rows("select name, start_ns from kernels where source_id = ? and device_id = ? "
                           "order by start_ns, stream_id, name", [sid, dev])
        names = [k[0] for k in with_src]
        assert _first_repetition(names, p) == j
        assert all(names[j + m] == names[j + m % p] for m in range(n * p))  # n whole repetitions
        assert ws == with_src[j][1] and startup == ws - dstart
    # the NCCL ranges' window began 14.8 ms later on the first capture
    assert st.one("select min(startup_ns) from steady_state where source_id = 0") == 0
