"""The Transformer's two halves as language models, built from its own layers.

  encoder-lm   BERT-style: the encoder stack, bidirectional self-attention (no causal mask), trained
               as a masked language model (15% of the pieces become [MASK]; only they are predicted)
  decoder-lm   GPT-style: masked self-attention + feed-forward layers (a decoder layer without
               cross-attention), trained to predict the next piece; generates with the KV cache

Both use the paper's embeddings (scaled by √d, sinusoidal PE) and tie the output layer to the token
embedding. The config's tgt_vocab_size is the tokenizer's vocabulary; the encoder-only model has one
extra embedding row for [MASK] (id = vocabulary size) that it never predicts.
Shapes: B batch, L length, d d_model, h heads, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..architectures import REGISTRY, Family
from ..config import ModelConfig
from ..data import Batch, Pair, batches, encode_pairs
from ..model import (
    Embeddings,
    Encoder,
    EncoderLayer,
    KVCache,
    LayerCache,
    init_embeddings,
    masked_self_attention,
    padding_mask,
    xavier_init,
)
from ..tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

MASK_RATE = 0.15  # BERT masks 15% of the pieces
IGNORE = -100  # label of positions the loss skips
SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)  # never masked


@dataclass
class LMOutput:
    """Logits of a language model and, when asked for, its self-attention per layer."""

    logits: Tensor  # (B, L, V)
    attention: list[Tensor]  # per layer (B, h, L, L); empty unless weights were asked for


def _check_architecture(config: ModelConfig, kind: str) -> None:
    """Refuse a config of any architecture but the language model built from the `kind` stack of attention."""
    expected = [a.name for a in REGISTRY.values() if a.family is Family.LM and kind in a.layers]
    if config.architecture not in expected:
        raise ValueError(f"this model is {' or '.join(expected)}; the config says {config.architecture!r}")


def _summed_cross_entropy(logits: Tensor, labels: Tensor, ignore: int) -> tuple[Tensor, int]:
    """Cross-entropy summed over positions whose label is not `ignore`, and their number."""
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=ignore, reduction="sum"
    )
    return loss, int((labels != ignore).sum())


# ---------------------------------------------------------------------------------------------
# Encoder only: masked language model
# ---------------------------------------------------------------------------------------------


def mask_pieces(
    tokens: Tensor,
    mask_id: int,
    special_ids: Sequence[int],
    rate: float = MASK_RATE,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption of tokens (B, L): `rate` of the real pieces (at least one per sentence) become [MASK].

    Returns the inputs (B, L) and the labels (B, L): the original piece where masked, IGNORE elsewhere.
    """
    real = ~torch.isin(tokens, torch.tensor(list(special_ids), device=tokens.device))  # (B, L)
    noise = torch.rand(tokens.shape, generator=generator).to(tokens.device)  # (B, L)
    chosen = real & (noise < rate)
    first = noise.masked_fill(~real, 2.0).argmin(dim=1)  # (B,) the real piece with the least noise
    rows = real.any(dim=1).nonzero().squeeze(1)
    chosen[rows, first[rows]] = True
    return tokens.masked_fill(chosen, mask_id), tokens.masked_fill(~chosen, IGNORE)


class MaskedLM(nn.Module):
    """Encoder only (BERT-style): every position attends to every real position, before and after it."""

    objective = "masked LM, 15% of pieces"  # what loss() scores, as a checkpoint's info states it

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        _check_architecture(config, "encoder")
        self.config = config
        self.mask_id = config.tgt_vocab_size  # the extra embedding row
        token = nn.Embedding(config.tgt_vocab_size + 1, config.d_model, padding_idx=config.pad_id)
        self.embed = Embeddings(token, config.d_model, config.max_len, config.dropout)
        self.encoder = Encoder(config)
        xavier_init(self)
        init_embeddings(config, token)

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, tokens: Tensor, *, need_weights: bool = False) -> LMOutput:
        """Logits (B, L, V) over the vocabulary (never [MASK]) for tokens (B, L) that may hold [MASK]."""
        x, maps = self.encoder(self.embed(tokens), padding_mask(tokens, self.config.pad_id), need_weights)
        return LMOutput(F.linear(x, self.embed.token.weight[: self.config.tgt_vocab_size]), maps)

    def loss(self, batch: Batch, generator: torch.Generator | None = None) -> tuple[Tensor, int]:
        """Summed cross-entropy over the masked pieces of batch.src (ids + eos), and their number."""
        inputs, labels = mask_pieces(batch.src, self.mask_id, SPECIAL_IDS, generator=generator)
        return _summed_cross_entropy(self(inputs).logits, labels, IGNORE)


# ---------------------------------------------------------------------------------------------
# Decoder only: causal language model
# ---------------------------------------------------------------------------------------------


