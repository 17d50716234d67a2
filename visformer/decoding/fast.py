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

import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

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


# Measured on this project's CPU (bench/RESULTS.md, Decoding: where a token's time goes): below about 16 rows
# decoded together (batch x beams) a step's small matmuls run faster in fp32 (this CPU's bf16 GEMV kernels carry
# more overhead than the bytes they save), from 16 rows on bf16 wins; a large output matrix (opus-mt's 65,001 x
# 512) is read in bf16 at every batch, since at one row its bytes dominate the step. At such a size up to 16
# rows are memory-bound in fp32 and bf16 alike, and int8 weights (a quarter of fp32's bytes, fbgemm's dynamic
# int8 matmul) stream about 3x faster: 1 row x a 2,048 x 512 matrix read from memory took 95 us in int8, 290 us in
# fp32, 294 us in bf16; 8 rows 185 / 765 / 488 us, 16 rows 327 / 1,203 / 414 us; the 65,001 x 512 output at
# 1 / 8 / 16 / 32 rows 3.1 / 5.8 / 7.6 / 10.3 ms in int8 against 8.6 / 11.3 / 10.1 / 11.4 ms in bf16
# (2026-11-26, 1 thread).
BF16_MIN_ROWS = 16  # rows from which every matmul runs in bf16
BF16_MIN_OUTPUT_WEIGHTS = 16_000_000  # vocabulary x d_model from which the output projection is always bf16
INT8_MAX_ROWS = 16  # a model with such an output decodes up to this many rows with int8 weights ("auto", CPU)


@dataclass(frozen=True)
class StepDtypes:
    """Weight dtypes of one decoding: the layers' matmuls and the output projection (torch.int8: int8 weights)."""

    layers: torch.dtype
    output: torch.dtype

    @property
    def activations(self) -> torch.dtype:
        """The dtype the layers' matmuls read and write (and the cache holds): fp32 next to int8 weights."""
        return _reads(self.layers)

    @property
    def output_activations(self) -> torch.dtype:
        """The dtype the output projection reads."""
        return _reads(self.output)


def _reads(weights: torch.dtype) -> torch.dtype:
    """The activation dtype of a matmul with weights of this dtype (fbgemm's int8 matmul takes fp32)."""
    return torch.float32 if weights == torch.int8 else weights


def decoding_dtype(
    config: ModelConfig, rows: int, device: torch.device, precision: str = "auto"
) -> StepDtypes:
    """The weight dtypes for decoding `rows` rows at once: "fp32", "bf16", "int8", or "auto" by this CPU's
    measurements."""
    if precision == "int8":
        if device.type != "cpu":
            raise ValueError("int8 decoding runs on the CPU; use precision 'auto', 'bf16' or 'fp32'")
        return StepDtypes(torch.int8, torch.int8)
    dtype = autocast_dtype(precision, device, config.d_model)  # "auto": bf16 from d_model 256 on a bf16 CPU
    if dtype is None:
        return StepDtypes(torch.float32, torch.float32)
    if precision != "auto" or device.type != "cpu":
        return StepDtypes(dtype, dtype)
    big_output = config.tgt_vocab_size * config.d_model >= BF16_MIN_OUTPUT_WEIGHTS
    if big_output and rows <= INT8_MAX_ROWS:
        return StepDtypes(torch.int8, torch.int8)
    layers = dtype if rows >= BF16_MIN_ROWS else torch.float32
    return StepDtypes(layers, dtype if rows >= BF16_MIN_ROWS or big_output else torch.float32)


class Linear(NamedTuple):
    """A linear layer laid out for one dtype: fp32 weights transposed (in, out); bf16 (out, in); int8 as fbgemm's
    packed per-output-channel int8 weights with the fp32 bias."""

    weight: Tensor | object  # (in, out) fp32, (out, in) bf16, or fbgemm's packed int8 weights and bias
    bias: Tensor | None  # (out,); inside the packed weights for int8
    layout: str  # "in_out" | "out_in" | "int8"


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
    """Weights and biases of `modules` stacked along the outputs, laid out for `dtype`.

    This CPU's fp32 GEMV/GEMM reads a (in, out) matrix up to 2x faster than nn.Linear's (out, in) one at
    1-64 rows, bf16 the other way round (bench/RESULTS.md, Decoding: where a token's time goes). int8: symmetric
    per-output-channel int8 weights (scale = max |w| of the row / 127) for fbgemm's dynamic int8 matmul.
    """
    weight = torch.cat([m.weight for m in modules]) if len(modules) > 1 else modules[0].weight
    biases = [m.bias for m in modules]
    bias = None if biases[0] is None else torch.cat(biases) if len(biases) > 1 else biases[0]
    weight, bias = weight.detach().float(), None if bias is None else bias.detach().float()
    if dtype == torch.int8:
        return Linear(_int8_packed(weight, bias), None, "int8")
    bias = None if bias is None else bias.to(dtype)
    if dtype == torch.float32:
        return Linear(weight.t().contiguous(), bias, "in_out")
    return Linear(weight.to(dtype), bias, "out_in")


