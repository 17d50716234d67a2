"""Decoding page in AppTest: every strategy (alone, in pairs, all together) renders with its step view."""

from __future__ import annotations

import itertools
import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.app import DECODING, charts, korean, open_link, open_page, specs
from visformer.classroom.inputs import escape_markdown
from visformer.decoding import STRATEGIES
from visformer.explain.decoding import DEFAULT_STRATEGIES

SHIPPED_FIXTURE = "toy_rnn_shipped"  # conftest: toy models trained with snapshots, and two RNNs
NAMES = list(STRATEGIES)
COMBINATIONS = (
    [[name] for name in NAMES] + [list(pair) for pair in itertools.combinations(NAMES, 2)] + [NAMES]
)


@pytest.fixture(scope="module")
def page(roots) -> object:
    """One session on the Decoding page, reused across combinations (each test sets what it needs)."""
    import os

    old = {k: os.environ.get(k) for k in ("VISFORMER_CHECKPOINTS", "VISFORMER_USER_CHECKPOINTS")}
    os.environ["VISFORMER_CHECKPOINTS"], os.environ["VISFORMER_USER_CHECKPOINTS"] = (
        str(roots[0]),
        str(roots[1]),
    )
    at = open_page(DECODING, "toy-copy")
    yield at
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def open_tab(at, tab: str):
    """Open one of the page's tabs (only the open one is computed) and rerun."""
    at.session_state["dec_tab"] = tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("chosen", COMBINATIONS, ids=["+".join(c) for c in COMBINATIONS])
def test_every_strategy_combination_renders(page, chosen: list[str]) -> None:
    at = open_tab(page, "steps")
    at.multiselect(key="dec_strategies").set_value(chosen).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert [label.split(" (")[0] for label in table["strategy"]] == chosen
    assert (table["length"] >= 1).all() and (table["log P"] <= 0).all()
    for name in chosen:  # the step view of each strategy, at its last step
        at.selectbox(key="dec_step_strategy").set_value(name).run()
        sliders = [w for w in at.slider if w.key == "dec_step"]  # absent when the output has one token
        if sliders:
            sliders[0].set_value(sliders[0].max).run()
        assert not at.exception, [e.value for e in at.exception]
        titles = [spec["layout"]["title"]["text"] for spec in specs(at)]
        assert any("chose" in title for title in titles)


def test_reference_adds_bleu(page) -> None:
    at = page
    at.multiselect(key="dec_strategies").set_value(["greedy", "beam"]).run()
    output = at.dataframe[0].value.loc[0, "output"]
    at.text_input(key="dec_reference").input(output).run()
    table = at.dataframe[0].value
    assert "BLEU" in table.columns
    if output != "(empty)" and len(output.split()) >= 4:
        assert table.loc[0, "BLEU"] == pytest.approx(100.0)
    at.text_input(key="dec_reference").input("").run()
    assert "BLEU" not in at.dataframe[0].value.columns


def test_samples_show_their_diversity(page) -> None:
    at = open_tab(page, "samples")
    at.multiselect(key="dec_strategies").set_value(["greedy", "temperature"]).run()
    at.selectbox(key="dec_sampler").set_value("temperature").run()
    at.slider(key="dec_n").set_value(6).run()
    at.number_input(key="dec_seed").set_value(3).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Different outputs"].endswith("/ 6")
    first = [spec for spec in specs(at) if "samples" in spec["layout"]["title"]["text"]][0]
    assert sum(first["data"][0]["x"]) == 6  # every sample is counted once
    at.slider(key="dec_temperature_temperature").set_value(
        2.5
    ).run()  # the parameter panel drives the samples
    assert not at.exception