class CausalLayer(EncoderLayer):
    """Masked self-attention → add & norm → feed-forward → add & norm (a decoder layer without cross-attention)."""

    def forward(
        self, x: Tensor, cache: LayerCache | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, L, d) -> (B, L, d) and self-attention weights (B, h, L, L_all), 0 above the diagonal."""
        x, w = self.sublayer1(
            x, lambda y: masked_self_attention(self.self_attn, y, cache, need_weights, None)
        )
        x, _ = self.sublayer2(x, lambda y: (self.feed_forward(y), None))
        return x, w


class CausalLM(nn.Module):
    """Decoder only (GPT-style): position i attends to positions ≤ i and predicts piece i + 1."""

    objective = "next piece (causal LM)"  # what loss() scores, as a checkpoint's info states it

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        _check_architecture(config, "decoder")
        self.config = config
        token = nn.Embedding(config.tgt_vocab_size, config.d_model, padding_idx=config.pad_id)
        self.embed = Embeddings(token, config.d_model, config.max_len, config.dropout)
        self.layers = nn.ModuleList(CausalLayer(config) for _ in range(config.n_decoder_layers))
        self.norm = nn.LayerNorm(config.d_model) if config.norm_first else nn.Identity()
        xavier_init(self)
        init_embeddings(config, token)

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self) -> KVCache:
        """An empty key/value cache for generation."""
        return KVCache.empty(self.config.n_decoder_layers)

    def forward(
        self, tokens: Tensor, *, cache: KVCache | None = None, need_weights: bool = False
    ) -> LMOutput:
        """Next-piece logits (B, L, V) for tokens (B, L); with a cache, `tokens` holds only new pieces."""
        x = self.embed(tokens, cache.length if cache is not None else 0)
        maps = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, cache.layers[i] if cache is not None else None, need_weights)
            if w is not None:
                maps.append(w)
        return LMOutput(F.linear(self.norm(x), self.embed.token.weight), maps)

    def loss(self, batch: Batch, generator: torch.Generator | None = None) -> tuple[Tensor, int]:
        """Summed next-piece cross-entropy of [bos] + ids -> ids + [eos], and the number of targets."""
        return _summed_cross_entropy(self(batch.tgt_in).logits, batch.tgt_out, self.config.pad_id)


def _argmax(logits: Tensor) -> Tensor:
    """Greedy choice: the most likely piece of each row of logits (B, V) -> (B,)."""
    return logits.argmax(dim=-1)


@torch.no_grad()
def generate(
    model: CausalLM,
    prompt: Tensor,
    max_new: int,
    eos_id: int = EOS_ID,
    *,
    use_cache: bool = True,
    choose: Callable[[Tensor], Tensor] = _argmax,
) -> tuple[Tensor, Tensor]:
    """Continuation of prompt (B, P): new pieces (B, N) and the logits (B, N, V) each was chosen from.

    `choose` turns one step's logits (B, V) into pieces (B,): greedy by default, or a sampler built from
    visformer.decoding's filters. With the cache each step feeds only the newest piece; without it every
    step reruns the whole sequence (the reference the cache must equal). Stops once every row has produced eos.
    """
    if prompt.shape[1] + max_new > model.config.max_len:
        raise ValueError(
            f"prompt of {prompt.shape[1]} + {max_new} new pieces exceeds max_len {model.config.max_len}"
        )
    cache = model.new_cache() if use_cache else None
    seq, step_input = prompt, prompt
    new, logits = [], []
    done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    for _ in range(max_new):
        last = model(step_input if use_cache else seq, cache=cache).logits[:, -1]  # (B, V)
        token = choose(last)  # (B,)
        new.append(token), logits.append(last)
        seq = torch.cat([seq, token[:, None]], dim=1)
        step_input = token[:, None]
        done |= token == eos_id
        if done.all():
            break
    return torch.stack(new, dim=1), torch.stack(logits, dim=1)


# ---------------------------------------------------------------------------------------------
# The objective (visformer.training.Trainer trains a language model through lm_objective)
# ---------------------------------------------------------------------------------------------


def lm_objective(model: MaskedLM | CausalLM, batch: Batch, smoothing: float = 0.0) -> tuple[Tensor, int]:
    """The Trainer's loss hook for a language model: its own summed objective and number of targets.

    The batch comes from (text, text) pairs (src = ids+eos, tgt_in = bos+ids, tgt_out = ids+eos); label
    smoothing is not part of either objective, so `smoothing` is ignored.
    """
    return model.loss(batch.to(next(model.parameters()).device))


@torch.no_grad()
def lm_loss(
    model: MaskedLM | CausalLM, texts: Sequence[str], tok: Tokenizer, max_tokens: int = 4096, seed: int = 0
) -> float:
    """Per-target cross-entropy on texts (masked LM: a seeded masking; causal: every next piece)."""
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    examples = encode_pairs([Pair(t, t) for t in texts], tok, tok, model.config.max_len)
    total, count = 0.0, 0
    for batch in batches(examples, max_tokens, tok, False, 0):
        loss, n = model.loss(batch.to(device), generator)
        total, count = total + loss.item(), count + n
    return total / max(count, 1)
