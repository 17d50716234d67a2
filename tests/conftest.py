"""Shared fixtures: tiny configs that run in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from visformer import ModelConfig, Transformer

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Tests run tiny models: one torch thread is faster than several on a small shared machine (one model test took
# 70 s with the default threads and 8.5 s with one on 2 cores), and results do not depend on the core count.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _deterministic() -> None:
    torch.manual_seed(0)


def tiny_config(**overrides) -> ModelConfig:
    """A model small enough for unit tests (d_model=16, one layer each side)."""
    base = dict(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=16,
        n_heads=4,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=64,
        pad_id=0,
    )
    base.update(overrides)
    return ModelConfig(**base)


@pytest.fixture
def tiny_model() -> Transformer:
    """A two-layer tiny model in eval mode."""
    return Transformer(tiny_config(n_encoder_layers=2, n_decoder_layers=2)).eval()
