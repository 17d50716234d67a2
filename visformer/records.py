"""Typed records of a training run: the metrics stream and attention snapshots.

Written by the trainer, saved and loaded by `visformer.checkpoint`, drawn by the pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import AttentionMaps


@dataclass(frozen=True)
class StepMetrics:
    """Progress after a training step (loss averaged since the previous report)."""

    step: int
    loss: float
    lr: float
    tokens_per_s: float
    elapsed_s: float


@dataclass(frozen=True)
class EvalMetrics:
    """Validation after a step: loss always, BLEU/chrF for corpora, exact match/alignment for tasks."""

    step: int
    valid_loss: float
    bleu: float | None = None
    chrf: float | None = None
    exact_match: float | None = None
    alignment_score: float | None = None
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # (source, reference, output)
    elapsed_s: float = 0.0


@dataclass
class Snapshot:
    """Attention maps of the fixed probe sentences at one training step (float16, B = probes)."""

    step: int
    loss: float
    probes: list[str]  # source texts
    attention: AttentionMaps
    targets: list[str] = field(default_factory=list)  # target texts fed with teacher forcing