def test_beam_tree_and_parameters(page) -> None:
    at = open_tab(page, "beam")
    at.multiselect(key="dec_strategies").set_value(["beam"]).run()
    at.number_input(key="dec_beam_beam_size").set_value(3).run()
    assert not at.exception
    assert "beam_size=3" in at.dataframe[0].value.loc[0, "strategy"]
    tree = [spec for spec in specs(at) if "beam (rank" in str(spec["layout"].get("yaxis", {}))][0]
    ranks = [y for trace in tree["data"] if trace.get("mode") == "markers+text" for y in trace.get("y", [])]
    assert max(ranks) <= 2  # three beams: ranks 0..2


def test_the_comparison_computes_no_attention_maps(page, monkeypatch) -> None:
    """The page draws no attention, so it runs the strategies alone, without translate()'s attention pass."""
    import visformer.decoding

    def refuse(*args, **kwargs):
        raise AssertionError("the Decoding page computed attention maps it never shows")

    monkeypatch.setattr(visformer.decoding, "output_attention", refuse)
    at = open_tab(page, "steps")
    at.multiselect(key="dec_strategies").set_value(NAMES).run()
    fresh = "q w q z w k"  # a sentence no other test decodes: no cache hit
    at.text_input(key="sentence").input(fresh).run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert len(table) == len(NAMES) and (table["length"] >= 1).all()
    assert charts(open_tab(at, "beam"))


def test_empty_sentence_gets_a_message(page) -> None:
    at = page
    at.text_input(key="sentence").input("   ").run()
    assert not at.exception
    assert any("nothing to translate" in e.value for e in at.error)
    at.text_input(key="sentence").input("a b c").run()
    assert not at.error


def test_url_parameters_restore_the_step_view(env) -> None:
    link = {
        "checkpoint": "toy-copy", "sentence": "a b c d", "dec_strategies": "top-k,beam", "dec_beam_beam_size": "3",
        "dec_top-k_top_k": "5", "dec_top-k_seed": "2", "dec_step_strategy": "top-k", "dec_step": "1",
    }  # fmt: skip
    at = open_link(DECODING, **link)
    assert not at.error, [e.value for e in at.error]
    assert at.text_input(key="sentence").value == "a b c d"
    assert at.multiselect(key="dec_strategies").value == ["top-k", "beam"]
    assert (
        at.number_input(key="dec_beam_beam_size").value == 3
        and at.number_input(key="dec_top-k_top_k").value == 5
    )
    table = at.dataframe[0].value
    assert list(table["strategy"]) == ["top-k (seed=2, top_k=5)", "beam (alpha=0.6, beam_size=3)"]
    assert at.selectbox(key="dec_step_strategy").value == "top-k"
    step = at.select_slider(key="dec_step")
    assert (
        step.value == 1 and step.format_func(step.value) == "2"
    )  # counted from 0 in the URL, from 1 on screen
    titles = [spec["layout"]["title"]["text"] for spec in specs(at)]
    assert any(t.startswith("Output step 2:") for t in titles), titles
    assert not any(t.startswith("Output step 0") for t in titles), titles
    assert dict(at.query_params) == link  # the page writes back the same link


def test_url_parameters_restore_the_beam_and_sample_tabs(env) -> None:
    at = open_link(DECODING, checkpoint="toy-copy", sentence="a b c", dec_strategies="beam",
                   dec_beam_beam_size="2", dec_tab="beam")  # fmt: skip
    assert at.session_state["dec_tab"] == "beam"
    tree = [spec for spec in specs(at) if "beam (rank" in str(spec["layout"].get("yaxis", {}))][0]
    ranks = [y for trace in tree["data"] if trace.get("mode") == "markers+text" for y in trace.get("y", [])]
    assert max(ranks) <= 1  # two beams
    at = open_link(DECODING, checkpoint="toy-copy", sentence="a b c", dec_tab="samples", dec_sampler="top-p",
                   dec_n="4", dec_seed="5", **{"dec_top-p_top_p": "0.5"})  # fmt: skip
    assert at.selectbox(key="dec_sampler").value == "top-p"
    assert at.slider(key="dec_n").value == 4 and at.number_input(key="dec_seed").value == 5
    assert next(m for m in at.metric if m.label == "Different outputs").value.endswith("/ 4")
    assert any("top-p (top_p=0.5, seed=5)" in c.value for c in at.caption)
    assert not any("chose" in spec["layout"]["title"]["text"] for spec in specs(at))  # only the open tab runs


