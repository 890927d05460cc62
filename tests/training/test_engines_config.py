from __future__ import annotations

import math

import pytest
import torch

from training.configs import TrainConfig, model_config, tiny
from training.engines import lr_at
from training.engines.zero3 import deepspeed_config
from training.model import Llama, chunked_cross_entropy_sum


def test_zero3_config_follows_the_model() -> None:
    m = model_config("llama3_70b")
    cfg = deepspeed_config(m, TrainConfig(micro_batch=1, grad_accum=4, zero3_buckets="hidden"), world=64)
    z = cfg["zero_optimization"]
    assert z["stage"] == 3 and z["overlap_comm"] is True
    assert z["reduce_bucket_size"] == 8192 * 8192
    assert z["stage3_prefetch_bucket_size"] == int(0.9 * 8192 * 8192)
    assert z["stage3_param_persistence_threshold"] == 10 * 8192
    assert z["stage3_gather_16bit_weights_on_model_save"] is False
    assert cfg["train_batch_size"] == 1 * 4 * 64 and cfg["bf16"]["enabled"] is True
    assert "optimizer" not in cfg  # PyTorch's AdamW is passed in: no FusedAdam, no nvcc
    asked = deepspeed_config(m, TrainConfig(deepspeed_optimizer="fused"), world=8)
    assert asked["optimizer"]["type"] == "AdamW" and "zero_allow_untested_optimizer" not in asked


def test_lr_schedule_warms_up_then_decays_to_the_floor() -> None:
    c = TrainConfig(lr=1.0, warmup_steps=10, steps=110, min_lr_ratio=0.1)
    assert lr_at(5, c) == pytest.approx(0.5)
    assert lr_at(10, c) == pytest.approx(1.0)
    assert lr_at(60, c) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(110, c) == pytest.approx(0.1)


@pytest.mark.parametrize("chunk", [4, 18, 64])
def test_chunked_loss_equals_the_plain_loss_and_gradient(chunk: int) -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    h = torch.randn(2, 9, 16, requires_grad=True)
    y = torch.randint(0, 50, (2, 9))
    y[0, :3] = -100
    chunked = chunked_cross_entropy_sum(h, head, y, chunk_tokens=chunk)
    chunked.backward()
    g1 = h.grad.clone()  # type: ignore[union-attr]
    h.grad = None
    plain = torch.nn.functional.cross_entropy(head(h).reshape(-1, 50), y.reshape(-1), ignore_index=-100,
                                              reduction="sum")
    plain.backward()
    assert chunked.item() == pytest.approx(plain.item(), rel=1e-5)
    assert torch.allclose(g1, h.grad, atol=1e-5)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["full", "selective", "ops"])
def test_activation_checkpointing_keeps_the_gradients(mode: str) -> None:
    torch.manual_seed(0)
    ref = Llama(tiny())
    ckpt = Llama(tiny())
    ckpt.load_state_dict(ref.state_dict())
    ckpt.set_activation_checkpointing(mode, every=2)
    ids = torch.randint(0, 512, (2, 32))
    pos = torch.arange(32).expand(2, 32)
    for m in (ref, ckpt):
        m(ids, pos, ids).backward()
    for (n, a), (_, b) in zip(ref.named_parameters(), ckpt.named_parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5), n  # type: ignore[arg-type]


def test_hf_parameter_names() -> None:
    names = set(Llama(tiny()).state_dict())
    assert {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
            "model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight",
            "model.layers.0.post_attention_layernorm.weight"} <= names


def test_zero3_buckets_hold_one_whole_decoder_layer_by_default() -> None:
    m = model_config("llama3_8b")
    z = deepspeed_config(m, TrainConfig(), world=2)["zero_optimization"]
    assert z["stage3_prefetch_bucket_size"] == z["reduce_bucket_size"] == m.layer_params()
    assert m.layer_params() > 200_000_000  # 8B: ~218M per layer, against the 15M "auto" prefetch
    assert z["stage3_max_live_parameters"] == 1_000_000_000
    kept = deepspeed_config(m, TrainConfig(reshard_after_forward=False), world=2)["zero_optimization"]
    assert kept["stage3_max_live_parameters"] == kept["stage3_max_reuse_distance"] == m.num_params()
    with pytest.raises(ValueError, match="zero3_buckets"):
        TrainConfig(zero3_buckets="huge")


def test_compiled_pointwise_functions_give_the_eager_loss_and_gradients() -> None:
    torch.manual_seed(0)
    eager = Llama(tiny())
    compiled = Llama(tiny())
    compiled.load_state_dict(eager.state_dict())
    compiled.compile_pointwise()
    ids = torch.randint(0, tiny().vocab_size, (2, 32))
    pos = torch.arange(32).expand(2, 32)
    losses = []
    for model in (eager, compiled):
        loss = model(ids, pos, ids)
        loss.backward()
        losses.append(loss)
    assert torch.allclose(losses[0], losses[1], rtol=1e-4)
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        assert a.grad is not None and b.grad is not None
        assert torch.allclose(a.grad, b.grad, rtol=1e-3, atol=1e-5), name


def test_gradient_pool_is_left_to_fsdp_on_cpu_and_when_switched_off() -> None:
    """The compute-stream gradient pool (engines/fsdp.py) is a CUDA allocator matter: on CPU, and with
    --grad-pool reduce-scatter (TRAINING_GRAD_POOL), FSDP2's own reduce-scatter stays; its buffers on CPU
    are plain."""
    from training.engines.fsdp import ComputeStreamReduceScatter, grads_from_compute_stream

    assert not grads_from_compute_stream([], torch.device("cpu"))
    assert not grads_from_compute_stream([], torch.device("cuda", 0), pool="reduce-scatter")
    buf = ComputeStreamReduceScatter.allocate(object.__new__(ComputeStreamReduceScatter), (6,), dtype=torch.float32,
                                              device=torch.device("cpu"))
    assert buf.shape == (6,) and buf.dtype == torch.float32
