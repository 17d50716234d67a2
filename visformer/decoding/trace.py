"""What a strategy returns: per-step traces, hypotheses, beam trees, and how a step is recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .filters import Filtered, largest


@dataclass
class Step:
    """One decoding step of one sentence: what the model offered, what the filters kept, what was chosen."""

    token: int  # the chosen token
    token_prob: float  # its model probability (before filters)
    logprob: float  # running log P(y_1..y_t | x) under the model
    candidates: list[int]  # the most probable ids, best first
    probs: list[float]  # their model probabilities (before filters)
    filtered: list[float]  # their probabilities after the filters (0 = filtered out)
    kept: list[bool]  # whether each candidate survived the filters (beam: became a beam)
    n_kept: int  # size of the whole kept set


@dataclass
class Hypothesis:
    """A finished output: tokens without bos (ending in eos if produced) and its scores."""

    tokens: list[int]
    logprob: float  # log P(Y | X)
    score: float  # what the strategy ranks by (beam: logprob / length_penalty; otherwise logprob)
    finished: bool  # True when it ended with eos, False when the length limit cut it
    node: tuple[int, int] | None = None  # beam: (step, beam) of its last token in the tree


@dataclass
class BeamNode:
    """A beam at one step: where it came from, the token it added, its score, whether it finished."""

    step: int  # 1-based: the node holds target token `step`
    beam: int  # slot at this step
    parent: int  # slot at step - 1 it extends (step 1: 0, the root [bos])
    token: int
    logprob: float  # running log P of the hypothesis up to this token
    score: float  # logprob / length_penalty(step)
    finished: bool  # this token is eos


@dataclass
class Output:
    """What a strategy produced for one source sentence."""

    best: Hypothesis
    steps: list[Step]  # per step, along the best output
    nbest: list[Hypothesis]  # best first (greedy and sampling: just `best`)
    tree: list[list[BeamNode]] = field(default_factory=list)  # beam search: nodes per step

    @property
    def tokens(self) -> list[int]:
        """Tokens of the best output."""
        return self.best.tokens


@dataclass
class DecodeResult:
    """A strategy's outputs for a batch, one per source sentence, with the parameters it used."""

    strategy: str
    params: dict[str, Any]
    outputs: list[Output]


def _steps_from_lists(rec: dict[str, list]) -> list[Step]:
    """Per-step Step objects from column lists."""
    return [Step(*values) for values in zip(*(rec[name] for name in _STEP_FIELDS), strict=True)]


_STEP_FIELDS = ("token", "token_prob", "logprob", "candidates", "probs", "filtered", "kept", "n_kept")


class TraceRecorder:
    """Collects each step's trace as tensors during decoding and turns them into Steps at the end.

    The loop only runs tensor ops (top candidates, gathers); the per-sentence Python lists are built once
    in `outputs`, off the decoding loop. n_candidates 0 records only the choice and its probabilities (no
    candidates, n_kept 0): for bulk translation, where nobody looks at the trace.
    """

    def __init__(self, batch: int, n_candidates: int) -> None:
        self.batch, self.n_candidates = batch, n_candidates
        self.steps: list[tuple[Tensor, dict[str, Tensor]]] = []  # (rows (A,), columns (A, ...))

    def add(
        self, rows: Tensor, token: Tensor, log_probs: Tensor, filtered: Filtered | None, running: Tensor
    ) -> None:
        """One step of the active rows: choice (A,), log-probabilities (A, V), filters (None: greedy's one token)."""
        columns = {
            "token": token,
            "token_prob": log_probs.gather(1, token[:, None]).squeeze(1).exp(),
            "logprob": running.clone(),
        }
        if self.n_candidates > 0:
            top_logp, top_i = largest(log_probs, min(self.n_candidates, log_probs.shape[-1]))  # (A, n)
            if filtered is None:  # only the chosen token is kept, with probability 1
                kept = top_i == token[:, None]
                columns |= {
                    "filtered": kept.to(top_logp.dtype),
                    "kept": kept,
                    "n_kept": torch.ones_like(token),
                }
            else:
                columns |= {
                    "filtered": filtered.probs.gather(1, top_i),
                    "kept": filtered.kept.gather(1, top_i),
                    "n_kept": filtered.kept.count_nonzero(dim=1),
                }
            columns |= {"candidates": top_i, "probs": top_logp.exp()}
        self.steps.append((rows, columns))

    def records(self) -> list[dict[str, list]]:
        """Per sentence, its step columns as lists."""
        recs = [{name: [] for name in _STEP_FIELDS} for _ in range(self.batch)]
        empty = {name: [] for name in ("candidates", "probs", "filtered", "kept")} | {"n_kept": 0}
        for rows, columns in self.steps:
            lists = {name: col.tolist() for name, col in columns.items()}
            for a, row in enumerate(rows.tolist()):
                for name in _STEP_FIELDS:
                    recs[row][name].append(lists[name][a] if name in lists else empty[name])
        return recs

    def outputs(self, eos_id: int) -> list[Output]:
        """Every sentence's Output."""
        return [_output(rec, eos_id) for rec in self.records()]


def _output(rec: dict[str, list], eos_id: int) -> Output:
    """One sentence's Output from its step record."""
    tokens = rec["token"]
    logprob = rec["logprob"][-1]
    best = Hypothesis(list(tokens), logprob, logprob, finished=tokens[-1] == eos_id)
    return Output(best, _steps_from_lists(rec), [best])