def test_invalid_decoding_parameters_fall_back(env) -> None:
    at = open_link(DECODING, checkpoint="toy-copy", sentence="a b c", dec_strategies="beam,nope",
                   dec_beam_beam_size="abc", dec_tab="x", dec_step="-3", dec_step_strategy="top-p",
                   dec_n="1e9", dec_seed="-1", **{"dec_beam_alpha": "nan", "dec_top-k_top_k": "0", "dec_temperature_temperature": "0.33"})  # fmt: skip
    assert not at.error, [e.value for e in at.error]
    assert at.multiselect(key="dec_strategies").value == list(DEFAULT_STRATEGIES)
    assert (
        at.number_input(key="dec_beam_beam_size").value == 4 and at.slider(key="dec_beam_alpha").value == 0.6
    )
    assert at.number_input(key="dec_top-k_top_k").value == 1  # top-k sampling needs k >= 1
    assert (
        at.slider(key="dec_temperature_temperature").value == 0.33
    )  # off the slider's 0.05 grid, still kept
    assert at.session_state["dec_tab"] == "steps"
    assert at.selectbox(key="dec_step_strategy").value == "top-p"
    assert at.select_slider(key="dec_step").value == 0
    at.session_state["dec_tab"] = "samples"
    at.run()
    assert not at.exception
    assert at.slider(key="dec_n").value == 10 and at.number_input(key="dec_seed").value == 0


def test_every_strategy_shares_one_decoding_batch(page, monkeypatch) -> None:
    """A comparison decodes all five strategies together: one decoder, a row per sampler, beam_size for beam."""
    import visformer.decoding.registry

    calls: list[list[int]] = []
    original = visformer.decoding.registry._decode_searches

    def counting(model, src, searches, **kwargs):
        calls.append([len(s.tokens) for s in searches])
        return original(model, src, searches, **kwargs)

    monkeypatch.setattr(visformer.decoding.registry, "_decode_searches", counting)
    at = page.run()
    at.multiselect(key="dec_strategies").set_value(["greedy", "temperature", "top-k", "top-p", "beam"]).run()
    calls.clear()
    at.text_input(key="sentence").input("z q w k q").run()  # a sentence no other test decodes
    assert not at.exception, [e.value for e in at.exception]
    beams, rows = calls[0]  # the comparison: one decoding, beam search's rows then greedy and the 3 samplers
    assert rows == 4 and beams == at.session_state["dec_beam_beam_size"]
    assert all(len(c) == 1 for c in calls[1:])  # an open tab's own view (the beam tree) decodes alone
    assert len(at.dataframe[0].value) == 5


def test_korean_mode_names_strategies_and_refuses_input_in_korean(env) -> None:
    at = open_link(DECODING, checkpoint="toy-copy", sentence="a b c", dec_strategies="beam,greedy", lang="ko")
    assert list(at.dataframe[0].value["strategy"]) == ["빔 서치 (alpha=0.6, beam_size=4)", "그리디"]
    at.text_input(key="sentence").input("x" * 250).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        escape_markdown(
            "'xxxxxxxxxxxxxxxxxxxx…' 단어는 250자입니다. 여기서는 한 단어가 200자를 넘을 수 없습니다. 띄어쓰기가 빠지지 않았나요?"
        )
    ]


def test_strategy_chips_are_named_in_the_interface_language(env) -> None:
    at = open_link(DECODING, checkpoint="toy-copy", sentence="a b c", lang="ko")
    chips = at.multiselect(key="dec_strategies")
    assert chips.value == ["greedy", "beam", "temperature", "top-k", "top-p"]  # code names in the URL
    assert list(chips.options) == [
        "그리디",
        "빔 서치",
        "샘플링",
        "온도 샘플링",
        "top-k 샘플링",
        "top-p 샘플링",
    ]


