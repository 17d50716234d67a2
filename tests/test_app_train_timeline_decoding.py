"""Train, timeline and decoding pages (issues 13, 15, 16) in AppTest: each test failed before its fix.

The roots hold the timeline's toy Transformer (copy task, with snapshots) and two RNN seq2seq models trained
here on the same task: one with Bahdanau attention, one without attention.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app import env  # noqa: F401 (fixture pointing the app at `roots` below)
from tests.test_app_timeline import (
    chart_specs,
    open_link,
    open_page,
    trained_checkpoint,
    untrained_checkpoint,
)
from tests.test_app_train import TRAIN, has_button, poll
from visformer import recipes
from visformer.checkpoint import load_checkpoint
from visformer.classroom import jobs
from visformer.classroom.hosting import HostedLimits
from visformer.config import TrainConfig

TIMELINE, DECODING = "pages/timeline.py", "pages/decoding.py"
HANGUL = re.compile("[가-힣]")
pytestmark = pytest.mark.usefixtures("env")


def rnn_checkpoint(root: Path, architecture: str) -> Path:
    """A GRU seq2seq trained 40 steps on the copy task with 4 attention snapshots (about a second)."""
    config = TrainConfig(steps=40, warmup=10, max_tokens=512, log_every=5, eval_every=20, eval_examples=10,
                         n_snapshots=4, threads=1)  # fmt: skip
    spec = recipes.RunSpec(architecture, recipes.TaskSource("copy", 300, 20), recipes.ModelSize(16, 1, 1, 32),
                           config, max_len=24, architecture=architecture)  # fmt: skip
    job = jobs.JobRegistry().start(f"fixture-{root}-{architecture}", spec, HostedLimits(), root)
    assert job.join(timeout=600)
    assert job.progress().state == jobs.DONE, job.progress().message
    return job.progress().checkpoint


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(shipped, user): the toy Transformer with snapshots, one without, and the two RNNs."""
    shipped = tmp_path_factory.mktemp("shipped")
    trained_checkpoint(shipped)
    untrained_checkpoint(shipped)
    for architecture in ("rnn-bahdanau", "rnn-none"):
        rnn_checkpoint(shipped, architecture)
    return shipped, tmp_path_factory.mktemp("user")


def korean(at: AppTest) -> AppTest:
    """Switch an open app to Korean (as the sidebar's language toggle does) and rerun."""
    at.session_state["lang"] = "ko"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> list[str]:
    """Every caption, markdown, info, success and warning text on the page."""
    return [e.value for e in (*at.caption, *at.markdown, *at.info, *at.success, *at.warning)]


def own_job(at: AppTest, spec: recipes.RunSpec) -> jobs.Job:
    """Start `spec` as this AppTest session's run (as the Start button would) and wait for it to end."""
    job = jobs.REGISTRY.start(at.session_state["_train_owner"], spec, HostedLimits(), Path(env_user()))
    assert job.join(timeout=600)
    return job


def env_user() -> str:
    """The user checkpoint folder the env fixture set."""
    import os

    return os.environ["VISFORMER_USER_CHECKPOINTS"]


# ---------------------------------------------------------------------------------------------
# Train page
# ---------------------------------------------------------------------------------------------


def test_a_run_that_reaches_its_target_says_so_and_shows_the_exact_share() -> None:
    """Issue 13: a run ended by the 100% exact-match rule said "stopped at step N" like a manual Stop."""
    at = open_page(TRAIN)
    config = TrainConfig(
        steps=400,
        warmup=10,
        max_tokens=512,
        log_every=5,
        eval_every=10,
        eval_examples=10,
        threads=1,
        stop_at_exact_match=0.0,
    )  # any evaluation reaches 0%: the run ends at step 10
    spec = recipes.RunSpec(f"target-{uuid.uuid4().hex[:6]}", recipes.TaskSource("copy", 300, 20),
                           recipes.ModelSize(16, 2, 1, 32), config, max_len=24)  # fmt: skip
    job = own_job(at, spec)
    p = job.progress()
    assert p.state == jobs.STOPPED and p.reason == jobs.TARGET_REACHED and p.step == 10
    at.run()
    message = " ".join(s.value for s in at.success)
    assert "Finished early: at step 10 the held-out exact match reached 0%" in message, message
    assert "stopped at step" not in message
    step = next(m for m in at.metric if m.label.startswith("Step"))
    assert step.label == "Step (of 400)" and step.value == "10"  # short value: no "10 / 4…" cut off
    outputs = next(m for m in at.markdown if m.value.startswith("**Outputs at step 10**"))
    assert re.search(r"exact match \d+(\.\d)?%, the run stops at ≥ 0%", outputs.value), outputs.value
    korean(at)
    assert any("일찍 끝났습니다" in s.value for s in at.success)