def _int8_packed(weight: Tensor, bias: Tensor | None) -> object:
    """fbgemm's packed int8 form of weight (out, in), one scale per output row, and the fp32 bias.

    torch 2.13 marks its quantized-tensor constructors deprecated (a UserWarning) but keeps them; they are
    the only CPU int8 kernels that stream a weight matrix from memory about 3x faster than fp32 at one row.
    """
    scales = weight.abs().amax(dim=1).clamp_min(1e-12) / 127  # (out,)
    zero = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        quantised = torch.quantize_per_channel(weight, scales.double(), zero, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(quantised, bias)


def project(x: Tensor, lin: Linear) -> Tensor:
    """x (..., in) W^T + b with a prepared Linear, in x's dtype (fp32 for int8 weights)."""
    if lin.layout == "out_in":
        return F.linear(x, lin.weight, lin.bias)
    if x.dim() != 2:
        return project(x.reshape(-1, x.shape[-1]), lin).view(*x.shape[:-1], -1)
    if lin.layout == "int8":  # activations quantised per call, 7 bits (reduce_range)
        return torch.ops.quantized.linear_dynamic(x, lin.weight, True)
    return x @ lin.weight if lin.bias is None else torch.addmm(lin.bias, x, lin.weight)


def _norm(module: nn.LayerNorm) -> Norm:
    """A LayerNorm's parameters."""
    return module.weight.detach(), module.bias.detach(), module.eps


def _layers(model: Transformer, dtype: torch.dtype) -> list[LayerWeights]:
    """The decoder layers' weights for the fast step: fused Q/K/V and K/V, in `dtype`."""
    layers = []
    for block in model.decoder.layers:
        sa, ca, ff = block.self_attn, block.cross_attn, block.feed_forward
        layers.append(
            LayerWeights(
                qkv=_linear(dtype, sa.w_q, sa.w_k, sa.w_v),
                self_out=_linear(dtype, sa.w_o),
                cross_q=_linear(dtype, ca.w_q),
                cross_kv=_linear(dtype, ca.w_k, ca.w_v),
                cross_out=_linear(dtype, ca.w_o),
                ff1=_linear(dtype, ff.linear1),
                ff2=_linear(dtype, ff.linear2),
                norms=(_norm(block.sublayer1.norm), _norm(block.sublayer2.norm), _norm(block.sublayer3.norm)),
            )
        )
    return layers


# model -> {(part, dtype): (parameter versions, prepared weights)}: laid out once per part and dtype (so the
# combinations share them), again after training changed a weight
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _versions(model: nn.Module) -> tuple[tuple[int, int], ...]:
    """Storage and version counter of every parameter: changes when a weight is replaced or updated in place."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def forget_weights(model: nn.Module) -> None:
    """Drop the model's prepared weights: for updates its version counters miss (a fused optimizer's step)."""
    _PREPARED.pop(model, None)


def _prepared(model: Transformer, part: str, dtype: torch.dtype, versions: tuple) -> object:
    """The model's decoder layers (part "layers") or output projection ("output") laid out in `dtype`."""
    per_model = _PREPARED.setdefault(model, {})
    entry = per_model.get((part, dtype))
    if entry is None or entry[0] != versions:
        made = _layers(model, dtype) if part == "layers" else _linear(dtype, model.generator)
        per_model[(part, dtype)] = entry = (versions, made)
    return entry[1]


def fast_weights(model: Transformer, dtypes: StepDtypes) -> FastWeights:
    """The model's prepared weights for `dtypes`, made on first use and when a parameter has changed."""
    versions = _versions(model)
    cfg = model.config
    final = model.decoder.norm
    return FastWeights(
        dtypes=dtypes,
        layers=_prepared(model, "layers", dtypes.layers, versions),
        embedding=model.tgt_embed.token.weight.detach(),
        scale=model.tgt_embed.scale,
        pe=model.tgt_embed.pe,
        final_norm=_norm(final) if isinstance(final, nn.LayerNorm) else None,
        output=_prepared(model, "output", dtypes.output, versions),
        n_heads=cfg.n_heads,
        norm_first=cfg.norm_first,
        activation=cfg.activation,
    )


