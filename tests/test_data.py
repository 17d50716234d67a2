"""Corpus reading, splitting and token-budget batching."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.corpora import GENERATED_PAIRS
from tests.helpers.paths import SHARED_DATA
from visformer.data import (
    Pair,
    batch_by_tokens,
    encode_pairs,
    filter_by_length,
    padded_tokens,
    read_parallel,
    read_tsv,
    split_disjoint,
)
from visformer.tasks import make_examples, task_tokenizer


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_read_parallel(tmp_path: Path) -> None:
    src = _write(tmp_path / "a.en", "Hello world\r\nTwo dogs \n")
    tgt = _write(tmp_path / "a.de", "Hallo Welt\nZwei Hunde\n")
    assert read_parallel(src, tgt) == [Pair("Hello world", "Hallo Welt"), Pair("Two dogs", "Zwei Hunde")]


def test_read_parallel_keeps_alignment_around_rare_separators(tmp_path: Path) -> None:
    src = _write(tmp_path / "a.en", "one\u2028still one\ntwo\n")
    tgt = _write(tmp_path / "a.de", "eins\nzwei\n")
    assert [p.tgt for p in read_parallel(src, tgt)] == ["eins", "zwei"]


def test_read_parallel_mismatched_lines(tmp_path: Path) -> None:
    src = _write(tmp_path / "a.en", "a\nb\nc\n")
    tgt = _write(tmp_path / "a.de", "a\nb\n")
    with pytest.raises(ValueError, match="3 lines .* has 2"):
        read_parallel(src, tgt)


def test_read_parallel_bad_files(tmp_path: Path) -> None:
    good = _write(tmp_path / "good", "a\nb\n")
    with pytest.raises(ValueError, match="empty"):
        read_parallel(_write(tmp_path / "empty", ""), good)
    with pytest.raises(ValueError, match="not UTF-8.*line 2"):
        read_parallel(_write(tmp_path / "latin1", "ok\ncaf\xe9\n".encode("latin-1")), good)
    with pytest.raises(ValueError, match="not found"):
        read_parallel(tmp_path / "missing", good)


def test_read_tsv(tmp_path: Path) -> None:
    path = _write(tmp_path / "kor.txt", "Go.\t가.\tCC-BY #1\nHi.\t안녕.\tCC-BY #2\n\n")
    assert read_tsv(path) == [Pair("Go.", "가."), Pair("Hi.", "안녕.")]
    assert read_tsv(path, src_col=1, tgt_col=0)[0] == Pair("가.", "Go.")


def test_read_tsv_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="line 2: no tab"):
        read_tsv(_write(tmp_path / "x.tsv", "a\tb\njust text\n"))
    with pytest.raises(ValueError, match="line 1: has 2 columns"):
        read_tsv(_write(tmp_path / "y.tsv", "a\tb\n"), tgt_col=2)


def test_filter_by_length() -> None:
    pairs = [Pair("a b c", "x y"), Pair("", "x"), Pair("a " * 20, "x"), Pair("a", "x " * 20)]
    assert filter_by_length(pairs, max_len=10) == [pairs[0]]
    assert filter_by_length(pairs, max_len=10, length=len) == [pairs[0]]  # characters: "a b c" is 5


def _repeated_corpus(n_sources: int = 300, seed: int = 0) -> list[Pair]:
    """Tatoeba-like: many source sentences have several translations."""
    rng = random.Random(seed)
    pairs = [
        Pair(f"sentence {i}", f"Satz {i} v{k}") for i in range(n_sources) for k in range(rng.randint(1, 3))
    ]
    rng.shuffle(pairs)
    return pairs


def test_split_disjoint_is_deterministic_and_order_free() -> None:
    pairs = _repeated_corpus()
    a = split_disjoint(pairs, valid=20, test=20, seed=1)
    shuffled = list(pairs)
    random.Random(9).shuffle(shuffled)
    b = split_disjoint(shuffled, valid=20, test=20, seed=1)
    assert {p.src for p in a.test} == {p.src for p in b.test}
    assert a == split_disjoint(pairs, valid=20, test=20, seed=1)
    assert {p.src for p in a.test} != {p.src for p in split_disjoint(pairs, valid=20, test=20, seed=2).test}


examples_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(4, 30), min_size=0, max_size=25),
        st.lists(st.integers(4, 30), min_size=0, max_size=25),
    ),
    min_size=1,
    max_size=80,
)


@settings(max_examples=40, deadline=None)
@given(examples_strategy, st.integers(26, 300), st.booleans(), st.integers(0, 5), st.sampled_from([None, 7]))
def test_batching_respects_budget_and_covers_everything_once(
    examples: list[tuple[list[int], list[int]]], max_tokens: int, shuffle: bool, seed: int, bucket: int | None
) -> None:
    batches = list(batch_by_tokens(examples, max_tokens, shuffle=shuffle, seed=seed, bucket_size=bucket))
    seen = sorted(i for b in batches for i in b.index)
    assert seen == list(range(len(examples)))
    for b in batches:
        assert padded_tokens([examples[i] for i in b.index]) <= max_tokens
        assert max(b.src.size(1), b.tgt_out.size(1)) * len(b) <= max_tokens


def test_batch_layout() -> None:
    examples = [([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])]
    (batch,) = batch_by_tokens(examples, max_tokens=100, shuffle=False)
    rows = {tuple(examples[i][0]): r for r, i in enumerate(batch.index)}
    r0, r1 = rows[(5, 6, 7)], rows[(5,)]
    assert batch.src.dtype == torch.long
    assert batch.src[r0].tolist() == [5, 6, 7, 3]
    assert batch.src[r1].tolist() == [5, 3, 0, 0]
    assert batch.tgt_in[r0].tolist() == [2, 8, 9, 0, 0]
    assert batch.tgt_out[r0].tolist() == [8, 9, 3, 0, 0]
    assert batch.tgt_in[r1].tolist() == [2, 8, 9, 10, 11]
    assert batch.tgt_out[r1].tolist() == [8, 9, 10, 11, 3]
    assert batch.n_tgt_tokens == 3 + 5 == int((batch.tgt_out != 0).sum())


def test_batching_is_seeded() -> None:
    examples = [([4] * (i % 17 + 1), [5] * (i % 13 + 1)) for i in range(500)]
    first = [b.index for b in batch_by_tokens(examples, 200, seed=1)]
    assert first == [b.index for b in batch_by_tokens(examples, 200, seed=1)]
    assert first != [b.index for b in batch_by_tokens(examples, 200, seed=2)]


def test_bucketing_reduces_padding() -> None:
    rng = random.Random(0)
    examples = [
        ([4] * n, [5] * max(1, n + rng.randint(-3, 3))) for n in (rng.randint(1, 40) for _ in range(2000))
    ]

    def padding(batches: list) -> float:
        real = sum(int((b.src != 0).sum()) + b.n_tgt_tokens for b in batches)
        return 1 - real / sum(b.src.numel() + b.tgt_out.numel() for b in batches)

    bucketed = padding(list(batch_by_tokens(examples, 1000, seed=0)))
    random_batches = padding(list(batch_by_tokens(examples, 1000, seed=0, sort_by_length=False)))
    assert bucketed < 0.15 < 0.3 < random_batches


def test_example_too_long_for_budget_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="filter by length"):
        batch_by_tokens([([4] * 50, [5])], max_tokens=20)


def test_encode_pairs_with_task_examples() -> None:
    tok = task_tokenizer("copy")
    examples = make_examples("copy", 20, seed=0, min_len=3, max_len=8)
    encoded = encode_pairs(examples, tok, tok)
    assert all(len(s) == len(e.src.split()) and s == t for (s, t), e in zip(encoded, examples, strict=True))
    assert all(len(s) + 1 <= 6 for s, _ in encode_pairs(examples, tok, tok, max_len=6))


def test_tatoeba_split_has_no_leak(corpus_data: Path) -> None:
    folder = corpus_data / "tatoeba-kor-eng"
    pairs = read_parallel(folder / "kor-eng.en", folder / "kor-eng.ko")
    assert len(pairs) == (5749 if corpus_data == SHARED_DATA else GENERATED_PAIRS)
    train, valid, test = split_disjoint(pairs, valid=287, test=287, seed=0)
    held_out = valid + test
    assert not {p.src for p in train} & {p.src for p in held_out}
    assert not {p.tgt for p in train} & {p.tgt for p in held_out}
    assert len(train) + len(valid) + len(test) == len(pairs)
