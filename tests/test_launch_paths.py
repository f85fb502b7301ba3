"""Launch paths (``ccdiag.ledger.vocab``): how a launch reached the GPU, by entry point and kernel.

A runtime-layer interposer (an LD_PRELOAD emulator) tolls the launches the framework makes
through the CUDA runtime and misses the ones a math library makes through its own runtime, so
LA01 measures tolls per path. Kernels the framework compiles into itself are the framework's,
whatever their names hold: PyTorch's memory-efficient attention is a CUTLASS template
(``fmha_cutlassF_*``) launched by ``cudaLaunchKernel`` like any ATen kernel.
"""

from __future__ import annotations

import polars as pl
import pytest

from ccdiag.ledger.vocab import launch_path, with_launch_path

CASES = [
    ("cudaLaunchKernel", "void at::native::vectorized_elementwise_kernel<4, float>(int)", "runtime"),
    ("cudaLaunchKernel", "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::"
     "AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "runtime"),
    ("cudaLaunchKernel", "fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(PyTorchMemEff"
     "Attention::AttentionBackwardKernel<cutlass::arch::Sm80, float>::Params)", "runtime"),
    ("cudaLaunchKernel", "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, "
     "64, 4, false, false, cutlass::half_t>>(Flash_fwd_params)", "runtime"),
    ("cudaLaunchKernel", "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>()", "library"),
    ("cuLaunchKernel", "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn>()", "library"),
    ("cudaLaunchKernelExC", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_execute_kernel", "library"),
    ("cuLaunchKernel", "triton_poi_fused_add_0", "driver"),
    ("cudaGraphLaunch", None, "graph"),
    ("cudaMemcpyAsync", None, "memset_copy"),
]  # fmt: skip


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "name": [c[0] for c in CASES],
            "gpu_name": [c[1] for c in CASES],
            "cls": ["launch"] * len(CASES),
        }  # fmt: skip
    )


@pytest.mark.parametrize("how", ["expr", "per_value"])
def test_framework_kernels_with_library_words_in_their_names_are_not_library_launches(
    how: str,
) -> None:
    df = _frame()
    got = (
        df.select(launch_path().alias("path"))["path"]
        if how == "expr"
        else with_launch_path(df)["path"]
    )
    assert got.to_list() == [c[2] for c in CASES]


def test_non_launch_calls_have_no_path() -> None:
    df = pl.DataFrame({"name": ["cudaStreamSynchronize"], "gpu_name": [None], "cls": ["sync"]},
                      schema_overrides={"gpu_name": pl.String})  # fmt: skip
    assert with_launch_path(df)["path"].to_list() == [None]
