"""Evaluation during and after training: validation loss, greedy translations, BLEU/chrF or exact match;
BLEU by source length (`evaluate --by-length`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .architectures import architecture
from .data import Batch, batches, encode_pairs, make_batch, source_batch
from .decoding import beam_search, greedy
from .models import Model
from .records import EvalMetrics
from .tasks import TaskExample, alignment_score, exact_match
from .tokenizer import Tokenizer

LossFn = Callable[[nn.Module, Batch, float], tuple[Tensor, int]]  # (model, batch, smoothing) -> (sum, tokens)


def corpus_scores(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    """sacreBLEU (cased, 13a) and chrF of detokenised hypotheses against one reference each."""
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    return float(bleu), float(chrf)


def best_head_alignment(cross: list[Tensor], alignments: list[list[int]]) -> float:
    """Alignment score of the best cross-attention head; cross: per layer (B, h, T, S), teacher-forced."""
    scores = [
        alignment_score(layer[:, h : h + 1], alignments) for layer in cross for h in range(layer.shape[1])
    ]
    scores = [x for x in scores if not math.isnan(x)]
    return max(scores) if scores else 0.0


@torch.no_grad()
def translate_batch(
    model: Model,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    texts: Sequence[str],
    beam_size: int = 1,
    precision: str = "auto",
) -> list[str]:
    """Translate one batch of texts: greedy (beam_size 1) or beam search from visformer.decoding."""
    src = source_batch(src_tok, texts, model.config.max_len).to(next(model.parameters()).device)  # (B, S)
    ids = dict(
        bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id, n_candidates=0, precision=precision
    )  # length: decoding's rule
    if beam_size <= 1:
        result = greedy(model, src, **ids)
    else:
        result = beam_search(model, src, beam_size=beam_size, n_best=1, **ids)
    return [tgt_tok.decode(o.tokens) for o in result.outputs]


def translate_all(
    model: Model,
    src_tok: Any,
    tgt_tok: Any,
    texts: Sequence[str],
    beam_size: int = 1,
    batch_size: int = 32,
    progress: bool = True,
    precision: str = "auto",
) -> list[str]:
    """Translate many texts in length-sorted batches, with a progress bar."""
    from tqdm import tqdm

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[str] = [""] * len(texts)
    with (
        torch.no_grad(),
        tqdm(total=len(texts), desc="translating", unit="sent", disable=not progress) as bar,
    ):
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            for i, hyp in zip(
                idx,
                translate_batch(model, src_tok, tgt_tok, [texts[i] for i in idx], beam_size, precision),
                strict=True,
            ):
                out[i] = hyp
            bar.update(len(idx))
    return out


def _device(model: nn.Module) -> torch.device:
    """The device the model's weights are on."""
    return next(model.parameters()).device


