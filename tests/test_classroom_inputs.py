"""Bad input gets one clear InputError (or a described repair), never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from tests.helpers.markdown import rendered
from visformer.classroom.hosting import HostedLimits
from visformer.classroom.inputs import (
    InputError,
    bounded_train_config,
    check_decoding_params,
    check_model_config,
    checkpoint_name,
    checkpoint_path,
    clean_sentence,
    count_parameters,
    decode_upload,
    escape_markdown,
    fit_to_model,
    parse_uploaded_parallel,
    parse_uploaded_tsv,
)
from visformer.config import ModelConfig, TrainConfig
from visformer.data import Pair
from visformer.decoding import translate
from visformer.model import Transformer
from visformer.text import strip_controls
from visformer.tokenizer import SentencePieceTokenizer, SymbolTokenizer

REPO = Path(__file__).resolve().parents[1]
HOSTED = HostedLimits.hosted()

# ---------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\t\n", None, "\x00\x01", "\u202e\u202d"])
def test_empty_sentences_are_refused(text: str | None) -> None:
    with pytest.raises(InputError, match="nothing to translate"):
        clean_sentence(text)


def test_non_text_is_refused() -> None:
    with pytest.raises(InputError, match="must be text"):
        clean_sentence(42)


def test_long_sentence_is_cut_at_a_word_and_said() -> None:
    text = " ".join(["word"] * 200)  # 999 characters
    out = clean_sentence(text, HOSTED)
    assert len(out.text) <= HOSTED.max_sentence_chars and out.text.endswith("word")
    assert out.changed and "first 300 of its 999 characters" in out.notes[0]
    assert clean_sentence("A short one.", HOSTED).notes == ()


def test_very_long_word_is_refused_with_the_limit() -> None:
    with pytest.raises(InputError, match=r"has 500 characters.*at most 60"):
        clean_sentence("hello " + "a" * 500, HOSTED)


def test_controls_are_stripped_and_the_rest_kept() -> None:
    out = clean_sentence("Hello\x00 \x07wor\u202eld\r\nagain\x1b[31m", HOSTED)
    assert out.text == "Hello world again[31m"
    assert "4 invisible control" in out.notes[0]
    stripped, removed = strip_controls("a\tb")
    assert stripped == "a b" and removed == 0


@pytest.mark.parametrize(
    "text",
    [
        "I love 🍕 and 👨‍👩‍👧!",  # emoji with zero-width joiners stay intact
        "나는 student입니다 und du?",  # mixed scripts
        "Привет, 世界, مرحبا",
        "<script>alert('x')</script> <b>bold</b> &amp;",  # HTML stays text
    ],
)
def test_emoji_scripts_and_html_are_kept_as_text(text: str) -> None:
    assert clean_sentence(text, HOSTED).text == text


def test_html_is_escaped_for_markdown() -> None:
    shown = escape_markdown("<script>alert(1)</script> **bold** [x](javascript:alert(1)) $x$ :red[hi]")
    assert "<script>" not in shown and "**" not in shown and "](" not in shown and "$x$" not in shown
    assert (
        re.sub(r"\\(.)", r"\1", shown)
        == "<script>alert(1)</script> **bold** [x](javascript:alert(1)) $x$ :red[hi]"
    )


def test_no_page_renders_user_text_as_html() -> None:
    """Audit: no page may switch Streamlit's HTML escaping off (user text would become live HTML). The one
    exception, the frame's preload, sends a constant style rule and nothing else."""
    from pages import _preload

    files = [REPO / "app.py", *sorted((REPO / "pages").glob("*.py"))]
    offenders = [
        f"{f.name}:{n}"
        for f in files
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"unsafe_allow_html\s*=\s*True|st\.html\(|components\.v1\.html|components\.html\(", line)
    ]
    assert [o.split(":")[0] for o in offenders] == ["_preload.py"]  # one call there: st.html(HIDE)
    assert "st.html(HIDE)" in (REPO / "pages" / "_preload.py").read_text(encoding="utf-8")
    assert re.fullmatch(r"<style>\.st-key-[a-z-]+\{display:none\}</style>", _preload.HIDE)


