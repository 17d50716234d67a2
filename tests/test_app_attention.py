"""The Attention page in AppTest: every view and widget, URL state, row labels, numbering from 1, head average in
the grid, the first head shown, the ablation note, the "Follow a word" view, the confidence cue, and Korean."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages import _views as schema
from tests.helpers.app import (
    APP,
    ATTENTION_TAB_LABELS,
    ATTENTION_TABS,
    PE,
    TIMEOUT,
    array,
    chart_by_title,
    markdown,
    open_tab,
    run_app,
    specs,
    title,
)
from visformer import i18n
from visformer.checkpoint import load_checkpoint
from visformer.classroom.inputs import escape_markdown
from visformer.decoding import translate
from visformer.explain import analysis as an
from visformer.explain import examples as example_text
from visformer.explain import views as sup
from visformer.explain.attention import short_label
from visformer.explain.style import escape, escaped

pytestmark = pytest.mark.usefixtures("env")  # the tiny checkpoint (conftest: tiny_shipped)


def checkpoint():
    """The tiny checkpoint the app is showing (env points VISFORMER_CHECKPOINTS at it)."""
    return load_checkpoint(Path(os.environ["VISFORMER_CHECKPOINTS"]) / "tiny-reverse")


def translated(sentence: str) -> sup.TranslationView:
    """The page's translation of `sentence`, recomputed here with the same checkpoint."""
    ck = checkpoint()
    result = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, sentence, "greedy")
    return sup.translation_view(result, ck.tgt_tokenizer, sentence)


def test_decoder_rows_are_named_by_the_token_they_produce() -> None:
    at = run_app(sentence="a b c d", layer="0", head="0")
    view = translated("a b c d")
    cross = chart_by_title(at, "Cross · layer 1 · head 1")
    assert cross["layout"]["yaxis"]["ticktext"] == escaped(
        [short_label("→ " + p) for p in view.output_pieces]
    )
    rows = [c.value for c in at.caption if "produces at that position" in c.value]
    piece = escape_markdown(view.output_pieces[0])  # this translation's own first piece, not "▁Hunde"
    assert rows == [rows[0]] and f"(→ {piece})" in rows[0] and "Hunde" not in rows[0], rows
    at.radio(key="view").set_value("decoder").run()
    decoder = chart_by_title(at, "Decoder self (masked) · layer 1 · head 1")
    assert decoder["layout"]["xaxis"]["ticktext"][0] == "&lt;s&gt;"  # keys: what the decoder read
    assert decoder["layout"]["yaxis"]["ticktext"][0].startswith("→ ")  # rows: what it produced
    at.radio(key="view").set_value("encoder").run()
    encoder = chart_by_title(at, "Encoder self · layer 1 · head 1")
    assert encoder["layout"]["yaxis"]["ticktext"] == ["a", "b", "c", "d", "&lt;/s&gt;"]


def test_layers_and_heads_are_counted_from_one_on_screen_and_from_zero_in_the_url() -> None:
    at = run_app(sentence="a b c", layer="1", head="0")
    layer = at.select_slider(key="layer")
    assert layer.options == ["1", "2"] and layer.value == 1  # shown 2, stored 1
    assert chart_by_title(at, "Cross · layer 2 · head 1")
    assert at.query_params["layer"] == "1" and "head" not in at.query_params  # 0 is the default
    at = open_tab(at, "ablation")
    options = at.multiselect(key="ablate").options
    assert "Encoder self · layer 1 · head 1" in options and not any("layer 0" in o for o in options)
    at = open_tab(at, "stats")
    assert chart_by_title(at, "Cross-attention")["layout"]["xaxis"]["ticktext"] == ["1", "2"]


def test_all_heads_grid_ends_each_layer_with_the_head_average() -> None:
    at = open_tab(run_app(sentence="a b c d", layer="0", head="0"), "all")
    grid = chart_by_title(at, "Cross-attention (decoder → encoder): every layer and head")
    heats = [t for t in grid["data"] if t["type"] == "heatmap"]
    assert len(heats) == 2 * (2 + 1)
    assert "mean" in [a["text"] for a in grid["layout"]["annotations"]]
    view = translated("a b c d")
    assert np.allclose(array(heats[2]["z"]).reshape(view.cross[0, 0].shape), view.cross[0].mean(0), atol=1e-6)


