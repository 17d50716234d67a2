"""The Positional encoding page and its figures in Korean and English; the wavelength marks are labelled."""

from __future__ import annotations

import pytest

from tests.helpers.app import PE, array, chart_by_title, run_app, specs, title
from visformer import i18n
from visformer.explain import analysis as an
from visformer.explain import positional


def hangul(text: str) -> bool:
    return any("가" <= ch <= "힣" for ch in text)


@pytest.mark.usefixtures("env")
def test_pe_page_in_korean_has_korean_text_titles_and_axes() -> None:
    at = run_app(PE, lang="ko")
    assert at.title[0].value == "포지셔널 인코딩"
    assert [s.value for s in at.subheader] == [i18n.t(k, "ko") for k in ("pe.binary_title", "pe.rotation_title",
                                                                           "pe.balance_title")]  # fmt: skip
    assert all(hangul(s.label) for s in at.slider) and hangul(at.metric[0].label)
    assert chart_by_title(at, "포지셔널 인코딩, d_model = 64, 위치 100개")
    for spec in specs(at):  # every figure's title or axis speaks Korean (the binary one: its subplot titles)
        texts = [title(spec), spec["layout"].get("xaxis", {}).get("title", {}).get("text", "")]
        texts += [a.get("text", "") for a in spec["layout"].get("annotations", [])]
        assert any(hangul(t) for t in texts), texts
    assert "2i" in at.markdown[0].value or any("트랜스포머" in m.value for m in at.markdown)
    at = run_app(PE, lang="en")
    assert at.title[0].value == "Positional encoding"
    assert chart_by_title(at, "Positional encoding, d_model = 64")


def test_wavelength_marks_are_labelled_in_both_languages() -> None:
    sin, cos, wl = an.pe_pair(100, 64, 0)  # wavelength 2π: 15 marks in 100 positions
    for lang in ("en", "ko"):
        fig = positional.pe_pair_figure(sin, cos, wl, 0, 64, lang=lang)
        labels = [a.text for a in fig.layout.annotations]
        assert labels[0] == "λ = 6.3" and "2λ" in labels and 1 < len(labels) <= 8  # not crowded
        assert len([s for s in fig.layout.shapes if s.type == "line"]) == 15  # every mark still drawn
    assert (
        "dashed lines: every full wavelength"
        in positional.pe_pair_figure(sin, cos, wl, 0, 64).layout.title.text
    )
    few = positional.pe_pair_figure(*an.pe_pair(100, 64, 4), 4, 64)  # wavelength 19.9: 4 marks, all labelled
    assert [a.text for a in few.layout.annotations] == ["λ = 19.9", "2λ", "3λ", "4λ"]


def test_pe_figures_default_to_english() -> None:
    pe = an.pe_matrix(20, 8)
    title = positional.pe_heatmap(pe).layout.title.text
    assert title == "Positional encoding, d_model = 8,<br>20 positions"  # wrapped at its comma to fit a phone
    assert positional.pe_heatmap(pe, lang="ko").layout.xaxis.title.text == "차원 (짝수 = sin, 홀수 = cos)"
    assert positional.norms_figure(pe[:, 0], 2.0, lang="ko").layout.title.text.startswith("단어 임베딩")


def test_pe_page_renders_and_every_slider_changes_a_chart(env) -> None:
    at = run_app(PE)
    assert at.title[0].value == "Positional encoding"
    assert at.latex, "the formula is missing"
    assert any("max |M_k" in m.label for m in at.metric)
    assert float(next(m for m in at.metric if "max |M_k" in m.label).value) < 1e-5
    assert chart_by_title(at, "Word embeddings")  # balance with the loaded model's embeddings
    changes = {
        "pe_d": (32, "Positional encoding, d_model = 32"),
        "pe_len": (50, "Positional encoding, d_model = 32, 50 positions"),
        "pe_pair": (3, "Pair i = 3: dimensions 6 and 7"),
        "pe_pos": (7, "PE(7)"),
        "pe_k": (9, "Pair i = 3: a rotation"),
    }
    for key, (value, expected) in changes.items():
        at.slider(key=key).set_value(value).run()
        assert not at.exception, key
        assert chart_by_title(at, expected), key
        assert at.query_params[key] == str(value)
    assert any("M_{9}^{(i=3)}" in latex.value for latex in at.latex)


def test_pe_page_url_restores_sliders_and_charts(env) -> None:
    at = run_app(PE, pe_d="16", pe_len="40", pe_pair="2", pe_pos="12", pe_k="3")
    values = [at.slider(key=k).value for k in ("pe_d", "pe_len", "pe_pair", "pe_pos", "pe_k")]
    assert values == [16, 40, 2, 12, 3]
    heatmap = chart_by_title(at, "Positional encoding, d_model = 16, 40 positions")
    assert array(heatmap["data"][0]["z"]).shape == (40, 16)
    assert chart_by_title(at, "Pair i = 2: dimensions 4 and 5")
    assert chart_by_title(at, "PE(12)")
    assert chart_by_title(at, "Pair i = 2: a rotation")
    assert any("M_{3}^{(i=2)}" in latex.value for latex in at.latex)
    assert not [latex for column in at.columns for latex in column.latex]  # full width: a column clipped it
    assert dict(at.query_params) == {
        "checkpoint": "tiny-reverse", "pe_d": "16", "pe_len": "40", "pe_pair": "2", "pe_pos": "12", "pe_k": "3"
    }  # fmt: skip
    at = run_app(PE, pe_d="16", pe_pair="500", pe_pos="x", pe_k="0")
    assert at.slider(key="pe_pair").value == 7  # clipped to the last pair of d_model = 16
    assert at.slider(key="pe_pos").value == 10 and at.slider(key="pe_k").value == 1
