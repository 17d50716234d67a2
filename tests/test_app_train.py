"""Train page in AppTest: a toy run finishes and opens on the Attention page, Stop keeps the model, uploads."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.app import TRAIN, charts, has_button, korean, open_page, poll, specs
from visformer import recipes
from visformer.checkpoint import load_checkpoint
from visformer.classroom import catalogue, jobs
from visformer.classroom.hosting import HostedLimits
from visformer.classroom.inputs import escape_markdown
from visformer.config import TrainConfig
from visformer.explain.examples import example_sentences

SHIPPED_FIXTURE = "toy_rnn_shipped"  # conftest: toy models trained with snapshots, and two RNNs


def own_job(at: AppTest, spec: recipes.RunSpec, user: Path) -> jobs.Job:
    """Start `spec` as this AppTest session's run (as the Start button would) into `user`; wait for it to end."""
    job = jobs.REGISTRY.start(at.session_state["_train_owner"], spec, HostedLimits(), user)
    assert job.join(timeout=600)
    return job


def start_run(at: AppTest, steps: int, name: str) -> None:
    """Choose the copy task, the tiny size and a number of steps, name the checkpoint and press Start."""
    at.radio(key="train_source").set_value("task").run()
    at.selectbox(key="train_task").set_value("copy").run()
    at.radio(key="train_size").set_value("tiny").run()
    at.select_slider(key="train_steps").set_value(steps).run()
    at.select_slider(key="train_warmup").set_value(10).run()
    at.text_input(key="train_name").input(name).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]


def test_a_toy_run_finishes_and_opens_on_the_attention_page(env) -> None:
    user = env[1]
    name = f"apptest-{uuid.uuid4().hex[:8]}"
    at = open_page(TRAIN)
    assert charts(at), "the Noam schedule is drawn before training"
    start_run(at, 10, name)
    poll(at, lambda at: has_button(at, "train_open"))
    at.run()
    assert any(name in s.value for s in at.success)
    ck = load_checkpoint(user / name)
    assert ck.task == "copy" and ck.metrics["steps"] == 10 and ck.snapshots
    assert f"yours/{name}" in [c.key for c in catalogue.discover_checkpoints()]  # the sidebar picker lists it
    at.session_state["sentence"] = "Where is the train station?"  # another model's sentence
    at.button(key="train_open").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["checkpoint"] == f"yours/{name}"
    assert [t.value for t in at.title] == ["Attention"]
    assert charts(at)
    sentence = at.text_input(key="sentence").value
    assert sentence in example_sentences(f"yours/{name}", ck.info, "copy"), sentence  # its own task's example
    assert ck.src_tokenizer.unk_id not in ck.src_tokenizer.encode(sentence)


def test_stop_ends_the_run_and_keeps_the_model(env) -> None:
    user = env[1]
    name = f"apptest-stop-{uuid.uuid4().hex[:8]}"
    at = open_page(TRAIN)
    start_run(at, 2_000, name)  # the first loss at step 20 (log every 1%), far from the end when Stop comes
    poll(at, lambda at: has_button(at, "train_stop") and any(m.label == "Training loss" for m in at.metric))
    assert at.button(key="train_start").disabled  # one run per session
    at.button(key="train_stop").click().run()
    poll(at, lambda at: has_button(at, "train_open"))
    message = " ".join(s.value for s in at.success)
    assert "You stopped the run at step" in message and name in message
    ck = load_checkpoint(user / name)
    assert 1 <= ck.metrics["steps"] < 2_000
    assert not at.button(key="train_start").disabled  # a new run may start


def test_uploaded_corpora_are_checked(env) -> None:
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("upload").run()
    at.radio(key="train_upload_kind").set_value("tsv").run()
    at.file_uploader(key="train_tsv").upload(
        "pairs.tsv", b"a cat sat\tno tab here\nplain line\n", "text/plain"
    ).run()
    assert any("no tab found" in e.value for e in at.error)
    assert at.button(key="train_start").disabled
    good = "".join(f"the {w} sat\tle {w} assis\n" for w in "cat dog bird fish cow".split()).encode()
    at.file_uploader(key="train_tsv").upload("pairs.tsv", good, "text/plain").run()
    assert not at.error and any("5 sentence pairs" in s.value for s in at.success)
    assert not at.button(key="train_start").disabled
    at.radio(key="train_upload_kind").set_value("two").run()
    at.file_uploader(key="train_src_file").upload("train.en", b"one\ntwo\nthree\n", "text/plain").run()
    at.file_uploader(key="train_tgt_file").upload("train.de", b"eins\nzwei\n", "text/plain").run()
    assert any("line counts differ" in e.value and escape_markdown("train.en") in e.value for e in at.error)
    at.file_uploader(key="train_tgt_file").upload("train.de", b"\xff\xfe bad bytes\n", "text/plain").run()
    assert any(escape_markdown("not UTF-8") in e.value for e in at.error)
    assert not at.exception


