"""The decoder step on prepared weights: fused projections, one weight dtype, a preallocated key/value cache.

`Transformer.decode` with a `KVCache` (the reference path) runs the modules and grows the cache with
torch.cat at every step. Decoding one new token per row runs the same arithmetic here with less around
it: Q, K and V of self-attention come from one fused matmul (the module's three weights side by side,
the parameters and checkpoints are unchanged), keys and values are written into a cache allocated once
for the length limit, the query of one new position needs no causal mask, the cross-attention mask is
dropped when no source is padded, and the weights are laid out once per model and dtype (a bf16 copy
where bf16 is chosen, instead of autocast's casts). The residual stream, layer norms and the returned
logits stay fp32. Tests hold it to the reference path token for token in fp32.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig
from ..model import ACTIVATION_FUNCTIONS, Encoded, HeadMask, Transformer
from ..utils import autocast_dtype

_FAST = ContextVar("visformer_fast_decoding", default=True)


@contextmanager
def reference_decoding() -> Iterator[None]:
    """Decode through `Transformer.decode` and its torch.cat cache inside the block (tests, the bench)."""
    token = _FAST.set(False)
    try:
        yield
    finally:
        _FAST.reset(token)


def fast_path_applies(model: nn.Module, head_mask: HeadMask | None) -> bool:
    """Whether the fast step can stand in for `model.decode`: a Transformer in eval mode, no head switched off."""
    return _FAST.get() and isinstance(model, Transformer) and head_mask is None and not model.training


# bf16 pays at batch 1 only for a large output matrix (bench/RESULTS.md, Decoding precision): a single row is
# memory-bound and this CPU's bf16 GEMV kernels are slower than fp32 below a few million weights
BF16_MIN_ROWS = 4  # rows decoded together (batch x beams) from which every matmul runs in bf16
BF16_MIN_OUTPUT_WEIGHTS = 16_000_000  # vocabulary x d_model from which the output projection runs in bf16


@dataclass(frozen=True)
class StepDtypes:
    """Weight dtypes of one decoding: the layers' matmuls and the output projection."""

    layers: torch.dtype
    output: torch.dtype


def decoding_dtype(
    config: ModelConfig, rows: int, device: torch.device, precision: str = "auto"
) -> StepDtypes:
    """The weight dtypes for decoding `rows` rows at once: "fp32", "bf16", or "auto" by this CPU's measurements."""
    dtype = autocast_dtype(precision, device, config.d_model)  # "auto": bf16 from d_model 256 on a bf16 CPU
    if dtype is None:
        return StepDtypes(torch.float32, torch.float32)
    if precision != "auto" or device.type != "cpu":
        return StepDtypes(dtype, dtype)
    big_output = config.tgt_vocab_size * config.d_model >= BF16_MIN_OUTPUT_WEIGHTS
    layers = dtype if rows >= BF16_MIN_ROWS else torch.float32
    return StepDtypes(layers, dtype if rows >= BF16_MIN_ROWS or big_output else torch.float32)


Linear = tuple[Tensor, Tensor | None]  # weight (out, in), bias (out,)
Norm = tuple[Tensor, Tensor, float]  # LayerNorm weight, bias, eps (fp32)


@dataclass
class LayerWeights:
    """One decoder layer's weights laid out for the fast step."""

    qkv: Linear  # (3d, d): W_Q, W_K, W_V of self-attention stacked
    self_out: Linear  # (d, d)
    cross_q: Linear  # (d, d)
    cross_kv: Linear  # (2d, d): W_K, W_V of cross-attention stacked
    cross_out: Linear  # (d, d)
    ff1: Linear  # (d_ff, d)
    ff2: Linear  # (d, d_ff)
    norms: tuple[Norm, Norm, Norm]


