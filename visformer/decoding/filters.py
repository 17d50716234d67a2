"""Filters: small pure functions on logits (..., V) that sampling uses; the UI uses them too."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
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
    if k >= logits.shape[-1]:
        return torch.ones_like(logits, dtype=torch.bool)
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest value
    above = logits > kth  # (..., V) all kept
    tied = logits == kth  # (..., V) kept from the lowest id until k are kept
    room = k - above.sum(dim=-1, keepdim=True)  # (..., 1)
    return above | (tied & (torch.cumsum(tied, dim=-1) <= room))


def descending_order(probs: Tensor) -> Tensor:
    """Indices (..., V) that sort non-negative probs (..., V) from the largest, equal values in id order.

    The order of a stable descending sort. On the CPU one int64 sort of (value bits, reversed id) keys in
    numpy: 0.6 ms for a 65,001-entry vocabulary where torch's stable sort took 11-16 ms (2026-11-26).
    """
    if probs.device.type != "cpu" or probs.shape[-1] >= 2**32:
        return torch.sort(probs, dim=-1, descending=True, stable=True).indices
    bits = probs.float().contiguous().view(torch.int32).to(torch.int64)  # order of non-negative floats
    low = (1 << 32) - 1
    keys = (bits << 32) | (low - torch.arange(probs.shape[-1]))  # (..., V) unique: ties by lower id
    ascending = torch.from_numpy(np.sort(keys.numpy(), axis=-1))
    return (low - (ascending.flip(-1) & low)).long()


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Kept mask (..., V) of the smallest most-probable set whose probability mass reaches p (nucleus)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    probs = torch.softmax(logits, dim=-1)
    order = descending_order(probs)  # (..., V)
    sorted_probs = probs.gather(-1, order)
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
    """One token id per row of probs (B, V), drawn with `generator`; zero-probability ids never come out.

    Inverse transform sampling: the first id whose cumulative probability exceeds u x total, u uniform in
    [0, 1). 0.07 ms for a 65,001-entry vocabulary where torch.multinomial took 5 ms (2026-11-26).
    """
    cdf = torch.cumsum(probs.double(), dim=-1)  # (B, V)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=torch.float64, device=probs.device)  # (B, 1)
    token = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)  # (B,)
    last = probs.shape[-1] - 1 - torch.argmax((probs.flip(-1) > 0).int(), dim=-1)  # (B,) last possible id
    return torch.minimum(token, last)


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha; a beam's score is log P(Y|X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha
