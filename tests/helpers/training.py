"""Tiny training runs: a trainer on a toy task, and the CLI flags of a tiny model."""

from __future__ import annotations

import torch

from tests.helpers.checkpoints import tiny_config
from visformer.config import TrainConfig
from visformer.model import Transformer
from visformer.tasks import make_examples, task_tokenizer
from visformer.training import Trainer

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--max-len", "32",
        "--max-tokens", "256", "--warmup", "10", "--log-every", "5", "--no-progress"]  # fmt: skip


def make_trainer(
    task: str = "copy", seed: int = 0, n_train: int = 300, d_model: int = 32, **overrides
) -> Trainer:
    """A d_model=32, one-layer trainer on a toy task."""
    tok = task_tokenizer(task)
    valid = make_examples(task, 20, seed=99, max_len=6)
    train = make_examples(task, n_train, seed=seed, max_len=6)
    settings = dict(
        steps=40,
        max_tokens=256,
        warmup=20,
        lr_factor=1.0,
        log_every=1,
        eval_every=1000,
        label_smoothing=0.0,
        seed=seed,
        device="cpu",
        n_snapshots=4,
    )
    settings.update(overrides)
    torch.manual_seed(seed)
    model = Transformer(
        tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=d_model)
    )
    return Trainer(model, train, valid, tok, tok, TrainConfig(**settings), task=task)
