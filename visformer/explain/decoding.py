"""What the Decoding page shows: strategy outputs as plain views, their scores, and plotly figures.

`strategy_view()` turns a `visformer.decoding.Translation` into a small picklable `StrategyView`
(pieces instead of ids, no tensors) that the page caches; the builders below draw it. No streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from ..decoding import BeamNode, Step, Translation, forbidden_ids
from ..i18n import has, t
from .style import escape, layout
from .views import readable_pieces, readable_text

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: not needed by the first page

MODEL_COLOR = "#c9d3e0"  # the model's probabilities, before filters
KEPT_COLOR = "#3b75af"  # survivors of the filters (beam: became a beam)
DROPPED_COLOR = "#e4572e"
CHOSEN_COLOR = "#f2a541"
FINISHED_COLOR = "#2e9e5b"
PRUNED_COLOR = "#b0b0b0"
BEST_COLOR = "#e4572e"

# ---------------------------------------------------------------------------------------------
# Views: what one strategy produced, as pieces and numbers
# ---------------------------------------------------------------------------------------------

DEFAULT_STRATEGIES = ("greedy", "beam", "temperature", "top-k", "top-p")  # compared when none are chosen


@dataclass(frozen=True)
class StepView:
    """One output step: the top candidates before and after the filters, and the chosen one."""

    candidates: list[str]  # pieces, most probable first (the chosen one appended when outside the top)
    probs: list[float]  # model probabilities (before filters)
    filtered: list[float]  # after temperature / top-k / top-p (0 = filtered out; NaN = unknown)
    kept: list[bool]
    chosen: int  # index of the chosen piece in `candidates`
    n_kept: int  # size of the whole kept set (may exceed the candidates shown)
    logprob: float  # running log P after this step


@dataclass(frozen=True)
class TreeNode:
    """One beam at one step of beam search, with the hypothesis it spells so far."""

    step: int
    beam: int
    parent: int
    piece: str
    prefix: str  # the hypothesis up to and including this piece
    logprob: float
    score: float
    finished: bool


@dataclass(frozen=True)
class StrategyView:
    """What one strategy produced for one sentence."""

    strategy: str
    params: dict[str, Any]
    text: str
    pieces: list[str]
    logprob: float
    finished: bool  # ended with </s> (False: cut by the length limit)
    steps: list[StepView]
    tree: list[list[TreeNode]] = field(default_factory=list)
    best_node: tuple[int, int] | None = None
    nbest: list[tuple[str, float, float]] = field(default_factory=list)  # (text, log P, score)

    def label(self, lang: str = "en") -> str:
        """The strategy's name in `lang` with its parameters, e.g. 'beam (beam_size=4, alpha=0.6)'."""
        return params_label(self.strategy, self.params, lang)

    @property
    def length(self) -> int:
        """Output tokens, </s> included."""
        return len(self.pieces)


def params_label(strategy: str, params: dict[str, Any], lang: str = "en") -> str:
    """'top-k (top_k=10, seed=0)': the strategy's name in `lang`, its parameters as the code names them."""
    name = t(f"decoding.name.{strategy}", lang) if has(f"decoding.name.{strategy}") else strategy
    shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
    return f"{name} ({shown})" if shown else name


def step_view(step: Step, piece: Callable[[int], str]) -> StepView:
    """A Step with pieces for ids; the chosen token is appended when it is not among the top candidates."""
    candidates, probs, filtered, kept = (
        list(step.candidates),
        list(step.probs),
        list(step.filtered),
        list(step.kept),
    )
    if step.token not in candidates:
        candidates.append(step.token)
        probs.append(step.token_prob)
        filtered.append(math.nan)
        kept.append(True)
    return StepView(
        [piece(i) for i in candidates],
        probs,
        filtered,
        kept,
        candidates.index(step.token),
        step.n_kept,
        step.logprob,
    )


