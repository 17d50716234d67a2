"""The app's views as data: the URL view state (every parameter validated) and a translation as arrays.

Pure functions (no streamlit), so they are tested directly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..decoding import STRATEGIES
from ..models import SEQ2SEQ_ARCHITECTURES
from ..tasks import TASKS
from .analysis import stack_maps, step_probabilities
from .kinds import KIND, KINDS, get_kind
from .language_models import STRATEGIES as LM_STRATEGIES

# ---------------------------------------------------------------------------------------------
# URL view state: every parameter has a default and a validator; bad input falls back quietly
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RangeParam:
    """A number in lo..hi (the common part of IntParam and FloatParam)."""

    default: float
    lo: float
    hi: float

    def clip(self, value: float) -> float:
        """value limited to lo..hi."""
        return min(max(value, self.lo), self.hi)


class IntParam(RangeParam):
    """An integer in lo..hi."""

    def parse(self, raw: str) -> int:
        """The integer, clipped into range; ValueError when it is not an integer."""
        return int(self.clip(int(str(raw).strip())))

    def encode(self, value: int) -> str:
        """The integer as written in the URL."""
        return str(value)


class FloatParam(RangeParam):
    """A finite number in lo..hi."""

    def parse(self, raw: str) -> float:
        """The number, clipped into range; ValueError when it is not a finite number."""
        value = float(str(raw).strip())
        if not math.isfinite(value):
            raise ValueError(f"{raw!r} is not a finite number")
        return float(self.clip(value))

    def encode(self, value: float) -> str:
        """The number without float noise (0.30000000000000004 -> 0.3)."""
        return f"{value:.10g}"


@dataclass(frozen=True)
class FlagParam:
    """A switch, written 1/0 (true/false, on/off also read)."""

    default: bool = False

    def parse(self, raw: str) -> bool:
        """True or False; ValueError on anything else."""
        word = str(raw).strip().lower()
        if word not in ("1", "0", "true", "false", "on", "off"):
            raise ValueError(f"{raw!r} is not 1 or 0")
        return word in ("1", "true", "on")

    def encode(self, value: bool) -> str:
        """1 or 0."""
        return "1" if value else "0"


@dataclass(frozen=True)
class ChoiceParam:
    """One of a fixed set of strings."""

    default: str
    options: tuple[str, ...]

    def parse(self, raw: str) -> str:
        """The option itself; ValueError when it is not one of the options."""
        if raw not in self.options:
            raise ValueError(f"{raw!r} is not one of {self.options}")
        return raw

    def encode(self, value: str) -> str:
        """The option itself."""
        return str(value)


@dataclass(frozen=True)
class NamesParam:
    """An ordered selection of distinct options, written 'greedy,beam'."""

    default: tuple[str, ...]
    options: tuple[str, ...]

    def parse(self, raw: str) -> tuple[str, ...]:
        """The options in the order given, repeats dropped; ValueError on an unknown one."""
        names = [item.strip() for item in str(raw).split(",") if item.strip()]
        unknown = [n for n in names if n not in self.options]
        if unknown or not names:
            raise ValueError(f"{unknown or raw!r}: choose from {self.options}")
        return tuple(dict.fromkeys(names))

    def encode(self, value: tuple[str, ...]) -> str:
        """Comma-separated, in order."""
        return ",".join(value)


@dataclass(frozen=True)
class TextParam:
    """Free text, trimmed; cut to max_len characters when it has one (None: the page cuts it and says so)."""

    default: str = ""
    max_len: int | None = None

    def parse(self, raw: str) -> str:
        """The text without control characters."""
        text = "".join(ch for ch in str(raw) if ch.isprintable())
        return text.strip()[: self.max_len]

    def encode(self, value: str) -> str:
        """The text itself."""
        return str(value)


@dataclass(frozen=True)
class HeadsParam:
    """A set of switched-off heads, written 'e0.1,d1.3,c0.0' (kind initial, layer, head)."""

    default: tuple[str, ...] = ()

    def parse(self, raw: str) -> tuple[str, ...]:
        """Sorted unique head codes; ValueError on any malformed item."""
        return tuple(sorted({head_code(*parse_head(item)) for item in str(raw).split(",") if item.strip()}))

    def encode(self, value: tuple[str, ...]) -> str:
        """Sorted and comma-separated, so one set of heads has one link."""
        return ",".join(sorted(value))


ParamSpec = IntParam | FloatParam | FlagParam | ChoiceParam | NamesParam | TextParam | HeadsParam
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


ATTENTION_TABS = (
    "One head",
    "All heads",
    "Step through generation",
    "Head statistics",
    "Ablation",
    "Inside one head",
    "Follow a word",
)

DECODING_TABS = ("Step by step", "Beam search tree", "Samples")
DEFAULT_STRATEGIES = ("greedy", "beam", "temperature", "top-k", "top-p")
SAMPLERS = ("temperature", "top-k", "top-p", "sample")


def decoding_param_key(strategy: str, name: str) -> str:
    """Widget key (and URL name) of one strategy parameter: 'dec_beam_beam_size'."""
    return f"dec_{strategy}_{name}"


def decoding_params() -> dict[str, ParamSpec]:
    """The Decoding page's view: strategies, step view, tab, samples and every strategy's parameters."""
    specs: dict[str, ParamSpec] = {
        "dec_strategies": NamesParam(DEFAULT_STRATEGIES, tuple(STRATEGIES)),
        "dec_reference": TextParam(""),
        "dec_tab": ChoiceParam(DECODING_TABS[0], DECODING_TABS),
        "dec_step_strategy": ChoiceParam(DEFAULT_STRATEGIES[0], tuple(STRATEGIES)),
        "dec_step": IntParam(0, 0, 511),
        "dec_sampler": ChoiceParam(SAMPLERS[0], SAMPLERS),
        "dec_n": IntParam(10, 2, 1000),  # the page lowers the top to the hosted limit
        "dec_seed": IntParam(0, 0, 2**31 - 1),
    }
    for strategy in STRATEGIES.values():
        for p in strategy.params:
            specs[decoding_param_key(strategy.name, p.name)] = (
                IntParam(int(p.default), int(p.low), int(p.high))
                if p.is_int
                else FloatParam(p.default, p.low, p.high)
            )
    return specs


DECODING_PARAMS = decoding_params()
TIMELINE_PARAMS: dict[str, ParamSpec] = {
    "tl_probe": IntParam(0, 0, 63),
    "tl_step": IntParam(-1, -1, 10**9),  # a training step; -1 or a step without a snapshot: the last one
    "tl_average": FlagParam(False),
}

TRAIN_PARAMS: dict[str, ParamSpec] = {  # the Train page: which toy task and which architecture
    "train_task": ChoiceParam("copy", tuple(TASKS)),
    "train_arch": ChoiceParam("transformer", tuple(a for a in SEQ2SEQ_ARCHITECTURES if a != "rnn-dot")),
}

LM_METRICS = ("entropy / log k", "previous", "diagonal", "first")  # head statistics of the language models
MODELS_PARAMS: dict[str, ParamSpec] = {  # the language-model and RNN-vs-Transformer pages
    "lm_sentence": TextParam(""),  # "" on a first visit: the page's example
    "lm_hide": IntParam(-1, -1, 511),  # word hidden behind [MASK] (-1: none, or the one the student wrote)
    "lm_layer": IntParam(-1, -1, 63),  # -1: the last layer
    "lm_head": IntParam(-1, -1, 63),  # -1: the mean of the heads
    "lm_metric": ChoiceParam(LM_METRICS[0], LM_METRICS),
    "lm_strategy": ChoiceParam(LM_STRATEGIES[0], LM_STRATEGIES),
    "lm_temperature": FloatParam(1.0, 0.1, 2.0),
    "lm_top_k": IntParam(0, 0, 50),
    "lm_top_p": FloatParam(0.9, 0.05, 1.0),
    "lm_seed": IntParam(0, 0, 10_000),
    "lm_max_new": IntParam(12, 1, 30),
    "cmp_rnn": TextParam("", max_len=120),  # "": the first RNN checkpoint
    "cmp_sentence": TextParam(""),  # "": that model's example
    "cmp_layer": IntParam(-1, -1, 63),  # -1: the Transformer's last layer
}

# Every URL parameter the app understands, by widget key (pages bind their widgets to these names).
VIEW_PARAMS: dict[str, ParamSpec] = {
    "checkpoint": TextParam("", max_len=120),
    "sentence": TextParam(""),
    "view": ChoiceParam("cross", KINDS),
    "layer": IntParam(0, 0, 63),
    "head": IntParam(0, 0, 63),
    "tab": ChoiceParam(ATTENTION_TABS[0], ATTENTION_TABS),
    "step": IntParam(0, 0, 511),
    "ablate": HeadsParam(),
    "stat": ChoiceParam("entropy", ("entropy", "diagonal", "previous", "first", "last", "alignment")),
    "dk": IntParam(64, 1, 1024),
    "word": IntParam(-1, -1, 511),  # Follow a word: source piece (-1: chosen by the page)
    "tword": IntParam(-1, -1, 511),  # Follow a word: output piece (-1: chosen by the page)
    "pe_d": IntParam(64, 4, 1024),
    "pe_len": IntParam(100, 10, 1000),
    "pe_pair": IntParam(4, 0, 511),
    "pe_pos": IntParam(10, 0, 999),
    "pe_k": IntParam(5, 1, 100),
    "lang": ChoiceParam("", ("", "en", "ko")),  # "" = from the browser's locale (visformer.i18n.LANGS)
    "lesson_step": IntParam(1, 1, 12),  # one of visformer.explain.lesson.STEPS, counted from 1
    **TIMELINE_PARAMS,
    **TRAIN_PARAMS,
    **DECODING_PARAMS,
    **MODELS_PARAMS,
}


def parse_view(params: Mapping[str, Any], specs: Mapping[str, ParamSpec] = VIEW_PARAMS) -> dict[str, Any]:
    """Every known parameter from a query-string mapping, each falling back to its default when bad."""
    values: dict[str, Any] = {}
    for name, spec in specs.items():
        raw = params.get(name)
        if isinstance(raw, list | tuple):
            raw = raw[-1] if raw else None
        try:
            values[name] = spec.default if raw is None else spec.parse(raw)
        except (ValueError, TypeError):
            values[name] = spec.default
    return values


def url_params(
    values: Mapping[str, Any], keys: list[str], specs: Mapping[str, ParamSpec] = VIEW_PARAMS
) -> dict[str, str]:
    """The query string for `keys`: values that differ from their default (checkpoint and sentence always)."""
    out = {}
    for key in keys:
        if key not in values or key not in specs:
            continue
        value = tuple(values[key]) if isinstance(values[key], list) else values[key]
        if value is None:  # not chosen yet (e.g. Follow a word before the page picks a word)
            continue
        if key in ("checkpoint", "sentence") or value != specs[key].default:
            if value not in ("", ()):
                out[key] = specs[key].encode(value)
    return out


def clamp(value: int, lo: int, hi: int) -> int:
    """value limited to lo..hi."""
    return max(lo, min(int(value), hi))


def even(value: int) -> int:
    """The even number at or below value (d_model must be even)."""
    return int(value) - int(value) % 2


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
