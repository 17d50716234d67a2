"""Attention timeline page in AppTest: the step slider replays the saved attention maps."""

from __future__ import annotations

import numpy as np

from tests.helpers.app import HANGUL, TIMELINE, array, charts, korean, open_link, open_page, specs

SHIPPED_FIXTURE = "toy_rnn_shipped"  # conftest: toy models trained with snapshots, and two RNNs


def test_slider_replays_the_attention_maps(env) -> None:
    at = open_page(TIMELINE, "toy-copy")
    slider = at.select_slider(key="tl_step")
    assert slider.options == ["1", "3", "12", "40"] and slider.value == 40
    last = specs(at)[0]
    assert last["layout"]["annotations"][0]["text"] == "attention at step 40"
    at.select_slider(key="tl_step").set_value(1).run()
    assert not at.exception
    first = specs(at)[0]
    assert first["layout"]["annotations"][0]["text"] == "attention at step 1"
    assert not np.allclose(array(first["data"][0]["z"]), array(last["data"][0]["z"]))  # another map is shown
    star = [t for t in first["data"] if t.get("name") == "this step"][0]
    assert star["x"] == [1]  # the loss marker moved with the slider


def test_layer_head_and_kind_change_the_map(env) -> None:
    at = open_page(TIMELINE, "toy-copy")
    cross = array(specs(at)[0]["data"][0]["z"])
    other = 1 - at.select_slider(key="head").value  # the other of the two heads
    at.select_slider(key="head").set_value(other).run()
    assert not np.allclose(array(specs(at)[0]["data"][0]["z"]), cross)
    at.toggle(key="tl_average").set_value(True).run()
    assert "average of heads" in specs(at)[0]["layout"]["title"]["text"]
    at.radio(key="view").set_value("decoder").run()
    assert not at.exception
    spec = specs(at)[0]
    assert spec["layout"]["title"]["text"].startswith("Decoder")
    z = array(spec["data"][0]["z"])
    assert np.isnan(z[0, 1]) and not np.isnan(z[1, 0])  # the masked future position is left empty
    strip = specs(at)[1]
    assert len(strip["data"]) == 4  # one small map per snapshot


def test_play_advances_the_step(env) -> None:
    at = open_page(TIMELINE, "toy-copy")
    at.select_slider(key="tl_step").set_value(1).run()
    at.toggle(key="tl_play").set_value(True).run()
    assert not at.exception
    assert at.select_slider(key="tl_step").value != 1


def test_a_checkpoint_without_snapshots_says_so(env) -> None:
    at = open_page(TIMELINE, "no-snapshots")
    assert any("has no attention snapshots" in i.value for i in at.info)
    assert not charts(at)


def test_url_parameters_restore_the_timeline(env) -> None:
    link = dict(checkpoint="toy-copy", tl_probe="1", view="decoder", layer="0", head="1", tl_step="3")
    at = open_link(TIMELINE, **link)
    assert at.selectbox(key="tl_probe").value == 1 and at.radio(key="view").value == "decoder"
    assert at.select_slider(key="head").value == 1 and at.select_slider(key="tl_step").value == 3
    spec = specs(at)[0]
    title = spec["layout"]["title"]["text"].replace("<br>", " ")  # wrapped to fit a phone
    assert title == "Decoder masked self-attention · layer 1 · head 2"  # counted from 1
    assert spec["layout"]["annotations"][0]["text"] == "attention at step 3"
    probe = at.selectbox(key="tl_probe").format_func(1).split()
    assert spec["layout"]["xaxis"]["ticktext"] == ["&lt;s&gt;", *probe]  # the second probe's map (copy task)
    assert dict(at.query_params) == {k: v for k, v in link.items() if k != "layer"}  # layer 0 is the default
    at.select_slider(key="tl_step").set_value(
        12
    ).run()  # the slider lives in a fragment: the URL follows it too
    assert at.query_params["tl_step"] == "12"
    at = open_link(TIMELINE, checkpoint="toy-copy", tl_average="1", tl_step="40")
    assert at.toggle(key="tl_average").value is True
    assert "average of heads" in specs(at)[0]["layout"]["title"]["text"]


def test_invalid_timeline_parameters_fall_back(env) -> None:
    at = open_link(TIMELINE, checkpoint="toy-copy", tl_probe="99", tl_step="5", tl_average="maybe", view="x")
    assert at.select_slider(key="tl_step").value == 40  # 5 is not a saved step: the last snapshot
    assert at.selectbox(key="tl_probe").value == len(at.selectbox(key="tl_probe").options) - 1
    assert at.toggle(key="tl_average").value is False and at.radio(key="view").value == "cross"
    assert specs(at)[0]["layout"]["annotations"][0]["text"] == "attention at step 40"


def test_timeline_of_an_rnn_shows_cross_attention_only(env) -> None:
    """Issue 16: an RNN's snapshots hold one cross-attention map (one layer, one head) and nothing else."""
    at = open_page(TIMELINE, "rnn-bahdanau")
    assert at.radio(key="view").options == ["Cross-attention (decoder → encoder)"]
    assert any("only cross-attention exists" in c.value for c in at.caption)
    spec = specs(at)[0]
    assert (
        spec["layout"]["title"]["text"].replace("<br>", " ")
        == "Cross-attention (decoder → encoder) · layer 1 · head 1"
    )
    at = open_page(TIMELINE, "rnn-none")
    assert any("RNN without attention" in i.value for i in at.info)
    assert not charts(at)


def test_timeline_counts_layers_and_heads_from_one_and_labels_the_losses(env) -> None:
    """Issue 15: layers and heads from 1; issue 13: the snapshot dots and the curve are named apart."""
    at = open_link(TIMELINE, checkpoint="toy-copy", head="1", tl_step="3")
    head = at.select_slider(key="head")
    assert head.options == ["1", "2"] and head.value == 1  # shown 1..2, kept 0-based in the state and URL
    assert at.query_params["head"] == "1"
    spec = specs(at)[0]
    assert spec["layout"]["title"]["text"].replace("<br>", " ").endswith("· layer 1 · head 2")
    names = [t.get("name") for t in spec["data"]]
    assert "training loss, mean over 5 steps" in names and "batch loss at a snapshot step" in names


def test_timeline_in_korean(env) -> None:
    at = korean(open_page(TIMELINE, "toy-copy"))
    assert [t.value for t in at.title] == ["어텐션 타임라인"]
    assert at.radio(key="view").options[0] == "인코더 셀프 어텐션"
    spec = specs(at)[0]
    assert (
        spec["layout"]["title"]["text"].startswith("크로스 어텐션")
        and "레이어 1" in spec["layout"]["title"]["text"]
    )
    assert any(HANGUL.search(c.value) for c in at.caption)