def tree_nodes(tree: list[list[BeamNode]], piece: Callable[[int], str]) -> list[list[TreeNode]]:
    """Beam nodes with pieces and the prefix each hypothesis spells."""
    out: list[list[TreeNode]] = []
    prefixes = {0: ""}
    for nodes in tree:
        layer, nxt = [], {}
        for n in nodes:
            prefix = f"{prefixes.get(n.parent, '')} {piece(n.token)}".strip()
            nxt[n.beam] = prefix
            layer.append(
                TreeNode(n.step, n.beam, n.parent, piece(n.token), prefix, n.logprob, n.score, n.finished)
            )
        out.append(layer)
        prefixes = nxt
    return out


def strategy_view(
    translation: Translation, tgt_tokenizer: Any, strategy: str, params: dict[str, Any]
) -> StrategyView:
    """The view of one Translation (any strategy)."""

    def piece(i: int) -> str:  # one token alone: a byte piece names its byte ('byte EB'), not '<0xEB>'
        return readable_pieces(tgt_tokenizer.pieces([i]))[0]

    out = translation.output
    nbest = [
        (readable_text(tgt_tokenizer.decode(h.tokens), tgt_tokenizer.pieces(h.tokens)), h.logprob, h.score)
        for h in out.nbest
    ]
    return StrategyView(
        strategy=strategy,
        params=dict(params),
        text=readable_text(translation.text, list(translation.tgt_pieces)),
        pieces=readable_pieces(list(translation.tgt_pieces)),
        logprob=float(out.best.logprob),
        finished=bool(out.best.finished),
        steps=[step_view(s, piece) for s in out.steps],
        tree=tree_nodes(out.tree, piece),
        best_node=out.best.node,
        nbest=nbest,
    )