def test_the_run_says_what_it_trains_and_the_parameters_of_the_built_model() -> None:
    """Issue 13: the page's only parameter count described the sliders, not the run (the Fast recipe's 1+1 layers)."""
    at = open_page(TRAIN)
    config = TrainConfig(
        steps=5, warmup=10, max_tokens=512, log_every=5, eval_every=5, eval_examples=5, threads=1
    )
    spec = recipes.toy_spec(f"fast-{uuid.uuid4().hex[:6]}", "copy", 5)
    spec = replace(spec, source=recipes.TaskSource("copy", 300, 20), train=config)
    job = own_job(at, spec)
    at.run()
    built = load_checkpoint(job.progress().checkpoint).model.num_parameters()
    about = next(c.value for c in at.caption if c.value.startswith("Transformer:"))
    assert "d_model 64, 4 heads, 1+1 layers (encoder+decoder), d_ff 128" in about
    assert f"; {built:,} parameters" in about
    assert any(m.label == "Parameters (Start training)" for m in at.metric)  # the sliders' model, named so


def test_rnn_is_an_architecture_choice_for_toy_tasks_and_trains() -> None:
    """Issue 16: the Train page offers the GRU seq2seq (none / Bahdanau / Luong) for toy tasks."""
    name = f"rnn-{uuid.uuid4().hex[:6]}"
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("Built-in task").run()
    at.selectbox(key="train_task").set_value("copy").run()
    assert at.radio(key="train_arch").options == [
        "Transformer", "RNN, no attention", "RNN + Bahdanau attention", "RNN + Luong attention",
    ]  # fmt: skip
    at.radio(key="train_arch").set_value("rnn-bahdanau").run()
    at.radio(key="train_size").set_value("tiny").run()
    assert not has_button(at, "train_fast")  # the fast recipe is the Transformer's
    assert any(c.value.startswith("GRU, d_model 32, 1+1 layers") for c in at.caption)
    shown = int(
        next(m for m in at.metric if m.label.startswith("Parameters")).value.strip("≈ ").replace(",", "")
    )
    at.select_slider(key="train_steps").set_value(10).run()
    at.select_slider(key="train_warmup").set_value(10).run()
    at.text_input(key="train_name").input(name).run()
    at.button(key="train_start").click().run()
    poll(at, lambda at: has_button(at, "train_open"))
    ck = load_checkpoint(Path(env_user()) / name)
    assert ck.model_config.architecture == "rnn-bahdanau" and ck.model.num_parameters() == shown
    assert ck.snapshots and len(ck.snapshots[0].attention.cross) == 1
    at.radio(key="train_source").set_value("Upload a corpus").run()
    assert not any(r.key == "train_arch" for r in at.radio)  # corpora: the Transformer only


