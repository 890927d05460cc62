"""Worker for the Hugging Face checkpoint tests, started by torchrun on CPU/gloo (or `results` called in the
test's process as its only rank): loads an HF
folder into an engine (`--init-from`), writes rank 0's logits on a fixed batch, optionally trains
one step, saves a checkpoint and writes the logits after that step."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from training.configs import TrainConfig
from training.data import Batch
from training.hf import hf_config, model_config_from_hf
from training.trainer import build_engine


def logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    with torch.no_grad():
        out: torch.Tensor = model(ids, pos)  # through the engine's hooks: no labels, the logits
    return out.float()


def results(engine_name: str, hf: Path, out: Path, train: bool) -> dict[str, torch.Tensor]:
    """The logits of the engine loaded from `hf` on a fixed batch ("before"), and with `train` those after one
    step ("after"), its checkpoint saved under `out`. Called by every rank of a process group."""
    mcfg = model_config_from_hf(hf)
    tcfg = TrainConfig(seq_len=16, micro_batch=2, steps=1, warmup_steps=0, lr=1e-2, loss_chunk_tokens=4096)
    engine = build_engine(engine_name, mcfg, tcfg, torch.device("cpu"), param_dtype=torch.float32, init_from=hf)
    ids = torch.randint(0, mcfg.vocab_size, (2, 17), generator=torch.Generator().manual_seed(0))
    out_logits = {"before": logits(engine.model, ids[:, :-1])}
    if train:
        pos = torch.arange(16).expand(2, 16).contiguous()
        batch = Batch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous(), pos, torch.zeros(2, 16, dtype=torch.int64))
        engine.train_step([batch], lr=1e-2)
        out_logits["after"] = logits(engine.model, ids[:, :-1])
        ckpt = out / "checkpoints" / "step_00000001"
        engine.save(ckpt)
        engine.wait_saved()
        dist.barrier()
        if dist.get_rank() == 0:
            (ckpt / "config.json").write_text(json.dumps(hf_config(mcfg, dtype="float32")))
    return out_logits


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--engine", required=True)
    p.add_argument("--hf", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--train", action="store_true")
    a = p.parse_args()
    dist.init_process_group("gloo")
    res = results(a.engine, a.hf, a.out, a.train)
    if dist.get_rank() == 0:
        torch.save(res, a.out / "logits.pt")
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)  # DeepSpeed's background threads can keep the interpreter from exiting


if __name__ == "__main__":
    main()
