"""Named strategies with their parameters for the UI's selectors, and several runs on one sentence."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from ..i18n import TextError
from ..model import HeadMask, Transformer
from ..tokenizer import BOS_ID, EOS_ID
from .filters import Filtered, draw, filter_distribution
from .search import (
    N_CANDIDATES,
    _beam_search,
    _BeamSearch,
    _choose_greedy,
    _decode_searches,
    _sampling_generator,
    _token_search,
    beam_search,
    greedy,
    sample,
)
from .trace import DecodeResult


@dataclass(frozen=True)
class Param:
    """A strategy parameter the UI can offer: name, default and allowed range."""

    name: str
    default: float
    low: float
    high: float
    step: float
    help: str

    @property
    def is_int(self) -> bool:
        """Whether the parameter takes whole numbers."""
        return float(self.step).is_integer()

    def check(self, raw: Any) -> int | float:
        """raw as a number in [low, high] (an int when the parameter takes whole numbers), else ValueError."""
        try:
            value = float(raw)
        except (TypeError, ValueError) as exc:
            raise TextError("error.param_number", name=self.name, raw=repr(raw)) from exc
        if not math.isfinite(value) or not self.low <= value <= self.high:
            key = "error.param_range_temperature" if self.name == "temperature" else "error.param_range"
            raise TextError(key, name=self.name, low=f"{self.low:g}", high=f"{self.high:g}", raw=repr(raw))
        if not self.is_int:
            return value
        if not value.is_integer():
            raise TextError("error.param_whole", name=self.name, raw=repr(raw))
        return int(value)


@dataclass(frozen=True)
class Strategy:
    """A named decoding strategy: the function, the parameters it exposes and the ones it fixes."""

    name: str
    fn: Callable[..., DecodeResult]
    params: tuple[Param, ...]
    description: str
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        """Default values of the exposed parameters."""
        return {p.name: int(p.default) if p.is_int else p.default for p in self.params}

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults, then the fixed values, then `params`; a fixed value or one outside its range is refused."""
        clash = sorted(set(params) & set(self.fixed))
        if clash:
            raise TextError("error.param_fixed", name=self.name, names=", ".join(clash))
        merged = {**self.defaults(), **self.fixed, **params}
        for p in (*self.params, MAX_LEN):  # the declared ranges, also what the app's validation checks
            if merged.get(p.name) is not None:
                merged[p.name] = p.check(merged[p.name])
        return merged

    def __call__(self, model: Transformer, src: Tensor, **params: Any) -> DecodeResult:
        """Run on src (B, S) with defaults, the fixed values and `params` (exposed or decoding options)."""
        result = self.fn(model, src, **self.resolve(params))
        result.strategy = self.name
        return result


MAX_LEN = Param("max_len", 0, 1, math.inf, 1, "most target tokens to generate (default: source length + 50)")
_SEED = Param("seed", 0, 0, 2**31 - 1, 1, "random seed: the same seed gives the same samples")
_TEMPERATURE = Param("temperature", 1.0, 0.05, 3.0, 0.05, "divide logits by T: < 1 sharper, > 1 flatter")
_TOP_K = Param("top_k", 10, 0, 200, 1, "keep only the k most probable tokens (0 = off)")
_TOP_P = Param(
    "top_p", 0.9, 0.05, 1.0, 0.05, "keep the smallest set of tokens whose mass reaches p (1 = off)"
)

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("greedy", greedy, (), "the most probable token at every step"),
        Strategy(
            "beam",
            beam_search,
            (
                Param("beam_size", 4, 1, 16, 1, "hypotheses kept at every step"),
                Param("alpha", 0.6, 0.0, 2.0, 0.1, "length penalty ((5+|Y|)/6)^alpha; 0 = plain log P"),
            ),
            "beam search with the GNMT length penalty (paper: beam 4, alpha 0.6)",
        ),
        Strategy(
            "sample",
            sample,
            (_TEMPERATURE, replace(_TOP_K, default=0), replace(_TOP_P, default=1.0), _SEED),
            "draw from the distribution after temperature → top-k → top-p",
        ),
        Strategy(
            "temperature",
            sample,
            (_TEMPERATURE, _SEED),
            "pure sampling at temperature T",
            {"top_k": 0, "top_p": 1.0},
        ),
        Strategy(
            "top-k",
            sample,
            (replace(_TOP_K, low=1, help="keep only the k most probable tokens"), _SEED),
            "sample among the k most probable tokens",
            {"temperature": 1.0, "top_p": 1.0},
        ),
        Strategy("top-p", sample, (_TOP_P, _SEED), "nucleus sampling", {"temperature": 1.0, "top_k": 0}),
    )
}


