"""Held-out splits that share no sentence with training, and the shipped models' corpus mixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from visformer.corpora import MIXES, prepare
from visformer.data import Pair, drop_overlapping, split_disjoint

from .conftest import SHARED_DATA


def _assert_disjoint(train: list[Pair], held: list[Pair]) -> None:
    """No source and no target of `held` occurs in `train`."""
    srcs, tgts = {p.src for p in train}, {p.tgt for p in train}
    assert not [p for p in held if p.src in srcs or p.tgt in tgts]


sentences = st.sampled_from([f"s{i}" for i in range(25)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(sentences, sentences), min_size=30, max_size=120), st.integers(0, 3))
def test_split_disjoint_shares_no_sentence_on_either_side(raw: list[tuple[str, str]], seed: int) -> None:
    pairs = [Pair(a, "t" + b) for a, b in raw]
    try:
        train, valid, test = split_disjoint(pairs, valid=2, test=2, seed=seed)
    except ValueError:
        return  # too connected to hold anything out: refused, never leaked
    assert sorted(train + valid + test, key=repr) == sorted(pairs, key=repr)
    _assert_disjoint(train, valid + test)
    _assert_disjoint(valid, test)


def test_paraphrases_that_share_a_target_stay_together() -> None:
    # "I am hungry." has three Korean sources; a split by source alone would leak the target
    pairs = [Pair(f"배고파{i}", "I am hungry.") for i in range(3)] + [
        Pair(f"k{i}", f"e{i}") for i in range(40)
    ]
    train, valid, test = split_disjoint(pairs, valid=5, test=5, seed=1)
    _assert_disjoint(train, valid + test)
    hungry = [split for split in (train, valid, test) if any(p.tgt == "I am hungry." for p in split)]
    assert len(hungry) == 1


def test_groups_keep_paraphrase_groups_whole() -> None:
    pairs = [Pair(f"k{i}", f"e{i}") for i in range(60)]
    groups = [f"g{i // 10}" for i in range(60)]
    train, valid, test = split_disjoint(pairs, valid=10, test=10, seed=0, groups=groups)
    by_pair = dict(zip(pairs, groups, strict=True))
    assert not {by_pair[p] for p in train} & {by_pair[p] for p in valid + test}


def test_held_out_from_limits_the_test_corpus() -> None:
    pairs = [Pair(f"a{i}", f"x{i}") for i in range(50)] + [Pair(f"b{i}", f"y{i}") for i in range(50)]
    train, valid, test = split_disjoint(pairs, valid=5, test=5, held_out_from=lambda i: i >= 50)
    assert all(p.src.startswith("b") for p in valid + test)


def test_split_refuses_when_it_cannot_hold_enough_out() -> None:
    pairs = [Pair(f"k{i}", "same") for i in range(30)]  # one component
    with pytest.raises(ValueError, match="held out"):
        split_disjoint(pairs, valid=1, test=1)


def test_drop_overlapping_removes_pairs_sharing_either_side() -> None:
    keep = drop_overlapping(
        [Pair("a", "x"), Pair("b", "y"), Pair("c", "z")], [Pair("a", "q"), Pair("r", "z")]
    )
    assert keep == [Pair("b", "y")]


def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_shipped_mixes_hold_out_clean_test_sets(mix: str, tmp_path: Path) -> None:
    m = MIXES[mix]
    if not all((SHARED_DATA / s.src).is_file() for s in m.sources):
        pytest.skip("../shared/data is not here")
    manifest = prepare(mix, SHARED_DATA, tmp_path)
    assert manifest["pairs"]["test"] >= m.n_test
    files = {split: (_read(tmp_path / f"{split}.{m.src_lang}"), _read(tmp_path / f"{split}.{m.tgt_lang}"))
             for split in ("train", "valid", "test")}  # fmt: skip
    train = [Pair(a, b) for a, b in zip(*files["train"], strict=True)]
    for split in ("valid", "test"):
        _assert_disjoint(train, [Pair(a, b) for a, b in zip(*files[split], strict=True)])
    excluded = {line for a, b in m.exclude for line in _read(SHARED_DATA / a) + _read(SHARED_DATA / b)}
    assert not excluded & (set(files["train"][0]) | set(files["train"][1]))


def test_prepare_refuses_an_unknown_mix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown mix"):
        prepare("xx-yy", tmp_path, tmp_path / "out")