def open_decoding(checkpoint: str = "toy-copy", **params: str) -> AppTest:
    """The Decoding page on `checkpoint` with the sentence "a b c d" and these URL parameters."""
    return open_link(DECODING, checkpoint=checkpoint, sentence="a b c d", **params)


def test_every_column_of_the_comparison_table_has_a_width_and_a_short_label(env) -> None:
    """Issue 13: the last column ("ended with </s>") was cut off; every column now has a set width."""
    at = open_decoding()
    columns = json.loads(at.dataframe[0].proto.columns)
    columns.pop("_index", None)  # hide_index's own entry
    assert set(columns) == {"strategy", "output", "log P", "log P / token", "length", "ended with </s>"}
    assert all(c.get("width") for c in columns.values()), columns
    assert columns["ended with </s>"]["label"] == "</s>" and columns["output"]["width"] == "large"


def test_decoding_says_what_the_filters_removed(env) -> None:
    """Issue 15: say when the filters removed nothing, or left one token (the draw could only be greedy's)."""
    at = open_decoding(dec_strategies="temperature,top-p", **{"dec_top-p_top_p": "0.05"})
    notes = " ".join(c.value for c in at.caption)
    assert "temperature (seed=0, temperature=1): no token was filtered out; all 28 tokens" in notes, notes
    assert "top-p (seed=0, top_p=0.05): only one token was left at every step" in notes, notes


def test_same_seed_is_explained_and_seeds_can_be_varied(env) -> None:
    """Issue 15: temperature / top-k / top-p with one seed often agree; say why, and offer different seeds."""
    at = open_decoding(dec_strategies="greedy,temperature,top-k,top-p")
    note = next(i.value for i in at.info if i.value.startswith("Same seed (0) for temperature, top-k, top-p"))
    assert "expected, not a bug" in note
    at.button(key="dec_vary_seeds_0").click().run()
    assert not at.exception, [e.value for e in at.exception]
    seeds = [at.session_state[f"dec_{s}_seed"] for s in ("temperature", "top-k", "top-p")]
    assert seeds == [0, 1, 2]
    assert not any(i.value.startswith("Same seed") for i in at.info)
    assert list(at.dataframe[0].value["strategy"])[1:] == [
        "temperature (seed=0, temperature=1)", "top-k (seed=1, top_k=10)", "top-p (seed=2, top_p=0.9)",
    ]  # fmt: skip


def test_decoding_an_rnn_checkpoint(env) -> None:
    """Issue 16: every strategy, the beam tree and the samples run on a GRU seq2seq."""
    at = open_decoding("rnn-bahdanau", dec_strategies="greedy,beam,top-k", dec_tab="beam")
    assert not at.error, [e.value for e in at.error]
    assert len(at.dataframe[0].value) == 3
    assert any("beam (rank" in str(spec["layout"].get("yaxis", {})) for spec in specs(at))
    at.session_state["dec_tab"] = "samples"
    at.run()
    assert not at.exception and any(m.label == "Different outputs" for m in at.metric)


def test_decoding_in_korean_keeps_the_tab_in_the_link(env) -> None:
    at = korean(open_decoding(dec_tab="samples"))
    assert [t.value for t in at.title] == ["디코딩"]
    assert [t.label for t in at.tabs] == ["스텝별로 보기", "빔 서치 트리", "샘플"]
    assert any(m.label == "서로 다른 출력" for m in at.metric)  # the Samples tab is the open one
    assert at.query_params["dec_tab"] == "samples"  # the URL keeps the language-neutral value
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["output"]["label"] == "출력" and columns["length"]["label"] == "토큰 수"
    assert any(c.value.startswith("온도 샘플링 (seed=0, temperature=1): 필터가") for c in at.caption)