@dataclass
class FastWeights:
    """A Transformer's decoder weights in the dtypes of one decoding (`StepDtypes`)."""

    dtypes: StepDtypes
    layers: list[LayerWeights]
    embedding: Tensor  # (V, d) fp32, the module's own
    scale: float  # √d
    pe: Tensor  # (max_len, d) fp32
    final_norm: Norm | None  # pre-LN only
    output: Linear  # (V, d) in dtypes.output
    n_heads: int
    norm_first: bool
    activation: str


def _linear(dtype: torch.dtype, *modules: nn.Linear) -> Linear:
    """Weights and biases of `modules` stacked along the outputs, in `dtype` (no copy for one fp32 module)."""
    weight = torch.cat([m.weight for m in modules]) if len(modules) > 1 else modules[0].weight
    biases = [m.bias for m in modules]
    bias = None if biases[0] is None else torch.cat(biases) if len(biases) > 1 else biases[0]
    return weight.detach().to(dtype), None if bias is None else bias.detach().to(dtype)


def _norm(module: nn.LayerNorm) -> Norm:
    """A LayerNorm's parameters."""
    return module.weight.detach(), module.bias.detach(), module.eps


def prepare_weights(model: Transformer, dtypes: StepDtypes) -> FastWeights:
    """Lay out the decoder's weights for the fast step (fused Q/K/V and K/V, one dtype)."""
    layers = []
    dt = dtypes.layers
    for block in model.decoder.layers:
        sa, ca, ff = block.self_attn, block.cross_attn, block.feed_forward
        layers.append(
            LayerWeights(
                qkv=_linear(dt, sa.w_q, sa.w_k, sa.w_v),
                self_out=_linear(dt, sa.w_o),
                cross_q=_linear(dt, ca.w_q),
                cross_kv=_linear(dt, ca.w_k, ca.w_v),
                cross_out=_linear(dt, ca.w_o),
                ff1=_linear(dt, ff.linear1),
                ff2=_linear(dt, ff.linear2),
                norms=(_norm(block.sublayer1.norm), _norm(block.sublayer2.norm), _norm(block.sublayer3.norm)),
            )
        )
    cfg = model.config
    final = model.decoder.norm
    return FastWeights(
        dtypes=dtypes,
        layers=layers,
        embedding=model.tgt_embed.token.weight.detach(),
        scale=model.tgt_embed.scale,
        pe=model.tgt_embed.pe,
        final_norm=_norm(final) if isinstance(final, nn.LayerNorm) else None,
        output=_linear(dtypes.output, model.generator),
        n_heads=cfg.n_heads,
        norm_first=cfg.norm_first,
        activation=cfg.activation,
    )


# model -> {dtypes: (parameter versions, weights)}: laid out once, again after training changed a weight
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _versions(model: nn.Module) -> tuple[tuple[int, int], ...]:
    """Storage and version counter of every parameter: changes when a weight is replaced or updated in place."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def fast_weights(model: Transformer, dtypes: StepDtypes) -> FastWeights:
    """The model's prepared weights for `dtypes`, made on first use and when a parameter has changed."""
    versions = _versions(model)
    per_model = _PREPARED.setdefault(model, {})
    entry = per_model.get(dtypes)
    if entry is None or entry[0] != versions:
        per_model[dtypes] = entry = (versions, prepare_weights(model, dtypes))
    return entry[1]


