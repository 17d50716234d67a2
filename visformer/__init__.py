"""visformer: the Transformer of "Attention is all you need", built to be looked inside."""

from .config import ModelConfig
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
from .utils import resolve_device, seed_everything

__all__ = [
    "AttentionMaps",
    "Decoded",
    "Encoded",
    "HeadMask",
    "KVCache",
    "ModelConfig",
    "MultiHeadAttention",
    "Seq2SeqOutput",
    "Transformer",
    "apply_pe_rotation",
    "causal_mask",
    "pe_rotation",
    "pe_wavelengths",
    "positional_encoding",
    "resolve_device",
    "seed_everything",
]
