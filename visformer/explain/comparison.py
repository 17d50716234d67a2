"""One sentence through two models (an RNN with attention and a Transformer): outputs, alignments, scores.

An RNN seq2seq has one attention only, the decoder's look at the encoder states (cross-attention); the
Transformer has one cross-attention map per layer and head. Both come back as (layers, heads, T, S) stacks, so
the same heatmap draws them side by side. On a toy task the right answer and the right alignment are known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..decoding import translate
from ..i18n import t
from ..tasks import alignment_score
from .analysis import stack_maps

REFERENCE_TASKS = ("copy", "reverse")  # toy tasks whose answer and alignment follow from any source


@dataclass(frozen=True)
class SystemRun:
    """What one model did with the sentence."""

    name: str
    architecture: str
    text: str  # its output
    src_pieces: list[str]  # keys of cross-attention: source + </s>
    query_pieces: list[str]  # what each row produced (output pieces, ending in </s>)
    cross: np.ndarray  # (layers, heads, T, S)
    logprob: float  # log P(output | source) under the model
    correct: bool | None  # output equals the task's answer (None: no known answer)
    alignment: (
        float  # share of output pieces whose strongest attention hits their source piece (NaN: unknown)
    )
    held_out_exact_match: float | None  # from the checkpoint's final evaluation
    test_bleu: float | None = None  # a corpus model's recorded test score (config.json info.test)

    def layer_map(self, layer: int) -> np.ndarray:
        """Heads averaged at one layer: (T, S)."""
        return self.cross[layer].mean(axis=0)


def task_reference(task: str | None, source: str) -> tuple[str, list[int]] | None:
    """The answer and alignment (target j <- source piece alignment[j]) of copy/reverse for any source."""
    if task not in REFERENCE_TASKS:
        return None
    words = source.split()
    n = len(words)
    if task == "copy":
        return " ".join(words), list(range(n))
    return " ".join(reversed(words)), [n - 1 - j for j in range(n)]


def _final_exact_match(metrics: dict[str, Any]) -> float | None:
    """The exact match of a checkpoint's final evaluation, when recorded."""
    value = (metrics.get("final") or {}).get("exact_match")
    return None if value is None else float(value)


def run_system(ck: Any, sentence: str) -> SystemRun:
    """Greedy output of a loaded checkpoint (visformer.checkpoint.Checkpoint) with its cross-attention and scores."""
    result = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, sentence, "greedy")
    if result.attention.cross:
        cross = stack_maps(result.attention, "cross")  # (L, h, T, S)
    else:  # an RNN without attention: no map at all
        cross = np.zeros((0, 1, len(result.tgt_ids), len(result.src_ids)), dtype=np.float32)
    reference = task_reference(ck.task, sentence)
    correct, alignment = None, math.nan
    if reference is not None:
        correct = result.text.split() == reference[0].split()
        if len(cross):
            alignment = alignment_score(cross[-1].mean(axis=0), reference[1])
    return SystemRun(
        name=ck.name, architecture=ck.model_config.architecture, text=result.text,
        src_pieces=list(result.src_pieces), query_pieces=list(result.tgt_pieces), cross=cross,
        logprob=float(result.output.steps[-1].logprob) if result.output.steps else 0.0,
        correct=correct, alignment=alignment, held_out_exact_match=_final_exact_match(ck.metrics),
        test_bleu=recorded_test(ck.info).get("bleu"),
    )  # fmt: skip


def recorded_test(info: dict[str, Any]) -> dict[str, Any]:
    """The test evaluation a checkpoint records in its info (empty when it has none)."""
    test = info.get("test")
    return test if isinstance(test, dict) else {}


def length_scores(info: dict[str, Any]) -> tuple[tuple[str, float], ...]:
    """(source words, BLEU) per length bucket of the recorded test (`evaluate --by-length`)."""
    return tuple((str(b["words"]), float(b["bleu"])) for b in recorded_test(info).get("by_length", []))


def length_figure(
    scores: Mapping[str, Sequence[tuple[str, float]]], title: str, lang: str = "en"
) -> go.Figure:
    """Grouped bars: test BLEU per source-length bucket ({model: length_scores}), one colour per model."""
    fig = go.Figure(
        [go.Bar(name=name, x=[w for w, _ in rows], y=[b for _, b in rows],
                text=[f"{b:.1f}" for _, b in rows], textposition="outside") for name, rows in scores.items() if rows]
    )  # fmt: skip
    fig.update_layout(title=title, barmode="group", height=380, legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(title=t("models.cmp.length_x", lang), type="category")
    fig.update_yaxes(title="BLEU", rangemode="tozero")
    return fig