def test_the_page_opens_on_the_most_informative_head_unless_the_url_names_one() -> None:
    at = run_app(sentence="a b c d e")
    pick = an.informative_head(translated("a b c d e").cross, "cross")
    assert (at.session_state["layer"], at.session_state["head"]) == (pick.layer, pick.head)
    assert any(
        c.value.startswith(f"Opened on layer {pick.layer + 1} · head {pick.head + 1}.") for c in at.caption
    )
    assert at.query_params["layer"] == str(pick.layer) or pick.layer == 0  # the link restores this view
    other = ((pick.layer + 1) % 2, pick.head)
    at = run_app(sentence="a b c d e", layer=str(other[0]), head=str(other[1]))
    assert (at.select_slider(key="layer").value, at.select_slider(key="head").value) == other  # the URL wins
    assert any("most informative head for this sentence" in c.value for c in at.caption)
    next(b for b in at.button if b.label == "Go there").click().run()
    assert (at.select_slider(key="layer").value, at.select_slider(key="head").value) == (
        pick.layer,
        pick.head,
    )


def test_a_head_chosen_by_hand_stays_when_the_sentence_changes() -> None:
    at = run_app(sentence="a b c d e")
    chosen = 1 - at.session_state["head"]
    at.select_slider(key="head").set_value(chosen).run()
    at.text_input(key="sentence").input("e d c b a").run()
    assert not at.exception
    assert at.select_slider(key="head").value == chosen


def test_follow_a_word_names_the_top_piece_of_every_head() -> None:
    at = open_tab(run_app(sentence="a b c d e", layer="0", head="0"), "word")
    view = translated("a b c d e")
    word, target = at.selectbox(key="word").value, at.selectbox(key="tword").value
    assert word == len(view.src_pieces) // 2 - 1  # no pronoun here: the middle of the sentence
    encoder = chart_by_title(
        at, f"Encoder self-attention: where “{escape(view.src_pieces[word])}” looks most"
    )
    eos = len(view.src_pieces) - 1
    top = an.top_keys(an.with_head_average(view.encoder), word, skip=(word, eos))
    assert np.allclose(array(encoder["data"][0]["z"]).reshape(top.weight.shape), top.weight, atol=1e-6)
    names = [[escape(short_label(view.src_pieces[k], 10)) for k in row] for row in top.index]
    assert np.asarray(encoder["data"][0]["text"]).tolist() == names
    assert encoder["layout"]["xaxis"]["ticktext"] == ["1", "2", "mean"]
    assert chart_by_title(at, f"Cross-attention: where “→ {escape(view.output_pieces[target])}” looks most")
    assert any(c.value.startswith("Most often:") for c in at.caption)
    assert not any("es" in c.value and "Tier" in c.value for c in at.caption), "German es/sie on a toy model"
    at.checkbox(key="word_skip").uncheck().run()
    top = an.top_keys(an.with_head_average(view.encoder), word)
    encoder = chart_by_title(at, "Encoder self-attention: where")
    assert np.allclose(array(encoder["data"][0]["z"]).reshape(top.weight.shape), top.weight, atol=1e-6)
    at.selectbox(key="word").set_value(0).run()
    assert chart_by_title(at, f"Encoder self-attention: where “{escape(view.src_pieces[0])}” looks most")


def test_follow_a_word_starts_from_the_pronoun() -> None:
    assert an.pronoun_position(["▁The", "▁animal", "▁was", "▁tired", "▁because", "▁it", "</s>"]) == 5


