"""The app in Streamlit's AppTest (no browser) on a tiny checkpoint made here, plus the pure helpers of explain.views, explain.examples and classroom.catalogue."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pages import _views as schema
from tests.helpers.app import (
    ATTENTION,
    ATTENTION_TAB_LABELS,
    ATTENTION_TABS,
    PE,
    array,
    chart_by_title,
    markdown,
    open_tab,
    run_app,
    specs,
    title,
)
from tests.helpers.checkpoints import make_checkpoint
from visformer.classroom import catalogue
from visformer.decoding import STRATEGIES
from visformer.explain import examples as example_text
from visformer.explain import views as sup
from visformer.explain.decoding import DEFAULT_STRATEGIES

# ---------------------------------------------------------------------------------------------
# Attention page
# ---------------------------------------------------------------------------------------------


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


def test_state_survives_a_page_switch(env) -> None:
    at = run_app(sentence="b c d")
    at.select_slider(key="layer").set_value(1).run()
    at.switch_page(PE).run()
    at.switch_page(ATTENTION).run()
    assert not at.exception
    assert at.text_input(key="sentence").value == "b c d"
    assert at.select_slider(key="layer").value == 1


def test_no_checkpoint_is_a_message_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(tmp_path / "none"))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(tmp_path / "none-either"))
    at = run_app()
    assert any("No checkpoint" in i.value for i in at.info)
    at.switch_page(PE).run()
    assert not at.exception
    assert specs(at)


def test_user_checkpoints_are_listed_after_shipped_ones(env) -> None:
    make_checkpoint(env[1], "my-run")
    at = run_app()
    assert at.sidebar.selectbox(key="checkpoint").options == ["tiny-reverse", "my-run (yours)"]
    at.sidebar.selectbox(key="checkpoint").set_value("yours/my-run").run()
    assert not at.exception
    assert at.query_params["checkpoint"] == "yours/my-run"


# ---------------------------------------------------------------------------------------------
# Positional Encoding page
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# explain.views, explain.examples, classroom.catalogue (pure)
# ---------------------------------------------------------------------------------------------


def test_parse_view_validates_every_parameter() -> None:
    good = schema.parse_view(
        {"layer": "2", "view": "encoder", "ablate": "c1.0,e0.1,e0.1", "sentence": " hi\x07 "}
    )
    assert good["layer"] == 2 and good["view"] == "encoder"
    assert good["ablate"] == ("c1.0", "e0.1") and good["sentence"] == "hi"
    bad = schema.parse_view({"layer": "x", "view": "?", "ablate": "e0", "pe_len": ["20", "5000"]})
    assert bad["layer"] == 0 and bad["view"] == "cross" and bad["ablate"] == ()
    assert bad["pe_len"] == 1000  # repeated key: the last one, clipped into range
    # the Attention page's tabs by id; a link from before the ids (an English label) opens the same tab
    assert (
        schema.parse_view({"tab": "inside"})["tab"]
        == schema.parse_view({"tab": "Inside one head"})["tab"]
        == "inside"
    )
    assert (
        schema.parse_view({"sentence": "x" * 3000})["sentence"] == "x" * 3000
    )  # the page cuts it, saying so


def test_url_params_leave_defaults_out() -> None:
    values = schema.parse_view({})
    values.update(checkpoint="m", layer=3, ablate=["e0.1"])
    assert schema.url_params(values, ["checkpoint", "sentence", "layer", "head", "ablate"]) == {
        "checkpoint": "m",
        "layer": "3",
        "ablate": "e0.1",
    }


def test_decoding_and_timeline_parameters_are_validated() -> None:
    good = schema.parse_view(
        {"dec_strategies": "top-p,beam,top-p", "dec_beam_alpha": "1.3", "dec_beam_beam_size": "99",
         "tl_average": "1", "tl_step": "12", "dec_tab": "samples"}
    )  # fmt: skip
    assert good["dec_strategies"] == ("top-p", "beam")  # order kept, repeats dropped
    assert (
        good["dec_beam_alpha"] == 1.3 and good["dec_beam_beam_size"] == 16
    )  # clipped to the strategy's range
    assert good["tl_average"] is True and good["tl_step"] == 12 and good["dec_tab"] == "samples"
    bad = schema.parse_view(
        {"dec_strategies": "beam,nope", "dec_beam_alpha": "nan", "dec_top-p_top_p": "inf", "tl_average": "maybe",
         "dec_tab": "Beam", "dec_seed": "1.5", "dec_step_strategy": ""}
    )  # fmt: skip
    assert bad["dec_strategies"] == DEFAULT_STRATEGIES and bad["dec_beam_alpha"] == 0.6
    assert bad["dec_top-p_top_p"] == 0.9 and bad["tl_average"] is False and bad["dec_tab"] == "steps"
    assert (
        schema.parse_view({"dec_tab": "Beam search tree"})["dec_tab"] == "beam"
    )  # a link from before the ids
    assert bad["dec_seed"] == 0 and bad["dec_step_strategy"] == "greedy"
    every = {schema.decoding_param_key(s.name, p.name) for s in STRATEGIES.values() for p in s.params}
    assert every <= set(schema.VIEW_PARAMS)  # every strategy parameter can be linked
    values = {**schema.parse_view({}), "dec_strategies": ["beam", "greedy"], "dec_beam_alpha": 0.1 + 0.2}
    assert schema.url_params(values, ["dec_strategies", "dec_beam_alpha", "tl_average"]) == {
        "dec_strategies": "beam,greedy",  # in the order chosen (the comparison table's order)
        "dec_beam_alpha": "0.3",  # without float noise
    }


def test_heads_codes_round_trip_and_mask_rows() -> None:
    assert sup.parse_head("d2.7") == ("decoder", 2, 7)
    assert sup.head_code("cross", 1, 0) == "c1.0"
    sizes = {"encoder": 2, "decoder": 1, "cross": 1}
    assert len(sup.all_head_codes(sizes, 3)) == (2 + 1 + 1) * 3
    rows = sup.head_mask_rows(["e1.2", "c0.0", "e5.0", "junk"], sizes, 3)
    assert rows["encoder"].sum() == 5 and rows["encoder"][1, 2] == 0 and rows["cross"][0, 0] == 0
    assert rows["decoder"].all()


def test_checkpoint_discovery_and_default(tmp_path: Path) -> None:
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    for name in ("reverse", "multi30k-en-de", "en-de", "copy"):
        (shipped / name).mkdir(parents=True)
        (shipped / name / "config.json").write_text("{}")
    (shipped / "half-written").mkdir()  # no config.json: not a checkpoint
    (user / "mine").mkdir(parents=True)
    (user / "mine" / "config.json").write_text("{}")
    found = catalogue.discover_checkpoints(shipped, user)
    assert [c.key for c in found] == ["en-de", "copy", "multi30k-en-de", "reverse", "yours/mine"]
    assert catalogue.default_choice(found).key == catalogue.DEFAULT_CHECKPOINT == "en-de"
    assert catalogue.default_choice([c for c in found if c.key != "en-de"]).key == "copy"
    assert catalogue.find_choice(found, "yours/mine").label == "mine (yours)"
    assert catalogue.find_choice(found, "nope").key == "en-de"
    assert catalogue.default_choice([]) is None
    assert catalogue.checkpoint_stamp(shipped / "copy") > 0


def test_example_sentences_follow_the_checkpoint_language() -> None:
    assert example_text.language_pair("multi30k-en-de") == ("en", "de")
    assert example_text.language_pair("tatoeba-ko-en") == ("ko", "en")
    assert example_text.language_pair("x", {"src_lang": "fr", "tgt_lang": "en"}) == ("fr", "en")
    assert example_text.example_sentences("tatoeba-ko-en")[0] == example_text.EXAMPLES["ko"][0]
    assert example_text.example_sentences("multi30k-de-en") == example_text.EXAMPLES["de"]
    lecture = example_text.LECTURE_EXAMPLES["en"]  # the lecture's examples follow the model's own
    assert example_text.example_sentences("whatever") == [*example_text.EXAMPLES["en"], *lecture]
    reverse = example_text.example_sentences("reverse", task="reverse")
    assert reverse and all(set(s.split()) <= set("abcdefghijklmnopqrstuvwxyz") for s in reverse)


def test_a_run_of_byte_pieces_shows_the_character_it_spells() -> None:
    pieces = [
        "▁A",
        "▁",
        "<0xEB>",
        "<0xB5>",
        "<0x88>",
        "▁dog",
        "<0x3F>",
        "<0xF0>",
        "<0x9F>",
        "<0x98>",
        "<0x80>",
    ]
    assert sup.readable_pieces(pieces) == [
        "▁A", "▁", "뵈 (1/3)", "뵈 (2/3)", "뵈 (3/3)", "▁dog", "?", "😀 (1/4)", "😀 (2/4)", "😀 (3/4)", "😀 (4/4)",
    ]  # fmt: skip
    assert sup.readable_pieces(["<0xEB>", "<0xB5>", "x"]) == ["byte EB", "byte B5", "x"]  # half a character
    assert sup.readable_pieces(["▁<0xEB>", "<unk>"]) == ["▁<0xEB>", "<unk>"]  # only whole byte pieces
    assert sup.unseen_characters(pieces) == ["뵈", "?", "😀"]
    assert sup.unseen_characters(["▁A", "▁dog"]) == []


SHIPPED_EN_DE = Path(__file__).resolve().parents[1] / "checkpoints" / "en-de"


@pytest.mark.skipif(not SHIPPED_EN_DE.is_dir(), reason="the shipped en-de model is not in this tree")
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_unseen_characters_are_named_and_shown_as_characters_not_bytes(lang: str, monkeypatch) -> None:
    from visformer import i18n

    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(SHIPPED_EN_DE.parent))
    at = run_app(checkpoint="en-de", sentence="A dog 🐕 runs ★.", lang=lang)
    warning = i18n.catalog(lang)["frame.unseen"].split("{chars}")[1][:12]
    unseen = [w.value for w in at.warning if warning in w.value]
    assert len(unseen) == 1 and "🐕" in unseen[0] and "★" in unseen[0], [w.value for w in at.warning]
    ticks = json.dumps([s["layout"] for s in specs(at)], ensure_ascii=False)
    assert "0xF0" not in ticks and "🐕 (1/4)" in ticks
    at.text_input(key="sentence").input("A dog runs.").run()
    assert not [w.value for w in at.warning if warning in w.value], "a sentence the model knows: no warning"


def test_bytes_that_spell_no_character_are_written_as_bytes_not_a_replacement_mark() -> None:
    pieces = ["▁Ein", "▁", "<0xEB>", "<0xB5>", "▁Hund", "</s>"]  # a sample that stopped inside a character
    assert sup.readable_text("Ein \ufffd Hund", pieces) == "Ein ⟨EB⟩⟨B5⟩ Hund"
    assert (
        sup.readable_text("Ein 뵈", ["▁Ein", "▁", "<0xEB>", "<0xB5>", "<0x88>"]) == "Ein 뵈"
    )  # nothing to mend
