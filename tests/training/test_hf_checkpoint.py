"""Hugging Face Llama checkpoints in and out, on CPU/gloo with 2 ranks: a tiny Llama made and saved
by transformers loads into both engines with transformers' own logits; the llama3 RoPE scaling too;
a trained step exported by the merge tool loads back into transformers with the job's logits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.training.conftest import REPO, one_rank_group, torchrun_cmd
from tests.training.hf_worker import results
from training.hf import SafetensorsFolder, load_sharded, model_config_from_hf
from training.model import Llama

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow
SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 64}


def save_tiny_llama(out: Path, rope_scaling: dict[str, Any] | None = None, seed: int = 0) -> Any:
    """A random tiny LlamaForCausalLM saved as sharded safetensors with an index."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                                   max_position_embeddings=512, rms_norm_eps=1e-5, rope_scaling=rope_scaling)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # transformers initialises norms to 1: perturb them so a mix-up shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(out, max_shard_size="100KB")
    return model


def hf_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = model(input_ids=ids).logits.float()
    return out


def run_worker(engine: str, hf_dir: Path, out: Path, train: bool = False) -> dict[str, torch.Tensor]:
    out.mkdir(parents=True, exist_ok=True)
    cmd = torchrun_cmd(2, out / "torchelastic", str(REPO / "tests" / "training" / "hf_worker.py"), "--engine",
                       engine, "--hf", str(hf_dir), "--out", str(out), *(["--train"] if train else []))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results: dict[str, torch.Tensor] = torch.load(out / "logits.pt")
    return results


def fixed_ids() -> torch.Tensor:
    return torch.randint(0, 512, (2, 17), generator=torch.Generator().manual_seed(0))[:, :-1]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    d = tmp_path_factory.mktemp("hf_plain")
    return d, save_tiny_llama(d)


def test_config_and_shards_are_read_as_transformers_wrote_them(plain: tuple[Path, Any], tmp_path: Path) -> None:
    hf_dir, _ = plain
    index = json.loads((hf_dir / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1  # really sharded
    cfg = model_config_from_hf(hf_dir)
    assert (cfg.hidden_size, cfg.num_layers, cfg.num_kv_heads, cfg.rope_theta, cfg.rope_scaling) == \
        (64, 2, 2, 10000.0, None)
    save_tiny_llama(tmp_path, SCALING)
    assert model_config_from_hf(tmp_path).rope_scaling == (8.0, 1.0, 4.0, 64)
    folder = SafetensorsFolder(hf_dir)
    try:  # a box of a tensor reads exactly those rows
        full = folder.read("model.layers.0.mlp.down_proj.weight")
        assert torch.equal(folder.read("model.layers.0.mlp.down_proj.weight", (32, 0), (16, 176)), full[32:48])
    finally:
        folder.close()


# ZeRO-3 too: its background checkpoint writer once saved `param_shapes` as plain tuples (DeepSpeed's
# clone helper), which zero_to_fp32 cannot read; training.engines.zero3_checkpoint.host_copy keeps torch.Size.
@pytest.fixture(scope="module", params=["fsdp", "deepspeed"])
def trained(request: pytest.FixtureRequest, plain: tuple[Path, Any], tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, dict[str, torch.Tensor]]:
    """One 2-rank step of each engine from `plain` (hf_worker.py): its logits before and after the step, and
    the folder holding its checkpoint; one run for the tests that ask different things of it."""
    out = tmp_path_factory.mktemp(f"trained_{request.param}")
    return out, run_worker(request.param, plain[0], out, train=True)


def test_hf_checkpoint_loads_into_each_engine_with_transformers_logits(
        trained: tuple[Path, dict[str, torch.Tensor]], plain: tuple[Path, Any]) -> None:
    torch.testing.assert_close(trained[1]["before"], hf_logits(plain[1], fixed_ids()), atol=1e-5, rtol=1e-5)


def test_llama3_rope_scaling_matches_transformers(tmp_path: Path) -> None:
    """Through the FSDP engine on one rank, in this process (the positions are no matter of processes)."""
    hf_dir = tmp_path / "hf"
    model = save_tiny_llama(hf_dir, SCALING, seed=1)
    with one_rank_group():
        got = results("fsdp", hf_dir, tmp_path / "run", train=False)["before"]
    want = hf_logits(model, fixed_ids())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # and the scaling matters: the same weights in one process, with and without it
    cfg = model_config_from_hf(hf_dir)
    pos = torch.arange(16).expand(2, 16)
    for scaling, same in ((cfg.rope_scaling, True), (None, False)):
        single = Llama(replace(cfg, rope_scaling=scaling))
        load_sharded(single, hf_dir)
        with torch.no_grad():
            mine = single.logits(fixed_ids(), pos)
        assert torch.allclose(mine, want, atol=1e-5, rtol=1e-5) is same


def test_trained_step_exported_by_merge_loads_back_into_transformers(
        trained: tuple[Path, dict[str, torch.Tensor]], tmp_path: Path) -> None:
    from training.merge import merge

    run, res = trained
    assert (res["after"] - res["before"]).abs().max() > 1e-3  # the step changed the weights
    out = tmp_path / "export"
    merge(run / "checkpoints" / "step_00000001", out, torch.float32)
    back = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    torch.testing.assert_close(hf_logits(back, fixed_ids()), res["after"], atol=1e-5, rtol=1e-5)


def test_train_init_from_takes_the_folders_tokenizer_and_starts_at_transformers_loss(
        plain: tuple[Path, Any], corpus: Path, tokenizer_path: Path, tmp_path: Path) -> None:
    """`train --init-from DIR` (no --config, no --tokenizer): step 1's loss, before any update, is
    transformers' mean token loss over the batch; the checkpoint exports to a folder. One rank in this process
    (loading into each engine across ranks is test_hf_checkpoint_loads_into_each_engine_with_transformers_logits)."""
    from tests.training.conftest import step_records, train_here
    from training.data import PackedLoader, discover_files
    from training.merge import merge
    from training.tokenizer import load_tokenizer

    src, model = plain
    hf_dir = tmp_path / "hf"
    shutil.copytree(src, hf_dir)
    shutil.copyfile(tokenizer_path, hf_dir / "tokenizer.json")
    run = tmp_path / "run"
    assert train_here(["--init-from", str(hf_dir), "--run-dir", str(run), "--data", str(corpus), "--seq-len", "128",
                       "--micro-batch", "2", "--steps", "1", "--warmup-steps", "1", "--checkpoint-every", "1",
                       "--compile", "0"])[0] == 0
    tok, files = load_tokenizer(hf_dir / "tokenizer.json"), discover_files([corpus])
    batch, _ = PackedLoader.fresh(files, tok, 128, 2, 0, 1, 1234).next_batch()
    logits = hf_logits(model, batch.input_ids)
    want = float(F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=-100))
    assert step_records(run)[1]["loss"] == pytest.approx(want, abs=1e-4)
    ckpt = run / "checkpoints" / "step_00000001"
    assert (ckpt / "tokenizer.json").exists()
    merge(ckpt, tmp_path / "export", torch.float32)
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export")
    assert back.config.num_hidden_layers == 2 and (tmp_path / "export" / "tokenizer.json").exists()