# ---------------------------------------------------------------------------------------------
# Scores: BLEU against a reference, diversity of samples
# ---------------------------------------------------------------------------------------------


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """sacreBLEU sentence BLEU (0–100, smoothed) of one output against one reference."""
    import sacrebleu

    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score)


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Distinct-n: unique word n-grams / all word n-grams over the texts (0 when there are none)."""
    grams = [
        tuple(words[i : i + n]) for words in (t.split() for t in texts) for i in range(len(words) - n + 1)
    ]
    return len(set(grams)) / len(grams) if grams else 0.0


def self_bleu(texts: Sequence[str]) -> float:
    """Mean BLEU of each text against all the others (high = the samples repeat each other); NaN for < 2."""
    if len(texts) < 2:
        return math.nan
    import sacrebleu

    scores = [
        sacrebleu.sentence_bleu(t, [o for j, o in enumerate(texts) if j != i]).score
        for i, t in enumerate(texts)
    ]
    return float(np.mean(scores))


@dataclass(frozen=True)
class Diversity:
    """How different N samples are."""

    n: int
    distinct: int  # different output texts
    distinct_1: float
    distinct_2: float
    self_bleu: float


def diversity(texts: Sequence[str]) -> Diversity:
    """Distinct outputs, distinct-1/2 and self-BLEU of a set of samples."""
    return Diversity(
        len(texts), len(set(texts)), distinct_n(texts, 1), distinct_n(texts, 2), self_bleu(texts)
    )


def comparison_table(views: Sequence[StrategyView], reference: str = "", lang: str = "en") -> pd.DataFrame:
    """One row per strategy: output, log P, log P per token, length, and BLEU when a reference is given.

    Column names are stable keys (the page labels them in the reader's language: COLUMN_KEYS).
    """
    import pandas as pd

    rows = []
    for v in views:
        row = {
            "strategy": v.label(lang),
            "output": v.text or t("decoding.empty", lang),
            "log P": round(v.logprob, 3),
            "log P / token": round(v.logprob / max(v.length, 1), 3),
            "length": v.length,
            "ended with </s>": v.finished,
        }
        if reference.strip():
            row["BLEU"] = round(sentence_bleu(v.text, reference), 1)
        rows.append(row)
    return pd.DataFrame(rows)


COLUMN_KEYS = {  # comparison_table column -> interface text key of its label
    "strategy": "decoding.col.strategy",
    "output": "decoding.col.output",
    "log P": "decoding.col.logp",
    "log P / token": "decoding.col.logp_token",
    "length": "decoding.col.length",
    "ended with </s>": "decoding.col.finished",
    "BLEU": "decoding.col.bleu",
}


# ---------------------------------------------------------------------------------------------
# What the filters did, and why samplers with one seed often agree
# ---------------------------------------------------------------------------------------------

SAMPLING = ("sample", "temperature", "top-k", "top-p")  # strategies that draw with a seeded generator


def allowed_tokens(tokenizer: Any) -> int:
    """Tokens one decoding step may choose: the vocabulary less <pad> and <s>, which decoding forbids."""
    return tokenizer.vocab_size - len(forbidden_ids(tokenizer.pad_id, tokenizer.bos_id))


@dataclass(frozen=True)
class FilterSummary:
    """How many tokens the filters of one sampling run left, over its steps."""

    n_steps: int
    min_kept: int
    max_kept: int
    kept_all: int  # steps where the filters removed nothing (every allowed token stayed a candidate)
    kept_one: int  # steps where one token was left, so the draw had no choice (as greedy)


def filter_summary(view: StrategyView, n_allowed: int) -> FilterSummary:
    """What the filters did at each step of one run, from its trace (n_kept of every step)."""
    kept = [s.n_kept for s in view.steps]
    return FilterSummary(
        len(kept), min(kept, default=0), max(kept, default=0),
        sum(k >= n_allowed for k in kept), sum(k == 1 for k in kept),
    )  # fmt: skip


def filter_note(view: StrategyView, n_allowed: int, lang: str = "en") -> str:
    """One sentence on what the filters of a sampling run did: removed nothing, left one token, or a range."""
    s = filter_summary(view, n_allowed)
    if s.n_steps and s.kept_all == s.n_steps:
        return t("decoding.filters.none", lang, label=view.label(lang), n=f"{n_allowed:,}")
    if s.n_steps and s.kept_one == s.n_steps:
        return t("decoding.filters.forced", lang, label=view.label(lang))
    return t("decoding.filters.range", lang, label=view.label(lang), lo=f"{s.min_kept:,}", hi=f"{s.max_kept:,}",
             one=s.kept_one, n=s.n_steps)  # fmt: skip


def shared_seeds(views: Sequence[StrategyView]) -> dict[int, list[StrategyView]]:
    """Sampling runs grouped by seed, only the seeds that two or more of them share."""
    groups: dict[int, list[StrategyView]] = {}
    for v in views:
        if v.strategy in SAMPLING and "seed" in v.params:
            groups.setdefault(int(v.params["seed"]), []).append(v)
    return {seed: group for seed, group in groups.items() if len(group) > 1}


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def comparison_figure(views: Sequence[StrategyView], lang: str = "en") -> go.Figure:
    """Horizontal bars of each strategy's log P (closer to 0 = more probable), length printed beside."""
    labels = [v.label(lang) for v in views]
    logprobs = [v.logprob for v in views]
    fig = go.Figure(
        go.Bar(
            y=labels,
            x=logprobs,
            orientation="h",
            marker_color=KEPT_COLOR,
            text=[t("decoding.fig.tokens", lang, n=v.length) for v in views],
            textposition="outside",
            customdata=[escape(v.text) for v in views],
            hovertemplate="%{y}<br>log P = %{x:.3f}<br>%{customdata}<extra></extra>",
        )
    )
    low = min(logprobs, default=-1.0)
    fig.update_xaxes(title=t("decoding.fig.logp_axis", lang), range=[low * 1.25 - 0.5, 0])
    fig.update_yaxes(autorange="reversed")
    return layout(fig, t("decoding.fig.comparison_title", lang), 140 + 40 * len(views))


def candidates_figure(step: StepView, *, title: str = "", lang: str = "en") -> go.Figure:
    """Top candidates' probabilities before and after the filters; kept set highlighted, chosen token marked."""
    x = list(range(len(step.candidates)))
    labels = [escape(c) for c in step.candidates]
    after = [0.0 if math.isnan(f) else f for f in step.filtered]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=x, y=step.probs, name=t("decoding.fig.model_prob", lang), marker_color=MODEL_COLOR,
            customdata=labels, hovertemplate="%{customdata}: p = %{y:.3f}<extra>model</extra>",
        )
    )  # fmt: skip
    fig.add_trace(
        go.Bar(
            x=x,
            y=after,
            name=t("decoding.fig.after_filters", lang),
            marker=dict(
                color=[KEPT_COLOR if k else DROPPED_COLOR for k in step.kept],
                line=dict(color=[CHOSEN_COLOR if i == step.chosen else "rgba(0,0,0,0)" for i in x], width=3),
            ),
            customdata=[
                [c, t("decoding.fig.kept" if k else "decoding.fig.dropped", lang)]
                for c, k in zip(labels, step.kept, strict=True)
            ],
            hovertemplate="%{customdata[0]}: p = %{y:.3f} (%{customdata[1]})<extra>after filters</extra>",
        )
    )
    dropped = [i for i, k in enumerate(step.kept) if not k]
    if dropped:
        fig.add_trace(
            go.Scatter(
                x=dropped, y=[step.probs[i] for i in dropped], mode="markers", name=t("decoding.fig.dropped", lang),
                marker=dict(symbol="x", size=10, color=DROPPED_COLOR), hoverinfo="skip",
            )
        )  # fmt: skip
    top = max([*step.probs, *after, 1e-9])
    fig.add_annotation(
        x=step.chosen, y=max(step.probs[step.chosen], after[step.chosen]), text=t("decoding.fig.chosen", lang, token=labels[step.chosen]),
        showarrow=True, arrowhead=2, arrowcolor=CHOSEN_COLOR, ax=36, ay=-26, xanchor="left", font=dict(color="#7a4b00"),
    )  # fmt: skip
    fig.update_xaxes(tickvals=x, ticktext=labels, tickangle=-45)
    fig.update_yaxes(title=t("decoding.fig.probability", lang), range=[0, top * 1.3 + 0.02])
    fig.update_layout(
        barmode="group", bargap=0.25, legend=dict(orientation="h", y=1.12, x=1, xanchor="right")
    )
    return layout(fig, title, 400)