@torch.no_grad()
def run_strategies(
    model: Transformer,
    src: Tensor,
    runs: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    head_mask: HeadMask | None = None,
) -> list[DecodeResult]:
    """Several (strategy, params) runs on one sentence src (1, S), one DecodeResult each.

    Greedy and sampling runs (a row each) and beam searches (beam_size rows each) share one decoder: one
    encoder pass and one weight read per step for all rows, so they cost about one decoding instead of one
    each; every run keeps its own rule and seeded generator, so each result equals running it alone.
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"run_strategies decodes one sentence, src (1, S); got shape {tuple(src.shape)}")
    ids = {"bos_id": bos_id, "eos_id": eos_id}
    results: list[DecodeResult | None] = [None] * len(runs)
    groups: dict[tuple, list[tuple[int, dict[str, Any]]]] = {}
    beams: list[tuple[int, dict[str, Any], _BeamSearch]] = []  # (run, params, search)
    for i, (name, params) in enumerate(runs):
        strategy = get_strategy(name)
        merged = strategy.resolve(params)
        if strategy.fn in (greedy, sample):
            options = (merged.pop("max_len", None), merged.pop("n_candidates", N_CANDIDATES))
            groups.setdefault(options, []).append((i, merged))
        elif strategy.fn is beam_search and set(merged) <= _BEAM_OPTIONS:
            beams.append((i, *_beam_run(model, src, merged, ids)))
        else:
            results[i] = strategy(model, src, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask, **params)
    token_searches = []
    for (max_len, n_candidates), members in groups.items():
        choosers = [_row_chooser(runs[i][0], merged, src.device) for i, merged in members]

        def choose(logits: Tensor, rows: Tensor, choosers: list = choosers) -> tuple[Tensor, Filtered]:
            picked = [choosers[r][0](logits[a : a + 1]) for a, r in enumerate(rows.tolist())]
            token = torch.cat([t for t, _ in picked])  # (A,)
            probs = torch.cat([f.probs for _, f in picked])  # (A, V)
            return token, Filtered(probs, torch.cat([f.kept for _, f in picked]))

        batch = src.expand(len(members), -1)  # (R, S): one row per run
        search = _token_search(model, batch, choose, max_len, n_candidates=n_candidates, **ids)
        token_searches.append((members, choosers, max_len, search))
    searches = [s for *_, s in beams] + [s for *_, s in token_searches]
    if searches:
        _decode_searches(model, src, searches, head_mask=head_mask)
    for i, params, search in beams:
        n_best = params.pop("n_best")
        results[i] = DecodeResult(runs[i][0], params, search.outputs(n_best))
    for members, choosers, max_len, search in token_searches:
        for (i, _), output, (_, params) in zip(members, search.outputs(), choosers, strict=True):
            results[i] = DecodeResult(runs[i][0], {**params, "max_len": max_len}, [output])
    return [r for r in results if r is not None]


_BEAM_OPTIONS = {"beam_size", "alpha", "max_len", "n_best", "n_candidates"}  # what a shared beam search takes


def _beam_run(
    model: Transformer, src: Tensor, merged: dict[str, Any], ids: dict[str, int]
) -> tuple[dict[str, Any], _BeamSearch]:
    """A beam search of run_strategies (decoded beside the other runs): its recorded parameters (with n_best,
    which the result does not record) and its search."""
    params = {"beam_size": merged["beam_size"], "alpha": merged["alpha"], "max_len": merged.get("max_len")}
    search = _beam_search(
        model, src, params["beam_size"], params["alpha"], params["max_len"],
        n_candidates=merged.get("n_candidates", N_CANDIDATES), **ids,
    )  # fmt: skip
    return params | {"n_best": merged.get("n_best")}, search


def _row_chooser(
    name: str, params: dict[str, Any], device: torch.device
) -> tuple[Callable[[Tensor], tuple[Tensor, Filtered]], dict[str, Any]]:
    """The token rule of one run of run_strategies for logits (1, V), and the parameters it records."""
    if get_strategy(name).fn is greedy:
        return _choose_greedy, {}
    t, k, p = params["temperature"], params["top_k"], params["top_p"]
    generator, seed = _sampling_generator(t, k, p, params.get("seed"), device)

    def choose(logits: Tensor) -> tuple[Tensor, Filtered]:
        filtered = filter_distribution(logits, t, k, p)
        return draw(filtered.probs, generator), filtered

    return choose, {"temperature": t, "top_k": k, "top_p": p, "seed": seed}


def get_strategy(name: str) -> Strategy:
    """The registered strategy `name`, or a ValueError listing the choices."""
    if name not in STRATEGIES:
        raise TextError("error.unknown_strategy", name=name, names=", ".join(STRATEGIES))
    return STRATEGIES[name]
