from __future__ import annotations

import json
from pathlib import Path

import torch

from training.profile import family_of, profiled_step, summarise


def test_kernel_names_from_a_hopper_step_fall_into_their_families() -> None:
    assert family_of("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "nccl"
    assert family_of("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>") == "attention"
    assert family_of("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3") == "attention"
    assert family_of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1") == "matmul"
    assert family_of("nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_NTN") == "matmul"
    assert family_of("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>") \
        == "optimizer"
    assert family_of("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0") == "elementwise"
    assert family_of("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float>") == "copy"
    assert family_of("Memcpy DtoD (Device -> Device)") == "copy"
    assert family_of("some_unknown_kernel") == "other"


def test_summary_sums_kernels_once_by_family_and_keeps_the_largest_first() -> None:
    s = summarise(5, 1500.0, [("nvjet_gemm", 100, 900.0), ("flash_bwd", 32, 200.0), ("ncclDevKernel_AllGather", 33, 80.0),
                              ("triton_poi_fused_silu", 64, 50.0), ("idle_zero", 1, 0.0),
                              ("nccl:_all_gather_base", 33, 80.0), ("Command Buffer Full", 9, 170.0),
                              ("cudaStreamIsCapturing", 99, 26.0)], top_n=2)
    assert s.families_ms == {"matmul": 900.0, "attention": 200.0, "nccl": 80.0, "elementwise": 50.0}
    assert s.device_busy_ms == 1230.0
    assert [k.name for k in s.top] == ["nvjet_gemm", "flash_bwd"]


def test_a_profiled_step_on_cpu_writes_its_summary_and_table(tmp_path: Path) -> None:
    model = torch.nn.Linear(64, 64)
    with profiled_step(3, tmp_path / "profile", write=True):
        model(torch.randn(8, 64)).sum().backward()
    summary = json.loads((tmp_path / "profile" / "step_3.json").read_text())
    assert summary["step"] == 3 and summary["wall_ms"] > 0
    assert "aten::addmm" in (tmp_path / "profile" / "step_3.txt").read_text()


def test_only_rank_zero_writes_a_profile(tmp_path: Path) -> None:
    with profiled_step(3, tmp_path / "profile", write=False):
        torch.ones(4).sum()
    assert not (tmp_path / "profile").exists()
