"""RNN encoder–decoder, the lectures' step before the Transformer: GRUs with a bidirectional encoder.

Three ways for the decoder to see the source:
  rnn-none       the encoder's last states are the only context (the bottleneck: one vector c)
  rnn-bahdanau   additive attention, score(s_{t-1}, h_j) = vᵀ tanh(W s_{t-1} + U h_j), before the step
  rnn-luong      general attention, score(s_t, h_j) = s_tᵀ W h_j, after the step (rnn-dot: s_tᵀ h_j)
The query is the decoder state, the keys and values are the encoder states. The model speaks the
Transformer's interface (`encode()`, `decode()` with an incremental cache, `forward()` returning
logits and `AttentionMaps`), so the decoding strategies and the Trainer use it unchanged; its
attention comes back as cross-attention with one layer and one head, (B, 1, T, S).

Shapes: B batch, S source length, T target length, d d_model (decoder state, encoder output:
d/2 per direction), L GRU layers, V target vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..architectures import Family, architecture, of_family
from ..config import ModelConfig
from ..model import AttentionMaps, Decoded, Encoded, HeadMask, Seq2SeqOutput, init_embeddings, padding_mask

# architecture -> attention score (None: no attention), from the registry
RNN_SCORES: dict[str, str | None] = {name: architecture(name).score for name in of_family(Family.RNN)}


# ---------------------------------------------------------------------------------------------
# Attention of a decoder state over the encoder states
# ---------------------------------------------------------------------------------------------


class RecurrentAttention(nn.Module):
    """α_tj = softmax_j score(s_t, h_j) over real source tokens; context c_t = Σ_j α_tj h_j."""

    def __init__(self, score: str, d_model: int) -> None:
        super().__init__()
        if score not in ("additive", "general", "dot"):
            raise ValueError(f"unknown attention score {score!r}; choose additive, general or dot")
        self.score = score
        if score == "additive":
            self.w_query = nn.Linear(d_model, d_model, bias=False)  # W
            self.w_key = nn.Linear(d_model, d_model)  # U
            self.v = nn.Linear(d_model, 1, bias=False)
        elif score == "general":
            self.w_a = nn.Linear(d_model, d_model, bias=False)

    def scores(self, query: Tensor, memory: Tensor) -> Tensor:
        """score(s_t, h_j) for queries (B, T, d) and encoder states (B, S, d): (B, T, S)."""
        if self.score == "additive":
            hidden = torch.tanh(self.w_query(query)[:, :, None] + self.w_key(memory)[:, None])  # (B, T, S, d)
            return self.v(hidden).squeeze(-1)
        keys = self.w_a(memory) if self.score == "general" else memory  # (B, S, d)
        return query @ keys.transpose(1, 2)

    def forward(self, query: Tensor, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Context (B, T, d) and weights (B, T, S); padding (src_mask (B, 1, 1, S) False) gets exactly 0."""
        scores = self.scores(query, memory).float().masked_fill(~src_mask[:, 0], -math.inf)  # (B, T, S)
        weights = torch.softmax(scores, dim=-1).to(memory.dtype)
        return weights @ memory, weights


# ---------------------------------------------------------------------------------------------
# Encoder and decoder
# ---------------------------------------------------------------------------------------------


def source_lengths(src_mask: Tensor) -> Tensor:
    """Real tokens per sentence (B,) from a key mask (B, 1, 1, S); at least 1."""
    return src_mask.flatten(1).sum(dim=1).clamp(min=1)