@pytest.fixture(scope="module")
def sp_tokenizer() -> SentencePieceTokenizer:
    texts = ["the cat sat on the mat", "a dog ran in the park", "ein hund lief im park"] * 30
    return SentencePieceTokenizer.train(texts, vocab_size=300)


def test_odd_text_translates_with_byte_fallback(sp_tokenizer: SentencePieceTokenizer) -> None:
    cfg = ModelConfig(
        src_vocab_size=sp_tokenizer.vocab_size, tgt_vocab_size=sp_tokenizer.vocab_size, d_model=16, n_heads=4,
        n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=256,
    )  # fmt: skip
    model = Transformer(cfg).eval()
    for text in ["🍕 나는 <b>x</b> Привет", "a\u0301 e\u0300"]:
        cleaned = clean_sentence(text, HOSTED)
        fitted = fit_to_model(cleaned.text, sp_tokenizer, cfg.max_len, HOSTED)
        out = translate(model, sp_tokenizer, sp_tokenizer, fitted.text, max_len=5)
        assert len(out.src_pieces) == len(out.src_ids) and out.attention.cross[0].shape[-1] == len(
            out.src_ids
        )


def test_fit_to_model_cuts_whole_words_and_says_so() -> None:
    tok = SymbolTokenizer.from_symbols(list("abcdefgh"))
    text = " ".join("abcdefgh" * 3)  # 24 symbols
    assert fit_to_model("a b c", tok, max_len=64).notes == ()
    out = fit_to_model(text, tok, max_len=10)
    assert len(tok.encode(out.text)) == 9 and "at most 9 tokens" in out.notes[0]
    capped = fit_to_model(text, tok, max_len=64, limits=HostedLimits(max_sentence_tokens=5))
    assert len(tok.encode(capped.text)) == 5


