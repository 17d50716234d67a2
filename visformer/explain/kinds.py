"""The three kinds of attention of the Transformer, in one table: names, titles, masks and token sides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class AttentionKind:
    """One kind of attention: its field in AttentionMaps, its labels, and which tokens ask and answer."""

    name: str  # the AttentionMaps / HeadMask field and URL value: "encoder", "decoder" or "cross"
    title: str  # "Encoder self-attention"
    short: str  # "Encoder self"
    initial: str  # letter of a head code in the URL ("e0.1")
    masked: bool  # decoder self-attention: a query may not see later keys
    queries: str  # "source" or "target": the side whose tokens ask (rows)
    keys: str  # the side whose tokens are looked at (columns)

    def sides(self, source: T, target: T) -> tuple[T, T]:
        """(query, key) items of this kind, given the source side's and the target side's."""
        pick = {"source": source, "target": target}
        return pick[self.queries], pick[self.keys]

    def mask(self, n_queries: int, n_keys: int) -> np.ndarray | None:
        """True where a query may NOT see a key (the future, for masked kinds); None when nothing is hidden."""
        return future_mask(n_queries, n_keys) if self.masked else None

    def axis_labels(
        self, source: list[str], decoder_inputs: list[str], produced: list[str]
    ) -> tuple[list[str], list[str]]:
        """(row labels, column labels): a target-side row is named by the token produced there ('→ ▁Hunde')."""
        rows, cols = self.sides(source, decoder_inputs)
        return (produced_labels(produced) if self.queries == "target" else rows), cols


ENCODER = AttentionKind("encoder", "Encoder self-attention", "Encoder self", "e", False, "source", "source")
DECODER = AttentionKind(
    "decoder", "Decoder masked self-attention", "Decoder self (masked)", "d", True, "target", "target"
)
CROSS = AttentionKind("cross", "Cross-attention (decoder → encoder)", "Cross", "c", False, "target", "source")
KIND = {k.name: k for k in (ENCODER, DECODER, CROSS)}
KINDS = tuple(KIND)  # ("encoder", "decoder", "cross"): the order every page shows them in


def get_kind(name: str) -> AttentionKind:
    """The kind called `name`; ValueError naming the choices otherwise."""
    if name not in KIND:
        raise ValueError(f"unknown attention kind {name!r}; choose one of {', '.join(KINDS)}")
    return KIND[name]


def future_mask(n_queries: int, n_keys: int) -> np.ndarray:
    """True where decoder query i may NOT see key j (the masked upper triangle), shape (q, k)."""
    offset = n_keys - n_queries
    return np.arange(n_keys)[None, :] > np.arange(n_queries)[:, None] + offset


def produced_labels(pieces: list[str]) -> list[str]:
    """Decoder rows named by what they produce: row t reads input t and produces output t ('→ ▁Hunde')."""
    return [f"→ {piece}" for piece in pieces]
