"""The Encoder-only vs decoder-only page in AppTest (English and Korean): the two masks, fill a mask, continue."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.app import assert_no_raw_key, charts, run_app
from visformer import i18n
from visformer.classroom.inputs import escape_markdown

PAGE = "pages/language_models.py"
RAW_KEY = re.compile(r"\bmodels\.lm\.[a-z_.]+\b")
pytestmark = pytest.mark.usefixtures("shipped_checkpoints")


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_language_models_contrast_the_two_masks_fill_a_mask_and_continue(lang: str) -> None:
    at = run_app(PAGE, lang=lang)
    assert at.title[0].value == i18n.t("models.lm.page_title", lang)
    weights = {m.label: float(m.value) for m in at.metric}
    assert weights[i18n.t("models.lm.future_encoder", lang)] > 0.05  # bidirectional
    assert weights[i18n.t("models.lm.future_decoder", lang)] == 0.0  # causal: nothing after the query
    assert len(charts(at)) == 2 + 2 + 2  # side by side, every layer and head, head statistics
    guesses = at.dataframe[0].value  # the example's [MASK]
    assert len(guesses) == 5 and guesses[i18n.t("models.lm.col_prob", lang)].is_monotonic_decreasing
    steps = at.dataframe[-1].value
    assert 1 <= len(steps) <= 12
    assert_no_raw_key(at, RAW_KEY)

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
    at = run_app(PAGE, lang="ko")
    assert at.warning[0].value == i18n.t("models.lm.missing", "ko", names="lm-encoder-en, lm-decoder-en")


def test_a_link_restores_the_language_model_view_and_the_page_writes_it_back() -> None:
    link = {"lm_sentence": "Two dogs are playing in the snow.", "lm_hide": "6", "lm_layer": "0", "lm_head": "1",
            "lm_strategy": "sampling", "lm_temperature": "1.5", "lm_seed": "3", "lm_max_new": "5"}  # fmt: skip
    at = run_app(PAGE, **link)
    assert at.text_input(key="lm_sentence").value == link["lm_sentence"]
    assert at.selectbox(key="lm_hide").value == 6 and at.selectbox(key="lm_head").value == 1
    assert at.select_slider(key="lm_layer").value == 0  # shown as layer 1
    assert at.radio(key="lm_strategy").value == "sampling" and at.slider(key="lm_temperature").value == 1.5
    assert len(at.dataframe[-1].value) <= 5
    written = {k: v for k, v in at.query_params.items() if k.startswith("lm_")}
    assert written == link
    at.select_slider(key="lm_layer").set_value(1).run()
    assert at.query_params["lm_layer"] == "1"
