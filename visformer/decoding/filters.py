"""Filters: small pure functions on logits (..., V) that sampling uses; the UI uses them too."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """logits / T, so softmax gives softmax(logits / T): T < 1 sharpens, T > 1 flattens."""
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; temperature 0 means 'always the most "
            "likely token': use the greedy strategy for that"
        )
    return logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Kept mask (..., V) of exactly the k largest logits; ties are broken towards the lower token id."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices  # equal values keep id order
    keep_sorted = (torch.arange(logits.shape[-1], device=logits.device) < k).expand_as(order)
    return torch.zeros_like(order, dtype=torch.bool).scatter_(-1, order, keep_sorted)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Kept mask (..., V) of the smallest most-probable set whose probability mass reaches p (nucleus)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass of the more likely tokens
    keep_sorted = (mass_before < p) & (sorted_probs > 0)
    keep_sorted[..., 0] = True  # the most likely token is always kept
    return torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)


@dataclass
class Filtered:
    """A sampling distribution after the filters: probabilities (..., V) and the kept mask (..., V)."""

    probs: Tensor
    kept: Tensor


def filter_distribution(
    logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> Filtered:
    """Temperature → top-k → top-p (0 and 1.0 switch a filter off); at least one token is always kept."""
    scaled = apply_temperature(logits, temperature)
    kept = torch.isfinite(scaled)
    if top_k:
        kept &= top_k_filter(scaled, top_k)
    if top_p < 1.0:
        kept &= top_p_filter(scaled.masked_fill(~kept, -math.inf), top_p)
    probs = torch.softmax(scaled.masked_fill(~kept, -math.inf), dim=-1)
    return Filtered(probs, kept)


def draw(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of probs (B, V), drawn with `generator`; zero-probability ids never come out."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha; a beam's score is log P(Y|X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha
