"""Package and CLI fixes from issue 13: exact names, unencodable text, parameter ranges, clean input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.checkpoints import tiny_config
from visformer.checkpoint import safe_checkpoint_dir, save_checkpoint
from visformer.classroom.hosting import session_folder_name
from visformer.model import Transformer
from visformer.tokenizer import SentencePieceTokenizer

REPO = Path(__file__).resolve().parents[1]
SENTENCES = ["a dog runs on the beach.", "ein Hund läuft am Strand.", "개가 해변을 달린다.", "café ☕"] * 5
ANY_TEXT = st.text(st.characters(exclude_categories=()))  # surrogates included (excluded by default)
LONE_SURROGATES = st.text(st.sampled_from(["\udcff", "\ud800", "\udfff", "a", " ", "é"]))


@pytest.fixture(scope="module")
def sp_tokenizer() -> SentencePieceTokenizer:
    """A small SentencePiece tokenizer with byte fallback."""
    return SentencePieceTokenizer.train(SENTENCES, 300, num_threads=1)


@pytest.fixture(scope="module")
def text_checkpoint(tmp_path_factory: pytest.TempPathFactory, sp_tokenizer: SentencePieceTokenizer) -> Path:
    """An untrained tiny model with that tokenizer, saved as a checkpoint."""
    v = sp_tokenizer.vocab_size
    model = Transformer(tiny_config(src_vocab_size=v, tgt_vocab_size=v)).eval()
    return save_checkpoint(tmp_path_factory.mktemp("ck") / "text", model, sp_tokenizer, sp_tokenizer)


@pytest.mark.parametrize("name", ["abc\n", "abc\r\n", "a\nb", "\nabc"])
def test_checkpoint_names_match_the_character_set_exactly(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid checkpoint name"):
        safe_checkpoint_dir(tmp_path, name)
    assert safe_checkpoint_dir(tmp_path, "abc") == tmp_path.resolve() / "abc"


def test_a_session_id_with_a_trailing_newline_is_hashed_not_used_as_a_folder_name() -> None:
    assert session_folder_name("abc") == "s-abc"
    folder = session_folder_name("abc\n")
    assert "\n" not in folder and folder != "s-abc\n"


@settings(max_examples=300, deadline=None)
@given(text=ANY_TEXT | LONE_SURROGATES)
def test_sentencepiece_encodes_any_python_string(sp_tokenizer: SentencePieceTokenizer, text: str) -> None:
    ids = sp_tokenizer.encode(text)
    assert all(0 <= i < sp_tokenizer.vocab_size for i in ids)
    assert isinstance(sp_tokenizer.normalize(text), str)


def test_a_lone_surrogate_is_read_as_the_replacement_character(sp_tokenizer: SentencePieceTokenizer) -> None:
    assert sp_tokenizer.encode("a\udcffb") == sp_tokenizer.encode("a\ufffdb")


def _cli(*args: str | bytes) -> subprocess.CompletedProcess:
    """`python -m visformer ARGS` (bytes arguments stay bytes: non-UTF-8 argv)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "visformer", *args], capture_output=True, cwd=REPO, env=env)


@pytest.mark.parametrize("sentence", [b"caf\xe9 \xff\xfe", b"\xed\xa0\x80", "\u202e\x7f ok".encode()])
def test_cli_translate_with_non_utf8_arguments_translates_or_says_one_line(
    text_checkpoint: Path, sentence: bytes
) -> None:
    done = _cli("translate", "--checkpoint", str(text_checkpoint), sentence)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    if done.returncode == 0:
        assert done.stdout.count(b"\n") == 1
    else:
        assert done.returncode == 2 and done.stderr.count(b"\n") == 1


def test_cli_non_utf8_checkpoint_path_is_one_error_line() -> None:
    done = _cli("translate", "--checkpoint", b"/no/such/\xff", "hello")
    assert done.returncode == 2 and done.stderr.startswith(b"error: ") and done.stderr.count(b"\n") == 1


def test_translate_cleans_its_input_like_the_app(text_checkpoint: Path) -> None:
    from visformer.checkpoint import load_checkpoint
    from visformer.decoding import translate

    ck = load_checkpoint(text_checkpoint)
    args = (ck.model, ck.src_tokenizer, ck.tgt_tokenizer)
    plain = translate(*args, "a dog runs")
    dirty = translate(*args, "a\u202e dog\x07\udcff\n  runs\t")
    assert dirty.src_ids == plain.src_ids and dirty.text == plain.text
    for empty in ("", "  \n", "\x00\u202e"):
        with pytest.raises(ValueError, match="nothing to translate"):
            translate(*args, empty)


def _each_param_just_outside() -> list[tuple[str, str, float]]:
    """(strategy, parameter, a value just below its range) for every declared parameter."""
    from visformer.decoding import STRATEGIES

    return [(s.name, p.name, p.low - p.step) for s in STRATEGIES.values() for p in s.params]


@pytest.mark.parametrize(("strategy", "name", "value"), _each_param_just_outside())
def test_strategies_and_the_app_refuse_the_same_out_of_range_values(
    strategy: str, name: str, value: float
) -> None:
    import torch

    from visformer.classroom.inputs import InputError, check_decoding_params
    from visformer.decoding import get_strategy

    model = Transformer(tiny_config()).eval()
    src = torch.tensor([[5, 6, 7, 3]])  # (1, S)
    with pytest.raises(ValueError, match=f"{name} must be between") as api:
        get_strategy(strategy)(model, src, **{name: value})
    with pytest.raises(InputError) as app:
        check_decoding_params(strategy, {name: value})
    assert str(app.value) == str(api.value)


def test_top_k_sampling_refuses_k_0_and_the_app_offers_k_from_1() -> None:
    import torch

    from pages import _views as schema
    from visformer.decoding import get_strategy

    model = Transformer(tiny_config()).eval()
    with pytest.raises(ValueError, match="top_k must be between 1 and"):
        get_strategy("top-k")(model, torch.tensor([[5, 6, 3]]), top_k=0, seed=0)
    assert schema.VIEW_PARAMS[schema.decoding_param_key("top-k", "top_k")].lo == 1
    assert get_strategy("sample")(model, torch.tensor([[5, 6, 3]]), top_k=0, seed=0).params["top_k"] == 0


@pytest.mark.parametrize("name", [b"abc\xff", b"abc\n", b"..", b".hidden"])
def test_cli_average_refuses_an_out_name_outside_the_character_set(
    text_checkpoint: Path, tmp_path: Path, name: bytes
) -> None:
    done = _cli("average", str(text_checkpoint), "--out", os.fsencode(tmp_path) + b"/" + name)
    assert done.returncode == 2 and done.stderr.startswith(b"error: invalid checkpoint name")
    assert done.stderr.count(b"\n") == 1 and list(tmp_path.iterdir()) == []


def test_cli_os_errors_are_one_line(text_checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    done = _cli("average", str(text_checkpoint), "--out", str(tmp_path / "a-file" / "avg"))
    assert done.returncode == 2 and done.stderr.startswith(b"error: ") and done.stderr.count(b"\n") == 1
