"""Trainer behaviour on tiny configs: schedule, learning, stopping, reproducibility, snapshots."""

from __future__ import annotations

import json
import math
import threading

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from tests.helpers.training import make_trainer
from visformer.config import TrainConfig
from visformer.data import Pair
from visformer.model import Transformer
from visformer.probes import snapshot_schedule
from visformer.records import EvalMetrics, StepMetrics
from visformer.tasks import make_examples, task_tokenizer
from visformer.training import Trainer, TrainingDiverged, noam_lr


def losses(trainer: Trainer) -> list[float]:
    return [m.loss for m in trainer.run() if isinstance(m, StepMetrics)]


def test_noam_matches_formula_and_peaks_at_warmup() -> None:
    d, warmup = 512, 4000
    assert noam_lr(1, d, warmup) == pytest.approx(d**-0.5 * warmup**-1.5)
    assert noam_lr(16000, d, warmup) == pytest.approx(d**-0.5 * 16000**-0.5)
    assert noam_lr(100, d, warmup, factor=2.0) == pytest.approx(2 * noam_lr(100, d, warmup))
    rates = [noam_lr(s, d, warmup) for s in range(1, 20000, 7)]
    peak_step = 1 + 7 * rates.index(max(rates))
    assert abs(peak_step - warmup) <= 7
    assert noam_lr(warmup, d, warmup) == pytest.approx(d**-0.5 * warmup**-0.5)
    assert noam_lr(warmup, d, warmup) > noam_lr(warmup - 1, d, warmup)
    assert noam_lr(warmup, d, warmup) > noam_lr(warmup + 1, d, warmup)


def test_train_config_round_trips_json_and_rejects_unknown_keys() -> None:
    cfg = TrainConfig(steps=7, betas=(0.8, 0.9), probes=("a b", "c"), snapshot_steps=(1, 5), time_limit_s=3.5)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # as a checkpoint stores it
    with pytest.raises(ValueError, match="unknown TrainConfig keys: colour"):
        TrainConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)


def test_snapshot_schedule_is_log_spaced() -> None:
    steps = snapshot_schedule(TrainConfig(steps=10000, n_snapshots=12))
    assert steps[0] == 1 and steps[-1] == 10000 and steps == sorted(set(steps))
    assert 10 <= len(steps) <= 12
    ratios = [b / a for a, b in zip(steps[3:], steps[4:], strict=False)]
    assert max(ratios) / min(ratios) < 1.5  # roughly constant ratio between snapshot steps
    assert snapshot_schedule(TrainConfig(steps=10, snapshot_every=4)) == [4, 8]
    assert snapshot_schedule(TrainConfig(steps=10, snapshot_steps=(3, 20, 1))) == [1, 3]


def test_loss_falls_on_a_toy_task() -> None:
    trace = losses(make_trainer(steps=120))
    assert len(trace) == 120
    assert sum(trace[-10:]) / 10 < 0.6 * sum(trace[:10]) / 10


def test_run_yields_eval_metrics_for_tasks_and_corpora() -> None:
    trainer = make_trainer(steps=20, eval_every=10, log_every=5)
    evals = [m for m in trainer.run() if isinstance(m, EvalMetrics)]
    assert [e.step for e in evals] == [10, 20]
    assert evals[-1].exact_match is not None and 0.0 <= evals[-1].exact_match <= 1.0
    assert evals[-1].alignment_score is not None and evals[-1].bleu is None
    assert math.isfinite(evals[-1].valid_loss) and len(evals[-1].samples) == 3

    tok = task_tokenizer("copy")
    pairs = [Pair(ex.src, ex.tgt) for ex in make_examples("copy", 60, seed=3, max_len=5)]
    model = Transformer(tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size))
    corpus = Trainer(model, pairs, pairs[:10], tok, tok, TrainConfig(steps=2, eval_every=2, max_tokens=128))
    (ev,) = [m for m in corpus.run() if isinstance(m, EvalMetrics)]
    assert ev.bleu is not None and ev.chrf is not None and ev.exact_match is None


def test_stop_ends_after_the_current_step() -> None:
    trainer = make_trainer(steps=1000)
    seen = []
    for m in trainer.run():
        seen.append(m.step)
        if m.step == 3:
            trainer.stop()
    assert seen == [1, 2, 3] and trainer.step == 3
    assert trainer.snapshots[-1].step == 3  # the final state is snapshotted too


