"""visformer: the Transformer of "Attention is all you need", built to be looked inside."""

from .checkpoint import Checkpoint, load_checkpoint
from .config import ModelConfig, TrainConfig
from .decoding import Translation, translate
from .model import (
    AttentionMaps,
    Decoded,
    Encoded,
    HeadMask,
    KVCache,
    MultiHeadAttention,
    Seq2SeqOutput,
    Transformer,
    apply_pe_rotation,
    causal_mask,
    pe_rotation,
    pe_wavelengths,
    positional_encoding,
)
from .training import Trainer
from .utils import resolve_device, seed_everything

__all__ = [
    "AttentionMaps",
    "Checkpoint",
    "Decoded",
    "Encoded",
    "HeadMask",
    "KVCache",
    "ModelConfig",
    "MultiHeadAttention",
    "Seq2SeqOutput",
    "TrainConfig",
    "Trainer",
    "Transformer",
    "Translation",
    "apply_pe_rotation",
    "causal_mask",
    "load_checkpoint",
    "pe_rotation",
    "pe_wavelengths",
    "positional_encoding",
    "resolve_device",
    "seed_everything",
    "translate",
]