class RecurrentEncoder(nn.Module):
    """Bidirectional GRU over the source embeddings; padding is packed away, so it changes nothing."""

    def __init__(self, config: ModelConfig, token: nn.Embedding) -> None:
        super().__init__()
        d, layers = config.d_model, config.n_encoder_layers
        self.token = token
        self.scale = math.sqrt(d)
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = nn.GRU(
            d,
            d // 2,
            layers,
            batch_first=True,
            bidirectional=True,
            dropout=config.dropout if layers > 1 else 0.0,
        )

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S) -> encoder states h_j = [h→_j; h←_j] (B, S, d), zero at padding."""
        x = self.dropout(self.token(src) * self.scale)  # (B, S, d)
        lengths = source_lengths(src_mask).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return memory


def final_states(memory: Tensor, src_mask: Tensor) -> Tensor:
    """[h→_last; h←_1]: the forward state at the last real token and the backward state at the first (B, d)."""
    half = memory.shape[-1] // 2
    last = source_lengths(src_mask) - 1  # (B,)
    forward = memory[torch.arange(memory.shape[0], device=memory.device), last, :half]  # (B, d/2)
    return torch.cat([forward, memory[:, 0, half:]], dim=-1)


@dataclass
class RecurrentCache:
    """Incremental-decoding state: the decoder's GRU states (L, B, d) after the tokens decoded so far."""

    hidden: Tensor | None = None
    length: int = 0

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search picks surviving hypotheses)."""
        if self.hidden is not None:
            self.hidden = self.hidden.index_select(1, index)


class RecurrentDecoder(nn.Module):
    """GRU decoder; s_0 = tanh(W [h→_last; h←_1]); output s̃_t = tanh(W_c [s_t; c_t]) -> logits."""

    def __init__(self, config: ModelConfig, token: nn.Embedding, score: str | None) -> None:
        super().__init__()
        d, layers = config.d_model, config.n_decoder_layers
        self.token = token
        self.scale = math.sqrt(d)
        self.n_layers = layers
        self.attention = RecurrentAttention(score, d) if score else None
        self.context_first = score in (None, "additive")  # c_t is known before the step and fed to the GRU
        self.bridge = nn.Linear(d, layers * d)
        self.rnn = nn.GRU(
            d * (2 if self.context_first else 1), d, layers, batch_first=True,
            dropout=config.dropout if layers > 1 else 0.0,
        )  # fmt: skip
        self.combine = nn.Linear(2 * d, d)
        self.dropout = nn.Dropout(config.dropout)

    def initial_state(self, encoded: Encoded) -> Tensor:
        """s_0 of every layer (L, B, d) from the encoder's final states."""
        summary = final_states(encoded.memory, encoded.src_mask)  # (B, d)
        b, d = summary.shape
        return torch.tanh(self.bridge(summary)).view(b, self.n_layers, d).transpose(0, 1).contiguous()

    def forward(self, tgt: Tensor, encoded: Encoded, hidden: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """tgt (B, T) from state (L, B, d) -> s̃ (B, T, d), new state, attention (B, T, S) or None."""
        y = self.dropout(self.token(tgt) * self.scale)  # (B, T, d)
        memory, src_mask = encoded.memory, encoded.src_mask
        if self.attention is None:  # one context for every step: the bottleneck
            context = final_states(memory, src_mask)[:, None].expand_as(y)  # (B, T, d)
            states, hidden = self.rnn(torch.cat([y, context], dim=-1), hidden)
            weights = None
        elif self.context_first:  # Bahdanau: the query is the previous state, so step by step
            outs, contexts, maps = [], [], []
            for t in range(y.shape[1]):
                c, w = self.attention(hidden[-1][:, None], memory, src_mask)  # (B, 1, d), (B, 1, S)
                out, hidden = self.rnn(torch.cat([y[:, t : t + 1], c], dim=-1), hidden)
                outs.append(out), contexts.append(c), maps.append(w)
            states, context, weights = torch.cat(outs, 1), torch.cat(contexts, 1), torch.cat(maps, 1)
        else:  # Luong: run the GRU, then every state s_t queries the encoder at once
            states, hidden = self.rnn(y, hidden)  # (B, T, d)
            context, weights = self.attention(states, memory, src_mask)
        output = torch.tanh(self.combine(torch.cat([states, context], dim=-1)))  # (B, T, d)
        return self.dropout(output), hidden, weights


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


class RNNSeq2Seq(nn.Module):
    """GRU encoder–decoder with `encode()` / `decode()` / `forward()` like `Transformer`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.architecture not in RNN_SCORES:
            raise ValueError(f"RNNSeq2Seq builds {', '.join(RNN_SCORES)}, not {config.architecture!r}")
        self.config = config
        d = config.d_model
        tgt_token = nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_id)
        src_token = (
            tgt_token
            if config.share_embeddings
            else nn.Embedding(config.src_vocab_size, d, padding_idx=config.pad_id)
        )
        self.encoder = RecurrentEncoder(config, src_token)
        self.decoder = RecurrentDecoder(config, tgt_token, RNN_SCORES[config.architecture])
        self.generator = nn.Linear(d, config.tgt_vocab_size, bias=False)
        self.reset_parameters()
        if config.share_embeddings:
            self.generator.weight = tgt_token.weight

    @property
    def has_attention(self) -> bool:
        """Whether the decoder attends to the encoder states (False: only the final states)."""
        return self.decoder.attention is not None

    def reset_parameters(self) -> None:
        """Embeddings N(0, d^-0.5) (scaled by √d on the way in), pad row zero; GRUs keep torch's init."""
        untied = None if self.config.share_embeddings else self.generator
        init_embeddings(self.config, self.encoder.token, self.decoder.token, output=untied)

    def num_parameters(self) -> int:
        """Number of distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def encode(
        self, src: Tensor, *, need_weights: bool = False, head_mask: HeadMask | None = None
    ) -> Encoded:
        """Encode source tokens (B, S) into encoder states (B, S, d); no self-attention to return."""
        _no_heads(head_mask)
        src_mask = padding_mask(src, self.config.pad_id)
        return Encoded(self.encoder(src, src_mask), src_mask, [])

    def new_cache(self) -> RecurrentCache:
        """An empty decoder state for incremental decoding."""
        return RecurrentCache()

    def decode(
        self,
        tgt: Tensor,
        encoded: Encoded,
        *,
        cache: RecurrentCache | None = None,
        need_weights: bool = False,
        head_mask: HeadMask | None = None,
    ) -> Decoded:
        """Logits (B, T, V) for target tokens (B, T); with a cache, `tgt` holds only new tokens."""
        _no_heads(head_mask)
        hidden = cache.hidden if cache is not None and cache.hidden is not None else None
        if hidden is None:
            hidden = self.decoder.initial_state(encoded)
        output, hidden, weights = self.decoder(tgt, encoded, hidden)
        if cache is not None:
            cache.hidden, cache.length = hidden, cache.length + tgt.shape[1]
        cross = [weights[:, None]] if need_weights and weights is not None else []  # (B, 1, T, S)
        return Decoded(self.generator(output), [], cross)

    def forward(
        self, src: Tensor, tgt: Tensor, *, need_weights: bool = False, head_mask: HeadMask | None = None
    ) -> Seq2SeqOutput:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T)."""
        dec = self.decode(
            tgt, self.encode(src, head_mask=head_mask), need_weights=need_weights, head_mask=head_mask
        )
        return Seq2SeqOutput(dec.logits, AttentionMaps([], [], dec.cross_attention) if need_weights else None)


def _no_heads(head_mask: HeadMask | None) -> None:
    """Refuse head masks: an RNN has no attention heads to switch off."""
    if head_mask is not None:
        raise ValueError("head masks switch off Transformer heads; an RNN model has none")
