"""Synthetic tasks: targets, alignments, held-out generation and the two task metrics."""

from __future__ import annotations

import datetime

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from visformer.tasks import (
    MONTHS,
    TASKS,
    alignment_score,
    exact_match,
    head_alignment_scores,
    make_examples,
    task_tokenizer,
)


def _one_hot(alignment: list[int], n_src: int) -> torch.Tensor:
    """A perfect (T+1, S+1) attention map (extra eos row and column, like a real model)."""
    att = torch.full((len(alignment) + 1, n_src + 1), 0.01)
    for j, a in enumerate(alignment):
        if a >= 0:
            att[j, a] = 1.0
    return att / att.sum(-1, keepdim=True)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["copy", "reverse", "sort"]), st.integers(0, 10_000))
def test_alignment_rebuilds_the_target(name: str, seed: int) -> None:
    for ex in make_examples(name, 5, seed=seed):
        src, tgt = ex.src.split(), ex.tgt.split()
        assert len(ex.alignment) == len(tgt)
        assert [src[a] for a in ex.alignment] == tgt


def test_task_targets_follow_their_rule() -> None:
    for ex in make_examples("copy", 20, seed=0):
        assert ex.tgt == ex.src
    for ex in make_examples("reverse", 20, seed=0):
        assert ex.tgt.split() == ex.src.split()[::-1]
    for ex in make_examples("sort", 20, seed=0):
        assert ex.tgt.split() == sorted(ex.src.split())
        assert len(set(ex.src.split())) == len(ex.src.split())


def test_date_task_matches_python_dates() -> None:
    for ex in make_examples("date", 200, seed=0):
        src, tgt = ex.src.split(), ex.tgt.split()
        month_at = next(i for i, s in enumerate(src) if s in MONTHS)
        day, year = int("".join(src[:month_at])), int("".join(src[month_at + 1 :]))
        date = datetime.date(year, MONTHS.index(src[month_at]) + 1, day)  # raises on impossible dates
        assert "".join(tgt) == date.isoformat()
        for j, a in enumerate(ex.alignment):
            if tgt[j] == "-":
                assert a == -1
            elif 5 <= j <= 6:
                assert a == month_at  # month digits come from the month word
            elif a >= 0:
                assert src[a] == tgt[j]  # year and day digits are copied
        assert sum(a == -1 for a in ex.alignment) == 2 + (day < 10)  # dashes and the padding zero


def test_date_example_from_the_issue() -> None:
    tok = task_tokenizer("date")
    assert tok.unk_id not in tok.encode("2 1 November 2 0 2 6") + tok.encode("2 0 2 6 - 1 1 - 2 1")


def test_every_task_is_described_and_tokenizable() -> None:
    assert {"copy", "reverse", "sort", "date"} <= set(TASKS)
    for name, task in TASKS.items():
        assert task.description
        tok = task_tokenizer(name)
        for ex in make_examples(name, 50, seed=1):
            assert tok.unk_id not in tok.encode(ex.src) + tok.encode(ex.tgt)
            assert tok.decode(tok.encode(ex.tgt)) == ex.tgt


def test_lengths_and_determinism() -> None:
    examples = make_examples("reverse", 100, seed=4, min_len=5, max_len=7)
    assert {len(e.src.split()) for e in examples} == {5, 6, 7}
    assert examples == make_examples("reverse", 100, seed=4, min_len=5, max_len=7)
    assert examples != make_examples("reverse", 100, seed=5, min_len=5, max_len=7)


def test_held_out_overlap_is_small_for_reverse() -> None:
    train = {e.src for e in make_examples("reverse", 5000, seed=0)}
    held_out = make_examples("reverse", 1000, seed=1)
    overlap = sum(e.src in train for e in held_out)
    assert overlap / len(held_out) < 0.02
    clean = make_examples("reverse", 1000, seed=1, exclude=train)
    assert not {e.src for e in clean} & train


def test_unknown_task_and_bad_lengths() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        make_examples("translate", 1)
    with pytest.raises(ValueError, match="min_len"):
        make_examples("copy", 1, min_len=5, max_len=2)


def test_exact_match() -> None:
    assert exact_match(["a b", "c  d", "e"], ["a b", "c d", "f"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        exact_match(["a"], ["a", "b"])


@pytest.mark.parametrize("name", sorted(TASKS))
def test_alignment_score_is_one_on_a_perfect_map(name: str) -> None:
    ex = make_examples(name, 1, seed=2)[0]
    att = _one_hot(ex.alignment, len(ex.src.split()))
    assert alignment_score(att, ex.alignment) == 1.0
    assert alignment_score(att.numpy(), ex.alignment) == 1.0
    heads = torch.stack([att, att.roll(1, dims=-1)])  # (h=2, T, S): a good head and a shifted one
    assert head_alignment_scores(heads, ex.alignment)[0] == 1.0
    assert head_alignment_scores(heads, ex.alignment)[1] < 0.5


def test_alignment_score_counts_misses_and_batches() -> None:
    alignment = [2, 1, 0, -1]
    att = np.zeros((5, 4))
    att[[0, 1, 2, 3], [2, 1, 3, 0]] = 1  # third token wrong, fourth ignored
    assert alignment_score(att, alignment) == pytest.approx(2 / 3)
    batch = torch.tensor(att).expand(2, 3, 5, 4)  # (B, h, T, S)
    assert alignment_score(batch, [alignment, [2, 1, 3]]) == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="past"):
        alignment_score(att, [7])
    with pytest.raises(ValueError, match="shape"):
        alignment_score(torch.zeros(4), [0])
