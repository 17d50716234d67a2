"""The encoder–decoder Transformer of "Attention is all you need", with visible attention.

Shapes: B batch, S source length, T target length, d d_model, h heads, dh d_model / h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ModelConfig
from .outputs import (
    AttentionMaps,
    AttentionRecord,
    HeadMask,
    Intermediates,
    KVCache,
    LayerCache,
    LayerRecord,
    SublayerRecord,
)

# ---------------------------------------------------------------------------------------------
# Positional encoding (section 3.5)
# ---------------------------------------------------------------------------------------------


def positional_encoding(positions: Tensor, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    positions = positions.to(torch.float64)
    i = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)  # (d/2,) = 2i
    angles = positions.unsqueeze(-1) / torch.pow(10000.0, i / d_model)  # (..., d/2)
    pe = torch.empty(*positions.shape, d_model, dtype=torch.float64, device=positions.device)
    pe[..., 0::2] = torch.sin(angles)
    pe[..., 1::2] = torch.cos(angles)
    return pe.to(torch.get_default_dtype())


def pe_frequencies(d_model: int) -> Tensor:
    """Angular frequency w_i = 1 / 10000^(2i/d) of each (sin, cos) pair, shape (d/2,)."""
    i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return torch.pow(10000.0, -i / d_model)


def pe_wavelengths(d_model: int) -> Tensor:
    """Wavelength 2π·10000^(2i/d) of each (sin, cos) pair, shape (d/2,)."""
    return 2 * math.pi / pe_frequencies(d_model)


def pe_rotation(k: float, d_model: int) -> Tensor:
    """2x2 matrices M_k, one per pair (d/2, 2, 2), with PE(pos+k)[pair] = M_k @ PE(pos)[pair]."""
    wk = pe_frequencies(d_model) * k  # (d/2,)
    cos, sin = torch.cos(wk), torch.sin(wk)
    rows = [torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)]  # sin' = cos·sin + sin·cos ...
    return torch.stack(rows, -2).to(torch.get_default_dtype())  # (d/2, 2, 2)


def apply_pe_rotation(pe: Tensor, k: float) -> Tensor:
    """Rotate PE vectors (..., d) by k positions using M_k on each (sin, cos) pair."""
    d_model = pe.shape[-1]
    pairs = pe.reshape(*pe.shape[:-1], d_model // 2, 2, 1).to(torch.float64)  # (..., d/2, 2, 1)
    rotated = pe_rotation(k, d_model).to(torch.float64) @ pairs  # (..., d/2, 2, 1)
    return rotated.reshape(pe.shape).to(pe.dtype)


# ---------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key mask (B, 1, 1, L): True where a token may be attended to (not padding)."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(q_len: int, k_len: int, device: torch.device | None = None) -> Tensor:
    """Mask out subsequent positions: (q_len, k_len), True where query i may see key j."""
    offset = k_len - q_len  # queries are the last q_len positions of the k_len-long sequence
    q = torch.arange(q_len, device=device)[:, None] + offset
    k = torch.arange(k_len, device=device)[None, :]
    return k <= q


# ---------------------------------------------------------------------------------------------
# Building blocks (section 3.2 and 3.3)
# ---------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, L, d) -> (B, h, L, dh)."""
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.d_head).transpose(1, 2)

    def project_q(self, x: Tensor) -> Tensor:
        """Queries of x per head, (B, h, L, dh)."""
        return self.split_heads(self.w_q(x))

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of x per head, each (B, h, L, dh)."""
        return self.split_heads(self.w_k(x)), self.split_heads(self.w_v(x))

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        *,
        causal: bool = False,
        need_weights: bool = False,
        head_mask: Tensor | None = None,
        record: list[AttentionRecord] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """softmax(QKᵀ/√dk)V per head, merged and projected: (B, Lq, d) and weights (B, h, Lq, Lk).

        With a `record` list, appends this pass taken apart (an AttentionRecord) and returns the weights.
        """
        q_len, k_len = q.shape[2], k.shape[2]
        drop = self.dropout if self.training else 0.0
        need_weights = need_weights or record is not None
        if causal and (need_weights or mask is not None or q_len != k_len):
            cm = causal_mask(q_len, k_len, q.device)
            mask = cm if mask is None else mask & cm
            causal = False
        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, Lq, Lk)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            out = F.dropout(weights, drop, self.training) @ v  # (B, h, Lq, dh)
        else:
            weights = None
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop, is_causal=causal)
        if head_mask is not None:
            out = out * head_mask.to(out.dtype).view(-1, self.n_heads, 1, 1)  # switch heads off
        b = out.shape[0]
        concat = out.transpose(1, 2).reshape(b, q_len, self.n_heads * self.d_head)  # concat heads
        projected = self.w_o(concat)  # (B, Lq, d)
        if record is not None:
            record.append(AttentionRecord(q, k, v, weights, out, concat, projected))
        return projected, weights

    def forward(
        self,
        query: Tensor,
        key_value: Tensor,
        mask: Tensor | None = None,
        *,
        causal: bool = False,
        need_weights: bool = False,
        head_mask: Tensor | None = None,
        record: list[AttentionRecord] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention of `query` (B, Lq, d) over `key_value` (B, Lk, d)."""
        k, v = self.project_kv(key_value)
        q = self.project_q(query)
        return self.attend(
            q, k, v, mask, causal=causal, need_weights=need_weights, head_mask=head_mask, record=record
        )


