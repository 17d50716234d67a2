"""The sampling filters and draws of visformer.decoding.filters (temperature, top-k, top-p, the GNMT length
penalty): each keeps exactly the set its definition names, ties included."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from visformer.decoding import (
    apply_temperature,
    draw,
    filter_distribution,
    length_penalty,
    top_k_filter,
    top_p_filter,
)
from visformer.decoding.filters import descending, first_max, largest

FAST = settings(max_examples=40, deadline=None)

logit_rows = st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=2, max_size=30).map(
    lambda xs: torch.tensor(xs, dtype=torch.float64)
)


# ---------------------------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------------------------


@FAST
@given(logits=logit_rows, k=st.integers(1, 40))
def test_top_k_keeps_exactly_the_k_largest(logits: torch.Tensor, k: int) -> None:
    kept = top_k_filter(logits, k)
    assert int(kept.sum()) == min(k, len(logits))
    if not kept.all():
        assert logits[kept].min() >= logits[~kept].max()


def test_top_k_ties_go_to_the_lower_id() -> None:
    logits = torch.tensor([1.0, 3.0, 2.0, 3.0, 3.0, 0.0])
    assert top_k_filter(logits, 2).tolist() == [False, True, False, True, False, False]
    assert top_k_filter(logits, 4).tolist() == [False, True, True, True, True, False]


@FAST
@given(logits=logit_rows, p=st.floats(0.01, 1.0))
@example(logits=torch.tensor([0.0, 5.2782e-08], dtype=torch.float64), p=0.25)  # equal once rounded to fp32
def test_top_p_keeps_the_smallest_set_reaching_p(logits: torch.Tensor, p: float) -> None:
    kept = top_p_filter(logits, p)
    probs = torch.softmax(logits, -1)
    assert kept.any()
    if not kept.all():
        assert probs[kept].min() >= probs[~kept].max()  # the most probable tokens
    mass = float(probs[kept].sum())
    assert mass >= p - 1e-9 or kept.all()  # reaches p
    assert mass - float(probs[kept].min()) < p + 1e-9  # without its least likely token it would not


@FAST
@given(logits=logit_rows, t=st.floats(0.05, 5.0))
def test_temperature_rescales_logits(logits: torch.Tensor, t: float) -> None:
    log_p = torch.log_softmax(apply_temperature(logits, t), -1)
    assert torch.allclose(log_p, torch.log_softmax(logits / t, -1))
    # log-odds between any two tokens shrink or grow by exactly 1/T
    assert torch.allclose(log_p - log_p[0], (logits - logits[0]) / t, atol=1e-9)


@FAST
@given(
    logits=logit_rows,
    t=st.floats(0.1, 3.0),
    k=st.integers(0, 10),
    p=st.floats(0.05, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_sampled_tokens_are_always_in_the_kept_set(
    logits: torch.Tensor, t: float, k: int, p: float, seed: int
) -> None:
    logits = logits.clone()
    logits[0] = -math.inf  # a forbidden token (like pad) is never kept
    filtered = filter_distribution(logits, t, k, p)
    assert filtered.kept.any() and not filtered.kept[0]
    assert float(filtered.probs[~filtered.kept].sum()) == 0.0
    tokens = draw(filtered.probs.expand(64, -1), torch.Generator().manual_seed(seed))
    assert filtered.kept[tokens].all()


def test_filters_apply_in_order_temperature_top_k_top_p() -> None:
    logits = torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0])
    # top-k 3 first, then top-p on the renormalised top-3 distribution
    renorm = torch.softmax(logits[:3], -1)
    p = float(renorm[0] + renorm[1]) - 1e-4
    assert filter_distribution(logits, 1.0, 3, p).kept.tolist() == [True, True, False, False, False]
    # a higher temperature flattens before top-p: more tokens are needed to reach the same mass
    assert int(filter_distribution(logits, 5.0, 0, 0.9).kept.sum()) > int(
        filter_distribution(logits, 1.0, 0, 0.9).kept.sum()
    )


def test_length_penalty_is_gnmt() -> None:
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(10, 0.0) == 1.0


def _stable_descending(values: torch.Tensor) -> torch.Tensor:
    """The order of torch's stable descending sort: the reference for the filters' faster order."""
    return torch.sort(values, dim=-1, descending=True, stable=True).indices


def test_filters_keep_what_a_stable_sort_keeps_also_with_ties() -> None:
    """top-k and top-p by threshold (top-p's count from numpy's sort of the values): the same sets as sorting
    every logit with its id (ties: lower id)."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(200):
        v = int(torch.randint(2, 300, (), generator=gen))
        logits = torch.randint(-3, 3, (3, v), generator=gen).float()  # many ties
        if trial % 3 == 0:
            logits = torch.randn(3, v, generator=gen)
        logits[0, : v // 3] = -math.inf
        order = _stable_descending(logits)
        for k in (1, 2, 5, v, v + 3):
            expected = torch.zeros_like(logits, dtype=torch.bool).scatter_(
                -1, order, (torch.arange(v) < k).expand_as(order)
            )
            assert torch.equal(top_k_filter(logits, k), expected)
        probs = torch.softmax(logits, -1)
        assert torch.equal(descending(probs), probs.gather(-1, _stable_descending(probs)))
        for p in (0.1, 0.5, 0.9, 1.0):
            sorted_probs = probs.gather(-1, _stable_descending(probs))
            keep = (torch.cumsum(sorted_probs, -1) - sorted_probs < p) & (sorted_probs > 0)
            keep[..., 0] = True
            expected = torch.zeros_like(keep).scatter_(-1, _stable_descending(probs), keep)
            assert torch.equal(top_p_filter(logits, p), expected)


def test_largest_finds_what_topk_finds() -> None:
    """The chunked top-k: torch.topk's values, and indices that hold them (ties in any order)."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(50):
        vocab = int(torch.randint(5_000, 70_000, (), generator=gen))
        values = torch.randn(2, 3, vocab, generator=gen)
        if trial % 2:
            values = values.round()  # many ties
        values[0, 0, -1] = 100.0  # the tail past the last whole chunk
        for k in (1, 4, 10):
            top, ids = largest(values, k)
            assert torch.equal(top, torch.topk(values, k, dim=-1).values)
            assert torch.equal(values.gather(-1, ids), top)
            assert all(len(set(row)) == k for row in ids.view(-1, k).tolist())
            assert ids[0, 0, 0] == vocab - 1
        rows = values.view(-1, vocab)
        assert torch.equal(first_max(rows), rows.argmax(-1))  # ties (rounded rows): the lower id


def test_draw_follows_the_distribution() -> None:
    probs = torch.tensor([[0.5, 0.0, 0.3, 0.2, 0.0]]).expand(20_000, -1)
    tokens = draw(probs, torch.Generator().manual_seed(1))
    counts = torch.bincount(tokens, minlength=5).double() / len(tokens)
    assert counts[1] == 0 and counts[4] == 0  # zero probability: never drawn, also the last id
    assert torch.allclose(counts, probs[0].double(), atol=0.015)