# ---------------------------------------------------------------------------------------------
# Decoding parameters
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy, params, fragment",
    [
        ("temperature", {"temperature": 0}, "use greedy"),
        ("sample", {"temperature": -1.0}, "temperature must be between"),
        ("sample", {"temperature": float("nan")}, "temperature must be between"),
        ("top-p", {"top_p": 0}, "top_p must be between"),
        ("top-p", {"top_p": 1.5}, "top_p must be between"),
        ("top-k", {"top_k": 0}, "top_k must be between 1"),
        ("top-k", {"top_k": 2.5}, "whole number"),
        ("beam", {"beam_size": 0}, "beam_size must be between 1"),
        ("beam", {"beam_size": 1000}, "beam_size must be between 1"),
        ("beam", {"beam_size": "four"}, "must be a number"),
        ("greedy", {"max_len": 0}, "max_len must be between 1"),
        ("greedy", {"temperature": 0.5}, "not a setting of greedy"),
        ("nucleus", {}, "unknown decoding strategy"),
    ],
)
def test_decoding_params_out_of_range(strategy: str, params: dict, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        check_decoding_params(strategy, params, HOSTED)


def test_decoding_params_in_range_are_coerced() -> None:
    assert check_decoding_params("beam", {"beam_size": "4", "alpha": 0.6}) == {"beam_size": 4, "alpha": 0.6}
    assert check_decoding_params("sample", {"top_k": 0, "top_p": 1.0, "temperature": "0.7"}) == {
        "top_k": 0, "top_p": 1.0, "temperature": 0.7,
    }  # fmt: skip
    assert check_decoding_params("beam", {"beam_size": 16}, HostedLimits.local())["beam_size"] == 16
    with pytest.raises(InputError):
        check_decoding_params("beam", {"beam_size": 16}, HOSTED)  # hosted caps the beam at 8


# ---------------------------------------------------------------------------------------------
# Uploaded corpora
# ---------------------------------------------------------------------------------------------


def test_parallel_upload_ok_with_bom_and_crlf() -> None:
    pairs = parse_uploaded_parallel("\ufeffHello\r\nGood day\r\n".encode(), b"Hallo\nGuten Tag\n", HOSTED)
    assert pairs == [Pair("Hello", "Hallo"), Pair("Good day", "Guten Tag")]


def test_non_utf8_upload_names_file_and_line() -> None:
    with pytest.raises(InputError, match=r"de\.txt is not UTF-8 text \(bad byte at line 2\)"):
        parse_uploaded_parallel(b"a\nb\n", b"ok\n\xff\xfe bad\n", HOSTED, "en.txt", "de.txt")


def test_mismatched_line_counts_name_the_uploads() -> None:
    with pytest.raises(InputError, match=r"en\.txt has 3 lines but de\.txt has 2") as info:
        parse_uploaded_parallel(b"a\nb\nc\n", b"x\ny\n", HOSTED, "en.txt", "de.txt")
    assert "/tmp" not in str(info.value) and "upload0" not in str(info.value)


@pytest.mark.parametrize("empty", [b"", b"   \n\n", b"\xef\xbb\xbf"])
def test_empty_upload_is_refused(empty: bytes) -> None:
    with pytest.raises(InputError, match="en.txt is empty"):
        parse_uploaded_parallel(empty, b"x\n", HOSTED, "en.txt", "de.txt")


def test_oversized_upload_states_the_limit() -> None:
    big = b"word " * (HOSTED.max_upload_bytes // 5 + 10)
    with pytest.raises(InputError, match=r"uploads may be at most 2\.0 MB"):
        parse_uploaded_tsv(big, HOSTED)
    with pytest.raises(InputError, match="at most 3 lines"):
        decode_upload(b"a\nb\nc\nd\n", "x.txt", HostedLimits(max_upload_lines=3))


def test_binary_upload_is_refused() -> None:
    with pytest.raises(InputError, match="binary"):
        decode_upload(b"PK\x03\x04\x00\x00", "corpus.tsv", HOSTED)


def test_tsv_without_tabs_is_refused_with_the_line() -> None:
    with pytest.raises(InputError, match=r"pairs\.tsv, line 2: no tab found"):
        parse_uploaded_tsv(b"Hi\tHallo\nno tabs here\n", HOSTED, "pairs.tsv")
    assert parse_uploaded_tsv(b"Hi\tHallo\tCC-BY\n\nBye\tTschuess\n", HOSTED) == [
        Pair("Hi", "Hallo"), Pair("Bye", "Tschuess"),
    ]  # fmt: skip


def test_upload_with_only_blank_sides_is_refused() -> None:
    with pytest.raises(InputError, match="no sentence pairs"):
        parse_uploaded_parallel(b"a\n \n", b" \nb\n", HOSTED)


# ---------------------------------------------------------------------------------------------
# Checkpoint names, model size, training bounds
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("My run #2", "My-run-2"),
        ("../../etc/passwd", "etc-passwd"),
        ("/abs/olute", "abs-olute"),
        ("..", None),
        (".hidden", "hidden"),
        ("a/../../b", "a-.-.-b"),
        ("Über straße", "Uber-strae"),
        ("C:\\Windows\\x", "C-Windows-x"),
        ("x" * 300, "x" * 100),
        ("日本語", None),
    ],
)
def test_checkpoint_names_never_escape(tmp_path: Path, raw: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(InputError, match="letters or digits"):
            checkpoint_name(raw)
        return
    assert checkpoint_name(raw) == expected
    path = checkpoint_path(tmp_path, raw)
    assert path.parent == tmp_path.resolve() and path.name == expected


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True},
        {"share_embeddings": False, "src_vocab_size": 23, "tgt_vocab_size": 31},
        {"share_embeddings": False, "norm_first": True, "src_vocab_size": 7, "tgt_vocab_size": 50},
        {"n_encoder_layers": 3, "n_decoder_layers": 2, "d_model": 24, "n_heads": 2, "d_ff": 40},
        {"n_encoder_layers": 1, "n_decoder_layers": 4, "d_ff": 8},
    ],
)
def test_parameter_count_matches_the_built_model(overrides: dict) -> None:
    config = tiny_config(**overrides)
    assert count_parameters(config) == Transformer(config).num_parameters()


