"""Resuming a run (with and without Adam's state) and averaging checkpoints, in the API and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from tests.helpers.training import TINY, make_trainer
from visformer.checkpoint import (
    OPTIMIZER_FILE,
    CheckpointError,
    average_checkpoints,
    load_checkpoint,
    load_optimizer_state,
    save_checkpoint,
    save_trainer,
)
from visformer.cli import main
from visformer.model import Transformer
from visformer.records import StepMetrics
from visformer.training import Trainer, noam_lr


def run_all(trainer: Trainer) -> None:
    """Drain the metrics stream."""
    for _ in trainer.run():
        pass


def resumed(folder: Path, steps: int, with_optimizer: bool = True) -> Trainer:
    """A fresh trainer of the same task continuing the run saved in `folder`."""
    ckpt = load_checkpoint(folder)
    trainer = make_trainer("reverse", steps=steps)
    trainer.model.load_state_dict(ckpt.model.state_dict())
    optimizer = load_optimizer_state(folder) if with_optimizer else None
    trainer.restore(ckpt.metrics, ckpt.snapshots, optimizer)
    return trainer


def test_resume_with_adam_state_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    whole = make_trainer("reverse", steps=24)
    run_all(whole)
    first = make_trainer("reverse", steps=12)
    run_all(first)
    save_trainer(tmp_path / "half-way", first, resumable=True)
    assert (tmp_path / "half-way" / OPTIMIZER_FILE).is_file()
    second = resumed(tmp_path / "half-way", steps=24)
    assert second.step == 12
    run_all(second)
    assert second.step == 24
    for (name, a), b in zip(
        whole.model.state_dict().items(), second.model.state_dict().values(), strict=True
    ):
        assert torch.allclose(a, b, atol=1e-6), name
    assert [m.step for m in second.history] == [m.step for m in whole.history]
    assert [m.loss for m in second.history] == pytest.approx([m.loss for m in whole.history], rel=1e-5)


def test_resume_without_adam_state_ramps_the_learning_rate_up_again(tmp_path: Path) -> None:
    first = make_trainer("reverse", steps=10)
    run_all(first)
    save_trainer(tmp_path / "plain", first)  # no optimizer.safetensors
    assert load_optimizer_state(tmp_path / "plain") is None
    trainer = resumed(tmp_path / "plain", steps=30, with_optimizer=False)
    d, c = trainer.model.config.d_model, trainer.config
    full = [noam_lr(s, d, c.warmup, c.lr_factor) for s in (11, 100, 300)]
    assert trainer.lr(11) == pytest.approx(full[0] / 200)
    assert trainer.lr(100) < full[1]
    assert trainer.lr(300) == pytest.approx(full[2])
    steps = [m.step for m in trainer.run() if isinstance(m, StepMetrics)]
    assert steps[0] == 11 and steps[-1] == 30


def test_adam_state_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    trainer = make_trainer("reverse", steps=4)
    run_all(trainer)
    state = trainer.optimizer_tensors()
    with pytest.raises(ValueError, match="unexpected tensor"):
        make_trainer("reverse").load_optimizer_tensors({**state, "999.exp_avg": torch.zeros(1)})
    wrong = {k: (torch.zeros(3) if k == "0.exp_avg" else v) for k, v in state.items()}
    with pytest.raises(ValueError, match="shape"):
        make_trainer("reverse").load_optimizer_tensors(wrong)


def test_average_is_the_mean_of_the_weights(tmp_path: Path) -> None:
    a, b = make_trainer("reverse", steps=3), make_trainer("reverse", steps=9)
    run_all(a)
    run_all(b)
    save_trainer(tmp_path / "a", a)
    save_trainer(tmp_path / "b", b)
    average_checkpoints([tmp_path / "a", tmp_path / "b"], tmp_path / "avg", half=False)
    avg = load_checkpoint(tmp_path / "avg")
    for name, tensor in avg.model.state_dict().items():
        expected = (a.model.state_dict()[name] + b.model.state_dict()[name]) / 2
        assert torch.allclose(tensor, expected, atol=1e-6), name
    assert [entry["steps"] for entry in avg.info["averaged"]] == [3, 9]
    assert not torch.equal(
        avg.model.state_dict()["generator.weight"], b.model.state_dict()["generator.weight"]
    )


def test_average_accepts_a_fine_tune_with_other_dropout_and_keeps_the_last_ones(tmp_path: Path) -> None:
    from dataclasses import replace

    a = make_trainer("reverse", steps=3)
    run_all(a)
    save_trainer(tmp_path / "a", a)
    more = Transformer(replace(a.model.config, dropout=0.3))  # same shapes, other dropout
    save_checkpoint(tmp_path / "b", more, a.src_tok, a.tgt_tok, task="reverse")
    average_checkpoints([tmp_path / "a", tmp_path / "b"], tmp_path / "avg", half=False)
    avg = load_checkpoint(tmp_path / "avg")
    assert avg.model_config.dropout == 0.3
    expected = (a.model.state_dict()["generator.weight"] + more.state_dict()["generator.weight"]) / 2
    assert torch.allclose(avg.model.state_dict()["generator.weight"], expected, atol=1e-6)


def test_average_refuses_different_models(tmp_path: Path) -> None:
    trainer = make_trainer("reverse")
    save_trainer(tmp_path / "a", trainer)
    save_trainer(tmp_path / "b", make_trainer("copy"))
    with pytest.raises(CheckpointError, match="different tasks"):
        average_checkpoints([tmp_path / "a", tmp_path / "b"], tmp_path / "avg")
    wider = Transformer(tiny_config(src_vocab_size=trainer.model.config.src_vocab_size,
                                    tgt_vocab_size=trainer.model.config.tgt_vocab_size, d_model=64))  # fmt: skip
    save_checkpoint(tmp_path / "c", wider, trainer.src_tok, trainer.tgt_tok, task="reverse")
    with pytest.raises(CheckpointError, match="different model configs"):
        average_checkpoints([tmp_path / "a", tmp_path / "c"], tmp_path / "avg")
    with pytest.raises(CheckpointError, match="no checkpoints"):
        average_checkpoints([], tmp_path / "avg")


def test_cli_resume_continues_and_average_writes_a_loadable_checkpoint(tmp_path: Path, capsys) -> None:
    common = ["--task", "reverse", "--n-train", "200", "--n-valid", "20", "--eval-every", "10", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--out", str(first), "--steps", "10", "--resumable", *common]) == 0
    assert (first / OPTIMIZER_FILE).is_file()
    second = tmp_path / "second"
    assert main(["train", "--out", str(second), "--steps", "20", "--resume", str(first), *common]) == 0
    assert "with Adam's state" in capsys.readouterr().err
    info = json.loads((second / "config.json").read_text())["info"]
    assert info["steps"] == 20 and info["resumed_from"] == {"checkpoint": "first", "steps": 10}
    assert not (second / OPTIMIZER_FILE).exists()  # only written with --resumable
    history = load_checkpoint(second).metrics["history"]
    assert [m["step"] for m in history] == [5, 10, 15, 20]
    avg = tmp_path / "avg"
    assert main(["average", str(first), str(second), "--out", str(avg)]) == 0
    assert json.loads((avg / "config.json").read_text())["info"]["weights_dtype"] == "float16"
    assert load_checkpoint(avg).model_config == load_checkpoint(second).model_config


def test_cli_resume_of_another_kind_of_run_is_a_clear_error(tmp_path: Path, capsys) -> None:
    common = ["--n-train", "200", "--n-valid", "20", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--task", "reverse", "--out", str(first), "--steps", "5", *common]) == 0
    capsys.readouterr()
    code = main(["train", "--task", "copy", "--out", str(tmp_path / "x"), "--resume", str(first), *common])
    assert code == 2
    assert "trained on reverse, not copy" in capsys.readouterr().err
    code = main(
        ["train", "--task", "copy", "--out", str(tmp_path / "x"), "--resume", str(tmp_path / "nope"), *common]
    )
    assert code == 2
    assert "no checkpoint folder" in capsys.readouterr().err


def test_cli_resume_can_fine_tune_with_more_dropout_and_another_lr(tmp_path: Path, capsys) -> None:
    common = ["--task", "reverse", "--n-train", "200", "--n-valid", "20", "--eval-every", "10", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--out", str(first), "--steps", "10", *common]) == 0
    before = load_checkpoint(first)
    assert before.model_config.dropout != 0.3
    same = tmp_path / "same"  # no further steps: the weights must come through the rebuild unchanged
    args = ["train", "--out", str(same), "--steps", "10", "--resume", str(first), "--dropout", "0.3"]
    assert main([*args, "--lr-factor", "0.2", *common]) == 0
    after = load_checkpoint(same)
    assert after.model_config.dropout == 0.3
    assert after.train_config.lr_factor == 0.2
    for name, tensor in before.model.state_dict().items():
        assert torch.equal(after.model.state_dict()[name], tensor), name
    assert all(m.p == 0.3 for m in after.model.modules() if isinstance(m, torch.nn.Dropout))


def test_cli_resume_keeps_the_runs_seed_and_so_its_held_out_split(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """A run trained with --seed 3 resumes on the split of seed 3 (another split would put trained pairs in the
    held-out set); asking for another seed on --resume is a clear error."""
    import visformer.recipes as recipes

    common = ["--task", "reverse", "--n-train", "200", "--n-valid", "20", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--out", str(first), "--steps", "5", "--seed", "3", *common]) == 0
    seeds: list[int] = []
    split = recipes.split_data
    monkeypatch.setattr(
        recipes, "split_data", lambda source, seed=0: seeds.append(seed) or split(source, seed)
    )
    second = tmp_path / "second"
    assert main(["train", "--out", str(second), "--steps", "10", "--resume", str(first), *common]) == 0
    assert seeds == [3] and load_checkpoint(second).train_config.seed == 3
    capsys.readouterr()
    again = ["train", "--out", str(tmp_path / "x"), "--steps", "10", "--resume", str(first), "--seed", "4"]
    assert main([*again, *common]) == 2
    assert "trained with --seed 3" in capsys.readouterr().err
    assert main([*again[:-1], "3", *common]) == 0  # the run's own seed, spelled out, is fine


def test_a_cooldown_anneals_the_last_steps_linearly_to_zero_and_leaves_the_rest_alone() -> None:
    trainer = make_trainer("reverse", steps=40)
    cooled = make_trainer("reverse", steps=40)
    cooled.config = replace(cooled.config, cooldown=10)
    assert [cooled.lr(s) for s in (1, 20, 30)] == [trainer.lr(s) for s in (1, 20, 30)]
    assert cooled.lr(35) == pytest.approx(trainer.lr(35) * 0.5)
    assert cooled.lr(40) == 0.0
    with pytest.raises(ValueError, match="cooldown"):
        replace(cooled.config, cooldown=41)


def test_cli_resume_with_a_cooldown_ends_at_the_given_step_with_the_learning_rate_at_zero(
    tmp_path: Path, capsys
) -> None:
    common = ["--task", "reverse", "--n-train", "200", "--n-valid", "20", "--eval-every", "10", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--out", str(first), "--steps", "10", "--resumable", *common]) == 0
    second = tmp_path / "second"
    args = ["train", "--out", str(second), "--steps", "20", "--cooldown", "10", "--resume", str(first)]
    assert main([*args, "--log-every", "5", *common]) == 0
    ckpt = load_checkpoint(second)
    assert ckpt.train_config.cooldown == 10
    rates = {m["step"]: m["lr"] for m in ckpt.metrics["history"] if "lr" in m}
    assert rates[20] == 0.0 and 0.0 < rates[15] < rates[10]
