"""The RNN vs Transformer page in AppTest (English and Korean): both models on one input, BLEU by length."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers.app import assert_no_raw_key, charts, run_app
from visformer import i18n

PAGE = "pages/rnn_vs_transformer.py"
RAW_KEY = re.compile(r"\bmodels\.cmp\.[a-z_.]+\b")
pytestmark = pytest.mark.usefixtures("shipped_checkpoints")


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_rnn_vs_transformer_scores_both_models_on_the_same_input(lang: str) -> None:
    at = run_app(PAGE, lang=lang, cmp_rnn="reverse-rnn-bahdanau")
    assert at.title[0].value == i18n.t("models.cmp.page_title", lang)
    assert at.selectbox(key="cmp_rnn").value == "reverse-rnn-bahdanau"
    assert [s.value for s in at.subheader] == ["reverse-rnn-bahdanau", "reverse"]
    assert at.text_input(key="cmp_sentence").label == i18n.t("models.cmp.sentence_task", lang)
    correct = [m.value for m in at.metric if m.label == i18n.t("models.cmp.correct", lang)]
    assert correct == [i18n.t("models.cmp.yes", lang)] * 2
    assert len(charts(at)) == 2
    assert i18n.t("models.cmp.rnn_only_cross", lang) in [c.value for c in at.caption]
    assert_no_raw_key(at, RAW_KEY)
    at.text_input(key="cmp_sentence").set_value("a b c d e").run()
    assert not at.exception
    assert any("e d c b a" in m.value for m in at.markdown)
    at.selectbox(key="cmp_rnn").set_value("reverse-rnn-none").run()
    assert not at.exception and len(charts(at)) == 1  # the Transformer's map only
    assert i18n.t("models.cmp.no_attention", lang) in [i.value for i in at.info]


def test_a_link_restores_the_comparison_view() -> None:
    at = run_app(PAGE, cmp_rnn="reverse-rnn-none", cmp_sentence="a b c", cmp_layer="0")
    assert at.selectbox(key="cmp_rnn").value == "reverse-rnn-none"
    assert at.text_input(key="cmp_sentence").value == "a b c"
    assert at.query_params["cmp_rnn"] == "reverse-rnn-none" and at.query_params["cmp_layer"] == "0"
    at = run_app(PAGE, cmp_rnn="no-such-model", cmp_layer="99")  # falls back, no exception
    assert at.selectbox(key="cmp_rnn").value in at.selectbox(key="cmp_rnn").options


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_rnn_vs_transformer_on_multi30k_shows_test_bleu_and_the_bottleneck_by_length(lang: str) -> None:
    at = run_app(PAGE, lang=lang)
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
    drawn = charts(at)
    assert len(drawn) == 3  # the RNN's map, the Transformer's map, BLEU by length
    bars = json.loads(drawn[-1].proto.spec)["data"]
    assert [b["name"] for b in bars] == [
        "multi30k-en-de-rnn-bahdanau",
        "multi30k-en-de-rnn-none",
        "multi30k-en-de",
    ]
    assert all(len(b["x"]) == 5 for b in bars)
    assert i18n.t("models.cmp.length_lesson", lang) in [c.value for c in at.caption]
    assert_no_raw_key(at, RAW_KEY)
    at.selectbox(key="cmp_rnn").set_value("multi30k-en-de-rnn-none").run()
    assert not at.exception and len(charts(at)) == 2  # no RNN map: the Transformer's and the bars
    assert i18n.t("models.cmp.no_attention", lang) in [i.value for i in at.info]
