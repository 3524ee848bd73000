"""Communication kernels beyond NCCL's (issue 50): the one table of kernel-name patterns,
`tk_comm_library` in sql/lib/names.sql, read by tk_is_comm_kernel / tk_kernel_type and through
them by kernel_type_breakdown, overlap, collectives, rank_imbalance, steady_state and
time_breakdown.

Each name below is a real kernel name, with where it was read. Where no capture of that library
is in fixtures/ or ../shared/realworld, the name is checked on the macro alone (an empty store):
that is the only place such a name can come from here."""

from __future__ import annotations

import pytest

from conftest import REALWORLD, need

# (library, kernel name, where the name comes from)
REAL_NAMES = [
    # NCCL: ../shared/realworld/kineto/hta__nccl_data.json.gz and tracelens__b200_eager_rank0.json.gz
    ("nccl", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"),
    ("nccl", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    # RCCL: a Kineto trace event of RCCL's generic kernel quoted in a public ROCm test suite
    # (its argument type names NCCL's, so 'rccl' is looked for first)
    ("rccl", "void rcclGenericKernel<1, false>(ncclDevKernelArgsStorage<4096ul>)"),
    # DeepEP, namespace dpsk::ep: DeepSeek's published profile (deepseek-ai/profile-data
    # train.json / prefill.json / decode.json, commit 4496024), as listed by a public trace-analysis
    # script's category table ("Dispatch Barrier", "Dispatch Core", "Combine Core", ...)
    ("deepep", "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int, int const*, int*, "
               "int const*, int*, int, bool const*, int, int, int, int, int, int, int, int*, int*, int*, int*, "
               "void*, void**, int**, int, int, int*, int)"),
    ("deepep", "void dpsk::ep::internode::dispatch<false, 4, false, 4>(int4*, float*, long*, float*, "
               "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*, int*, "
               "int*, int*, int*, int const*, int const*, int const*, int const*, int, int, int, int, int, "
               "bool const*, void*, int, int, void**, int, int, int, int, int*)"),
    ("deepep", "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*, "
               "int const*, int*, void*, void**, int**, int, int, int, int*, bool, int)"),
    ("deepep", "void dpsk::ep::internode::dispatch_ll<true, 3, 10, 7168>(void*, float*, int*, long*, int*, int*, "
               "void*, int*, void*, void const*, long const*, int*, int*, int*, int, int, int, int, int, int, "
               "int, int*, int)"),
    ("deepep", "void dpsk::ep::internode::combine_ll<3, 10, 7168, 9>(void*, void*, int*, void*, void const*, "
               "long const*, float const*, int const*, long const*, int*, int, int*, int, int, int, int, int, "
               "int, int, int*, int)"),
    # DeepEP, namespace deep_ep: SGLang prefill traces in the same script's table, and a public
    # profile report ("deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>: 24 launches")
    ("deepep", "void deep_ep::internode::combine<false, 4, __nv_bfloat16, 16, 4, 4, 16, 24>(int4*, float*, "
               "bool const*, int4 const*, float const*, int const*, int const*, "
               "deep_ep::internode::SourceMeta const*, int const*, int const*, int const*, int, int, int, int, "
               "void*, int, int, void**, int, int, int, int)"),
    ("deepep", "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>"),
    ("deepep", "void deep_ep::intranode::cached_notify_combine<8>"),
    ("deepep", "void primus_turbo::deep_ep::intranode::cached_notify_dispatch<8>(int const*, int, void**, int**, int, int)"),
    # NVSHMEM: a kernel-name table of a public flux fork's tests (the on-stream barrier), and the
    # demangled form of NVSHMEM's declaration in src/host/stream/coll (template <typename TYPE>
    # __global__ void alltoall_on_stream_kernel(nvshmem_team_t team, TYPE *dest, const TYPE *source,
    # size_t nelems))
    ("nvshmem", "void barrier_on_stream_kernel_threadgroup<(threadgroup_t)1>(int, int)"),
    ("nvshmem", "void alltoall_on_stream_kernel<float>(int, float*, float const*, unsigned long)"),
    # vLLM / SGLang / AITER custom all-reduce (csrc/custom_all_reduce.cuh): public profile reports
    ("custom_all_reduce", "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals"),
    ("custom_all_reduce", "void sglang::cross_device_reduce_1stage<__half, 8>(sglang::RankData*, sglang::RankSignals, "
                       "sglang::Signal*, __half*, int, int)"),
    ("custom_all_reduce", "cross_device_reduce_2stage"),
    ("custom_all_reduce", "aiter::cross_device_reduce_2stage"),
    # PyTorch symmetric memory (torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu):
    # ../shared/realworld/kineto/tracelens__b200_eager_rank0.json.gz (73 launches), and a public
    # vLLM benchmark report
    ("torch_symm_mem", "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
                       "unsigned long, unsigned int**, unsigned long, unsigned long)"),
    ("torch_symm_mem", "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, 2>("
                       "c10::BFloat16**, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)"),
    # MSCCL++: the demangled signature of allreduce7 in microsoft/mscclpp apps/nccl/src/allreduce.hpp
    # (commit 5cbc04f): its arguments name MSCCL++'s channel handles
    ("mscclpp", "void allreduce7<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
                "mscclpp::DeviceHandle<mscclpp::SmChannel>*, unsigned long, unsigned long, int, int, int, "
                "unsigned long, unsigned int)"),
]

# Not communication, though their names come near the patterns
NOT_COMM = [
    # DeepEP's layout kernel counts tokens per rank and expert locally (the same table)
    "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
    "void deep_ep::internode::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
    # DeepGEMM (the same table: the MoE GEMMs between dispatch and combine)
    "void dpsk::gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 128u, 128u, 5u, 128u, 128u, 2u, "
    "(dpsk::gemm::GemmType)1>(__nv_bfloat16*, float*, int*, unsigned int, unsigned int, CUtensorMap_st, "
    "CUtensorMap_st, CUtensorMap_st, CUtensorMap_st)",
    # torch reductions: ../shared/realworld/kineto/tracelens__h100_qwen1.5-0.5b.json.gz
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)",
    "reduce_segments",
]


@pytest.fixture(scope="module")
def empty(empty_store):
    return empty_store


@pytest.mark.parametrize("lib,name", REAL_NAMES, ids=[f"{lib}-{i}" for i, (lib, _) in enumerate(REAL_NAMES)])
def test_comm_library_of_real_kernel_names(empty, lib, name):
    got = empty.one("select tk_comm_library(?), tk_is_comm_kernel(?), tk_kernel_type('kernel', ?)",
                    [name, name, name])
    assert tuple(got) == (lib, True, "communication")


@pytest.mark.parametrize("name", NOT_COMM)
def test_not_comm(empty, name):
    assert tuple(empty.one("select tk_comm_library(?), tk_kernel_type('kernel', ?)", [name, name])) \
        == (None, "compute")


def test_collective_op_of_custom_kernels(empty):
    def op(prefix):
        name = next(n for _, n in REAL_NAMES if n.startswith(prefix))
        return empty.one("select tk_collective_op(?)", [name])
    assert op("void dpsk::ep::internode::notify_dispatch") is None  # metadata, not the payload
    assert op("void dpsk::ep::internode::dispatch<") == "all_to_all"
    assert op("void dpsk::ep::internode::combine_ll") == "all_to_all"
    assert op("void vllm::cross_device_reduce_1stage") == "all_reduce"
    assert op("void (anonymous namespace)::multimem_all_reduce") == "all_reduce"


def test_symmetric_memory_all_reduce_is_communication_in_a_real_trace(convert):
    """vLLM on a B200 all-reducing through PyTorch symmetric memory (multimem): before issue 50,
    kernel_type_breakdown counted these 73 kernels as compute and showed only the one NCCL
    all-gather as communication."""
    st = convert(need(REALWORLD / "kineto" / "tracelens__b200_eager_rank0.json.gz"))
    rows = st.rows("""select tk_comm_library(name) as lib, count(*), sum(dur_ns)::BIGINT from kernels
                      where tk_is_comm_kernel(name) group by all order by lib""")
    assert [(r[0], r[1]) for r in rows] == [("nccl", 1), ("torch_symm_mem", 73)]
    comm_ns = sum(r[2] for r in rows)
    kt = st.one("""select ops, total_ns from kernel_type_breakdown where kernel_type = 'communication'""")
    assert tuple(kt) == (74, comm_ns)
    assert st.one("select count(*) from collectives") == 74
    assert st.one("select count(*) from collectives where operation = 'all_reduce'") == 73
