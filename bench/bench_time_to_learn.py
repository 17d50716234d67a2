"""Time to learn: seconds of training until the reverse task is solved on held-out sequences.

Fallback used by bench/run.py when the training helper provides no `bench/bench_learning.py`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from visformer.config import ModelConfig
from visformer.model import Transformer
from visformer.utils import seed_everything

from .common import Section

REVERSE_MODEL = dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.0)


@dataclass
class LearnResult:
    """When (if ever) a run reached 100% exact match."""

    solved: bool
    train_s: float  # training time only (evaluation and snapshots excluded)
    wall_s: float  # including the periodic evaluations
    step: int
    exact_match: float


def time_to_learn(
    task: str = "reverse", limit_s: float = 120.0, eval_every: int = 50, seed: int = 0
) -> LearnResult:
    """Train a small model on `task` until held-out exact match is 100% or `limit_s` of training passes."""
    from visformer.tasks import make_examples, task_tokenizer
    from visformer.training import EvalMetrics, TrainConfig, Trainer

    seed_everything(seed)
    tok = task_tokenizer(task)
    train = make_examples(task, 20000, seed=seed)
    valid = make_examples(task, 200, seed=seed + 1, exclude={ex.src for ex in train})
    config = ModelConfig(
        src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, max_len=64, **REVERSE_MODEL
    )
    train_config = TrainConfig(
        steps=100_000,
        max_tokens=2048,
        warmup=300,
        lr_factor=2.0,
        eval_every=eval_every,
        eval_examples=200,
        log_every=eval_every,
        n_snapshots=0,
        time_limit_s=limit_s * 3,
        seed=seed,
    )
    trainer = Trainer(Transformer(config), train, valid, tok, tok, train_config, task=task)
    start = time.perf_counter()
    best = 0.0
    for metrics in trainer.run():
        if not isinstance(metrics, EvalMetrics):
            continue
        train_s = trainer.elapsed_s - trainer.eval_overhead_s - trainer.snapshot_overhead_s
        best = max(best, metrics.exact_match or 0.0)
        if (metrics.exact_match or 0.0) >= 1.0 or train_s >= limit_s:
            trainer.stop()
            return LearnResult(best >= 1.0, train_s, time.perf_counter() - start, metrics.step, best)
    train_s = trainer.elapsed_s - trainer.eval_overhead_s - trainer.snapshot_overhead_s
    return LearnResult(best >= 1.0, train_s, time.perf_counter() - start, trainer.step, best)


def run(quick: bool = False) -> Section:
    """The time-to-learn section (reverse task); quick mode trains for a few seconds only."""
    section = Section(
        title="Time to learn",
        intro=(
            "Seconds of training (evaluation excluded) until a small model "
            f"({', '.join(f'{k} {v}' for k, v in REVERSE_MODEL.items())}) decodes 200 held-out reverse-task "
            "sequences with 100% exact match (greedy), checked every 50 steps. Target: < 60 s on 2 CPU cores."
        ),
        header=["task", "solved", "training s", "wall s (with evals)", "step", "exact match"],
    )
    try:
        r = time_to_learn("reverse", limit_s=3.0 if quick else 120.0, eval_every=10 if quick else 50)
    except ImportError as err:
        section.notes.append(f"skipped: {err} (visformer.training / visformer.tasks not available yet)")
        return section
    section.rows.append(
        [
            "reverse",
            "yes" if r.solved else "no",
            f"{r.train_s:.1f}",
            f"{r.wall_s:.1f}",
            str(r.step),
            f"{r.exact_match:.0%}",
        ]
    )
    return section
