"""AppTest of the model-family pages (shipped checkpoints), in English and Korean: no exception, no raw key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from visformer import i18n
from visformer.classroom.inputs import escape_markdown

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints"
TIMEOUT = 180  # seconds per script run on a busy 2-core machine, not a performance limit
LM_PAGE, CX_PAGE, CMP_PAGE = (
    "pages/language_models.py",
    "pages/why_self_attention.py",
    "pages/rnn_vs_transformer.py",
)
RAW_KEY = re.compile(r"\bmodels\.(?:lm|cx|cmp)\.[a-z_.]+\b")


@pytest.fixture(autouse=True)
def shipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The shipped checkpoints, and an empty folder for the user's."""
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(SHIPPED))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(tmp_path))


def open_page(page: str, **params: str) -> AppTest:
    """The app with these query parameters, switched to `page`; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> list[str]:
    """Every markdown, caption, info, warning, metric label and title on the page."""
    found = [e.value for group in (at.markdown, at.caption, at.info, at.warning, at.title, at.header, at.subheader)
             for e in group]  # fmt: skip
    return found + [m.label for m in at.metric]


def assert_no_raw_key(at: AppTest) -> None:
    """No text on the page is an untranslated key."""
    raw = [t for t in texts(at) if RAW_KEY.search(str(t))]
    assert not raw, raw


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_why_self_attention_shows_table_1_and_the_measurements(lang: str) -> None:
    at = open_page(CX_PAGE, lang=lang)
    assert at.title[0].value == i18n.t("models.cx.page_title", lang)
    table, measured = at.table[0].value, at.table[1].value  # static tables: they wrap, never scroll sideways
    assert len(table) == 4 and i18n.t("models.cx.col_path", lang) in table.columns
    assert list(measured[i18n.t("models.cx.col_n", lang)]) == [8, 16, 32, 64, 128, 256, 512]
    ns = [8, 16, 32, 64, 128, 256, 512]
    assert list(measured[i18n.t("models.cx.col_steps", lang)]) == [f"1 / {n}" for n in ns]  # O(1) vs O(n)
    assert list(measured[i18n.t("models.cx.col_paths", lang)]) == [f"1 / {n}" for n in ns]
    assert len(at.get("plotly_chart")) == 3
    assert_no_raw_key(at)
    if lang == "ko":
        assert "셀프 어텐션" in at.markdown[0].value
    at.button(key="cx_remeasure").click().run()
    assert not at.exception and len(at.table[1].value) == 7


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_rnn_vs_transformer_scores_both_models_on_the_same_input(lang: str) -> None:
    at = open_page(CMP_PAGE, lang=lang, cmp_rnn="reverse-rnn-bahdanau")
    assert at.title[0].value == i18n.t("models.cmp.page_title", lang)
    assert at.selectbox(key="cmp_rnn").value == "reverse-rnn-bahdanau"
    assert [s.value for s in at.subheader] == ["reverse-rnn-bahdanau", "reverse"]
    assert at.text_input(key="cmp_sentence").label == i18n.t("models.cmp.sentence_task", lang)
    correct = [m.value for m in at.metric if m.label == i18n.t("models.cmp.correct", lang)]
    assert correct == [i18n.t("models.cmp.yes", lang)] * 2
    assert len(at.get("plotly_chart")) == 2
    assert i18n.t("models.cmp.rnn_only_cross", lang) in [c.value for c in at.caption]
    assert_no_raw_key(at)
    at.text_input(key="cmp_sentence").set_value("a b c d e").run()
    assert not at.exception
    assert any("e d c b a" in m.value for m in at.markdown)
    at.selectbox(key="cmp_rnn").set_value("reverse-rnn-none").run()
    assert not at.exception and len(at.get("plotly_chart")) == 1  # the Transformer's map only
    assert i18n.t("models.cmp.no_attention", lang) in [i.value for i in at.info]


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_language_models_contrast_the_two_masks_fill_a_mask_and_continue(lang: str) -> None:
    at = open_page(LM_PAGE, lang=lang)
    assert at.title[0].value == i18n.t("models.lm.page_title", lang)
    weights = {m.label: float(m.value) for m in at.metric}
    assert weights[i18n.t("models.lm.future_encoder", lang)] > 0.05  # bidirectional
    assert weights[i18n.t("models.lm.future_decoder", lang)] == 0.0  # causal: nothing after the query
    assert len(at.get("plotly_chart")) == 2 + 2 + 2  # side by side, every layer and head, head statistics
    guesses = at.dataframe[0].value  # the example's [MASK]
    assert len(guesses) == 5 and guesses[i18n.t("models.lm.col_prob", lang)].is_monotonic_decreasing
    steps = at.dataframe[-1].value
    assert 1 <= len(steps) <= 12
    assert_no_raw_key(at)

    at.text_input(key="lm_sentence").set_value("Two dogs are playing in the snow.").run()
    assert not at.exception
    assert i18n.t("models.lm.no_mask", lang) in [i.value for i in at.info]  # nothing hidden yet
    at.selectbox(key="lm_hide").set_value(6).run()  # word 6: "snow"
    assert not at.exception
    hidden = escape_markdown("Two dogs are playing in the [MASK].")
    assert i18n.t("models.lm.what_it_sees", lang, text=hidden) in [c.value for c in at.caption]
    assert len(at.dataframe[0].value) == 5

    at.radio(key="lm_strategy").set_value("sampling").run()
    at.slider(key="lm_temperature").set_value(1.5).run()
    assert not at.exception
    assert 1 <= len(at.dataframe[-1].value) <= 12


def test_language_models_page_says_so_when_the_checkpoints_are_missing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(tmp_path))
    at = open_page(LM_PAGE, lang="ko")
    assert at.warning[0].value == i18n.t("models.lm.missing", "ko", names="lm-encoder-en, lm-decoder-en")


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("name", ["reverse-rnn-bahdanau", "reverse-rnn-none"])
def test_an_rnn_on_the_attention_page_says_it_has_only_cross_attention(name: str, lang: str) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["checkpoint"], at.query_params["lang"] = name, lang
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert at.info[0].value == i18n.t("attention.rnn_only_cross", lang)
    if name == "reverse-rnn-none":  # no attention at all: no map, and the page says why
        assert at.warning[0].value == i18n.t("attention.rnn_no_attention", lang)
    else:
        assert not at.warning
    assert not at.radio  # no choice of attention kinds: an RNN has one


def test_a_link_restores_the_language_model_view_and_the_page_writes_it_back() -> None:
    link = {"lm_sentence": "Two dogs are playing in the snow.", "lm_hide": "6", "lm_layer": "0", "lm_head": "1",
            "lm_strategy": "sampling", "lm_temperature": "1.5", "lm_seed": "3", "lm_max_new": "5"}  # fmt: skip
    at = open_page(LM_PAGE, **link)
    assert at.text_input(key="lm_sentence").value == link["lm_sentence"]
    assert at.selectbox(key="lm_hide").value == 6 and at.selectbox(key="lm_head").value == 1
    assert at.select_slider(key="lm_layer").value == 0  # shown as layer 1
    assert at.radio(key="lm_strategy").value == "sampling" and at.slider(key="lm_temperature").value == 1.5
    assert len(at.dataframe[-1].value) <= 5
    written = {k: v for k, v in at.query_params.items() if k.startswith("lm_")}
    assert written == link
    at.select_slider(key="lm_layer").set_value(1).run()
    assert at.query_params["lm_layer"] == "1"


def test_a_link_restores_the_comparison_view() -> None:
    at = open_page(CMP_PAGE, cmp_rnn="reverse-rnn-none", cmp_sentence="a b c", cmp_layer="0")
    assert at.selectbox(key="cmp_rnn").value == "reverse-rnn-none"
    assert at.text_input(key="cmp_sentence").value == "a b c"
    assert at.query_params["cmp_rnn"] == "reverse-rnn-none" and at.query_params["cmp_layer"] == "0"
    at = open_page(CMP_PAGE, cmp_rnn="no-such-model", cmp_layer="99")  # falls back, no exception
    assert at.selectbox(key="cmp_rnn").value in at.selectbox(key="cmp_rnn").options


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_rnn_vs_transformer_on_multi30k_shows_test_bleu_and_the_bottleneck_by_length(lang: str) -> None:
    at = open_page(CMP_PAGE, lang=lang)
    assert at.selectbox(key="cmp_rnn").value == "multi30k-en-de-rnn-bahdanau"  # real sentences first
    assert [s.value for s in at.subheader] == ["multi30k-en-de-rnn-bahdanau", "multi30k-en-de"]
    assert at.text_input(key="cmp_sentence").value.startswith("A little girl")
    assert at.text_input(key="cmp_sentence").label == i18n.t(
        "models.cmp.sentence", lang
    )  # not "toy task: letters"
    labels = [m.label for m in at.metric]
    assert (
        labels.count(i18n.t("models.cmp.test_bleu", lang)) == 2
        and i18n.t("models.cmp.correct", lang) not in labels
    )
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # the RNN's map, the Transformer's map, BLEU by length
    bars = json.loads(charts[-1].proto.spec)["data"]
    assert [b["name"] for b in bars] == [
        "multi30k-en-de-rnn-bahdanau",
        "multi30k-en-de-rnn-none",
        "multi30k-en-de",
    ]
    assert all(len(b["x"]) == 5 for b in bars)
    assert i18n.t("models.cmp.length_lesson", lang) in [c.value for c in at.caption]
    assert_no_raw_key(at)
    at.selectbox(key="cmp_rnn").set_value("multi30k-en-de-rnn-none").run()
    assert not at.exception and len(at.get("plotly_chart")) == 2  # no RNN map: the Transformer's and the bars
    assert i18n.t("models.cmp.no_attention", lang) in [i.value for i in at.info]