def test_each_output_piece_carries_the_models_confidence() -> None:
    at = run_app(sentence="a b c d")
    ck = checkpoint()
    probs = an.step_probabilities(translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, "a b c d"))
    line = next(m.value for m in at.markdown if m.value.startswith("Output pieces:"))
    levels = [an.confidence_level(p) for p in probs]
    assert line.count(":red-background[") == levels.count(0)
    assert line.count(":orange-background[") == levels.count(1)
    low = int((probs < an.CONFIDENCE_LEVELS[0]).sum())
    assert any(f"{low} of {len(probs)} pieces are guesses" in c.value for c in at.caption)
    assert not [s for s in specs(at) if title(s).startswith("Probability")]  # drawn only when asked for
    at.toggle(key="attn_confidence").set_value(True).run()
    strip = chart_by_title(at, "Probability of each output piece")
    z = array(strip["data"][0]["z"]).ravel()
    assert z[: len(levels)].tolist() == levels


@pytest.mark.parametrize("how", ["url", "state"])
def test_the_attention_page_in_korean(how: str) -> None:
    params = {"lang": "ko"} if how == "url" else {}
    at = run_app(sentence="a b c d", layer="0", head="0", **params)
    if how == "state":
        at.session_state["lang"] = "ko"
        at.run()
    assert at.title[0].value == "어텐션"
    assert [t.label for t in at.tabs] == [
        "헤드 하나", "모든 헤드", "생성 단계별 보기", "헤드 통계", "헤드 끄기", "헤드 안쪽 보기", "단어 따라가기"
    ]  # fmt: skip
    assert at.radio(key="view").options == [
        "인코더 셀프 어텐션",
        "디코더 마스크드 셀프 어텐션",
        "크로스 어텐션(디코더 → 인코더)",
    ]
    assert chart_by_title(at, "크로스 · 레이어 1 · 헤드 1")
    intro = next(m.value for m in at.markdown if "**쿼리**" in m.value)  # the introduction
    assert all(
        word in intro
        for word in ("**키**", "마스크드", "크로스 어텐션", "`▁`", "`<s>`", "`</s>`", "`<0x3C>`")
    )
    for tab in ATTENTION_TABS:
        open_tab(at, tab)
        shown = [m.value for m in (*at.markdown, *at.caption, *at.info)] + [title(s) for s in specs(at)]
        assert not [s for s in shown if "attention." in s], tab  # no raw keys
        assert at.query_params["tab"] == tab if tab != ATTENTION_TABS[0] else "tab" not in at.query_params
    assert chart_by_title(at, "인코더 셀프 어텐션: “")  # Follow a word, in Korean


def test_clicking_a_translated_tab_keeps_the_tab_id_in_the_url() -> None:
    at = run_app(sentence="a b c", lang="ko")
    at.session_state["_attn_tab_ui"] = "모든 헤드"  # what a click on the Korean tab label sends
    at.run()
    assert at.session_state["tab"] == "all" and at.query_params["tab"] == "all"
    assert chart_by_title(at, "크로스 어텐션(디코더 → 인코더): 모든 레이어와 헤드")


def test_the_introduction_explains_queries_keys_kinds_and_special_pieces() -> None:
    at = run_app(sentence="a b c")
    intro = next(m.value for m in at.markdown if "**query**" in m.value)
    for words in (
        "**key**",
        "Encoder self-attention",
        "masked",
        "Cross-attention",
        "`▁`",
        "`<s>`",
        "`</s>`",
        "`<0x3C>`",
    ):
        assert words in intro, words


def test_a_new_sentence_starts_follow_a_word_again_from_its_pronoun() -> None:
    at = open_tab(run_app(sentence="a b c d e", layer="0", head="0"), "word")
    at.selectbox(key="word").set_value(0).run()
    at.text_input(key="sentence").input("a b c d e f g").run()
    assert at.selectbox(key="word").value == len(translated("a b c d e f g").src_pieces) // 2 - 1


