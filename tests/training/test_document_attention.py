"""Attention within documents without a dense mask: flex_attention with a document block mask gives
the dense-mask path's results (CPU, fp32) and skips the blocks no document pair falls in."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from training.configs import TrainConfig, model_config
from training.model import Llama, document_block_mask


def _doc_ids() -> torch.Tensor:
    doc = torch.zeros(2, 256, dtype=torch.int64)
    doc[0, 40:], doc[0, 200:] = 1, 2
    doc[1, 128:], doc[1, 250:] = 1, -1  # a boundary on the block edge; padding at the end
    return doc


def test_flex_block_mask_gives_the_dense_masks_hidden_states() -> None:
    torch.manual_seed(0)
    model = Llama(replace(model_config("tiny"), num_layers=2)).float()
    doc = _doc_ids()
    ids = torch.randint(0, 512, doc.shape)
    pos = torch.arange(256).expand(2, 256).contiguous()
    with torch.no_grad():
        model.document_attention = "flex"
        flex = model.hidden_states(ids, pos, doc)
        model.document_attention = "dense"
        dense = model.hidden_states(ids, pos, doc)
        causal = model.hidden_states(ids, pos, None)
    torch.testing.assert_close(flex, dense, atol=1e-5, rtol=1e-5)
    assert (flex - causal).abs().max() > 1e-3  # the mask matters on this batch


def test_blocks_outside_every_document_are_skipped() -> None:
    mask = document_block_mask(_doc_ids())
    kept = mask.kv_num_blocks + mask.full_kv_num_blocks  # [B, H, query blocks]
    assert kept[0, 0].tolist() == [1, 2]  # row 0: documents cross the block edge, both blocks needed
    assert kept[1, 0].tolist() == [1, 1]  # row 1: the second block's queries never see the first


def test_document_mask_kernel_is_validated() -> None:
    assert TrainConfig().document_mask_kernel == "flex"
    with pytest.raises(ValueError, match="flex or dense"):
        TrainConfig(document_mask_kernel="sparse")
