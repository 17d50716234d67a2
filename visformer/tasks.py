"""Built-in synthetic tasks (copy, reverse, sort, date) with ground-truth alignments, and their metrics.

Sources and targets are space-separated symbols, one token each, so `alignment[j]` (the source
token that target token j comes from, or -1) is exact.
"""

from __future__ import annotations

import calendar
import random
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from visformer.tokenizer import SymbolTokenizer

LETTERS = list(string.ascii_lowercase)
DIGITS = list(string.digits)
MONTHS = list(calendar.month_name)[1:]  # "January" .. "December"


@dataclass(frozen=True, slots=True)
class TaskExample:
    """A source, its target and the alignment: alignment[j] = source index of target token j, or -1."""

    src: str
    tgt: str
    alignment: list[int]


Generator = Callable[[random.Random, int, int], TaskExample]


@dataclass(frozen=True)
class Task:
    """A synthetic task: how to make one example, its symbols and default lengths."""

    name: str
    description: str
    symbols: list[str]
    generate: Generator
    min_len: int = 3
    max_len: int = 10
    fixed_length: bool = False  # True when min_len/max_len do not apply (date)


def _letters(rng: random.Random, min_len: int, max_len: int) -> list[str]:
    """Random letters (repeats allowed) of a random length in min_len..max_len."""
    return rng.choices(LETTERS, k=rng.randint(min_len, max_len))


def _copy(rng: random.Random, min_len: int, max_len: int) -> TaskExample:
    """Target = source."""
    src = _letters(rng, min_len, max_len)
    return TaskExample(" ".join(src), " ".join(src), list(range(len(src))))


def _reverse(rng: random.Random, min_len: int, max_len: int) -> TaskExample:
    """Target = source backwards."""
    src = _letters(rng, min_len, max_len)
    n = len(src)
    return TaskExample(" ".join(src), " ".join(reversed(src)), [n - 1 - j for j in range(n)])


def _sort(rng: random.Random, min_len: int, max_len: int) -> TaskExample:
    """Target = distinct source letters in alphabetical order."""
    k = rng.randint(min_len, min(max_len, len(LETTERS)))
    src = rng.sample(LETTERS, k)  # distinct, so each target letter has exactly one source
    order = sorted(range(k), key=lambda i: src[i])
    return TaskExample(" ".join(src), " ".join(src[i] for i in order), order)


def _date(rng: random.Random, min_len: int, max_len: int) -> TaskExample:
    """ "2 1 November 2 0 2 6" -> "2 0 2 6 - 1 1 - 2 1"; month digits align to the month word."""
    year, month = rng.randint(1900, 2099), rng.randint(1, 12)
    day = rng.randint(1, calendar.monthrange(year, month)[1])
    day_digits, year_digits = list(str(day)), list(f"{year:04d}")
    src = [*day_digits, MONTHS[month - 1], *year_digits]
    month_at, year_at = len(day_digits), len(day_digits) + 1
    tgt = [*year_digits, "-", *f"{month:02d}", "-"]
    alignment = [year_at + i for i in range(4)] + [-1, month_at, month_at, -1]
    if day < 10:  # the padding zero is not taken from the source
        tgt += ["0", day_digits[0]]
        alignment += [-1, 0]
    else:
        tgt += day_digits
        alignment += [0, 1]
    return TaskExample(" ".join(src), " ".join(tgt), alignment)


TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task("copy", "Repeat the letters unchanged: 'c a t' -> 'c a t'.", LETTERS, _copy),
        Task("reverse", "Write the letters backwards: 'c a t' -> 't a c'.", LETTERS, _reverse),
        Task("sort", "Sort distinct letters alphabetically: 'd a c' -> 'a c d'.", LETTERS, _sort),
        Task(
            "date",
            "Rewrite a date as ISO: '2 1 November 2 0 2 6' -> '2 0 2 6 - 1 1 - 2 1'.",
            [*DIGITS, "-", *MONTHS],
            _date,
            fixed_length=True,
        ),
    ]
}


def get_task(task: str | Task) -> Task:
    """The task object for a name (or the task itself)."""
    if isinstance(task, Task):
        return task
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(TASKS)}")
    return TASKS[task]


