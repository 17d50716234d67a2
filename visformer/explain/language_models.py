"""Encoder only against decoder only on one sentence: their self-attention, a [MASK] filled in, a continuation.

The lesson is the mask: the encoder-only model (BERT-style) lets every piece attend to every piece, before
and after it; the decoder-only model (GPT-style) lets piece i attend only to pieces ≤ i, which is what lets it
write the next piece. Views are plain arrays and labels (stacks are (layers, heads, queries, keys)); the
figures are the Attention page's own (visformer.explain.attention).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..data import fit_tokens
from ..decoding import draw, filter_distribution, forbid_tokens
from ..models.lm import CausalLM, MaskedLM, generate
from ..tokenizer import Tokenizer
from .kinds import future_mask

MASK_TOKEN = "[MASK]"  # how a student writes a hidden word; the model's own [MASK] id is its vocabulary size
STRATEGIES = ("greedy", "sampling")
N_TOP = 5  # predictions shown per [MASK] and candidates per continuation step
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class SelfAttentionView:
    """One language model's self-attention on a sentence: piece labels, the stack and what it may not see."""

    pieces: list[str]
    ids: list[int]
    stack: np.ndarray  # (layers, heads, L, L)
    hidden: (
        np.ndarray | None
    )  # (L, L) True where a query may not see a key (the future); None: sees everything


@dataclass(frozen=True)
class Prediction:
    """The model's most likely pieces at one [MASK] position."""

    position: int  # index in the view's pieces
    pieces: list[str]
    probs: list[float]


@dataclass(frozen=True)
class ContinuationStep:
    """One generated piece: it, its model probability, and the most likely pieces the model offered."""

    piece: str
    prob: float
    candidates: list[str]
    candidate_probs: list[float]


@dataclass(frozen=True)
class Continuation:
    """A continuation of the prompt: the text, its steps, and how it was chosen."""

    text: str
    steps: list[ContinuationStep]
    strategy: str


def mask_words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, word) of every word of text that can be hidden behind [MASK]."""
    return [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text) if m.group() != "MASK"]


def hide_word(text: str, index: int) -> str:
    """text with its index-th word (of mask_words) replaced by [MASK]."""
    words = mask_words(text)
    if not 0 <= index < len(words):
        raise ValueError(f"no word {index}: the sentence has {len(words)}")
    start, end, _ = words[index]
    return text[:start] + MASK_TOKEN + text[end:]


def without_masks(text: str) -> str:
    """text with every [MASK] taken out (what the decoder-only model reads)."""
    return " ".join(text.replace(MASK_TOKEN, " ").split())


def prompt_before_mask(text: str) -> str:
    """What a left-to-right model can use to fill the first gap: the text before it (the whole text if none)."""
    left = without_masks(text.split(MASK_TOKEN)[0])
    return left or without_masks(text)


def encode_with_masks(tok: Tokenizer, text: str, mask_id: int) -> list[int]:
    """Piece ids of text where every written [MASK] becomes one mask_id piece."""
    ids: list[int] = []
    for i, part in enumerate(text.split(MASK_TOKEN)):
        if i:
            ids.append(mask_id)
        if part.strip():
            ids += tok.encode(part.strip())
    return ids


def _stack(maps: list[Tensor]) -> np.ndarray:
    """Per-layer maps (1, h, L, L) of batch row 0 as one float array (layers, heads, L, L)."""
    return np.stack([m[0].detach().float().cpu().numpy() for m in maps])


def _device(model: torch.nn.Module) -> torch.device:
    """Where the model's weights are."""
    return next(model.parameters()).device


@torch.no_grad()
def encoder_view(model: MaskedLM, tok: Tokenizer, text: str) -> tuple[SelfAttentionView, list[Prediction]]:
    """Bidirectional self-attention on text (ids + </s>, as in training) and the top pieces at each [MASK]."""
    ids = [*fit_tokens(encode_with_masks(tok, text, model.mask_id), model.config.max_len), tok.eos_id]
    out = model(torch.tensor([ids], device=_device(model)), need_weights=True)
    probs = torch.softmax(out.logits[0].float(), dim=-1)  # (L, V)
    predictions = []
    for pos in (i for i, t in enumerate(ids) if t == model.mask_id):
        top = probs[pos].topk(N_TOP)
        predictions.append(Prediction(pos, tok.pieces(top.indices.tolist()), top.values.tolist()))
    return SelfAttentionView(_pieces(tok, ids, model.mask_id), ids, _stack(out.attention), None), predictions


def _pieces(tok: Tokenizer, ids: list[int], mask_id: int) -> list[str]:
    """Display pieces of ids; the [MASK] id (outside the tokenizer's vocabulary) shows as [MASK]."""
    return [MASK_TOKEN if t == mask_id else tok.pieces([t])[0] for t in ids]


@torch.no_grad()
def decoder_view(model: CausalLM, tok: Tokenizer, text: str) -> SelfAttentionView:
    """Causal self-attention on <s> + text (as in training): row i sees only pieces 0..i."""
    ids = [tok.bos_id, *fit_tokens(tok.encode(without_masks(text)), model.config.max_len)]
    out = model(torch.tensor([ids], device=_device(model)), need_weights=True)
    return SelfAttentionView(tok.pieces(ids), ids, _stack(out.attention), future_mask(len(ids), len(ids)))


def future_weight(view: SelfAttentionView) -> float:
    """Mean attention weight a query puts on keys after it: > 0 for an encoder, exactly 0 for a decoder."""
    n = view.stack.shape[-1]
    later = ~np.tril(np.ones((n, n), dtype=bool))  # (L, L) key j > query i
    return float((view.stack * later).sum(axis=-1).mean())


def chooser(
    strategy: str, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0
) -> Callable[[Tensor], Tensor]:
    """A piece chooser for generate(): greedy argmax, or a seeded draw after decoding's temperature/top-k/top-p."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy == "greedy":
        return lambda logits: logits.argmax(dim=-1)
    generator = torch.Generator().manual_seed(seed)
    return lambda logits: draw(filter_distribution(logits.float().cpu(), temperature, top_k, top_p).probs,
                               generator).to(logits.device)  # fmt: skip


@torch.no_grad()
def continue_text(
    model: CausalLM,
    tok: Tokenizer,
    text: str,
    max_new: int = 20,
    strategy: str = "greedy",
    **params: float,
) -> Continuation:
    """The prompt continued piece by piece (KV cache) with `strategy`; pad, <s> and <unk> are never chosen."""
    prompt = [tok.bos_id, *tok.encode(without_masks(text))]
    prompt = prompt[: max(1, model.config.max_len - max_new)]
    forbidden = [tok.pad_id, tok.bos_id, tok.unk_id]
    choose = chooser(strategy, **params)

    def allowed(logits: Tensor) -> Tensor:
        """logits (B, V) with the forbidden pieces at -inf, then chosen."""
        return choose(forbid_tokens(logits.clone(), forbidden))

    new, logits = generate(
        model, torch.tensor([prompt], device=_device(model)), max_new, tok.eos_id, choose=allowed
    )
    forbid_tokens(logits, forbidden)
    probs = torch.softmax(logits[0].float(), dim=-1)  # (N, V)
    steps = []
    for t, token in enumerate(new[0].tolist()):
        top = probs[t].topk(N_TOP)
        steps.append(ContinuationStep(tok.pieces([token])[0], float(probs[t, token]),
                                      tok.pieces(top.indices.tolist()), top.values.tolist()))  # fmt: skip
        if token == tok.eos_id:
            break
    tokens = new[0].tolist()[: len(steps)]
    return Continuation(tok.decode(tokens), steps, strategy)