def test_attention_page_renders_translation_and_every_view(env) -> None:
    at = run_app(layer="0", head="0")
    assert at.title[0].value == "Attention"
    assert markdown(at, "Source pieces").endswith("`</s>`")
    assert at.sidebar.selectbox(key="checkpoint").value == "tiny-reverse"
    assert any("Device" in c.value for c in at.sidebar.caption)
    credits = [m.value for e in at.sidebar.expander if e.label == "Credits and terms" for m in e.markdown]
    assert any("Multi30k" in m for m in credits) and any("Tatoeba" in m for m in credits)
    assert [t.label for t in at.tabs] == ATTENTION_TAB_LABELS
    names = []
    for tab in ATTENTION_TABS:
        names += [title(s) for s in specs(open_tab(at, tab))]
        assert at.query_params.get("tab", schema.ATTENTION_TABS[0]) == tab
    for expected in (
        "Cross · layer 1 · head 1",  # layers and heads counted from 1 on screen
        "mean of 2 heads",
        "every layer and head",
        "Producing",
        "Q (queries)",
        "softmax (attention weights)",
        "Without scaling",
        "Encoder self-attention",
    ):
        assert any(expected in n for n in names), (expected, names)
    grid = chart_by_title(open_tab(at, "all"), "Cross-attention (decoder → encoder): every layer")
    assert len([t for t in grid["data"] if t["type"] == "heatmap"]) == 2 * (2 + 1)  # layers × (heads + mean)


def test_only_the_open_tab_is_computed(env) -> None:
    at = run_app()
    assert len(specs(at)) == 2  # one head + layer mean; the grid and the rest wait for their tab
    assert at.get("download_button"), "attention CSV download missing"


def test_typing_a_sentence_changes_translation_and_charts(env) -> None:
    at = run_app(layer="0", head="0")
    before = chart_by_title(at, "Cross · layer 1 · head 1")
    at.text_input(key="sentence").input("a b c").run()
    assert not at.exception
    assert markdown(at, "Source pieces") == "Source pieces: `a` `b` `c` `</s>`"
    after = chart_by_title(at, "Cross · layer 1 · head 1")
    assert after["layout"]["xaxis"]["ticktext"] == ["a", "b", "c", "&lt;/s&gt;"]
    assert after["data"][0]["z"] != before["data"][0]["z"]
    assert at.query_params["sentence"] == "a b c"


def test_changing_view_layer_and_head_changes_the_heatmap(env) -> None:
    at = run_app(sentence="a b c d", layer="0", head="0")
    first = chart_by_title(at, "Cross · layer 1")["data"][0]["z"]
    at.select_slider(key="layer").set_value(1).run()
    at.select_slider(key="head").set_value(1).run()
    spec = chart_by_title(at, "Cross · layer 2 · head 2")
    assert spec["data"][0]["z"] != first
    at.radio(key="view").set_value("decoder").run()
    assert not at.exception
    spec = chart_by_title(at, "Decoder self (masked) · layer 2 · head 2")
    z = array(spec["data"][0]["z"])
    assert np.isnan(z[np.triu_indices(len(z), 1)]).all()  # future cells are empty, not zero ...
    assert any(t.get("fillpattern", {}).get("shape") == "/" for t in spec["data"])  # ... and hatched
    assert at.query_params["view"] == "decoder" and at.query_params["layer"] == "1"


def test_ablating_a_head_shows_a_new_translation_beside_the_original(env) -> None:
    at = open_tab(run_app(sentence="a b c d", layer="0", head="0"), "ablation")
    assert any(m.value.startswith("**0 heads off:**") for m in at.markdown)
    assert any("weights are still computed and drawn" in i.value for i in at.info)
    original = [title(s) for s in specs(at)]
    at.multiselect(key="ablate").select("e0.0").select("c1.1").run()
    assert not at.exception
    assert any(m.value.startswith("**2 heads off:**") for m in at.markdown)
    assert any(m.value.startswith("**Original:**") for m in at.markdown)
    assert at.success or at.warning  # says whether the translation changed
    assert at.query_params["ablate"] == "c1.1,e0.0"
    assert chart_by_title(at, "Cross · layer 1 · head 1")  # the selected head is still on ...
    next(b for b in at.button if b.label == "Switch off this head").click().run()
    assert at.multiselect(key="ablate").value == ["c0.0", "c1.1", "e0.0"]  # ... until the button
    assert any(title(s) == "Cross · layer 1 · head 1 (switched off)" for s in specs(at))
    assert len(specs(at)) == len(original)


