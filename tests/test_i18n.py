"""Korean and English interface text: complete dictionaries, fallbacks, the browser locale."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from visformer import i18n

REPO = Path(__file__).resolve().parents[1]
KEY = re.compile(r"""["']((?:lesson|page|lang)\.[a-z_.]+[a-z_])["']""")


def test_every_key_exists_in_both_languages_with_the_same_placeholders() -> None:
    assert i18n.catalog_problems() == []
    assert set(i18n.catalog("en")) == set(i18n.catalog("ko"))
    for key, text in i18n.catalog("en").items():
        assert text.strip() and i18n.catalog("ko")[key].strip(), key
        assert i18n.placeholders(text) == i18n.placeholders(i18n.catalog("ko")[key]), key


def test_the_check_finds_a_missing_key_an_empty_text_and_different_placeholders(monkeypatch) -> None:
    en = {"a": "one {n}", "b": "two", "c": "three {x}"}
    ko = {"a": "하나 {m}", "c": " "}
    monkeypatch.setattr(i18n, "catalog", lambda lang: {"en": en, "ko": ko}[lang])
    problems = i18n.catalog_problems()
    assert "b: missing in ko" in problems
    assert "c: empty in ko" in problems
    assert any(p.startswith("a: placeholders differ") for p in problems)


class AnyValue:
    """A format value that accepts any format spec ({n:,}, {x:.2f}, {name})."""

    def __format__(self, spec: str) -> str:
        return "X"


def test_every_text_formats_with_its_own_placeholders() -> None:
    for lang in i18n.LANGS:
        for key, text in i18n.catalog(lang).items():
            i18n.t(key, lang, **dict.fromkeys(i18n.placeholders(text), AnyValue()))  # no stray braces


def test_lookup_formats_falls_back_to_english_and_refuses_unknown_keys(monkeypatch) -> None:
    assert i18n.t("lesson.step_of", "ko", i=3, n=12) == "12단계 중 3단계"
    assert i18n.t("lesson.step_of", "en", i=3, n=12) == "Step 3 of 12"
    assert i18n.t("lesson.step_of", "fr", i=3, n=12) == "Step 3 of 12"  # unknown language: English
    only_en = {**i18n.catalog("en"), "only.english": "English only"}
    monkeypatch.setattr(i18n, "catalog", lambda lang: only_en if lang == "en" else {})
    assert i18n.t("only.english", "ko") == "English only"
    with pytest.raises(i18n.MissingTextError, match="no interface text with key 'no.such.key'"):
        i18n.t("no.such.key", "ko")


@pytest.mark.parametrize(
    ("locale", "lang"),
    [("ko-KR", "ko"), ("ko", "ko"), ("ko_KR", "ko"), ("KO-kr", "ko"), ("en-US", "en"), ("de-DE", "en"),
     (None, "en"), ("", "en")],
)  # fmt: skip
def test_language_from_the_browser_locale(locale, lang) -> None:
    assert i18n.language_from_locale(locale) == lang


def test_every_key_written_in_the_code_exists() -> None:
    used = set()
    for path in (REPO / "pages" / "lesson.py", REPO / "visformer" / "explain" / "lesson.py"):
        used |= {k for k in KEY.findall(path.read_text(encoding="utf-8")) if not k.endswith(".")}
    assert used, "the pattern found no keys"
    missing = sorted(k for k in used if not i18n.has(k))
    assert missing == []


def test_the_dictionaries_are_valid_utf8_json_with_hangul() -> None:
    ko = json.loads((i18n.LOCALES / "ko.json").read_text(encoding="utf-8"))
    assert any(re.search("[가-힣]", text) for text in ko.values())
    for term in ("포지셔널 인코딩", "셀프 어텐션", "마스크드 셀프 어텐션", "크로스 어텐션", "멀티 헤드", "스케일드 닷 프로덕트",
                 "레이어 정규화", "잔차 연결", "피드 포워드", "라벨 스무딩", "빔 서치"):  # fmt: skip
        assert any(term in text for text in ko.values()), term


# ---------------------------------------------------------------------------------------------
# Refusals raised by the package, in the reader's language
# ---------------------------------------------------------------------------------------------

HANGUL = re.compile("[가-힣]")
RAISED_KEY = re.compile(r"""(?:Error|Localized)\(\s*["']([a-z_]+\.[a-z_.]+)["']""")


def test_every_key_an_error_is_raised_with_exists() -> None:
    used = set()
    for path in (REPO / "visformer").rglob("*.py"):
        used |= set(RAISED_KEY.findall(path.read_text(encoding="utf-8")))
    assert len(used) > 40, "the pattern found too few keys"
    assert sorted(k for k in used if not i18n.has(k)) == []


def test_a_refusal_is_english_by_default_and_korean_on_request() -> None:
    from visformer.classroom.inputs import InputError, clean_sentence

    with pytest.raises(InputError) as caught:
        clean_sentence("   ")
    assert str(caught.value) == "there is nothing to translate: type a sentence first"  # API and CLI: English
    assert i18n.error_text(caught.value, "ko") == "번역할 문장이 없습니다: 먼저 문장을 입력하세요"
    assert i18n.error_text(ValueError("plain"), "ko") == "plain"  # a library's message stands as it is


def test_fields_that_are_texts_follow_the_language() -> None:
    from visformer.classroom.hosting import HostedLimits
    from visformer.classroom.inputs import InputError, check_model_config
    from visformer.config import ModelConfig

    big = ModelConfig(src_vocab_size=100, tgt_vocab_size=100, d_model=64, d_ff=128, n_encoder_layers=40)
    with pytest.raises(InputError) as caught:
        check_model_config(big, HostedLimits.hosted())
    assert str(caught.value).startswith("encoder layers 40 is above the limit")
    assert caught.value.in_language("ko").startswith("인코더 층 수 40은(는)")


def test_passing_an_error_on_keeps_its_key_and_renames_its_fields() -> None:
    from visformer.classroom.inputs import parse_uploaded_parallel

    with pytest.raises(ValueError) as caught:
        parse_uploaded_parallel(b"a\nb\n", b"c\n", src_name="train.en", tgt_name="train.de")
    korean = i18n.error_text(caught.value, "ko")
    assert "train.en" in korean and "train.de" in korean and "upload" not in korean and HANGUL.search(korean)
    assert "train.en has 2 lines but train.de has 1" in str(caught.value)


def test_a_keyed_error_with_an_unknown_key_is_a_bug_not_a_message() -> None:
    with pytest.raises(i18n.MissingTextError):
        i18n.TextError("error.no_such_key", n=1)


def test_decoding_strategy_names_are_translated_and_parameters_keep_their_code_names() -> None:
    from visformer.explain.decoding import params_label

    assert params_label("beam", {"beam_size": 4}) == "beam (beam_size=4)"
    assert params_label("beam", {"beam_size": 4}, "ko") == "빔 서치 (beam_size=4)"
    assert params_label("greedy", {}, "ko") == "그리디"


def test_korean_emphasis_closes_where_markdown_can_close_it() -> None:
    # CommonMark closes * or ** only when it follows a letter or is followed by a space or punctuation:
    # "*체크포인트(모델)*에서" stays literal asterisks on screen.
    stuck = re.compile(r"""[)\]'"”’.,!?:;`]\*+[가-힣]""")
    found = [
        (k, v[m.start() - 10 : m.end() + 5]) for k, v in i18n.catalog("ko").items() for m in stuck.finditer(v)
    ]
    assert found == []


def test_the_korean_navigation_names_every_page_in_korean() -> None:
    pages = [k for k in i18n.catalog("ko") if k.startswith("page.") and k.count(".") == 1]
    assert "page.rnn_vs_transformer" in pages
    assert [
        k for k in pages if not re.search("[가-힣]", i18n.t(k, "ko"))
    ] == []  # "RNN vs Transformer" was English