def test_parameter_count_builds_no_model(monkeypatch) -> None:
    def refuse(self, config) -> None:
        raise AssertionError("count_parameters built a model")

    monkeypatch.setattr(Transformer, "__init__", refuse)
    assert count_parameters(tiny_config()) > 0


def test_model_size_is_bounded_in_hosted_mode() -> None:
    small = tiny_config(d_model=32, d_ff=64)
    assert check_model_config(small, HOSTED) == Transformer(small).num_parameters()
    with pytest.raises(InputError, match="d_model 512 is above the limit of 128"):
        check_model_config(ModelConfig(src_vocab_size=40, tgt_vocab_size=40), HOSTED)
    wide = tiny_config(src_vocab_size=8000, tgt_vocab_size=8000, d_model=128, n_heads=8, n_encoder_layers=2,
                       n_decoder_layers=2, d_ff=512, max_len=128, share_embeddings=False)  # fmt: skip
    with pytest.raises(InputError, match=r"parameters; the limit here is 2,000,000"):
        check_model_config(wide, HOSTED)
    check_model_config(wide, HostedLimits.local())


def test_training_bounds_steps_time_and_threads() -> None:
    with pytest.raises(InputError, match="5000 steps is above the limit of 2000"):
        bounded_train_config(TrainConfig(steps=5000), HOSTED)
    bounded = bounded_train_config(TrainConfig(steps=100, time_limit_s=1000.0, threads=8), HOSTED)
    assert bounded.steps == 100 and bounded.time_limit_s == 300.0 and bounded.threads == 1
    assert bounded_train_config(TrainConfig(steps=100), HOSTED).time_limit_s == 300.0
    local = bounded_train_config(TrainConfig(steps=100, threads=None), HostedLimits.local())
    assert local.time_limit_s is None and local.threads is None
    assert torch.get_num_threads() >= 1


# ---------------------------------------------------------------------------------------------
# Messages built from user input: every error text shows its fields literally (st.error renders markdown)
# ---------------------------------------------------------------------------------------------

HOSTILE = "![](//127.1:8999/)[Login](//evil.example)<script>alert(1)</script>**b** _i_ $x$ `c` # h"


def _fields(template: str) -> dict[str, object]:
    """A value for each placeholder of a template: a number where it has a format spec, else the hostile text."""
    import string

    return {
        name: 12345 if spec else HOSTILE for _, name, spec, _ in string.Formatter().parse(template) if name
    }


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_error_message_shows_user_text_as_text(lang: str) -> None:
    from visformer import i18n
    from visformer.classroom.inputs import error_markdown

    keys = [
        k
        for k, text in i18n.catalog("en").items()
        if k.startswith("error.") and HOSTILE in _fields(text).values()
    ]
    assert len(keys) > 40
    for key in keys:
        shown = error_markdown(InputError(key, **_fields(i18n.catalog("en")[key])), lang)
        kinds, text = rendered(shown)
        assert kinds <= {"paragraph_open", "inline", "paragraph_close", "text", "softbreak"}, (
            key,
            kinds,
            shown,
        )
        assert HOSTILE in text, (key, shown, text)  # every character of the user's text, shown as typed


def test_error_markdown_hides_paths_and_unexpected_errors(tmp_path: Path) -> None:
    from visformer.classroom.inputs import error_markdown, hide_paths

    root = tmp_path / "user_checkpoints"
    inside = f"{root}/s-0123abcd/.my-run.tmp-77-0a1b2c3d/tokenizer"
    assert (
        hide_paths(f"cannot load {inside} ({root})", [str(root)])
        == "cannot load tokenizer (user_checkpoints)"
    )
    shown = error_markdown(RecursionError("maximum recursion depth exceeded"), "en", roots=[str(root)])
    assert shown == "An unexpected error \\(RecursionError\\)\\. The server's log has the details" or (
        "unexpected error" in shown and "recursion depth" not in shown
    )
    assert "s-0123abcd" not in error_markdown(OSError(f"No such file: {inside}"), "en", roots=[str(root)])