class FastDecoder:
    """Incremental decoding of a Transformer on prepared weights: one new token per row and step."""

    def __init__(self, weights: FastWeights, encoded: Encoded, max_steps: int, group: int = 1) -> None:
        """Rows are `group` consecutive rows per sentence of `encoded` (beams); they share its cross K/V."""
        w = self.w = weights
        memory = encoded.memory  # (B, S, d)
        b, s, d = memory.shape
        h = w.n_heads
        dt = w.dtypes.activations
        self.d_model, self.d_head = d, d // h
        mem = memory.to(dt)
        # per layer (2, B, h, S, dh): strided views of one projection each, no copy
        self.cross = [
            project(mem, lw.cross_kv).view(b, s, 2, h, d // h).permute(2, 0, 3, 1, 4) for lw in w.layers
        ]
        self.group = group
        self.sentences = torch.arange(b, device=memory.device)  # (B,) sentence of each cross K/V row
        src_mask = encoded.src_mask  # (B, 1, 1, S), True = a real token
        self.mask = None  # an additive (B, 1, 1, S) mask where some source is padded
        if not bool(src_mask.all()):
            self.mask = torch.zeros(src_mask.shape, dtype=dt).masked_fill(~src_mask, float("-inf"))
        n_layers = len(w.layers)
        self.kv = memory.new_empty(
            (n_layers, 2, b * group, h, max_steps, d // h), dtype=dt
        )  # (L, 2, A, h, T, dh)
        self.length = 0

    def step(self, tokens: Tensor) -> Tensor:
        """Logits (A, V) in fp32 for one new token per row, tokens (A,)."""
        w, t = self.w, self.length
        if t >= self.kv.shape[4]:
            raise ValueError(f"the cache holds {self.kv.shape[4]} steps")
        x = F.embedding(tokens, w.embedding) * w.scale + w.pe[t]  # (A, d) fp32 residual stream
        act = ACTIVATION_FUNCTIONS[w.activation]
        d, dt, pre = self.d_model, w.dtypes.activations, w.norm_first
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
            x = x + project(act(project(y.to(dt), lw.ff1)), lw.ff2)
            if not pre:
                x = F.layer_norm(x, (d,), *n3)
        if w.final_norm is not None:
            x = F.layer_norm(x, (d,), *w.final_norm)
        self.length = t + 1
        return project(x.to(w.dtypes.output_activations), w.output).float()  # (A, V)

    def _self_attention(self, y: Tensor, lw: LayerWeights, i: int, t: int) -> Tensor:
        """Masked self-attention of the new position over positions 0..t (its K/V written at t): (A, d)."""
        a = y.shape[0]
        qkv = project(y, lw.qkv).view(a, 3, -1, self.d_head)  # (A, 3, h, dh)
        self.kv[i, :, :, :, t] = qkv[:, 1:].transpose(0, 1)  # (2, A, h, dh)
        k, v = self.kv[i, :, :, :, : t + 1].unbind(0)  # (A, h, t+1, dh) each
        out = F.scaled_dot_product_attention(qkv[:, 0, :, None], k, v)  # (A, h, 1, dh); no future to hide
        return project(out.reshape(a, -1), lw.self_out)

    def _cross_attention(self, y: Tensor, lw: LayerWeights, i: int) -> Tensor:
        """Attention of the new position over the encoder output (K/V computed once): (A, d).

        The G rows of a sentence (its beams) are G queries of one attention over its keys: (B, h, G, dh).
        """
        a = y.shape[0]
        g = a // len(self.sentences)  # rows per sentence: beams, or every search of a lone sentence
        q = project(y, lw.cross_q).view(a // g, g, -1, self.d_head).transpose(1, 2)  # (B, h, G, dh)
        k, v = self.cross[i].unbind(0)  # (B, h, S, dh) each
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)  # (B, h, G, dh)
        return project(out.transpose(1, 2).reshape(a, -1), lw.cross_out)

    def keep(self, rows: Tensor) -> None:
        """Keep rows `rows` (drop finished sentences, reorder beams: G rows per kept sentence, in sentence order);
        copies only the filled steps of the cache, and the cross K/V only when sentences left."""
        t = self.length
        kv = self.kv.new_empty((*self.kv.shape[:2], len(rows), *self.kv.shape[3:]))
        torch.index_select(self.kv[..., :t, :], 2, rows, out=kv[..., :t, :])
        self.kv = kv
        if len(self.sentences) == 1:  # a lone sentence: its rows may come and go (searches side by side)
            return
        sentences = rows[:: self.group] // self.group  # (B',) position of each kept sentence
        if len(sentences) != len(self.sentences) or not bool((sentences == self.sentences).all()):
            self.cross = [kv.index_select(1, sentences) for kv in self.cross]
            self.mask = None if self.mask is None else self.mask.index_select(0, sentences)
            self.sentences = torch.arange(len(sentences), device=rows.device)
