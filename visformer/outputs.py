"""What a Transformer hands out besides logits: attention maps, per-layer intermediates, head switches, caches.

Shapes: B batch, h heads, L / Lq / Lk lengths, d d_model, dh d_model / h.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .architectures import architecture
from .config import ModelConfig


@dataclass
class AttentionMaps:
    """All attention weights of one forward pass, one (B, h, queries, keys) tensor per layer."""

    encoder: list[Tensor] = field(default_factory=list)  # (B, h, S, S) each
    decoder: list[Tensor] = field(default_factory=list)  # (B, h, T, T) each, 0 above diagonal
    cross: list[Tensor] = field(default_factory=list)  # (B, h, T, S) each

    def cpu(self) -> AttentionMaps:
        """Detached float32 copies on the CPU."""

        def conv(xs: list[Tensor]) -> list[Tensor]:
            return [x.detach().float().cpu() for x in xs]

        return AttentionMaps(conv(self.encoder), conv(self.decoder), conv(self.cross))

    def select(self, index: int) -> AttentionMaps:
        """The maps of one batch element, keeping a batch dimension of 1."""

        def pick(xs: list[Tensor]) -> list[Tensor]:
            return [x[index : index + 1] for x in xs]

        return AttentionMaps(pick(self.encoder), pick(self.decoder), pick(self.cross))


@dataclass
class HeadMask:
    """Per-head switches (layers, heads): 1 keeps a head, 0 switches it off (ablation)."""

    encoder: Tensor | None = None
    decoder: Tensor | None = None
    cross: Tensor | None = None

    @staticmethod
    def ones(config: ModelConfig) -> HeadMask:
        """A mask that keeps every head of every attention kind the architecture has."""
        layers = architecture(config.architecture).attention_layers(config)
        return HeadMask(**{kind: torch.ones(n, config.n_heads) if n else None for kind, n in layers.items()})

    def layer(self, kind: str, index: int) -> Tensor | None:
        """Row of switches (h,) for one layer of `kind` ("encoder", "decoder", "cross")."""
        mask = getattr(self, kind)
        return None if mask is None else mask[index]


@dataclass
class AttentionRecord:
    """One attention sublayer taken apart: per-head Q, K, V, weights and outputs, concatenation, W_O."""

    q: Tensor  # (B, h, Lq, dh)
    k: Tensor  # (B, h, Lk, dh)
    v: Tensor  # (B, h, Lk, dh)
    weights: Tensor  # (B, h, Lq, Lk) softmax(QKᵀ/√dk), 0 where masked
    heads: Tensor  # (B, h, Lq, dh) weights @ V per head (after the head mask)
    concat: Tensor  # (B, Lq, h·dh) the heads side by side
    output: Tensor  # (B, Lq, d) concat W_Oᵀ + b_O


@dataclass
class SublayerRecord:
    """One residual sublayer: input x, sublayer output y, x + y and the LayerNorm's output."""

    input: Tensor  # (B, L, d) x
    output: Tensor  # (B, L, d) y = Sublayer(x) (post-LN) or Sublayer(LayerNorm(x)) (pre-LN)
    residual: Tensor  # (B, L, d) x + y
    normed: Tensor  # (B, L, d) LayerNorm(x + y) (post-LN: the result) or LayerNorm(x) (pre-LN: what y saw)
    norm_first: bool

    @property
    def result(self) -> Tensor:
        """What the sublayer connection hands on: LayerNorm(x + y) (post-LN) or x + y (pre-LN)."""
        return self.residual if self.norm_first else self.normed


@dataclass
class LayerRecord:
    """What one encoder or decoder layer computed, in order; lists are filled as the layer runs."""

    sublayers: list[SublayerRecord] = field(default_factory=list)  # self-attn, [cross-attn], feed-forward
    attention: list[AttentionRecord] = field(default_factory=list)  # self, then cross in the decoder
    hidden: list[Tensor] = field(default_factory=list)  # [(B, L, d_ff)]: activation(x W1 + b1)

    @property
    def self_attn(self) -> AttentionRecord:
        """The (masked, in the decoder) self-attention."""
        return self.attention[0]

    @property
    def cross_attn(self) -> AttentionRecord:
        """The decoder's attention over the encoder output."""
        return self.attention[1]

    @property
    def ffn_hidden(self) -> Tensor:
        """The feed-forward network's hidden layer (B, L, d_ff)."""
        return self.hidden[0]

    @property
    def input(self) -> Tensor:
        """What the layer received (B, L, d)."""
        return self.sublayers[0].input

    @property
    def output(self) -> Tensor:
        """The layer's output (B, L, d)."""
        return self.sublayers[-1].result


@dataclass
class Intermediates:
    """Every layer's record of one forward pass: Q, K, V, attention, sublayer outputs."""

    encoder: list[LayerRecord] = field(default_factory=list)
    decoder: list[LayerRecord] = field(default_factory=list)


@dataclass
class LayerCache:
    """Keys and values a decoder layer keeps between generation steps, each (B, h, L, dh)."""

    self_k: Tensor | None = None
    self_v: Tensor | None = None
    cross_k: Tensor | None = None
    cross_v: Tensor | None = None


@dataclass
class KVCache:
    """Incremental-decoding state: self-attention K/V grow, cross-attention K/V are computed once."""

    layers: list[LayerCache]

    @staticmethod
    def empty(n_layers: int) -> KVCache:
        """A cache with nothing decoded yet."""
        return KVCache([LayerCache() for _ in range(n_layers)])

    @property
    def length(self) -> int:
        """Number of target positions already cached."""
        k = self.layers[0].self_k
        return 0 if k is None else k.shape[2]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search picks surviving hypotheses)."""
        for layer in self.layers:
            for name in ("self_k", "self_v", "cross_k", "cross_v"):
                t = getattr(layer, name)
                if t is not None:
                    setattr(layer, name, t.index_select(0, index))