def test_train_page_messages_start_with_a_capital(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: the package's messages ("this model has … parameters") were shown in lower case."""
    monkeypatch.setenv("VISFORMER_MAX_PARAMS", "1000")
    at = open_page(TRAIN)
    errors = [e.value for e in at.error]
    assert errors and all(e[0].isupper() for e in errors), errors


def test_train_page_in_korean() -> None:
    at = korean(open_page(TRAIN))
    assert [t.value for t in at.title] == ["학습"]
    assert at.radio(key="train_source").options == ["내장 과제", "코퍼스 올리기", "디스크의 코퍼스"]
    assert at.radio(key="train_arch").options[0] == "트랜스포머"
    assert any(c.value.startswith("빠른 레시피: d_model 64, 헤드 4개, 레이어 1+1개") for c in at.caption)
    assert at.button(key="train_start").label == "학습 시작"
    noam = chart_specs(at)[0]
    assert noam["layout"]["title"]["text"].startswith("Noam 스케줄")


# ---------------------------------------------------------------------------------------------
# Timeline
# ---------------------------------------------------------------------------------------------


def test_timeline_of_an_rnn_shows_cross_attention_only() -> None:
    """Issue 16: an RNN's snapshots hold one cross-attention map (one layer, one head) and nothing else."""
    at = open_page(TIMELINE, "rnn-bahdanau")
    assert at.radio(key="view").options == ["Cross-attention (decoder → encoder)"]
    assert any("only cross-attention exists" in c.value for c in at.caption)
    spec = chart_specs(at)[0]
    assert (
        spec["layout"]["title"]["text"].replace("<br>", " ")
        == "Cross-attention (decoder → encoder) · layer 1 · head 1"
    )
    at = open_page(TIMELINE, "rnn-none")
    assert any("RNN without attention" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_timeline_counts_layers_and_heads_from_one_and_labels_the_losses() -> None:
    """Issue 15: layers and heads from 1; issue 13: the snapshot dots and the curve are named apart."""
    at = open_link(TIMELINE, checkpoint="toy-copy", head="1", tl_step="3")
    head = at.select_slider(key="head")
    assert head.options == ["1", "2"] and head.value == 1  # shown 1..2, kept 0-based in the state and URL
    assert at.query_params["head"] == "1"
    spec = chart_specs(at)[0]
    assert spec["layout"]["title"]["text"].replace("<br>", " ").endswith("· layer 1 · head 2")
    names = [t.get("name") for t in spec["data"]]
    assert "training loss, mean over 5 steps" in names and "batch loss at a snapshot step" in names


def test_timeline_in_korean() -> None:
    at = korean(open_page(TIMELINE, "toy-copy"))
    assert [t.value for t in at.title] == ["어텐션 타임라인"]
    assert at.radio(key="view").options[0] == "인코더 셀프 어텐션"
    spec = chart_specs(at)[0]
    assert (
        spec["layout"]["title"]["text"].startswith("크로스 어텐션")
        and "레이어 1" in spec["layout"]["title"]["text"]
    )
    assert any(HANGUL.search(c.value) for c in at.caption)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


def open_decoding(checkpoint: str = "toy-copy", **params: str) -> AppTest:
    """The Decoding page on `checkpoint` with the sentence "a b c d" and these URL parameters."""
    return open_link(DECODING, checkpoint=checkpoint, sentence="a b c d", **params)


def test_every_column_of_the_comparison_table_has_a_width_and_a_short_label() -> None:
    """Issue 13: the last column ("ended with </s>") was cut off; every column now has a set width."""
    at = open_decoding()
    columns = json.loads(at.dataframe[0].proto.columns)
    columns.pop("_index", None)  # hide_index's own entry
    assert set(columns) == {"strategy", "output", "log P", "log P / token", "length", "ended with </s>"}
    assert all(c.get("width") for c in columns.values()), columns
    assert columns["ended with </s>"]["label"] == "</s>" and columns["output"]["width"] == "large"


def test_decoding_says_what_the_filters_removed() -> None:
    """Issue 15: say when the filters removed nothing, or left one token (the draw could only be greedy's)."""
    at = open_decoding(dec_strategies="temperature,top-p", **{"dec_top-p_top_p": "0.05"})
    notes = " ".join(c.value for c in at.caption)
    assert "temperature (seed=0, temperature=1): no token was filtered out; all 28 tokens" in notes, notes
    assert "top-p (seed=0, top_p=0.05): only one token was left at every step" in notes, notes


def test_same_seed_is_explained_and_seeds_can_be_varied() -> None:
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


def test_decoding_an_rnn_checkpoint() -> None:
    """Issue 16: every strategy, the beam tree and the samples run on a GRU seq2seq."""
    at = open_decoding("rnn-bahdanau", dec_strategies="greedy,beam,top-k", dec_tab="Beam search tree")
    assert not at.error, [e.value for e in at.error]
    assert len(at.dataframe[0].value) == 3
    assert any("beam (rank" in str(spec["layout"].get("yaxis", {})) for spec in chart_specs(at))
    at.session_state["dec_tab"] = "Samples"
    at.run()
    assert not at.exception and any(m.label == "Different outputs" for m in at.metric)


def test_decoding_in_korean_keeps_the_tab_in_the_link() -> None:
    at = korean(open_decoding(dec_tab="Samples"))
    assert [t.value for t in at.title] == ["디코딩"]
    assert [t.label for t in at.tabs] == ["스텝별로 보기", "빔 서치 트리", "샘플"]
    assert any(m.label == "서로 다른 출력" for m in at.metric)  # the Samples tab is the open one
    assert at.query_params["dec_tab"] == "Samples"  # the URL keeps the language-neutral value
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["output"]["label"] == "출력" and columns["length"]["label"] == "토큰 수"
    assert any(c.value.startswith("온도 샘플링 (seed=0, temperature=1): 필터가") for c in at.caption)
