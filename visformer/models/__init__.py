"""Model families beside the paper's Transformer, built from its parts: RNN seq2seq and the two LMs.

`build_model(config)` builds whichever architecture a config (or a checkpoint's config) names.
"""

from __future__ import annotations

from ..architectures import SEQ2SEQ, Family, architecture
from ..config import ModelConfig
from ..model import Transformer
from .lm import CausalLM, LMOutput, MaskedLM, lm_objective, mask_pieces
from .rnn import RecurrentCache, RNNSeq2Seq

SEQ2SEQ_ARCHITECTURES = SEQ2SEQ  # translate with encode()/decode(): strategies, Trainer
Model = Transformer | RNNSeq2Seq | MaskedLM | CausalLM  # whatever build_model builds (Checkpoint.model)
_LM_CLASSES = {"encoder": MaskedLM, "decoder": CausalLM}  # a language model by the attention kind it keeps


def build_model(config: ModelConfig) -> Model:
    """The model of config.architecture, freshly initialised."""
    arch = architecture(config.architecture)
    if arch.family is Family.TRANSFORMER:
        return Transformer(config)
    if arch.family is Family.RNN:
        return RNNSeq2Seq(config)
    (kind,) = arch.layers  # a language model keeps one half of the Transformer
    return _LM_CLASSES[kind](config)


def attention_layers(config: ModelConfig) -> dict[str, int]:
    """How many attention maps of each kind (encoder self, decoder self, cross) one forward pass returns."""
    return architecture(config.architecture).attention_layers(config)


__all__ = [
    "SEQ2SEQ_ARCHITECTURES",
    "CausalLM",
    "LMOutput",
    "MaskedLM",
    "Model",
    "RNNSeq2Seq",
    "RecurrentCache",
    "attention_layers",
    "build_model",
    "lm_objective",
    "mask_pieces",
]
