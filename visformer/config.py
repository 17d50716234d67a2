"""Typed configuration that travels through model, trainer, checkpoint and UI."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the encoder–decoder Transformer (paper names)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 256
    norm_first: bool = False  # False = post-LN as in the paper; True = pre-LN
    share_embeddings: bool = True  # tie source, target and output embeddings (joint vocabulary)
    pad_id: int = 0

    def __post_init__(self) -> None:
        """Reject configurations the model cannot be built from."""
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.d_model % 2:
            raise ValueError(f"d_model ({self.d_model}) must be even for sinusoidal encoding")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs src_vocab_size == tgt_vocab_size")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1:
            raise ValueError("the model needs at least one encoder and one decoder layer")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def d_head(self) -> int:
        """Size of one head's queries, keys and values (d_k = d_v = d_model / h)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict, refusing unknown keys with a clear message."""
        return _from_dict(cls, data)

    def to_json(self) -> str:
        """Serialise to JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        """Parse from JSON."""
        return cls.from_dict(json.loads(text))


def _from_dict(cls: type, data: dict[str, Any]):
    """Construct dataclass `cls` from `data`, naming unknown or mistyped keys."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys: {', '.join(unknown)}")
    return cls(**data)
