"""The background training worker: a run finishes and saves, Stop keeps what was learned, runs are capped."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from visformer import recipes
from visformer.checkpoint import load_checkpoint
from visformer.classroom import jobs
from visformer.classroom.hosting import BusyError, HostedLimits
from visformer.config import TrainConfig
from visformer.data import Pair

TINY = recipes.ModelSize(d_model=16, n_heads=2, n_layers=1, d_ff=32)
QUICK = TrainConfig(steps=12, warmup=4, max_tokens=256, log_every=2, eval_every=6, eval_examples=10,
                    n_snapshots=3, threads=1)  # fmt: skip
ENDLESS = replace(QUICK, steps=1_000_000, log_every=1, eval_every=1_000_000, n_snapshots=0)
LIMITS = HostedLimits()


def spec(name: str, config: TrainConfig = QUICK, task: str = "copy") -> recipes.RunSpec:
    """A tiny copy-task run."""
    return recipes.RunSpec(name, recipes.TaskSource(task, n_train=200, n_valid=20), TINY, config, max_len=24)


def wait_for(job: jobs.Job, condition, polls: int = 3000) -> jobs.Progress:
    """Poll the job (bounded number of polls, no time limit asserted) until condition(progress) holds."""
    for _ in range(polls):
        p = job.progress()
        if condition(p):
            return p
        time.sleep(0.02)
    raise AssertionError(f"condition never held; last progress: {job.progress()}")


@pytest.fixture
def registry():
    """A fresh registry whose jobs are stopped and joined afterwards (their slots freed)."""
    reg = jobs.JobRegistry()
    started: list[jobs.Job] = []
    original = reg.start

    def start(*args, **kwargs):
        job = original(*args, **kwargs)
        started.append(job)
        return job

    reg.start = start
    yield reg
    for job in started:
        job.stop()
        assert job.join(timeout=120)


def test_a_run_finishes_and_saves_a_checkpoint_with_snapshots(registry, tmp_path: Path) -> None:
    job = registry.start("alice", spec("copy-run"), LIMITS, tmp_path)
    assert job.join(timeout=300)
    p = job.progress()
    assert p.state == jobs.DONE and not p.active and p.message == ""
    assert p.step == 12 and p.fraction == 1.0
    assert [h.step for h in p.history] == [2, 4, 6, 8, 10, 12]
    assert [e.step for e in p.evals] == [6, 12] and p.evals[-1].exact_match is not None
    assert p.checkpoint == tmp_path / "copy-run"
    ck = load_checkpoint(p.checkpoint)
    assert ck.task == "copy" and ck.model_config.d_model == 16
    assert [s.step for s in ck.snapshots] == [1, 3, 12]
    assert ck.info["source"] == "task copy" and len(ck.info["examples"]) == 4
    assert p.n_parameters == ck.model.num_parameters()


def test_stop_ends_cleanly_and_keeps_what_was_learned(registry, tmp_path: Path) -> None:
    job = registry.start("bob", spec("long-run", ENDLESS), LIMITS, tmp_path)
    wait_for(job, lambda p: p.state == jobs.RUNNING and p.step >= 3)
    job.stop()
    assert job.join(timeout=300)
    p = job.progress()
    assert p.state == jobs.STOPPED and "stopped at step" in p.message
    assert 3 <= p.step < ENDLESS.steps
    ck = load_checkpoint(p.checkpoint)
    assert ck.metrics["steps"] == p.step  # the saved model is the one trained up to the stop


def test_stop_while_preparing_saves_nothing(registry, tmp_path: Path) -> None:
    job = registry.start("carol", spec("early"), LIMITS, tmp_path)
    job.stop()  # almost surely before the first step; either way the run ends cleanly
    assert job.join(timeout=300)
    p = job.progress()
    assert p.state in (jobs.STOPPED, jobs.DONE)
    if p.step == 0:
        assert p.checkpoint is None and "nothing to save" in p.message
        assert not (tmp_path / "early").exists()


def test_one_run_per_session(registry, tmp_path: Path) -> None:
    first = registry.start("dave", spec("one", ENDLESS), LIMITS, tmp_path)
    with pytest.raises(BusyError, match="already have a training run"):
        registry.start("dave", spec("two"), LIMITS, tmp_path)
    other = registry.start("erin", spec("three"), LIMITS, tmp_path)  # another session may train
    assert registry.get("dave") is first and registry.get("erin") is other
    first.stop()
    assert first.join(timeout=300)
    again = registry.start("dave", spec("four"), LIMITS, tmp_path)  # finished: a new run is allowed
    assert registry.get("dave") is again


def test_concurrent_runs_are_capped_across_sessions(registry, tmp_path: Path) -> None:
    limits = HostedLimits(max_concurrent_runs=1)
    first = registry.start("frank", spec("cap-a", ENDLESS), limits, tmp_path)
    with pytest.raises(BusyError, match="server is busy"):
        registry.start("grace", spec("cap-b"), limits, tmp_path)
    assert registry.active_count() == 1
    first.stop()
    assert first.join(timeout=300)
    second = registry.start("grace", spec("cap-b"), limits, tmp_path)
    assert second.join(timeout=300) and second.progress().state == jobs.DONE


def test_the_registry_keeps_a_bounded_number_of_finished_jobs(tmp_path: Path) -> None:
    registry = jobs.JobRegistry(max_finished=1)
    first = registry.start("alice", spec("a", replace(QUICK, steps=2)), LIMITS, tmp_path)
    assert first.join(timeout=120)
    second = registry.start("bob", spec("b", replace(QUICK, steps=2)), LIMITS, tmp_path)
    assert second.join(timeout=120) and registry.get("alice") is first  # alice's result is still shown
    third = registry.start("carol", spec("c", replace(QUICK, steps=2)), LIMITS, tmp_path)
    assert third.join(timeout=120)
    assert registry.get("alice") is None and registry.get("bob") is second  # the oldest finished one went
    assert registry.get("carol") is third


def test_finished_jobs_expire_and_a_new_run_replaces_the_old_one(tmp_path: Path) -> None:
    registry = jobs.JobRegistry(max_age_s=60)
    threads = threading.active_count()
    saved = []
    for name in ("a", "b", "c"):  # one session trains three times in a row
        job = registry.start("alice", spec(name, replace(QUICK, steps=2)), LIMITS, tmp_path)
        assert job.join(timeout=120) and job.progress().state == jobs.DONE
        saved.append(job.progress().checkpoint)
        assert len(registry) == 1 and registry.get("alice") is job  # the new run replaced the finished one
    assert threading.active_count() == threads  # every worker thread has ended
    assert not set(saved) & jobs._RESERVED  # reservations are released once the folder is written
    assert registry.sweep(now=job.finished + 30) == 0 and registry.get("alice") is job
    assert registry.sweep(now=job.finished + 61) == 1 and len(registry) == 0


def test_a_model_beyond_the_limits_fails_with_a_message(registry, tmp_path: Path) -> None:
    big = recipes.RunSpec("big", recipes.TaskSource("copy"), recipes.ModelSize(256, 4, 2, 1024), QUICK)
    job = registry.start("heidi", big, HostedLimits.hosted(), tmp_path)
    assert job.join(timeout=300)
    p = job.progress()
    assert p.state == jobs.FAILED and "d_model 256 is above the limit of 128" in p.message
    assert p.checkpoint is None
    with pytest.raises(ValueError, match="steps"):
        registry.start("heidi", spec("many", replace(QUICK, steps=5000)), HostedLimits.hosted(), tmp_path)
    with pytest.raises(ValueError, match="invalid checkpoint name"):
        registry.start("heidi", spec("../escape"), LIMITS, tmp_path)


def test_check_spec_counts_parameters_and_refuses_big_models() -> None:
    n = jobs.check_spec(spec("x"), LIMITS, vocab_size=30)
    assert 0 < n < 20_000
    with pytest.raises(ValueError, match="above the limit"):
        jobs.check_spec(
            replace(spec("x"), size=recipes.ModelSize(512, 8, 6, 2048)), HostedLimits.hosted(), 30
        )


def test_checkpoint_names_never_collide(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    first = jobs.reserve_checkpoint_dir(tmp_path, "run")
    second = jobs.reserve_checkpoint_dir(tmp_path, "run")
    assert first.name == "run-2" and second.name == "run-3"


def test_prepare_data_for_a_corpus_trains_a_joint_tokenizer() -> None:
    words = "the cat dog sat ran on a mat big small red".split()
    pairs = tuple(Pair(f"{a} {b} {c}", f"{c} {b} {a}") for a in words for b in words[:4] for c in words[:3])
    prepared = recipes.prepare_data(recipes.PairsSource("toy", pairs, vocab_size=300, valid=10))
    assert prepared.src_tokenizer is prepared.tgt_tokenizer and prepared.task is None
    assert len(prepared.valid) >= 1 and len(prepared.train) + len(prepared.valid) == len(pairs)
    assert prepared.src_tokenizer.decode(prepared.src_tokenizer.encode("the cat sat")) == "the cat sat"
    with pytest.raises(ValueError, match="fewer than 2 usable"):
        recipes.prepare_data(recipes.PairsSource("empty", (Pair("a", ""),)))


def test_find_and_read_corpora_on_disk(tmp_path: Path) -> None:
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "train.en").write_text("a cat\na dog\n", encoding="utf-8")
    (folder / "train.de").write_text("eine Katze\nein Hund\n", encoding="utf-8")
    (folder / "pairs.tsv").write_text("hi\tsalut\n", encoding="utf-8")
    (folder / "SOURCE.md").write_text("notes", encoding="utf-8")
    found = {c.name: c for c in jobs.find_corpora(tmp_path)}
    assert set(found) == {"toy/pairs.tsv", "toy/train.de→en", "toy/train.en→de"}
    assert jobs.read_corpus(found["toy/train.en→de"], LIMITS) == [
        Pair("a cat", "eine Katze"),
        Pair("a dog", "ein Hund"),
    ]
    assert jobs.read_corpus(found["toy/pairs.tsv"], LIMITS) == [Pair("hi", "salut")]
    assert jobs.read_corpus(found["toy/train.de→en"], HostedLimits(max_upload_lines=1)) == [
        Pair("eine Katze", "a cat")
    ]
    assert jobs.find_corpora(tmp_path / "missing") == []


def test_model_size_can_have_a_shallower_pre_ln_decoder() -> None:
    assert TINY.config(30, 30, 24).n_decoder_layers == 1 and not TINY.config(30, 30, 24).norm_first
    size = recipes.ModelSize(d_model=16, n_heads=2, n_layers=2, d_ff=32, n_decoder_layers=1, norm_first=True)
    config = size.config(30, 30, 24)
    assert (config.n_encoder_layers, config.n_decoder_layers, config.norm_first) == (2, 1, True)
    assert (
        jobs.check_spec(recipes.RunSpec("deep-encoder", recipes.TaskSource("copy"), size, QUICK), LIMITS, 30)
        > 0
    )


def test_toy_recipe_stops_at_exact_match_without_dropout_or_smoothing() -> None:
    spec = recipes.toy_spec("toy", seed=3)
    assert spec.train.stop_at_exact_match == 1.0 and spec.train.label_smoothing == 0.0 and spec.dropout == 0.0
    assert spec.train.weight_average > 0  # scored and saved: the moving average of the weights
    assert spec.train.seed == 3 and spec.source == recipes.TaskSource("reverse", n_train=20_000, n_valid=200)
    config = spec.size.config(30, 30, spec.max_len, spec.dropout)
    assert (config.n_encoder_layers, config.n_decoder_layers, config.norm_first) == (1, 1, True)
    assert jobs.check_spec(spec, LIMITS, recipes.TaskSource("reverse").vocab_size) < 200_000


def test_a_run_says_why_it_ended_early(registry, tmp_path: Path) -> None:
    """Issue 13: reaching the target exact match and pressing Stop ended with the same message."""
    target = replace(QUICK, steps=60, eval_every=6, stop_at_exact_match=0.0)  # every evaluation reaches 0%
    job = registry.start("target", spec("target", target), LIMITS, tmp_path)
    assert job.join(timeout=600)
    p = job.progress()
    assert p.state == jobs.STOPPED and p.reason == jobs.TARGET_REACHED and p.step == 6
    assert p.message.startswith("target exact match reached at step 6")
    job = registry.start("user", spec("user", ENDLESS), LIMITS, tmp_path)
    wait_for(job, lambda p: p.step >= 1)
    job.stop()
    assert job.join(timeout=600)
    assert job.progress().reason == jobs.BY_USER and job.progress().message.startswith("stopped at step")
    job = registry.start("done", spec("done"), LIMITS, tmp_path)
    assert job.join(timeout=600)
    assert job.progress().state == jobs.DONE and job.progress().reason == ""


def test_an_rnn_run_builds_the_architecture_it_names(registry, tmp_path: Path) -> None:
    """Issue 16: the worker trains a GRU seq2seq when the run names one, and counts its real parameters."""
    run = replace(spec("gru"), architecture="rnn-luong")
    counted = jobs.check_spec(run, LIMITS, run.source.vocab_size)
    job = registry.start("gru", run, LIMITS, tmp_path)
    assert job.join(timeout=600)
    ck = load_checkpoint(job.progress().checkpoint)
    assert ck.model_config.architecture == "rnn-luong" and ck.model.num_parameters() == counted
    assert counted != jobs.check_spec(
        spec("tf"), LIMITS, run.source.vocab_size
    )  # not the Transformer's count
