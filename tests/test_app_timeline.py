"""Attention timeline page in AppTest: the step slider replays the saved attention maps."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app import env, run_app  # noqa: F401 (env: fixture pointing the app at `roots` below)
from visformer import recipes
from visformer.checkpoint import save_checkpoint
from visformer.classroom import jobs
from visformer.classroom.hosting import HostedLimits
from visformer.config import ModelConfig, TrainConfig
from visformer.model import Transformer
from visformer.tasks import task_tokenizer

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMELINE = "pages/timeline.py"
TIMEOUT = 120  # seconds per script run: generous for a shared 2-core machine, not a performance limit


def trained_checkpoint(root: Path, name: str = "toy-copy") -> Path:
    """A copy-task model trained for 40 steps with 4 attention snapshots (about a second on one thread)."""
    config = TrainConfig(steps=40, warmup=10, max_tokens=512, log_every=5, eval_every=20, eval_examples=10,
                         n_snapshots=4, threads=1)  # fmt: skip
    spec = recipes.RunSpec(
        name, recipes.TaskSource("copy", 300, 20), recipes.ModelSize(16, 2, 1, 32), config, max_len=24
    )
    job = jobs.JobRegistry().start(f"fixture-{root}", spec, HostedLimits(), root)
    assert job.join(timeout=600)
    assert job.progress().state == jobs.DONE, job.progress().message
    return job.progress().checkpoint


def untrained_checkpoint(root: Path, name: str = "no-snapshots") -> Path:
    """A reverse-task model saved without any snapshot."""
    tok = task_tokenizer("reverse")
    cfg = ModelConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=16, n_heads=2,
                      n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=24)  # fmt: skip
    return save_checkpoint(root / name, Transformer(cfg).eval(), tok, tok, task="reverse")


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(shipped, user) folders: a trained toy checkpoint with snapshots and one without."""
    shipped = tmp_path_factory.mktemp("shipped")
    trained_checkpoint(shipped)
    untrained_checkpoint(shipped)
    return shipped, tmp_path_factory.mktemp("user")


def open_page(page: str, checkpoint: str | None = None) -> AppTest:
    """Run the app, pick a checkpoint, switch to `page`; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if checkpoint:
        at.selectbox(key="checkpoint").set_value(checkpoint).run()
    at.switch_page(page).run()
    at.run()  # AppTest sends the previous page's widget values on the first run after a switch
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_link(page: str, **params: str) -> AppTest:
    """A link to `page` with these query parameters, in a fresh session; fail on any exception.

    One more run after the page switch, as in open_page (AppTest sends the previous page's widget values first).
    """
    at = run_app(page, **params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def z_array(trace: dict) -> np.ndarray:
    """A heatmap's z as an array (plotly writes numpy arrays as base64 'bdata')."""
    z = trace["z"]
    if isinstance(z, dict):
        shape = [int(n) for n in str(z["shape"]).split(",")]
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.array(z, dtype=float)


def chart_specs(at: AppTest) -> list[dict]:
    """The plotly figures on the page, as JSON."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_slider_replays_the_attention_maps(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_page(TIMELINE, "toy-copy")
    slider = at.select_slider(key="tl_step")
    assert slider.options == ["1", "3", "12", "40"] and slider.value == 40
    last = chart_specs(at)[0]
    assert last["layout"]["annotations"][0]["text"] == "attention at step 40"
    at.select_slider(key="tl_step").set_value(1).run()
    assert not at.exception
    first = chart_specs(at)[0]
    assert first["layout"]["annotations"][0]["text"] == "attention at step 1"
    assert not np.allclose(z_array(first["data"][0]), z_array(last["data"][0]))  # another map is shown
    star = [t for t in first["data"] if t.get("name") == "this step"][0]
    assert star["x"] == [1]  # the loss marker moved with the slider


def test_layer_head_and_kind_change_the_map(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_page(TIMELINE, "toy-copy")
    cross = z_array(chart_specs(at)[0]["data"][0])
    other = 1 - at.select_slider(key="head").value  # the other of the two heads
    at.select_slider(key="head").set_value(other).run()
    assert not np.allclose(z_array(chart_specs(at)[0]["data"][0]), cross)
    at.toggle(key="tl_average").set_value(True).run()
    assert "average of heads" in chart_specs(at)[0]["layout"]["title"]["text"]
    at.radio(key="view").set_value("decoder").run()
    assert not at.exception
    spec = chart_specs(at)[0]
    assert spec["layout"]["title"]["text"].startswith("Decoder")
    z = z_array(spec["data"][0])
    assert np.isnan(z[0, 1]) and not np.isnan(z[1, 0])  # the masked future position is left empty
    strip = chart_specs(at)[1]
    assert len(strip["data"]) == 4  # one small map per snapshot


def test_play_advances_the_step(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_page(TIMELINE, "toy-copy")
    at.select_slider(key="tl_step").set_value(1).run()
    at.toggle(key="tl_play").set_value(True).run()
    assert not at.exception
    assert at.select_slider(key="tl_step").value != 1


def test_a_checkpoint_without_snapshots_says_so(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_page(TIMELINE, "no-snapshots")
    assert any("has no attention snapshots" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_url_parameters_restore_the_timeline(env) -> None:  # noqa: F811 (fixture imported above)
    link = dict(checkpoint="toy-copy", tl_probe="1", view="decoder", layer="0", head="1", tl_step="3")
    at = open_link(TIMELINE, **link)
    assert at.selectbox(key="tl_probe").value == 1 and at.radio(key="view").value == "decoder"
    assert at.select_slider(key="head").value == 1 and at.select_slider(key="tl_step").value == 3
    spec = chart_specs(at)[0]
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
    assert "average of heads" in chart_specs(at)[0]["layout"]["title"]["text"]


def test_invalid_timeline_parameters_fall_back(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_link(TIMELINE, checkpoint="toy-copy", tl_probe="99", tl_step="5", tl_average="maybe", view="x")
    assert at.select_slider(key="tl_step").value == 40  # 5 is not a saved step: the last snapshot
    assert at.selectbox(key="tl_probe").value == len(at.selectbox(key="tl_probe").options) - 1
    assert at.toggle(key="tl_average").value is False and at.radio(key="view").value == "cross"
    assert chart_specs(at)[0]["layout"]["annotations"][0]["text"] == "attention at step 40"
