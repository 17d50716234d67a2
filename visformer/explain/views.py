"""A translation as the pages show it: arrays and readable labels; heads named by codes ('e0.1').

Pure functions (no streamlit), so they are tested directly. The URL view state is pages/_views.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis import stack_maps, step_probabilities
from .kinds import KIND, get_kind

# ---------------------------------------------------------------------------------------------
# Heads named in a URL: kind initial, layer, head ('e0.1')
# ---------------------------------------------------------------------------------------------

KIND_INITIAL = {k.name: k.initial for k in KIND.values()}
_HEAD = re.compile(r"([edc])(\d{1,3})\.(\d{1,3})")


def parse_head(code: str) -> tuple[str, int, int]:
    """'e0.1' -> ("encoder", 0, 1)."""
    match = _HEAD.fullmatch(code.strip())
    if not match:
        raise ValueError(f"{code!r} is not a head like 'e0.1'")
    kind = {v: k for k, v in KIND_INITIAL.items()}[match.group(1)]
    return kind, int(match.group(2)), int(match.group(3))


def head_code(kind: str, layer: int, head: int) -> str:
    """("encoder", 0, 1) -> 'e0.1'."""
    return f"{KIND_INITIAL[kind]}{layer}.{head}"


def all_head_codes(n_layers: Mapping[str, int], n_heads: int) -> list[str]:
    """Codes of every head of every kind."""
    return [
        head_code(kind, layer, head)
        for kind, n in n_layers.items()
        for layer in range(n)
        for head in range(n_heads)
    ]


# ---------------------------------------------------------------------------------------------
# A translation as plain arrays (what the Attention page caches and draws)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TranslationView:
    """Pieces and attention stacks (layers, heads, queries, keys) of one translation."""

    source: str
    text: str
    src_ids: list[int]
    query_ids: list[int]  # decoder inputs: [bos] + output[:-1]
    src_pieces: list[str]  # source tokens + </s>
    query_pieces: list[str]  # decoder inputs: <s> + output[:-1]
    output_pieces: list[str]  # what each decoder position produced
    encoder: np.ndarray  # (L, h, S, S)
    decoder: np.ndarray  # (L, h, T, T)
    cross: np.ndarray  # (L, h, T, S)
    truncated: bool = False
    token_probs: np.ndarray = field(
        default_factory=lambda: np.zeros(0)
    )  # (T,) probability of each output piece

    def stack(self, kind: str) -> np.ndarray:
        """The stack of one attention kind."""
        return getattr(self, get_kind(kind).name)

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of one attention kind."""
        return get_kind(kind).sides(self.src_pieces, self.query_pieces)


BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback: one raw byte of UTF-8


def _byte_runs(pieces: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every run of consecutive byte pieces."""
    runs, start = [], None
    for i, piece in enumerate([*pieces, ""]):
        is_byte = BYTE_PIECE.fullmatch(piece) is not None
        if is_byte and start is None:
            start = i
        elif not is_byte and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _characters(data: bytes) -> list[tuple[str | None, int]]:
    """The characters raw UTF-8 bytes spell, each with its byte count; (None, 1) for a byte that spells none."""
    found: list[tuple[str | None, int]] = []
    i = 0
    while i < len(data):
        for width in (1, 2, 3, 4):  # the shortest valid UTF-8 character starting here
            try:
                found.append((data[i : i + width].decode("utf-8"), width))
                break
            except UnicodeDecodeError:
                continue
        else:
            found.append((None, 1))
            width = 1
        i += width
    return found


def _run_labels(data: bytes) -> list[str]:
    """A label per byte: the character it belongs to, with its place when the character takes several bytes.

    '뵈' is three bytes: '뵈 (1/3)', '뵈 (2/3)', '뵈 (3/3)'; a byte that spells no character is 'byte EB'.
    """
    labels: list[str] = []
    i = 0
    for char, width in _characters(data):
        if char is None:
            labels.append(f"byte {data[i]:02X}")
        else:
            labels += [char] if width == 1 else [f"{char} ({k}/{width})" for k in range(1, width + 1)]
        i += width
    return labels


def readable_pieces(pieces: list[str]) -> list[str]:
    """Pieces as a student reads them: a run of byte pieces (<0xEB><0xB5><0x88>) shows the character it spells."""
    out = list(pieces)
    for start, end in _byte_runs(out):
        data = bytes(int(BYTE_PIECE.fullmatch(p).group(1), 16) for p in out[start:end])
        out[start:end] = _run_labels(data)
    return out


def unseen_characters(pieces: list[str]) -> list[str]:
    """The characters a sentence's pieces spell with byte pieces: ones the tokenizer never saw in training."""
    found: list[str] = []
    for start, end in _byte_runs(pieces):
        data = bytes(int(BYTE_PIECE.fullmatch(p).group(1), 16) for p in pieces[start:end])
        found += [ch for ch in data.decode("utf-8", errors="ignore") if not ch.isspace()]
    return list(dict.fromkeys(found))


def readable_text(text: str, pieces: list[str]) -> str:
    """An output as shown: as decoded, unless some bytes spell no character ('�'): then rebuilt from its pieces,
    each such byte written ⟨EB⟩ (the model wrote part of a character it never finished)."""
    if "\ufffd" not in text:
        return text
    out: list[str] = []
    runs = dict(_byte_runs(pieces))
    i = 0
    while i < len(pieces):
        if i in runs:
            data = bytes(int(BYTE_PIECE.fullmatch(p).group(1), 16) for p in pieces[i : runs[i]])
            spelled, at = [], 0
            for char, width in _characters(data):
                spelled.append(char if char is not None else f"⟨{data[at]:02X}⟩")
                at += width
            out.append("".join(spelled))
            i = runs[i]
        else:
            out.append("" if pieces[i] in ("<s>", "</s>", "<pad>") else pieces[i])
            i += 1
    return "".join(out).replace("▁", " ").strip()


def translation_view(translation: Any, tgt_tokenizer: Any, source: str) -> TranslationView:
    """Turn a `visformer.decoding.Translation` into arrays and labels."""
    maps = translation.attention
    return TranslationView(
        source=source,
        text=readable_text(translation.text, list(translation.tgt_pieces)),
        src_ids=list(translation.src_ids),
        query_ids=list(translation.decoder_input_ids),
        src_pieces=readable_pieces(list(translation.src_pieces)),
        query_pieces=readable_pieces(list(tgt_tokenizer.pieces(translation.decoder_input_ids))),
        output_pieces=readable_pieces(list(translation.tgt_pieces)),
        encoder=stack_maps(maps, "encoder"),
        decoder=stack_maps(maps, "decoder"),
        cross=stack_maps(maps, "cross"),
        truncated=bool(getattr(translation, "truncated", False)),
        token_probs=step_probabilities(translation),
    )


def head_mask_rows(codes: Iterable[str], n_layers: Mapping[str, int], n_heads: int) -> dict[str, np.ndarray]:
    """(layers, heads) arrays of 1/0 per kind with the listed heads off; unknown or out-of-range codes are ignored."""
    rows = {kind: np.ones((n, n_heads), dtype=np.float32) for kind, n in n_layers.items()}
    for code in codes:
        try:
            kind, layer, head = parse_head(code)
        except ValueError:
            continue
        if kind in rows and layer < rows[kind].shape[0] and head < n_heads:
            rows[kind][layer, head] = 0.0
    return rows
