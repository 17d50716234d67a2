"""The app's URL view state: every parameter a page binds a widget to, with its default and validator.

Not a page: a helper module of pages/ (pure, no streamlit, so it is tested directly). Bad input falls back
quietly to the default; the URL keeps only what differs from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from visformer.architectures import DEFAULT, REGISTRY
from visformer.decoding import STRATEGIES
from visformer.explain.decoding import DEFAULT_STRATEGIES
from visformer.explain.kinds import KINDS
from visformer.explain.language_models import STRATEGIES as LM_STRATEGIES
from visformer.explain.views import head_code, parse_head
from visformer.tasks import TASKS

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
    """One of a fixed set of strings (an old link's spelling of one, in `aliases`, is read as that one)."""

    default: str
    options: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def parse(self, raw: str) -> str:
        """The option itself; ValueError when it is not one of the options."""
        raw = self.aliases.get(raw, raw)
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

# the Attention page's tabs by id (labels: attention.tab.ID in the locales), with the English labels that
# links written before the ids still carry
ATTENTION_TABS = ("one", "all", "steps", "stats", "ablation", "inside", "word")
OLD_ATTENTION_TABS = {
    "One head": "one",
    "All heads": "all",
    "Step through generation": "steps",
    "Head statistics": "stats",
    "Ablation": "ablation",
    "Inside one head": "inside",
    "Follow a word": "word",
}

DECODING_TABS = ("steps", "beam", "samples")  # the Decoding page's tabs by id (labels: decoding.tab.ID)
OLD_DECODING_TABS = {"Step by step": "steps", "Beam search tree": "beam", "Samples": "samples"}  # older links
SAMPLERS = ("temperature", "top-k", "top-p", "sample")


def decoding_param_key(strategy: str, name: str) -> str:
    """Widget key (and URL name) of one strategy parameter: 'dec_beam_beam_size'."""
    return f"dec_{strategy}_{name}"


def decoding_params() -> dict[str, ParamSpec]:
    """The Decoding page's view: strategies, step view, tab, samples and every strategy's parameters."""
    specs: dict[str, ParamSpec] = {
        "dec_strategies": NamesParam(DEFAULT_STRATEGIES, tuple(STRATEGIES)),
        "dec_reference": TextParam(""),
        "dec_tab": ChoiceParam(DECODING_TABS[0], DECODING_TABS, OLD_DECODING_TABS),
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
    "train_arch": ChoiceParam(DEFAULT, tuple(name for name, a in REGISTRY.items() if a.trainable_in_app)),
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
    "tab": ChoiceParam(ATTENTION_TABS[0], ATTENTION_TABS, OLD_ATTENTION_TABS),
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
