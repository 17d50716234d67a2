"""One recipe source: the CLI, the Train page and the bench build the same toy-task run for a task and seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bench.bench_time_to_learn import BEST, MEASURED
from bench.bench_time_to_learn import build_trainer as bench_trainer
from visformer import recipes
from visformer.classroom import jobs
from visformer.classroom.hosting import HostedLimits
from visformer.cli import build_parser
from visformer.cli import build_trainer as cli_trainer
from visformer.cli.train import run_spec
from visformer.data import Pair
from visformer.training import Trainer


def run_of(trainer: Trainer) -> tuple:
    """What makes a run: model config, training config, encoded training pairs and held-out sources."""
    return (
        trainer.model.config,
        trainer.config,
        trainer.train_pairs,
        [ex.src for ex in trainer.valid_examples],
    )


@pytest.mark.parametrize(("task", "seed"), [("reverse", 3), ("sort", 0)])
def test_cli_train_page_and_bench_build_the_same_run(task: str, seed: int, tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["train", "--task", task, "--out", str(tmp_path / "cli"), "--seed", str(seed)]
    )
    cli, _ = cli_trainer(args)
    spec = recipes.toy_spec("page", task, seed=seed)  # the Train page's "Fast recipe" button
    page = jobs.build_trainer(spec, HostedLimits(), recipes.prepare_data(spec.source, seed))
    bench = bench_trainer(BEST, task, seed, limit_s=60.0)
    assert run_of(cli) == run_of(page)
    measured = replace(page.config, **MEASURED, time_limit_s=60.0)  # the bench only adds how long it may run
    assert run_of(bench) == (*run_of(page)[:1], measured, *run_of(page)[2:])
    assert page.config.seed == seed and page.model.config.norm_first  # the recipe, not the paper's defaults


def test_cli_arguments_override_the_recipe(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["train", "--task", "copy", "--out", str(tmp_path / "x"), "--layers", "1", "--no-norm-first",
         "--label-smoothing", "0.1", "--n-train", "50", "--n-valid", "5"]
    )  # fmt: skip
    trainer, _ = cli_trainer(args)
    cfg = trainer.model.config
    assert (cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.norm_first) == (1, 1, False)
    assert trainer.config.label_smoothing == 0.1 and trainer.config.warmup == recipes.TOY.train.warmup
    assert len(trainer.train_pairs) == 50 and len(trainer.valid_examples) == 5


def test_a_task_is_split_one_way() -> None:
    train, valid = recipes.split_task("reverse", 300, 30, seed=5)
    assert not {ex.src for ex in train} & {ex.src for ex in valid}
    assert (train, valid) == recipes.split_task("reverse", 300, 30, seed=5)
    prepared = recipes.prepare_data(recipes.TaskSource("reverse", 300, 30), seed=5)
    assert [ex.src for ex in prepared.valid] == [ex.src for ex in valid]


def paraphrased_corpus() -> list[Pair]:
    """60 meanings, each said three ways (three sources, one target): the paraphrases share their target."""
    words = "cat dog bird fish cow horse fox owl bee ant".split()
    colours = "red blue green gold grey pink".split()
    pairs = []
    for w in words:
        for c in colours:
            target = f"the {c} {w}"
            pairs += [Pair(f"{c} {w}", target), Pair(f"a {c} {w}", target), Pair(f"one {c} {w} here", target)]
    return pairs


def assert_held_out_is_unseen(train: list[Pair], held_out: list[Pair]) -> None:
    """No source and no target of a held-out pair occurs in training."""
    assert held_out
    assert not {p.src for p in held_out} & {p.src for p in train}
    assert not {p.tgt for p in held_out} & {p.tgt for p in train}


def test_the_train_page_holds_out_no_paraphrase_of_a_training_sentence() -> None:
    source = recipes.PairsSource("para", tuple(paraphrased_corpus()), vocab_size=300, valid=12, test=6)
    prepared = recipes.prepare_data(source, seed=1)
    assert_held_out_is_unseen(prepared.train, prepared.valid + prepared.test)
    assert len(prepared.train) + len(prepared.valid) + len(prepared.test) == len(source.pairs)


def test_train_corpus_without_valid_holds_out_no_paraphrase(tmp_path: Path) -> None:
    pairs = paraphrased_corpus()
    (tmp_path / "c.src").write_text("".join(p.src + "\n" for p in pairs), encoding="utf-8")
    (tmp_path / "c.tgt").write_text("".join(p.tgt + "\n" for p in pairs), encoding="utf-8")
    args = build_parser().parse_args(
        ["train", "--corpus", str(tmp_path / "c.src"), str(tmp_path / "c.tgt"), "--out", str(tmp_path / "x"),
         "--vocab-size", "300", "--seed", "2"]
    )  # fmt: skip
    trainer, test = cli_trainer(args)
    train, valid, held_out_test = recipes.split_data(run_spec(args).source, seed=2)  # the split it trained on
    assert [p.src for p in trainer.valid_examples] == [p.src for p in valid] and test == held_out_test
    assert len(trainer.train_pairs) == len(train)
    assert_held_out_is_unseen(train, valid + test)


def test_train_corpus_with_valid_files_trains_on_every_pair(tmp_path: Path) -> None:
    pairs = paraphrased_corpus()
    for name, part in (("c", pairs), ("v", pairs[:5])):
        (tmp_path / f"{name}.src").write_text("".join(p.src + "\n" for p in part), encoding="utf-8")
        (tmp_path / f"{name}.tgt").write_text("".join(p.tgt + "\n" for p in part), encoding="utf-8")
    args = build_parser().parse_args(
        ["train", "--corpus", str(tmp_path / "c.src"), str(tmp_path / "c.tgt"), "--out", str(tmp_path / "x"),
         "--valid", str(tmp_path / "v.src"), str(tmp_path / "v.tgt"), "--vocab-size", "300"]
    )  # fmt: skip
    trainer, test = cli_trainer(args)
    assert len(trainer.train_pairs) == len(pairs) and test == []
    assert [p.src for p in trainer.valid_examples] == [p.src for p in pairs[:5]]


def test_a_corpus_of_one_meaning_cannot_be_held_out_and_says_so() -> None:
    pairs = tuple(
        Pair(f"{w} hello", "hello") for w in ("well", "oh", "so", "ah")
    )  # one target: one component
    with pytest.raises(ValueError, match="no pairs left to train on"):
        recipes.prepare_data(recipes.PairsSource("hello", pairs, vocab_size=300))
