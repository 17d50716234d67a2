"""Held-out splits that share no sentence with training, and the shipped models' corpus mixes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.paths import SHARED_DATA
from visformer.corpora import MIXES, prepare
from visformer.data import Pair, drop_overlapping, split_disjoint


def _assert_disjoint(train: list[Pair], held: list[Pair]) -> None:
    """No source and no target of `held` occurs in `train`."""
    srcs, tgts = {p.src for p in train}, {p.tgt for p in train}
    assert not [p for p in held if p.src in srcs or p.tgt in tgts]


@st.composite
def corpora(draw: st.DrawFn, sizes: st.SearchStrategy[list[int]]) -> list[Pair]:
    """Small components of these sizes (each with its own sentences) and up to two too big to hold out."""
    pairs = []
    for c, size in enumerate(draw(sizes)):  # the pairs of a component share sources or targets
        links = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=size, max_size=size))
        pairs += [Pair(f"c{c}s{a}", f"c{c}t{b}") for a, b in links]
    for b, extra in enumerate(draw(st.lists(st.integers(0, 20), max_size=2))):  # 11+ pairs, one target
        pairs += [Pair(f"b{b}s{i}", f"b{b}t") for i in range(11 + extra)]
    return draw(st.permutations(pairs))


FOUR_OR_MORE = st.lists(st.integers(1, 10), min_size=4, max_size=8)  # enough to hold 2 + 2 pairs out
UNDER_FOUR_PAIRS = st.sampled_from([[1], [2], [3], [1, 1], [1, 2], [2, 1], [1, 1, 1]])  # never enough


@settings(max_examples=60, deadline=None)
@given(corpora(FOUR_OR_MORE), st.integers(0, 3))
def test_split_disjoint_shares_no_sentence_on_either_side(pairs: list[Pair], seed: int) -> None:
    """Four small components always give 2 + 2 held-out pairs, and nothing of them is in train."""
    train, valid, test = split_disjoint(pairs, valid=2, test=2, seed=seed)
    assert sorted(train + valid + test, key=repr) == sorted(pairs, key=repr)
    assert len(valid) >= 2 and len(test) >= 2
    assert all(p.src.startswith("c") for p in valid + test)  # the big components stay in train
    _assert_disjoint(train, valid + test)
    _assert_disjoint(valid, test)


@settings(max_examples=30, deadline=None)
@given(corpora(UNDER_FOUR_PAIRS), st.integers(0, 3))
def test_split_disjoint_refuses_when_fewer_pairs_can_be_held_out_than_asked(
    pairs: list[Pair], seed: int
) -> None:
    with pytest.raises(ValueError, match="held out"):
        split_disjoint(pairs, valid=2, test=2, seed=seed)


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


@pytest.mark.parametrize("mix", sorted(m for m in MIXES if MIXES[m].back_translation is None))
def test_shipped_mixes_hold_out_clean_test_sets(mix: str, tmp_path: Path, corpus_data: Path) -> None:
    m = MIXES[mix]
    manifest = prepare(mix, corpus_data, tmp_path)
    assert manifest["pairs"]["test"] >= m.n_test
    files = {split: (_read(tmp_path / f"{split}.{m.src_lang}"), _read(tmp_path / f"{split}.{m.tgt_lang}"))
             for split in ("train", "valid", "test")}  # fmt: skip
    train = [Pair(a, b) for a, b in zip(*files["train"], strict=True)]
    for split in ("valid", "test"):
        _assert_disjoint(train, [Pair(a, b) for a, b in zip(*files[split], strict=True)])
    excluded = {line for a, b in m.exclude for line in _read(corpus_data / a) + _read(corpus_data / b)}
    assert not excluded & (set(files["train"][0]) | set(files["train"][1]))


def test_prepare_refuses_an_unknown_mix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown mix"):
        prepare("xx-yy", tmp_path, tmp_path / "out")


# ---------------------------------------------------------------------------------------------
# The ko-en-bt mix: the project's own sentences, tagged back-translation, sources as students type them
# ---------------------------------------------------------------------------------------------


class _FakeTranslator:
    """Stands in for an en→ko checkpoint: translate_all is patched, so only its name is read."""

    name = "fake-en-ko"
    model = src_tokenizer = tgt_tokenizer = None


def _fake_translate_all(model, src_tok, tgt_tok, texts, **kwargs) -> list[str]:
    calls.append(list(texts))
    return [f"역 {t}" if t != "Other 7." else "역 \ufffd" for t in texts]  # one broken output


calls: list[list[str]] = []


@pytest.fixture
def fake_back_translation(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Back-translation without a model: each text becomes "역 " + text; returns the batches asked for."""
    import visformer.evaluation

    calls.clear()
    monkeypatch.setattr(visformer.evaluation, "translate_all", _fake_translate_all)
    return calls