# ModelConfig.activation -> function: the paper's ReLU; swish (SiLU) and exact GELU for imported Marian models
ACTIVATION_FUNCTIONS = {"relu": F.relu, "swish": F.silu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (or swish / GELU in place of max(0, ·))."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATION_FUNCTIONS[activation]

    def forward(self, x: Tensor, record: list[Tensor] | None = None) -> Tensor:
        """(B, L, d) -> (B, L, d); appends the hidden layer (B, L, d_ff) to `record` when given."""
        hidden = self.activation(self.linear1(x))
        if record is not None:
            record.append(hidden)
        return self.linear2(self.dropout(hidden))


class SublayerConnection(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))) (post-LN), or x + Dropout(Sublayer(LayerNorm(x))) (pre-LN)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: Tensor, sublayer, record: list[SublayerRecord] | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """Apply `sublayer` (returning output and optional weights) with residual and norm."""
        if self.norm_first:
            normed = self.norm(x)
            y, w = sublayer(normed)
            out = residual = x + self.dropout(y)
        else:
            y, w = sublayer(x)
            residual = x + self.dropout(y)
            out = normed = self.norm(residual)
        if record is not None:
            record.append(SublayerRecord(x, y, residual, normed, self.norm_first))
        return out, w


def masked_self_attention(
    attn: MultiHeadAttention,
    y: Tensor,
    cache: LayerCache | None,
    need_weights: bool,
    head_mask: Tensor | None,
    record: list[AttentionRecord] | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Masked self-attention of the new positions y (B, T, d) over all positions so far (K/V cached)."""
    k, v = attn.project_kv(y)
    if cache is not None:
        if cache.self_k is not None:
            k = torch.cat([cache.self_k, k], dim=2)  # (B, h, T_so_far, dh)
            v = torch.cat([cache.self_v, v], dim=2)
        cache.self_k, cache.self_v = k, v
    q = attn.project_q(y)
    return attn.attend(q, k, v, causal=True, need_weights=need_weights, head_mask=head_mask, record=record)


def _record_lists(
    record: LayerRecord,
) -> tuple[list[SublayerRecord], list[AttentionRecord], list[Tensor]]:
    """The lists a layer appends to while it runs."""
    return record.sublayers, record.attention, record.hidden


class EncoderLayer(nn.Module):
    """Self-attention → add & norm → feed-forward → add & norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, p = config.d_model, config.dropout
        self.self_attn = MultiHeadAttention(d, config.n_heads, p)
        self.feed_forward = FeedForward(d, config.d_ff, p, config.activation)
        self.sublayer1 = SublayerConnection(d, p, config.norm_first)
        self.sublayer2 = SublayerConnection(d, p, config.norm_first)

    def forward(
        self,
        x: Tensor,
        src_mask: Tensor | None,
        need_weights: bool = False,
        head_mask: Tensor | None = None,
        record: LayerRecord | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, d) -> (B, S, d) and self-attention weights (B, h, S, S); fills `record` when given."""
        subs, attns, hidden = (None, None, None) if record is None else _record_lists(record)
        x, w = self.sublayer1(
            x,
            lambda y: self.self_attn(
                y, y, src_mask, need_weights=need_weights, head_mask=head_mask, record=attns
            ),
            subs,
        )
        x, _ = self.sublayer2(x, lambda y: (self.feed_forward(y, hidden), None), subs)
        return x, w


class DecoderLayer(nn.Module):
    """Masked self-attention → add & norm → cross-attention → add & norm → feed-forward → add & norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, p = config.d_model, config.dropout
        self.self_attn = MultiHeadAttention(d, config.n_heads, p)
        self.cross_attn = MultiHeadAttention(d, config.n_heads, p)
        self.feed_forward = FeedForward(d, config.d_ff, p, config.activation)
        self.sublayer1 = SublayerConnection(d, p, config.norm_first)
        self.sublayer2 = SublayerConnection(d, p, config.norm_first)
        self.sublayer3 = SublayerConnection(d, p, config.norm_first)

    def _cross_attention(
        self,
        y: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: LayerCache | None,
        need_weights: bool,
        head_mask: Tensor | None,
        record: list[AttentionRecord] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention of y over the encoder output; its K/V are computed once per source."""
        attn = self.cross_attn
        if cache is not None and cache.cross_k is not None:
            k, v = cache.cross_k, cache.cross_v
        else:
            k, v = attn.project_kv(memory)
            if cache is not None:
                cache.cross_k, cache.cross_v = k, v
        q = attn.project_q(y)
        return attn.attend(q, k, v, src_mask, need_weights=need_weights, head_mask=head_mask, record=record)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        index: int = 0,
        record: LayerRecord | None = None,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x (B, T, d) -> (B, T, d), self weights (B, h, T, T_all), cross weights (B, h, T, S)."""
        hm_self = head_mask.layer("decoder", index) if head_mask else None
        hm_cross = head_mask.layer("cross", index) if head_mask else None
        subs, attns, hidden = (None, None, None) if record is None else _record_lists(record)
        x, w_self = self.sublayer1(
            x, lambda y: masked_self_attention(self.self_attn, y, cache, need_weights, hm_self, attns), subs
        )
        x, w_cross = self.sublayer2(
            x,
            lambda y: self._cross_attention(y, memory, src_mask, cache, need_weights, hm_cross, attns),
            subs,
        )
        x, _ = self.sublayer3(x, lambda y: (self.feed_forward(y, hidden), None), subs)
        return x, w_self, w_cross


class Embeddings(nn.Module):
    """Token embedding scaled by √d_model plus sinusoidal positional encoding, then dropout."""

    def __init__(self, token: nn.Embedding, d_model: int, max_len: int, dropout: float) -> None:
        super().__init__()
        self.token = token
        self.scale = math.sqrt(d_model)
        self.register_buffer("pe", positional_encoding(torch.arange(max_len), d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: Tensor, offset: int = 0) -> Tensor:
        """tokens (B, L) -> (B, L, d), positions starting at `offset`."""
        length = tokens.shape[1]
        if offset + length > self.pe.shape[0]:
            raise ValueError(f"sequence of {offset + length} tokens exceeds max_len {self.pe.shape[0]}")
        x = self.token(tokens) * self.scale + self.pe[offset : offset + length]
        return self.dropout(x)


def _new_record(records: list[LayerRecord] | None) -> LayerRecord | None:
    """A fresh LayerRecord appended to `records`, or None when nothing is recorded."""
    if records is None:
        return None
    records.append(LayerRecord())
    return records[-1]


class Encoder(nn.Module):
    """A stack of N encoder layers (with a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        src_mask: Tensor | None,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        records: list[LayerRecord] | None = None,
    ) -> tuple[Tensor, list[Tensor]]:
        """x (B, S, d) -> memory (B, S, d) and per-layer self-attention weights; one record per layer."""
        maps = []
        for i, layer in enumerate(self.layers):
            record = _new_record(records)
            x, w = layer(
                x, src_mask, need_weights, head_mask.layer("encoder", i) if head_mask else None, record
            )
            if w is not None:
                maps.append(w)
        return self.norm(x), maps


class Decoder(nn.Module):
    """A stack of N decoder layers (with a final LayerNorm in the pre-LN variant)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: KVCache | None = None,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        records: list[LayerRecord] | None = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """x (B, T, d) -> (B, T, d), per-layer self and cross weights; one record per layer."""
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            record = _new_record(records)
            x, ws, wc = layer(x, memory, src_mask, layer_cache, need_weights, head_mask, i, record)
            if ws is not None:
                self_maps.append(ws)
                cross_maps.append(wc)
        return self.norm(x), self_maps, cross_maps


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform for every weight matrix except token embeddings; zero biases."""
    for name, param in module.named_parameters():
        if param.dim() > 1 and "token" not in name:
            nn.init.xavier_uniform_(param)
        elif name.endswith("bias"):
            nn.init.zeros_(param)


def init_embeddings(config: ModelConfig, *tokens: nn.Embedding, output: nn.Linear | None = None) -> None:
    """N(0, d^-0.5) for each distinct token embedding (√d·E has unit scale; pad row zero) and an untied output."""
    for emb in {id(m): m for m in tokens}.values():
        nn.init.normal_(emb.weight, 0.0, config.d_model**-0.5)
        with torch.no_grad():
            emb.weight[config.pad_id].zero_()
    if output is not None:
        nn.init.normal_(output.weight, 0.0, config.d_model**-0.5)


@dataclass
class Encoded:
    """Encoder output with what the decoder needs alongside it."""

    memory: Tensor  # (B, S, d)
    src_mask: Tensor  # (B, 1, 1, S), True for real tokens
    attention: list[Tensor]  # per layer (B, h, S, S); empty unless weights were asked for
    intermediates: list[LayerRecord] = field(default_factory=list)  # per layer, when recorded


@dataclass
class Decoded:
    """Decoder output for the given target positions."""

    logits: Tensor | None  # (B, T, V); None when decode(logits=False)
    self_attention: list[Tensor]  # per layer (B, h, T, T_all)
    cross_attention: list[Tensor]  # per layer (B, h, T, S)
    intermediates: list[LayerRecord] = field(default_factory=list)  # per layer, when recorded


@dataclass
class Seq2SeqOutput:
    """Logits of a full forward pass and, when asked for, every attention map."""

    logits: Tensor  # (B, T, V)
    attention: AttentionMaps | None = None
    intermediates: Intermediates | None = None


class Transformer(nn.Module):
    """Encoder–decoder Transformer with `encode()` and `decode()` as in the Annotated Transformer."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d, p = config.d_model, config.dropout
        tgt_token = nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_id)
        src_token = (
            tgt_token
            if config.share_embeddings
            else nn.Embedding(config.src_vocab_size, d, padding_idx=config.pad_id)
        )
        self.src_embed = Embeddings(src_token, d, config.max_len, p)
        self.tgt_embed = Embeddings(tgt_token, d, config.max_len, p)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.generator = nn.Linear(d, config.tgt_vocab_size, bias=config.output_bias)
        self.reset_parameters()
        if config.share_embeddings or config.tie_output:
            self.generator.weight = tgt_token.weight  # three-way weight tying (section 3.4)

    def reset_parameters(self) -> None:
        """Xavier for projections, N(0, d^-0.5) for embeddings, so √d·E has unit scale like PE."""
        xavier_init(self)
        untied = None if self.config.share_embeddings or self.config.tie_output else self.generator
        init_embeddings(self.config, self.src_embed.token, self.tgt_embed.token, output=untied)

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def encode(
        self,
        src: Tensor,
        *,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        record: bool = False,
    ) -> Encoded:
        """Encode source tokens (B, S) into memory (B, S, d); `record` keeps every layer's intermediates."""
        src_mask = padding_mask(src, self.config.pad_id)
        records = [] if record else None
        memory, maps = self.encoder(self.src_embed(src), src_mask, need_weights, head_mask, records)
        return Encoded(memory, src_mask, maps if need_weights else [], records or [])

    def decode(
        self,
        tgt: Tensor,
        encoded: Encoded,
        *,
        cache: KVCache | None = None,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        record: bool = False,
        logits: bool = True,
    ) -> Decoded:
        """Logits (B, T, V) for target tokens (B, T); with a cache, `tgt` holds only new tokens.

        logits=False skips the output projection (attention or intermediates only: a 65k vocabulary's
        projection is the largest matmul of a teacher-forced pass)."""
        offset = cache.length if cache is not None else 0
        x = self.tgt_embed(tgt, offset)
        records = [] if record else None
        y, self_maps, cross_maps = self.decoder(
            x, encoded.memory, encoded.src_mask, cache, need_weights, head_mask, records
        )
        if not need_weights:
            self_maps, cross_maps = [], []
        return Decoded(self.generator(y) if logits else None, self_maps, cross_maps, records or [])

    def new_cache(self) -> KVCache:
        """An empty key/value cache for incremental decoding."""
        return KVCache.empty(self.config.n_decoder_layers)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        *,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
        record: bool = False,
    ) -> Seq2SeqOutput:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T).

        `record` also returns every layer's intermediates (Q, K, V, attention, sublayer outputs).
        """
        enc = self.encode(src, need_weights=need_weights, head_mask=head_mask, record=record)
        dec = self.decode(tgt, enc, need_weights=need_weights, head_mask=head_mask, record=record)
        maps = AttentionMaps(enc.attention, dec.self_attention, dec.cross_attention) if need_weights else None
        inside = Intermediates(enc.intermediates, dec.intermediates) if record else None
        return Seq2SeqOutput(dec.logits, maps, inside)
