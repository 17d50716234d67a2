"""The architectures a checkpoint can hold, one registry entry each: family, attention, pages.

`ModelConfig.architecture` names an entry; code asks the entry (`architecture(name).family`,
`.attention_layers(config)`, `.pages`) instead of comparing the name with string literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class Family(StrEnum):
    """What kind of network an architecture is."""

    TRANSFORMER = "transformer"  # the paper's encoder–decoder
    RNN = "rnn"  # a GRU encoder–decoder (models/rnn.py)
    LM = "lm"  # one half of the Transformer as a language model (models/lm.py)


class _Layers(Protocol):
    """The part of ModelConfig that layer counts are read from."""

    n_encoder_layers: int
    n_decoder_layers: int


KINDS = ("encoder", "decoder", "cross")  # the attention kinds, in AttentionMaps' order
ENCODER_LAYERS, DECODER_LAYERS = "n_encoder_layers", "n_decoder_layers"  # layer counts read from the config


@dataclass(frozen=True)
class Architecture:
    """One architecture: its family, which attention it returns and how many layers of each, where it is shown."""

    name: str  # ModelConfig.architecture, `--arch`
    family: Family
    layers: Mapping[str, str | int]  # attention kind -> the config field that counts its layers, or a count
    switchable_heads: (
        bool  # heads can be switched off (a HeadMask in decoding: the Attention page's ablation)
    )
    pages: tuple[str, ...]  # app pages (pages/NAME.py) a checkpoint of it opens on, the first one first
    score: str | None = None  # an RNN's attention score: additive, general, dot (None: no attention)

    @property
    def translates(self) -> bool:
        """Whether it is an encoder–decoder: translated by visformer.decoding, trained on pairs, scored by BLEU."""
        return self.family is not Family.LM

    @property
    def has_attention(self) -> bool:
        """Whether it returns attention maps at all (a GRU without attention does not)."""
        return bool(self.layers)

    @property
    def multi_head(self) -> bool:
        """Whether its attention has heads (n_heads and d_ff are settings); a GRU has neither."""
        return self.family is not Family.RNN

    @property
    def trainable_in_app(self) -> bool:
        """Whether the Train page offers it."""
        return "train" in self.pages

    def attention_layers(self, config: _Layers) -> dict[str, int]:
        """How many attention maps of each kind (encoder self, decoder self, cross) one forward pass returns."""
        counts = {kind: self.layers.get(kind, 0) for kind in KINDS}
        return {kind: n if isinstance(n, int) else int(getattr(config, n)) for kind, n in counts.items()}


_SEQ2SEQ_PAGES = ("attention", "decoding", "timeline")
_TRANSFORMER = Architecture(
    "transformer",
    Family.TRANSFORMER,
    {"encoder": ENCODER_LAYERS, "decoder": DECODER_LAYERS, "cross": DECODER_LAYERS},
    switchable_heads=True,
    pages=(*_SEQ2SEQ_PAGES, "lesson", "train", "rnn_vs_transformer"),
)


def _rnn(name: str, score: str | None, in_app: bool = True) -> Architecture:
    """A GRU seq2seq with this attention score (one cross-attention map per step, none without a score)."""
    pages = ("decoding", "attention", "timeline", "rnn_vs_transformer", *(("train",) if in_app else ()))
    return Architecture(name, Family.RNN, {"cross": 1} if score else {}, False, pages, score)


REGISTRY: dict[str, Architecture] = {
    a.name: a
    for a in (
        _TRANSFORMER,
        _rnn("rnn-none", None),
        _rnn("rnn-bahdanau", "additive"),
        _rnn("rnn-luong", "general"),
        _rnn("rnn-dot", "dot", in_app=False),  # Luong without W: the CLI trains it, the Train page does not
        Architecture("encoder-lm", Family.LM, {"encoder": ENCODER_LAYERS}, False, ("language_models",)),
        Architecture("decoder-lm", Family.LM, {"decoder": DECODER_LAYERS}, False, ("language_models",)),
    )
}
ARCHITECTURES = tuple(REGISTRY)  # every name, the Transformer first
DEFAULT = _TRANSFORMER.name  # what a config without an architecture holds
SEQ2SEQ = tuple(a.name for a in REGISTRY.values() if a.translates)  # translate with encode()/decode()


def architecture(name: str) -> Architecture:
    """The registry entry called `name`; ValueError naming the choices otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    return REGISTRY[name]


def of_family(family: Family) -> tuple[str, ...]:
    """The names of one family's architectures, in registry order."""
    return tuple(a.name for a in REGISTRY.values() if a.family is family)