def _tiny_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A generated data folder + own corpus and a mix over them registered as "tiny-bt"."""
    from visformer import corpora

    data, own = tmp_path / "data", tmp_path / "corpora"
    (data / "c").mkdir(parents=True)
    (own / "mine").mkdir(parents=True)
    n = 80
    (data / "c/x.ko").write_text("".join(f"문장 {i} 입니다.\n" for i in range(n)), encoding="utf-8")
    (data / "c/x.en").write_text("".join(f"Sentence {i}.\n" for i in range(n)), encoding="utf-8")
    # monolingual English: some lines are held-out references (valid/test/own test) and must not be used
    mono = [f"Other {i}." for i in range(30)] + [f"Sentence {i}." for i in range(n)] + ["Mine test 0."]
    (data / "mono.en").write_text("\n".join(mono) + "\n", encoding="utf-8")
    for split, k in (("train", 6), ("test", 2)):
        (own / "mine" / f"{split}.ko").write_text(
            "".join(f"내 {split} {i}\n" for i in range(k)), encoding="utf-8"
        )
        (own / "mine" / f"{split}.en").write_text(
            "".join(f"Mine {split} {i}.\n" for i in range(k)), encoding="utf-8"
        )
    for key, folder, license in (("c", "c", "test"), ("mine", "mine", "MIT"), ("mono", "mono.en", "test")):
        info = corpora.CorpusInfo(key, key, {folder: ("ko", "en")}, license, "tests", "https://example.org")
        monkeypatch.setitem(corpora.CORPORA, key, info)  # every corpus of a mix is in the registry
    mix = corpora.Mix(
        name="tiny-bt", src_lang="ko", tgt_lang="en",
        sources=(corpora.Source("c", "c/x.ko", "c/x.en", repeat=2),),
        test_from="c", n_test=5, n_valid=5,
        own=(corpora.OwnCorpus("mine", "mine", repeat=3),),
        back_translation=corpora.BackTranslation("mono", ("mono.en",), tag="<bt>"),
        typing=corpora.Typing(drop_final=0.5, drop_space=0.5),
        real_repeat=2,
    )  # fmt: skip
    monkeypatch.setitem(corpora.MIXES, "tiny-bt", mix)
    return data, own


def test_back_translation_mix_keeps_held_out_sentences_out_of_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_back_translation: list
) -> None:
    data, own = _tiny_mix(tmp_path, monkeypatch)
    out = tmp_path / "out"
    manifest = prepare("tiny-bt", data, out, back_translator=_FakeTranslator(), corpora=own, progress=False)
    train = [Pair(a, b) for a, b in zip(_read(out / "train.ko"), _read(out / "train.en"), strict=True)]
    held = [Pair(a, b) for split in ("valid", "test")
            for a, b in zip(_read(out / f"{split}.ko"), _read(out / f"{split}.en"), strict=True)]  # fmt: skip
    own_test = [Pair(f"내 test {i}", f"Mine test {i}.") for i in range(2)]
    assert len(held) == 10
    _assert_disjoint(train, held + own_test)  # no held-out source or target, real or synthetic
    synthetic = [p for p in train if p.src.startswith("<bt> ")]
    assert {p.tgt for p in synthetic} == {
        f"Other {i}." for i in range(30) if i != 7
    } | {  # broken one dropped
        p.tgt for p in train if p.tgt.startswith("Sentence")
    }
    assert all(p.src == f"<bt> 역 {p.tgt}" for p in synthetic)
    assert sum(p.tgt.startswith("Mine train") for p in train) == 6 * 3 * 2  # own corpus repeated 3 × 2
    assert manifest["back_translation"]["pairs"] == len(synthetic)
    assert [e["name"] for e in manifest["evals"]] == ["mine"]


def test_back_translation_mix_asks_for_a_back_translator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, own = _tiny_mix(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="back-translator"):
        prepare("tiny-bt", data, tmp_path / "out", corpora=own)


def test_back_translation_continues_where_a_killed_run_stopped(
    tmp_path: Path, fake_back_translation: list
) -> None:
    from visformer.corpora import back_translate

    texts = [f"Text {i}." for i in range(7)]
    first = back_translate(texts[:5], _FakeTranslator(), tmp_path, "ko", "en", chunk=2, progress=False)
    assert len(first) == 5
    fake_back_translation.clear()
    pairs = back_translate(texts, _FakeTranslator(), tmp_path, "ko", "en", chunk=2, progress=False)
    assert fake_back_translation == [["Text 5.", "Text 6."]]  # only what was missing
    assert pairs == [Pair(f"역 {t}", t) for t in texts]
    fake_back_translation.clear()
    back_translate(["Another."], _FakeTranslator(), tmp_path, "ko", "en", progress=False)
    assert fake_back_translation == [["Another."]]  # other input: starts again, never mixes the two


def test_typing_augmentation_drops_final_punctuation_and_spaces_of_a_share_only() -> None:
    from visformer.data import augment_typing

    pairs = [Pair(f"저는 학생 {i} 입니다.", f"I am student {i}.") for i in range(400)]
    typed = augment_typing(pairs, drop_final=0.3, drop_space=0.1, seed=0)
    assert [p.tgt for p in typed] == [p.tgt for p in pairs]  # targets never change
    no_period = sum(not p.src.endswith(".") for p in typed)
    joined = sum(p.src.rstrip(".").count(" ") < 3 for p in typed)
    assert 0.2 < no_period / 400 < 0.4 and 0.05 < joined / 400 < 0.15
    assert typed == augment_typing(pairs, drop_final=0.3, drop_space=0.1, seed=0)  # reproducible
    assert typed != augment_typing(pairs, drop_final=0.3, drop_space=0.1, seed=1)
    assert augment_typing([Pair("?", "x")], drop_final=1.0)[0].src == "?"  # never empties a sentence


def test_shipped_ko_en_bt_mix_holds_out_its_own_test_set(
    tmp_path: Path, fake_back_translation: list, corpus_data: Path
) -> None:
    manifest = prepare("ko-en-bt", corpus_data, tmp_path, back_translator=_FakeTranslator(), progress=False)
    train_src, train_tgt = set(_read(tmp_path / "train.ko")), set(_read(tmp_path / "train.en"))
    from visformer.corpora import REPO_CORPORA

    own = REPO_CORPORA / "students-ko-en"
    assert not set(_read(own / "test.ko")) & train_src and not set(_read(own / "test.en")) & train_tgt
    for split in ("valid", "test"):
        assert not set(_read(tmp_path / f"{split}.en")) & train_tgt
    assert manifest["back_translation"]["pairs"] > (100_000 if corpus_data == SHARED_DATA else 500)


def test_every_corpus_of_every_mix_is_in_the_registry_with_its_licence() -> None:
    from visformer.corpora import CORPORA, corpus_of, terms

    for mix in MIXES.values():
        for source in mix.sources:
            assert source.license == corpus_of(source.src).license == corpus_of(source.tgt).license
        assert all(own.license == corpus_of(own.folder).license for own in mix.own)
    assert MIXES["ko-en"].sources[0].license == CORPORA["kss"].license == "CC BY-NC-SA 4.0"
    assert MIXES["ko-en-bt"].back_translation.license.startswith(CORPORA["tatoeba"].license)
    with pytest.raises(ValueError, match="no corpus in the registry"):
        corpus_of("somewhere-else/x.en")
    files = ["tatoeba-deu-eng/a.en", "multi30k/train.en", "tatoeba-fra-eng/fra-eng.en"]
    assert (
        terms(files) == "Tatoeba: CC BY 2.0 FR; Multi30k: research/education"
    )  # what the LM checkpoints record


@pytest.mark.parametrize("readme", ["README.md", "checkpoints/README.md"])
def test_the_readme_credits_every_corpus_under_the_registry_licence(readme: str) -> None:
    from visformer.corpora import CORPORA

    readme = (Path(__file__).resolve().parents[1] / readme).read_text(encoding="utf-8")
    credits = readme.split("## Data credits", 1)[1].split("\n## ", 1)[0]
    bullets = {b.split("**")[1]: " ".join(b.split()) for b in credits.split("\n- ")[1:]}
    assert set(bullets) == {c.name for c in CORPORA.values()}
    for corpus in CORPORA.values():
        assert corpus.license in bullets[corpus.name], corpus.name