def test_stop_from_another_thread() -> None:
    trainer = make_trainer(steps=100000)
    started = threading.Event()
    worker = threading.Thread(target=lambda: (started.wait(), trainer.stop()))
    worker.start()
    seen = []
    for m in trainer.run():
        seen.append(m.step)
        started.set()
    worker.join()
    assert trainer.stopped and 1 <= trainer.step < 100000
    assert seen[-1] == trainer.step  # the run ended right after a completed step


def test_time_limit_stops_the_run() -> None:
    trainer = make_trainer(steps=100000, time_limit_s=0.0)
    assert list(trainer.run()) == [] and trainer.step == 0


def test_same_seed_gives_identical_losses() -> None:
    a = losses(_dropout_trainer(5))
    b = losses(_dropout_trainer(5))
    c = losses(_dropout_trainer(6))
    assert a == b
    assert a != c


def _dropout_trainer(seed: int) -> Trainer:
    """A trainer whose model uses dropout, so the run's RNG use matters."""
    tok = task_tokenizer("reverse")
    train = make_examples("reverse", 200, seed=1, max_len=6)
    torch.manual_seed(0)
    model = Transformer(
        tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, dropout=0.2)
    )
    cfg = TrainConfig(steps=6, max_tokens=128, warmup=10, log_every=1, seed=seed, device="cpu", n_snapshots=0)
    return Trainer(model, train, train[:5], tok, tok, cfg)


def test_nan_loss_stops_with_clear_error_and_keeps_last_good_weights(monkeypatch) -> None:
    trainer = make_trainer(steps=10)
    real_loss = trainer.objective
    kept = {}

    def poisoned(model, batch, smoothing):
        loss, n = real_loss(model, batch, smoothing)
        return (loss * float("nan"), n) if trainer.step == 2 else (loss, n)

    monkeypatch.setattr(trainer, "objective", poisoned)
    with pytest.raises(TrainingDiverged, match="step 3.*weights of step 2"):
        for m in trainer.run():
            kept = {k: v.clone() for k, v in trainer.model.state_dict().items()}
            assert m.step <= 2
    assert trainer.step == 2
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(v, kept[k]) and torch.isfinite(v).all()


def test_snapshots_are_small_float16_maps_of_the_probes() -> None:
    trainer = make_trainer(steps=16, n_snapshots=5, n_probes=3)
    list(trainer.run())
    assert [s.step for s in trainer.snapshots] == snapshot_schedule(trainer.config)
    snap = trainer.snapshots[-1]
    assert len(snap.probes) == 3 and len(snap.targets) == 3
    enc, cross = snap.attention.encoder[0], snap.attention.cross[0]
    assert enc.dtype == torch.float16 and enc.shape[:2] == (3, 4)
    assert cross.shape[2] == max(len(t.split()) for t in snap.targets) + 1  # [bos] + target tokens
    row_sums = cross.float().sum(-1)
    assert torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-2)
    assert trainer.snapshot_overhead_s >= 0.0
    # early and late snapshots differ: attention changes as the model learns
    assert not torch.equal(trainer.snapshots[0].attention.cross[0], snap.attention.cross[0])


def test_probe_sentences_without_targets_use_greedy_output() -> None:
    trainer = make_trainer(steps=2, probes=("a b c", "d e"), n_snapshots=1)
    list(trainer.run())
    (snap,) = trainer.snapshots
    assert snap.probes == ["a b c", "d e"] and len(snap.targets) == 2


def test_bf16_and_fp32_training_agree_on_a_tiny_model() -> None:
    fp32 = losses(make_trainer(precision="fp32"))
    bf16 = losses(make_trainer(precision="bf16"))
    assert len(fp32) == len(bf16) == 40
    assert bf16[-1] < bf16[0] * 0.8  # bf16 learns
    assert abs(sum(bf16[-10:]) - sum(fp32[-10:])) / 10 < 0.1 * fp32[-1] + 0.05
    assert all(p.dtype == torch.float32 for p in make_trainer(precision="bf16").model.parameters())


def test_auto_precision_falls_back_to_fp32_without_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    from visformer import utils

    cpu = torch.device("cpu")
    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: False)
    assert make_trainer(precision="auto").autocast is None
    assert utils.autocast_dtype("auto", cpu, d_model=512) is None
    assert make_trainer(precision="bf16").autocast == torch.bfloat16  # asked for explicitly
    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: True)
    assert utils.autocast_dtype("auto", cpu, d_model=256) == torch.bfloat16
    assert make_trainer(precision="auto").autocast is None  # d_model 32: casts cost more than they save
    assert utils.autocast_dtype("fp32", cpu, d_model=512) is None
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp8")


