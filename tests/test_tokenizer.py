"""Tokenizers: special ids, byte fallback round trips, save/load, symbol tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.paths import SHARED_DATA
from visformer.tokenizer import (
    SentencePieceTokenizer,
    SymbolTokenizer,
    Tokenizer,
    load_tokenizer,
)

TINY_CORPUS = [
    "A man is riding a bike down the street.",
    "Ein Mann fährt mit dem Fahrrad die Straße hinunter.",
    "Two dogs play in the snow.",
    "Zwei Hunde spielen im Schnee.",
    "A woman in a red dress sings on a stage.",
    "Eine Frau in einem roten Kleid singt auf einer Bühne.",
    "Children are running through the park.",
    "Kinder rennen durch den Park.",
] * 20

HARD_TEXTS = [
    "emoji 😀🚀 and flags 🇰🇷",
    "한국어 문장입니다. 안녕하세요!",
    "control\x01chars\x07and\x1btab\there",
    "mixed: naïve café Ω ∑ 中文 العربية",
]


@pytest.fixture(scope="module")
def bpe() -> SentencePieceTokenizer:
    return SentencePieceTokenizer.train(TINY_CORPUS, vocab_size=320)


def test_special_ids_and_pieces(bpe: SentencePieceTokenizer) -> None:
    assert (bpe.pad_id, bpe.unk_id, bpe.bos_id, bpe.eos_id) == (0, 1, 2, 3)
    assert bpe.pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert isinstance(bpe, Tokenizer)
    assert bpe.vocab_size <= 320


def test_encode_adds_no_specials_and_decode_drops_them(bpe: SentencePieceTokenizer) -> None:
    ids = bpe.encode("Two dogs play.")
    assert ids and not {0, 2, 3} & set(ids)
    assert bpe.decode([2, *ids, 3, 0, 0]) == "Two dogs play."


def test_pieces_keep_word_marker(bpe: SentencePieceTokenizer) -> None:
    pieces = bpe.pieces(bpe.encode("Two dogs"))
    assert pieces[0].startswith("▁")
    assert "".join(pieces).replace("▁", " ").strip() == "Two dogs"


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_byte_fallback_round_trip_never_unk(bpe: SentencePieceTokenizer, text: str) -> None:
    ids = bpe.encode(text)
    assert bpe.unk_id not in ids
    assert bpe.decode(ids) == bpe.normalize(text) == text


def test_byte_pieces_are_shown(bpe: SentencePieceTokenizer) -> None:
    assert "<0xF0>" in bpe.pieces(bpe.encode("😀"))


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_any_text_round_trips_to_its_normal_form(text: str) -> None:
    tok = _shared_bpe()
    ids = tok.encode(text)
    assert tok.unk_id not in ids
    assert tok.decode(ids) == tok.normalize(text)


_CACHE: dict[str, SentencePieceTokenizer] = {}


def _shared_bpe() -> SentencePieceTokenizer:
    """One trained tokenizer for hypothesis runs (fixtures do not mix with @given)."""
    if "bpe" not in _CACHE:
        _CACHE["bpe"] = SentencePieceTokenizer.train(TINY_CORPUS, vocab_size=320)
    return _CACHE["bpe"]


def test_unigram_trains_and_round_trips() -> None:
    tok = SentencePieceTokenizer.train(TINY_CORPUS, vocab_size=320, model_type="unigram")
    assert tok.model_type == "unigram"
    assert tok.decode(tok.encode("Kinder rennen 😀")) == "Kinder rennen 😀"


def test_save_load_and_bytes(tmp_path: Path, bpe: SentencePieceTokenizer) -> None:
    bpe.save(tmp_path)
    assert (tmp_path / "tokenizer.model").is_file()
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, SentencePieceTokenizer)
    text = "Ein Mann fährt 한국 😀"
    assert loaded.encode(text) == bpe.encode(text)
    assert SentencePieceTokenizer.from_bytes(bpe.to_bytes()).encode(text) == bpe.encode(text)
    assert loaded.model_type == "bpe"


def test_bad_arguments_give_clear_errors() -> None:
    with pytest.raises(ValueError, match="too small"):
        SentencePieceTokenizer.train(TINY_CORPUS, vocab_size=100)
    with pytest.raises(ValueError, match="model_type"):
        SentencePieceTokenizer.train(TINY_CORPUS, vocab_size=320, model_type="wordpiece")
    with pytest.raises(ValueError, match="empty"):
        SentencePieceTokenizer.train(["", "  "], vocab_size=320)


def test_load_tokenizer_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tokenizer"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="SentencePiece"):
        load_tokenizer(tmp_path)
    other = tmp_path / "sym"
    other.mkdir()
    (other / "tokenizer.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(ValueError, match="symbol tokenizer"):
        load_tokenizer(other)


def test_out_of_range_ids_are_refused(bpe: SentencePieceTokenizer) -> None:
    with pytest.raises(ValueError, match="outside the vocabulary"):
        bpe.decode([bpe.vocab_size])


def test_symbol_tokenizer(tmp_path: Path) -> None:
    tok = SymbolTokenizer.from_symbols(["a", "b", "November", "-"])
    assert isinstance(tok, Tokenizer)
    assert tok.vocab_size == 8
    assert tok.encode("a November - b") == [4, 6, 7, 5]
    assert tok.encode("a zzz") == [4, tok.unk_id]
    assert tok.decode([2, 4, 6, 3, 0]) == "a November"
    assert tok.pieces([2, 4, 1, 3, 0]) == ["<s>", "a", "<unk>", "</s>", "<pad>"]
    tok.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, SymbolTokenizer) and loaded.vocab == tok.vocab


@pytest.mark.parametrize("bad", [["a b"], [""], ["<s>"]])
def test_symbol_tokenizer_rejects_bad_symbols(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        SymbolTokenizer.from_symbols(bad)


def test_joint_multi30k_vocabulary(corpus_data: Path) -> None:
    lines = []
    for lang in ("en", "de"):
        lines += (corpus_data / "multi30k" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
    real = corpus_data == SHARED_DATA  # else the generated stand-in: a few dozen distinct words
    size = 8000 if real else 300
    tok = SentencePieceTokenizer.train(lines, vocab_size=size)
    assert tok.vocab_size == size
    ids = tok.encode("Ein Hund läuft im Gras. A dog runs on the grass." if real else lines[1])
    assert tok.unk_id not in ids and len(ids) < 20  # common words are whole pieces


ANY_TEXT = st.text(st.characters(exclude_categories=()))  # surrogates included (excluded by default)
LONE_SURROGATES = st.text(st.sampled_from(["\udcff", "\ud800", "\udfff", "a", " ", "é"]))


@settings(max_examples=300, deadline=None)
@given(text=ANY_TEXT | LONE_SURROGATES)
def test_sentencepiece_encodes_any_python_string(sp_tokenizer: SentencePieceTokenizer, text: str) -> None:
    ids = sp_tokenizer.encode(text)
    assert all(0 <= i < sp_tokenizer.vocab_size for i in ids)
    assert isinstance(sp_tokenizer.normalize(text), str)


def test_a_lone_surrogate_is_read_as_the_replacement_character(sp_tokenizer: SentencePieceTokenizer) -> None:
    assert sp_tokenizer.encode("a\udcffb") == sp_tokenizer.encode("a\ufffdb")