class Evaluator:
    """Scores a model on held-out examples: the trainer's collaborator for `eval_every` evaluations."""

    def __init__(
        self,
        model: Model,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        valid_examples: Sequence[Any],
        loss: LossFn,
        max_tokens: int,
        n_examples: int,
    ) -> None:
        self.model, self.src_tok, self.tgt_tok, self.loss = model, src_tok, tgt_tok, loss
        self.max_tokens, self.n_examples = max_tokens, n_examples
        self.valid_examples = [ex for ex in valid_examples if ex.src]
        self.valid_pairs = encode_pairs(self.valid_examples, src_tok, tgt_tok, model.config.max_len)
        self.evals: list[EvalMetrics] = []
        self.overhead_s = 0.0

    @property
    def translates(self) -> bool:
        """Whether the model translates (else only its loss is scored: a language model)."""
        return architecture(self.model.config.architecture).translates

    @property
    def scores_task(self) -> bool:
        """Whether the held-out examples are a toy task's (exact match, alignment) rather than a corpus's (BLEU)."""
        return bool(self.valid_examples) and isinstance(self.valid_examples[0], TaskExample)

    @torch.no_grad()
    def valid_loss(self) -> float:
        """Per-token cross-entropy (no smoothing) on the validation pairs."""
        if not self.valid_pairs:
            return float("nan")
        self.model.eval()
        tok = self.tgt_tok
        total, count = 0.0, 0
        for batch in batches(self.valid_pairs, self.max_tokens, tok, False, 0):
            loss, n = self.loss(self.model, batch, 0.0)
            total, count = total + loss.item(), count + n
        return total / max(count, 1)

    def translate_texts(self, texts: Sequence[str], batch_size: int = 64) -> list[str]:
        """Greedy translations of source texts (for evaluation and samples)."""
        self.model.eval()
        out: list[str] = []
        for i in range(0, len(texts), batch_size):
            out += translate_batch(self.model, self.src_tok, self.tgt_tok, texts[i : i + batch_size])
        return out

    def evaluate(self, step: int, elapsed_s: float) -> EvalMetrics:
        """Valid loss plus BLEU/chrF (corpora) or exact match/alignment score (tasks) after `step`."""
        t0 = time.perf_counter()
        examples = self.valid_examples[: self.n_examples]
        refs = [ex.tgt for ex in examples]
        bleu = chrf = exact = align = None
        scored = self._task_scores(examples) if examples and self.scores_task and self.translates else None
        if not self.translates:
            loss, hyps = self.valid_loss(), []
        elif scored is not None:
            loss, right, align = scored
            exact = float(right.float().mean())
            if (
                exact >= 1.0
            ):  # exact match from teacher forcing; a 100% is confirmed by decoding every example
                hyps = self.translate_texts([ex.src for ex in examples])
                exact = exact_match(hyps, refs)
            else:  # the samples: a fully right row is what greedy decoding outputs, the others are decoded
                wrong = [i for i in range(min(3, len(examples))) if not right[i]]
                decoded = dict(
                    zip(wrong, self.translate_texts([examples[i].src for i in wrong]), strict=True)
                )
                hyps = [decoded.get(i, refs[i]) for i in range(min(3, len(examples)))]
        else:
            loss = self.valid_loss()
            hyps = self.translate_texts([ex.src for ex in examples]) if examples else []
            if examples and self.scores_task:  # a task whose examples max_len cuts
                exact = exact_match(hyps, refs)
            elif examples:
                bleu, chrf = corpus_scores(hyps, refs)
        samples = [(ex.src, ex.tgt, h) for ex, h in zip(examples[:3], hyps[:3], strict=False)]
        self.overhead_s += time.perf_counter() - t0
        metrics = EvalMetrics(step, loss, bleu, chrf, exact, align, samples, elapsed_s)
        self.evals.append(metrics)
        return metrics

    @torch.no_grad()
    def _task_scores(self, examples: Sequence[Any]) -> tuple[float, Tensor, float] | None:
        """Loss, which examples are fully right (B,) and the alignment score, from one teacher-forced pass.

        Greedy decoding reproduces a target exactly when every teacher-forced prediction is right (by
        induction over the prefix), so the share of fully right rows is greedy's exact match without decoding.
        None when max_len cuts an example.
        """
        pairs = encode_pairs(examples, self.src_tok, self.tgt_tok, self.model.config.max_len)
        if len(pairs) != len(examples):
            return None
        tok, device = self.tgt_tok, _device(self.model)
        batch = make_batch(pairs, tok.pad_id, tok.bos_id, tok.eos_id).to(device)
        self.model.eval()
        out = self.model(batch.src, batch.tgt_in, need_weights=True)
        logits = out.logits.float()  # (B, T, V)
        pad = batch.tgt_out == tok.pad_id  # (B, T)
        loss = F.cross_entropy(
            logits.transpose(1, 2), batch.tgt_out, ignore_index=tok.pad_id, reduction="sum"
        )
        right = ((logits.argmax(-1) == batch.tgt_out) | pad).all(-1)  # (B,)
        cross = [c.float().cpu() for c in out.attention.cross]
        # decoder query j (input [bos] + tokens) is the one that predicts target token j
        align = best_head_alignment(cross, [ex.alignment for ex in examples])
        return loss.item() / max(batch.n_tgt_tokens, 1), right.cpu(), align


# ---------------------------------------------------------------------------------------------
# BLEU by source length: where the single context vector of an RNN without attention runs out
# ---------------------------------------------------------------------------------------------

# source words: ≤8, 9-11, 12-14, 15-17, >17 (on Multi30k's test_2016_flickr: 174, 367, 255, 122, 82 sentences)
LENGTH_EDGES = (8, 11, 14, 17)


@dataclass(frozen=True)
class LengthBucket:
    """sacreBLEU and chrF of the sentences whose source has `low`..`high` words."""

    low: int
    high: int | None  # None: no upper bound
    n: int
    bleu: float
    chrf: float

    @property
    def label(self) -> str:
        """'11-15', '>25', ... (source words)."""
        return f">{self.low - 1}" if self.high is None else f"{self.low}-{self.high}"


def bleu_by_source_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[str],
    edges: Sequence[int] = LENGTH_EDGES,
) -> list[LengthBucket]:
    """Corpus BLEU/chrF per bucket of source length in words (bucket upper bounds `edges`); empty buckets left out."""
    if not len(sources) == len(hypotheses) == len(references):
        raise ValueError(
            f"{len(sources)} sources, {len(hypotheses)} hypotheses, {len(references)} references"
        )
    if list(edges) != sorted(set(edges)) or (edges and edges[0] < 1):
        raise ValueError(f"edges must be increasing positive word counts, got {list(edges)}")
    bounds = [*zip([1, *(e + 1 for e in edges)], [*edges, None], strict=True)]
    buckets = []
    for low, high in bounds:
        rows = [
            i
            for i, s in enumerate(sources)
            if low <= len(s.split()) and (high is None or len(s.split()) <= high)
        ]
        if rows:
            bleu, chrf = corpus_scores([hypotheses[i] for i in rows], [references[i] for i in rows])
            buckets.append(LengthBucket(low, high, len(rows), bleu, chrf))
    return buckets