def test_every_slider_on_the_attention_page_changes_what_is_shown(env) -> None:
    at = open_tab(run_app(sentence="a b c d e"), "steps")
    step_before = chart_by_title(at, "Producing")
    at.select_slider(key="step").set_value(2).run()
    step_after = chart_by_title(at, "Producing")
    assert step_after["data"][0]["x"] != step_before["data"][0]["x"] or title(step_after) != title(
        step_before
    )
    assert ":orange-background" in markdown(at, "Output:")
    example = chart_by_title(open_tab(at, "inside"), "One random query")
    at.select_slider(key="dk").set_value(1024).run()
    assert title(chart_by_title(at, "One random query")) == "One random query, d_k = 1024"
    assert chart_by_title(at, "One random query")["data"][0]["y"] != example["data"][0]["y"]
    open_tab(at, "stats").radio(key="stat").set_value("previous").run()
    assert not at.exception
    assert chart_by_title(at, "Encoder self-attention")["data"][0]["colorbar"]["title"]["text"] == "previous"
    at.radio(key="stat").set_value("alignment").run()
    assert not at.exception
    grid = chart_by_title(at, "Agreement with the task")
    assert array(grid["data"][0]["z"]).shape == (2, 2)


def test_examples_fill_the_sentence_box(env) -> None:
    at = run_app()
    examples = example_text.example_sentences("tiny-reverse", task="reverse")
    assert at.pills(key="example_pick").options == examples
    at.pills(key="example_pick").set_value(examples[1]).run()
    assert at.text_input(key="sentence").value == examples[1]
    assert at.pills(key="example_pick").value is None  # ready for the next click


def test_url_parameters_restore_a_view(env) -> None:
    at = run_app(
        sentence="c a b", view="decoder", layer="1", head="1", tab="Step through generation", step="2"
    )
    assert at.text_input(key="sentence").value == "c a b"
    assert at.select_slider(key="step").value == 2
    assert any(title(s).startswith("Producing") and title(s).endswith("layer 2 · head 2") for s in specs(at))
    at = run_app(sentence="c a b", view="decoder", layer="1", head="1", ablate="d0.1", dk="16", stat="last")
    assert at.radio(key="view").value == "decoder"
    assert at.select_slider(key="layer").value == 1 and at.select_slider(key="head").value == 1
    assert title(chart_by_title(at, "Decoder self (masked) · layer 2 · head 2"))
    assert open_tab(at, "ablation").multiselect(key="ablate").value == ["d0.1"]
    assert open_tab(at, "inside").select_slider(key="dk").value == 16
    assert open_tab(at, "stats").radio(key="stat").value == "last"


def test_invalid_url_parameters_fall_back_to_defaults(env) -> None:
    at = run_app(
        checkpoint="../../etc",
        sentence="\x00",
        view="nope",
        layer="-5",
        head="99",
        step="x",
        ablate="zz,e9.9",
        dk="3",
        pe_d="7",
        pe_len="abc",
        tab="Ablation",
    )
    assert at.sidebar.selectbox(key="checkpoint").value == "tiny-reverse"
    assert at.radio(key="view").value == "cross"
    assert at.select_slider(key="layer").value == 0
    assert at.select_slider(key="head").value == 1  # clipped to the last head of this model
    assert at.multiselect(key="ablate").value == []  # e9.9 does not exist in this model
    at = run_app(tab="nonsense", dk="3")
    assert at.session_state["tab"] == "one"
    assert open_tab(at, "inside").select_slider(key="dk").value == 64  # 3 is not a power of two
    at = run_app(pe_d="7", pe_len="abc")
    at.switch_page(PE).run()
    assert not at.exception
    assert at.slider(key="pe_d").value == 6  # odd d_model 7 made even


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("name", ["reverse-rnn-bahdanau", "reverse-rnn-none"])
def test_an_rnn_on_the_attention_page_says_it_has_only_cross_attention(
    shipped_checkpoints: tuple[Path, Path], name: str, lang: str
) -> None:
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