def test_custom_sizes_stay_within_hosted_limits(env, monkeypatch) -> None:
    monkeypatch.setenv("VISFORMER_HOSTED", "1")
    at = open_page(TRAIN)
    at.radio(key="train_size").set_value("custom").run()
    assert at.slider(key="train_d_model").max <= 128
    assert at.slider(key="train_layers").max <= 2
    assert max(at.select_slider(key="train_steps").options, key=int) == "2000"
    assert any(m.label.startswith("Parameters") for m in at.metric)
    assert not at.exception and not at.error


def test_a_run_that_reaches_its_target_says_so_and_shows_the_exact_share(env) -> None:
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
    job = own_job(at, spec, env[1])
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


def test_the_run_says_what_it_trains_and_the_parameters_of_the_built_model(env) -> None:
    """Issue 13: the page's only parameter count described the sliders, not the run (the Fast recipe's 1+1 layers)."""
    at = open_page(TRAIN)
    config = TrainConfig(
        steps=5, warmup=10, max_tokens=512, log_every=5, eval_every=5, eval_examples=5, threads=1
    )
    spec = recipes.toy_spec(f"fast-{uuid.uuid4().hex[:6]}", "copy", 5)
    spec = replace(spec, source=recipes.TaskSource("copy", 300, 20), train=config)
    job = own_job(at, spec, env[1])
    at.run()
    built = load_checkpoint(job.progress().checkpoint).model.num_parameters()
    about = next(c.value for c in at.caption if c.value.startswith("Transformer:"))
    assert "d_model 64, 4 heads, 1+1 layers (encoder+decoder), d_ff 128" in about
    assert f"; {built:,} parameters" in about
    assert any(m.label == "Parameters (Start training)" for m in at.metric)  # the sliders' model, named so


def test_rnn_is_an_architecture_choice_for_toy_tasks_and_trains(env) -> None:
    """Issue 16: the Train page offers the GRU seq2seq (none / Bahdanau / Luong) for toy tasks."""
    name = f"rnn-{uuid.uuid4().hex[:6]}"
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("task").run()
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
    ck = load_checkpoint(env[1] / name)
    assert ck.model_config.architecture == "rnn-bahdanau" and ck.model.num_parameters() == shown
    assert ck.snapshots and len(ck.snapshots[0].attention.cross) == 1
    at.radio(key="train_source").set_value("upload").run()
    assert not any(r.key == "train_arch" for r in at.radio)  # corpora: the Transformer only


def test_train_page_messages_start_with_a_capital(env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13: the package's messages ("this model has … parameters") were shown in lower case."""
    monkeypatch.setenv("VISFORMER_MAX_PARAMS", "1000")
    at = open_page(TRAIN)
    errors = [e.value for e in at.error]
    assert errors and all(e[0].isupper() for e in errors), errors


def test_train_page_in_korean(env) -> None:
    at = korean(open_page(TRAIN))
    assert [t.value for t in at.title] == ["학습"]
    assert at.radio(key="train_source").options == ["내장 과제", "코퍼스 올리기", "디스크의 코퍼스"]
    assert at.radio(key="train_arch").options[0] == "트랜스포머"
    assert any(c.value.startswith("빠른 레시피: d_model 64, 헤드 4개, 레이어 1+1개") for c in at.caption)
    assert at.button(key="train_start").label == "학습 시작"
    noam = specs(at)[0]
    assert noam["layout"]["title"]["text"].startswith("Noam 스케줄")


def test_fast_recipe_trains_the_benchmark_recipe_under_the_name_and_size_it_shows(env) -> None:
    """The Fast recipe button trains recipes.toy_spec (the bench's reverse-task recipe), whatever the sliders say,
    saved under the name its caption shows, with the parameter count it shows (issue 13)."""
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("task").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.radio(key="train_size").set_value("base").run()  # the sliders' size: not the recipe's
    caption = next(c.value for c in at.caption if c.value.startswith("Fast recipe:"))
    shown = int(re.search(r"([\d,]+) parameters", caption).group(1).replace(",", ""))
    name = re.search(r"saved as \*\*(.+?)\*\*", caption).group(1)
    assert "fast" in name
    at.button(key="train_fast").click().run()
    assert not at.exception, [e.value for e in at.exception]
    job = jobs.REGISTRY.get(at.session_state["_train_owner"])
    assert job.spec == recipes.toy_spec(name, "reverse", job.spec.train.steps, 0)
    assert job.spec.train.stop_at_exact_match == 1.0
    assert job.spec.size.decoder_layers == 1 and job.spec.size.norm_first
    poll(at, lambda at: has_button(at, "train_stop") and any(m.label == "Training loss" for m in at.metric))
    at.button(key="train_stop").click().run()
    poll(at, lambda at: has_button(at, "train_open"))
    ck = load_checkpoint(env[1] / name)
    assert ck.model.num_parameters() == shown