class FastDecoder:
    """Incremental decoding of a Transformer on prepared weights: one new token per row and step."""

    def __init__(self, weights: FastWeights, encoded: Encoded, max_steps: int) -> None:
        w = self.w = weights
        memory = encoded.memory  # (B, S, d)
        b, s, d = memory.shape
        h = w.n_heads
        dt = w.dtypes.layers
        self.d_model, self.d_head = d, d // h
        mem = memory.to(dt)
        cross = [F.linear(mem, *lw.cross_kv).view(b, s, 2, h, d // h) for lw in w.layers]  # (B, S, 2, h, dh)
        self.cross = torch.stack(cross).permute(0, 3, 1, 4, 2, 5).contiguous()  # (L, 2, B, h, S, dh)
        src_mask = encoded.src_mask  # (B, 1, 1, S), True = a real token
        self.mask = None  # an additive (B, 1, 1, S) mask where some source is padded
        if not bool(src_mask.all()):
            self.mask = torch.zeros(src_mask.shape, dtype=dt).masked_fill(~src_mask, float("-inf"))
        n_layers = len(w.layers)
        self.kv = memory.new_empty((n_layers, 2, b, h, max_steps, d // h), dtype=dt)  # (L, 2, B, h, T, dh)
        self.length = 0

    def step(self, tokens: Tensor) -> Tensor:
        """Logits (A, V) in fp32 for one new token per row, tokens (A,)."""
        w, t = self.w, self.length
        if t >= self.kv.shape[4]:
            raise ValueError(f"the cache holds {self.kv.shape[4]} steps")
        x = F.embedding(tokens, w.embedding) * w.scale + w.pe[t]  # (A, d) fp32 residual stream
        act = ACTIVATION_FUNCTIONS[w.activation]
        d, dt, pre = self.d_model, w.dtypes.layers, w.norm_first
        for i, lw in enumerate(w.layers):
            n1, n2, n3 = lw.norms
            y = F.layer_norm(x, (d,), *n1) if pre else x
            x = x + self._self_attention(y.to(dt), lw, i, t)
            if not pre:
                x = F.layer_norm(x, (d,), *n1)
            y = F.layer_norm(x, (d,), *n2) if pre else x
            x = x + self._cross_attention(y.to(dt), lw, i)
            if not pre:
                x = F.layer_norm(x, (d,), *n2)
            y = F.layer_norm(x, (d,), *n3) if pre else x
            x = x + F.linear(act(F.linear(y.to(dt), *lw.ff1)), *lw.ff2)
            if not pre:
                x = F.layer_norm(x, (d,), *n3)
        if w.final_norm is not None:
            x = F.layer_norm(x, (d,), *w.final_norm)
        self.length = t + 1
        return F.linear(x.to(w.dtypes.output), *w.output).float()  # (A, V)

    def _self_attention(self, y: Tensor, lw: LayerWeights, i: int, t: int) -> Tensor:
        """Masked self-attention of the new position over positions 0..t (its K/V written at t): (A, d)."""
        a = y.shape[0]
        qkv = F.linear(y, *lw.qkv).view(a, 3, -1, self.d_head)  # (A, 3, h, dh)
        self.kv[i, :, :, :, t] = qkv[:, 1:].transpose(0, 1)  # (2, A, h, dh)
        k, v = self.kv[i, :, :, :, : t + 1].unbind(0)  # (A, h, t+1, dh) each
        out = F.scaled_dot_product_attention(qkv[:, 0, :, None], k, v)  # (A, h, 1, dh); no future to hide
        return F.linear(out.reshape(a, -1), *lw.self_out)

    def _cross_attention(self, y: Tensor, lw: LayerWeights, i: int) -> Tensor:
        """Attention of the new position over the encoder output (K/V computed once): (A, d)."""
        a = y.shape[0]
        q = F.linear(y, *lw.cross_q).view(a, -1, 1, self.d_head)  # (A, h, 1, dh)
        k, v = self.cross[i].unbind(0)  # (A, h, S, dh)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)  # (A, h, 1, dh)
        return F.linear(out.reshape(a, -1), *lw.cross_out)

    def keep(self, rows: Tensor) -> None:
        """Keep batch rows `rows` (drop finished sentences, reorder beams); copies only the filled steps."""
        t = self.length
        kv = self.kv.new_empty((*self.kv.shape[:2], len(rows), *self.kv.shape[3:]))
        torch.index_select(self.kv[..., :t, :], 2, rows, out=kv[..., :t, :])
        self.kv = kv
        self.cross = self.cross.index_select(2, rows)
        if self.mask is not None:
            self.mask = self.mask.index_select(0, rows)