def _node_status(tree: list[list[TreeNode]]) -> dict[tuple[int, int], str]:
    """'finished', 'pruned' (no child at the next step) or 'live' (still a beam when the search ended)."""
    status = {}
    for i, nodes in enumerate(tree):
        children = {n.parent for n in tree[i + 1]} if i + 1 < len(tree) else None
        for n in nodes:
            if n.finished:
                status[(n.step, n.beam)] = "finished"
            elif children is not None and n.beam not in children:
                status[(n.step, n.beam)] = "pruned"
            else:
                status[(n.step, n.beam)] = "live"
    return status


def _best_path(tree: list[list[TreeNode]], best: tuple[int, int] | None) -> set[tuple[int, int]]:
    """(step, beam) of every node on the best hypothesis."""
    path: set[tuple[int, int]] = set()
    if best is None:
        return path
    step, beam = best
    by_key = {(n.step, n.beam): n for nodes in tree for n in nodes}
    while step >= 1 and (step, beam) in by_key:
        path.add((step, beam))
        step, beam = step - 1, by_key[(step, beam)].parent
    return path


TREE_WINDOW = 10  # steps of the beam tree on screen at once: 39 steps side by side were unreadable


def beam_tree_figure(
    tree: list[list[TreeNode]], best: tuple[int, int] | None = None, *, title: str = "", lang: str = "en"
) -> go.Figure:
    """The beam search tree: steps left to right, beams top to bottom; finished, pruned and best marked."""
    if not tree:
        raise ValueError("no beam tree to draw: this strategy is not beam search")
    status = _node_status(tree)
    on_best = _best_path(tree, best)
    fig = go.Figure()
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    best_x: list[float | None] = []
    best_y: list[float | None] = []
    for nodes in tree:
        for n in nodes:
            xs, ys = (best_x, best_y) if (n.step, n.beam) in on_best else (edge_x, edge_y)
            xs += [n.step - 1, n.step, None]
            ys += [n.parent, n.beam, None]
    fig.add_trace(go.Scatter(x=edge_x, y=edge_y, mode="lines", line=dict(color="#c8c8c8", width=1.5),
                             hoverinfo="skip", showlegend=False))  # fmt: skip
    fig.add_trace(go.Scatter(x=best_x, y=best_y, mode="lines", line=dict(color=BEST_COLOR, width=3.5),
                             name=t("decoding.fig.best", lang), hoverinfo="skip"))  # fmt: skip
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", text=["&lt;s&gt;"], textposition="middle left",
                             marker=dict(size=12, color="#444"), name="start", hoverinfo="skip", showlegend=False))  # fmt: skip
    styles = {
        "live": (KEPT_COLOR, "circle", t("decoding.fig.live", lang)),
        "pruned": (PRUNED_COLOR, "x", t("decoding.fig.pruned", lang)),
        "finished": (FINISHED_COLOR, "diamond", t("decoding.fig.finished", lang)),
    }
    for kind, (color, symbol, name) in styles.items():
        chosen = [n for nodes in tree for n in nodes if status[(n.step, n.beam)] == kind]
        if not chosen:
            continue
        fig.add_trace(
            go.Scatter(
                x=[n.step for n in chosen],
                y=[n.beam for n in chosen],
                mode="markers+text",
                text=[escape(n.piece) for n in chosen],
                textposition="top center",
                textfont=dict(size=11),
                marker=dict(size=12, color=color, symbol=symbol, line=dict(color="white", width=1)),
                customdata=[[escape(n.prefix), n.logprob, n.score] for n in chosen],
                hovertemplate="%{customdata[0]}<br>log P = %{customdata[1]:.3f}<br>score = %{customdata[2]:.3f}"
                f"<extra>{name}</extra>",
                name=name,
            )
        )
    n_beams = max(n.beam for nodes in tree for n in nodes) + 1
    shown = min(
        len(tree), TREE_WINDOW
    )  # a long output opens on its first steps; the slider below moves along
    fig.update_xaxes(
        title=t("decoding.fig.step", lang),
        dtick=1,
        range=[-0.7, shown + 0.5],
        showgrid=False,
        zeroline=False,
        rangeslider=dict(visible=len(tree) > TREE_WINDOW, thickness=0.08, range=[-0.7, len(tree) + 0.5]),
    )
    fig.update_yaxes(title=t("decoding.fig.beam_axis", lang), tickvals=list(range(n_beams)),
                     ticktext=[str(b + 1) for b in range(n_beams)], autorange="reversed",  # ranks from 1
                     range=[-0.6, n_beams - 0.4],
                     showgrid=False, zeroline=False)  # fmt: skip
    long = len(tree) > TREE_WINDOW
    fig.update_layout(
        legend=dict(orientation="h", y=-0.45 if long else -0.18)
    )  # below the slider when there is one
    return layout(fig, title, 220 + 55 * n_beams + (80 if long else 0))


def samples_figure(texts: Sequence[str], logprobs: Sequence[float], lang: str = "en") -> go.Figure:
    """How often each distinct sample came out, most frequent first, with its log P on hover."""
    counts: dict[str, int] = {}
    best_lp: dict[str, float] = {}
    for text, lp in zip(texts, logprobs, strict=True):
        counts[text] = counts.get(text, 0) + 1
        best_lp[text] = lp
    order = sorted(counts, key=lambda x: (-counts[x], -best_lp[x]))
    empty = t("decoding.empty", lang)
    labels = [escape(x or empty) if len(x) <= 60 else escape(x[:57]) + "…" for x in order]
    fig = go.Figure(
        go.Bar(
            y=labels, x=[counts[x] for x in order], orientation="h", marker_color=KEPT_COLOR,
            customdata=[[escape(x), best_lp[x]] for x in order],
            hovertemplate=t("decoding.fig.drawn_hover", lang),
        )
    )  # fmt: skip
    fig.update_xaxes(title=t("decoding.fig.times_drawn", lang), dtick=1)
    fig.update_yaxes(autorange="reversed")
    return layout(
        fig, t("decoding.fig.samples_title", lang, k=len(order), n=len(texts)), 160 + 28 * len(order)
    )