def make_examples(
    task: str | Task,
    n: int,
    seed: int = 0,
    min_len: int | None = None,
    max_len: int | None = None,
    exclude: Iterable[str] = (),
) -> list[TaskExample]:
    """n examples drawn with a seeded RNG; a different seed gives held-out data, `exclude` forbids sources."""
    task = get_task(task)
    lo, hi = min_len or task.min_len, max_len or task.max_len
    if not 1 <= lo <= hi:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={lo}, max_len={hi}")
    rng = random.Random(f"{task.name}:{seed}")
    banned = set(exclude)
    examples: list[TaskExample] = []
    attempts = 0
    while len(examples) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise ValueError(f"could not draw {n} {task.name} examples outside `exclude`; too few possible")
        ex = task.generate(rng, lo, hi)
        if ex.src not in banned:
            examples.append(ex)
    return examples


def task_tokenizer(task: str | Task) -> SymbolTokenizer:
    """The symbol tokenizer shared by source and target of a task."""
    return SymbolTokenizer.from_symbols(get_task(task).symbols)


def exact_match(preds: Sequence[str], refs: Sequence[str]) -> float:
    """Share of predictions equal to their reference (whitespace-normalised)."""
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} predictions but {len(refs)} references")
    if not refs:
        raise ValueError("exact_match needs at least one example")
    return sum(p.split() == r.split() for p, r in zip(preds, refs, strict=True)) / len(refs)


def _as_tensor(attention: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Attention as a float tensor on CPU."""
    return torch.as_tensor(attention).detach().float().cpu()


def _hits(attention: torch.Tensor, alignment: Sequence[int]) -> tuple[int, int]:
    """(argmax hits, aligned tokens) for one (T, S) map; rows beyond the alignment are ignored."""
    rows = [j for j, a in enumerate(alignment[: attention.size(0)]) if a >= 0]
    if any(alignment[j] >= attention.size(1) for j in rows):
        raise ValueError(f"alignment points past the {attention.size(1)} source positions of the attention")
    if not rows:
        return 0, 0
    best = attention[rows].argmax(dim=-1)  # (n_rows,)
    return int((best == torch.tensor([alignment[j] for j in rows])).sum()), len(rows)


def _targets(alignments: Sequence[Sequence[int]], n_rows: int, n_cols: int) -> torch.Tensor:
    """(B, T) source position each row should attend to: -1 where nothing is aligned or the alignment ends."""
    target = torch.full((len(alignments), n_rows), -1, dtype=torch.long)
    for b, alignment in enumerate(alignments):
        row = list(alignment[:n_rows])
        target[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    if bool((target >= n_cols).any()):
        raise ValueError(f"alignment points past the {n_cols} source positions of the attention")
    return target


def alignment_score(
    cross_attention: torch.Tensor | np.ndarray, alignment: Sequence[int] | Sequence[Sequence[int]]
) -> float:
    """Share of aligned target tokens whose argmax attention hits their source token (-1 ignored).

    Accepts one map (T, S), one layer's heads (h, T, S) (heads averaged first), or a batch
    (B, h, T, S) with one alignment per example. Row j is the query that predicts target token j
    (decoder input [bos]+tokens). NaN when nothing is aligned.
    """
    att = _as_tensor(cross_attention)
    if att.dim() == 4:
        if len(alignment) != att.size(0):
            raise ValueError(f"batch of {att.size(0)} maps but {len(alignment)} alignments")
        target = _targets(alignment, att.size(2), att.size(3))  # type: ignore[arg-type]
        aligned = target >= 0  # (B, T)
        hits = (att.mean(1).argmax(-1) == target) & aligned  # (B, T)
        counts = [(int(hits.sum()), int(aligned.sum()))]
    elif att.dim() in (2, 3):
        counts = [_hits(att.mean(0) if att.dim() == 3 else att, alignment)]  # type: ignore[arg-type]
    else:
        raise ValueError(f"cross attention must be (T,S), (h,T,S) or (B,h,T,S), got shape {tuple(att.shape)}")
    hits, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return hits / total if total else float("nan")


def head_alignment_scores(
    cross_attention: torch.Tensor | np.ndarray, alignment: Sequence[int]
) -> list[float]:
    """alignment_score of each head of one layer's (h, T, S) cross attention."""
    att = _as_tensor(cross_attention)
    if att.dim() != 3:
        raise ValueError(f"expected (h, T, S) cross attention, got shape {tuple(att.shape)}")
    return [alignment_score(head, alignment) for head in att]
