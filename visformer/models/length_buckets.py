"""BLEU by source length: where the single context vector of an RNN without attention runs out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..evaluation import corpus_scores

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
