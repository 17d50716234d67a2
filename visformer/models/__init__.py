"""Model families beside the paper's Transformer, built from its parts: RNN seq2seq and the two LMs.

`build_model(config)` builds whichever architecture a config (or a checkpoint's config) names.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from ..config import ARCHITECTURES, ModelConfig
from ..model import Transformer
from .lm import CausalLM, LMOutput, MaskedLM, mask_pieces
from .rnn import RNN_SCORES, RecurrentCache, RNNSeq2Seq

SEQ2SEQ_ARCHITECTURES = ("transformer", *RNN_SCORES)  # translate with encode()/decode(): strategies, Trainer


def build_model(config: ModelConfig) -> nn.Module:
    """The model of config.architecture, freshly initialised."""
    if config.architecture == "transformer":
        return Transformer(config)
    if config.architecture in RNN_SCORES:
        return RNNSeq2Seq(config)
    if config.architecture == "encoder-lm":
        return MaskedLM(config)
    if config.architecture == "decoder-lm":
        return CausalLM(config)
    raise ValueError(
        f"unknown architecture {config.architecture!r}; choose one of {', '.join(ARCHITECTURES)}"
    )


def attention_layers(config: ModelConfig) -> dict[str, int]:
    """How many attention maps of each kind (encoder self, decoder self, cross) one forward pass returns."""
    arch = config.architecture
    if arch in RNN_SCORES:
        return {"encoder": 0, "decoder": 0, "cross": 1 if RNN_SCORES[arch] else 0}
    if arch == "encoder-lm":
        return {"encoder": config.n_encoder_layers, "decoder": 0, "cross": 0}
    if arch == "decoder-lm":
        return {"encoder": 0, "decoder": config.n_decoder_layers, "cross": 0}
    return {
        "encoder": config.n_encoder_layers,
        "decoder": config.n_decoder_layers,
        "cross": config.n_decoder_layers,
    }


def architecture_of(folder: str | Path) -> str:
    """The architecture a checkpoint folder's config.json names ("transformer" when absent or unreadable)."""
    try:
        model = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("model") or {}
        return str(model.get("architecture", "transformer"))
    except (OSError, ValueError, AttributeError, RecursionError):
        return "transformer"  # loading it will say what is wrong


__all__ = [
    "SEQ2SEQ_ARCHITECTURES",
    "CausalLM",
    "LMOutput",
    "MaskedLM",
    "RNNSeq2Seq",
    "RecurrentCache",
    "architecture_of",
    "attention_layers",
    "build_model",
    "mask_pieces",
]
