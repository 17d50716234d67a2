"""The Attention page's teaching fixes in AppTest: row labels, numbering from 1, head average in the grid, the
first head shown, the ablation note, the "Follow a word" view, the confidence cue, and Korean."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.app import ATTENTION_TABS, array, chart_by_title, open_tab, run_app, specs, title
from visformer.checkpoint import load_checkpoint
from visformer.classroom.inputs import escape_markdown
from visformer.decoding import translate
from visformer.explain import analysis as an
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