@pytest.mark.parametrize(("native", "expected"), [(True, torch.bfloat16), (False, torch.float32)])
def test_the_trainer_steps_in_bf16_by_default_where_native_and_in_fp32_elsewhere(
    monkeypatch: pytest.MonkeyPatch, native: bool, expected: torch.dtype
) -> None:
    from visformer import utils

    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: native)  # the CPU capability check
    trainer = make_trainer(d_model=utils.BF16_MIN_D_MODEL, steps=2, n_snapshots=0)  # precision "auto"
    assert TrainConfig().precision == trainer.config.precision == "auto"
    seen: list[torch.dtype] = []
    trainer.model.register_forward_hook(lambda module, args, out: seen.append(out.logits.dtype))
    steps = losses(trainer)
    assert len(steps) == 2 and all(math.isfinite(loss) for loss in steps)
    assert seen and set(seen) == {expected}  # the forward passes of the training steps
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())  # fp32 master weights


@pytest.mark.parametrize("supported", [True, False])
def test_auto_precision_on_cuda_follows_the_gpus_bf16_support(
    monkeypatch: pytest.MonkeyPatch, supported: bool
) -> None:
    from visformer import utils

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: supported)
    cuda = torch.device("cuda")
    assert utils.autocast_dtype("auto", cuda, d_model=16) == (torch.bfloat16 if supported else None)


def test_a_run_restores_the_callers_thread_count_even_from_a_job_thread() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[int] = []
        trainer = make_trainer(steps=3, threads=1)
        assert torch.get_num_threads() == 2  # building a trainer changes nothing

        def job() -> None:  # the Train page runs the trainer in a background thread
            for _ in trainer.run():
                seen.append(torch.get_num_threads())

        worker = threading.Thread(target=job)
        worker.start()
        worker.join()
        assert seen and set(seen) == {1}  # the run itself used its one thread
        assert torch.get_num_threads() == 2  # the app's own inference keeps its threads
        for _ in make_trainer(steps=2, threads=1).run():
            pass
        assert torch.get_num_threads() == 2  # in the same thread too
    finally:
        torch.set_num_threads(before)


def test_weight_average_must_be_a_decay_below_one() -> None:
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="weight_average"):
            TrainConfig(weight_average=bad)


def test_the_saved_model_is_the_moving_average_of_the_trained_weights() -> None:
    decay = 0.8
    trainer = make_trainer(steps=5, weight_average=decay, n_snapshots=0)
    live = []  # the trained weights after each step (the run swaps in the average only at its end)
    for m in trainer.run():
        if isinstance(m, StepMetrics):
            live.append({k: v.detach().clone() for k, v in trainer.model.state_dict().items()})
    expected = {k: v.clone() for k, v in live[0].items()}  # the first update copies the weights
    for weights in live[1:]:
        for k in expected:
            expected[k] = decay * expected[k] + (1 - decay) * weights[k]
    final = trainer.model.state_dict()
    assert all(torch.allclose(final[k], expected[k], atol=1e-6) for k in expected)
    assert not all(torch.equal(final[k], live[-1][k]) for k in expected)  # not the last trained weights


def test_evaluations_score_the_averaged_weights_and_without_averaging_the_trained_ones() -> None:
    averaged = make_trainer(steps=6, eval_every=6, weight_average=0.9, n_snapshots=0)
    assert averaged.evaluator.model is averaged.average.module
    plain = make_trainer(steps=6, eval_every=6, n_snapshots=0)
    assert plain.average is None and plain.evaluator.model is plain.model
    a = [m for m in averaged.run() if isinstance(m, EvalMetrics)][-1]
    b = [m for m in plain.run() if isinstance(m, EvalMetrics)][-1]
    assert a.valid_loss != b.valid_loss  # the same data and seed: only the scored weights differ


def test_teacher_forced_exact_match_equals_greedy_exact_match() -> None:
    """The cheap exact match (every teacher-forced prediction right) is right where greedy decoding is right."""
    trainer = make_trainer(steps=300, eval_every=1000, n_train=2000, log_every=25)
    examples = trainer.evaluator.valid_examples
    shares = []
    for m in trainer.run():
        if isinstance(m, StepMetrics):
            _, right, _ = trainer.evaluator._task_scores(examples)
            hyps = trainer.evaluator.translate_texts([ex.src for ex in examples])
            assert right.tolist() == [
                h.split() == ex.tgt.split() for h, ex in zip(hyps, examples, strict=True)
            ]
            shares.append(float(right.float().mean()))
    assert any(0.0 < s < 1.0 for s in shares), shares  # compared while the model is partly right
