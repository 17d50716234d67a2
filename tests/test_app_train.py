"""Train page in AppTest: a toy run finishes and opens on the Attention page, Stop keeps the model, uploads."""

from __future__ import annotations

import time
import uuid

from streamlit.testing.v1 import AppTest

from tests.test_app_timeline import env, open_page, roots  # noqa: F401 (fixtures)
from visformer.checkpoint import load_checkpoint
from visformer.classroom import catalogue
from visformer.classroom.inputs import escape_markdown
from visformer.explain.examples import example_sentences

TRAIN = "pages/train.py"


def poll(at: AppTest, condition, polls: int = 1500) -> None:
    """Re-run the page (as the fragment's timer would) until condition(at) holds; a bounded number of polls."""
    for _ in range(polls):
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if condition(at):
            return
        time.sleep(0.1)
    raise AssertionError("the run never reached the expected state")


def has_button(at: AppTest, key: str) -> bool:
    """Whether a button with this key is on the page."""
    return any(b.key == key for b in at.button)


def start_run(at: AppTest, steps: int, name: str) -> None:
    """Choose the copy task, the tiny size and a number of steps, name the checkpoint and press Start."""
    at.radio(key="train_source").set_value("Built-in task").run()
    at.selectbox(key="train_task").set_value("copy").run()
    at.radio(key="train_size").set_value("tiny").run()
    at.select_slider(key="train_steps").set_value(steps).run()
    at.select_slider(key="train_warmup").set_value(10).run()
    at.text_input(key="train_name").input(name).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]


def test_a_toy_run_finishes_and_opens_on_the_attention_page(env) -> None:  # noqa: F811 (fixture imported above)
    user = env[1]
    name = f"apptest-{uuid.uuid4().hex[:8]}"
    at = open_page(TRAIN)
    assert at.get("plotly_chart"), "the Noam schedule is drawn before training"
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
    assert at.get("plotly_chart")
    sentence = at.text_input(key="sentence").value
    assert sentence in example_sentences(f"yours/{name}", ck.info, "copy"), sentence  # its own task's example
    assert ck.src_tokenizer.unk_id not in ck.src_tokenizer.encode(sentence)


def test_stop_ends_the_run_and_keeps_the_model(env) -> None:  # noqa: F811 (fixture imported above)
    user = env[1]
    name = f"apptest-stop-{uuid.uuid4().hex[:8]}"
    at = open_page(TRAIN)
    start_run(at, 20_000, name)
    poll(at, lambda at: has_button(at, "train_stop") and any(m.label == "Training loss" for m in at.metric))
    assert at.button(key="train_start").disabled  # one run per session
    at.button(key="train_stop").click().run()
    poll(at, lambda at: has_button(at, "train_open"))
    message = " ".join(s.value for s in at.success)
    assert "You stopped the run at step" in message and name in message
    ck = load_checkpoint(user / name)
    assert 1 <= ck.metrics["steps"] < 20_000
    assert not at.button(key="train_start").disabled  # a new run may start


def test_uploaded_corpora_are_checked(env) -> None:  # noqa: F811 (fixture imported above)
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("Upload a corpus").run()
    at.radio(key="train_upload_kind").set_value("One TSV file").run()
    at.file_uploader(key="train_tsv").upload(
        "pairs.tsv", b"a cat sat\tno tab here\nplain line\n", "text/plain"
    ).run()
    assert any("no tab found" in e.value for e in at.error)
    assert at.button(key="train_start").disabled
    good = "".join(f"the {w} sat\tle {w} assis\n" for w in "cat dog bird fish cow".split()).encode()
    at.file_uploader(key="train_tsv").upload("pairs.tsv", good, "text/plain").run()
    assert not at.error and any("5 sentence pairs" in s.value for s in at.success)
    assert not at.button(key="train_start").disabled
    at.radio(key="train_upload_kind").set_value("Two aligned files").run()
    at.file_uploader(key="train_src_file").upload("train.en", b"one\ntwo\nthree\n", "text/plain").run()
    at.file_uploader(key="train_tgt_file").upload("train.de", b"eins\nzwei\n", "text/plain").run()
    assert any("line counts differ" in e.value and escape_markdown("train.en") in e.value for e in at.error)
    at.file_uploader(key="train_tgt_file").upload("train.de", b"\xff\xfe bad bytes\n", "text/plain").run()
    assert any(escape_markdown("not UTF-8") in e.value for e in at.error)
    assert not at.exception


def test_custom_sizes_stay_within_hosted_limits(env, monkeypatch) -> None:  # noqa: F811 (fixture imported above)
    monkeypatch.setenv("VISFORMER_HOSTED", "1")
    at = open_page(TRAIN)
    at.radio(key="train_size").set_value("custom").run()
    assert at.slider(key="train_d_model").max <= 128
    assert at.slider(key="train_layers").max <= 2
    assert max(at.select_slider(key="train_steps").options, key=int) == "2000"
    assert any(m.label.startswith("Parameters") for m in at.metric)
    assert not at.exception and not at.error


def test_fast_recipe_starts_the_benchmark_recipe(env) -> None:  # noqa: F811 (fixture imported above)
    """The Fast recipe button trains with recipes.toy_spec (the bench's reverse-task recipe), whatever the sliders say."""
    from visformer import recipes
    from visformer.classroom import jobs

    name = f"apptest-{uuid.uuid4().hex[:8]}"
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("Built-in task").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.radio(key="train_size").set_value("base").run()
    at.text_input(key="train_name").input(name).run()
    at.button(key="train_fast").click().run()
    assert not at.exception, [e.value for e in at.exception]
    job = jobs.REGISTRY.get(at.session_state["_train_owner"])
    expected = recipes.toy_spec(name, "reverse", job.spec.train.steps, 0)
    assert job.spec == expected and job.spec.train.stop_at_exact_match == 1.0
    assert job.spec.size.decoder_layers == 1 and job.spec.size.norm_first
    job.stop()
    poll(at, lambda at: not job.active)
