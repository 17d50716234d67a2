"""The guided lesson: for a model and the student's sentence, the numbers each step draws and asks about.

Every question's answer is computed here from the model (an argmax of attention, a comparison of two
softmaxes, a shape, a norm), never written by hand. Texts are i18n keys (`Text`), turned into Korean or
English by the page. Shapes: S source pieces, T target pieces, d d_model, h heads, dh d_model / h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..model import LayerRecord, Transformer
from ..training import noam_lr
from .analysis import entropy, pe_matrix, pe_norm, softmax
from .kinds import future_mask
from .lesson_figures import seq2seq_figure as seq2seq_figure  # step 1's figure, where the pages look for it
from .style import escape, layout

STEPS = (
    "rnn",
    "embedding",
    "positional",
    "self_attention",
    "scaled",
    "multi_head",
    "ffn",
    "masked",
    "cross",
    "training",
    "decoding",
    "why",
)
LECTURE_EXAMPLE = "드디어 금요일 이다"  # the lecture's self-attention example (Korean source models)


@dataclass(frozen=True)
class Text:
    """A piece of interface text: an i18n key and its format values."""

    key: str
    fmt: dict[str, object] = field(default_factory=dict)


Option = Text | str  # a translated label, or a literal one (a piece, a number, a shape)


@dataclass(frozen=True)
class Question:
    """A predict-then-reveal question whose answer was computed from the model."""

    prompt: Text
    options: tuple[Option, ...]
    answer: int  # index into options
    reveal: Text  # the explanation shown after answering, with the computed numbers


def piece_options(pieces: list[str]) -> tuple[str, ...]:
    """Pieces as option labels, numbered by position where a piece occurs twice."""
    repeated = {p for p in pieces if pieces.count(p) > 1}
    return tuple(f"{p} ({i})" if p in repeated else p for i, p in enumerate(pieces))


def _numeric_question(prompt: Text, values: dict[str, int], correct: str, reveal: Text) -> Question:
    """A question over named numbers: options in ascending order, equal values merged."""
    by_value: dict[int, str] = {}
    for name, value in sorted(values.items(), key=lambda kv: kv[1]):
        by_value.setdefault(value, name)
    ordered = sorted(by_value)
    return Question(prompt, tuple(f"{v:,}" for v in ordered), ordered.index(values[correct]), reveal)


def most_decided(weights: np.ndarray, skip_last: bool = True) -> int:
    """The query row with the lowest entropy (the clearest answer); the last row (</s>) is skipped when others exist."""
    ent = entropy(np.asarray(weights, dtype=float))
    if skip_last and len(ent) > 1:
        ent = ent[:-1]
    return int(np.argmin(ent))


# ---------------------------------------------------------------------------------------------
# 1. Why not an RNN
# ---------------------------------------------------------------------------------------------


def rnn_question(n_src: int) -> Question:
    """How many steps an RNN encoder needs, one after another, for n source pieces (answer: n)."""
    values = {"one": 1, "n": n_src, "n2": n_src * n_src, "log": max(1, math.ceil(math.log2(max(n_src, 2))))}
    return _numeric_question(
        Text("lesson.rnn.question", {"n": n_src}), values, "n", Text("lesson.rnn.reveal", {"n": n_src})
    )


# ---------------------------------------------------------------------------------------------
# 2. Token embedding
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingView:
    """The lookup of the student's pieces: shapes and vector norms before and after √d scaling."""

    table_shape: tuple[int, int]  # (V, d)
    lookup_shape: tuple[int, int]  # (S, d)
    vectors: np.ndarray  # (S, d) the looked-up rows E[token], before scaling
    scale: float  # √d_model
    raw_norms: np.ndarray  # (S,) ‖E[token]‖
    scaled_norms: np.ndarray  # (S,) ‖√d · E[token]‖
    pe_norm: float  # ‖PE(pos)‖ = √(d/2), the same for every position


@torch.no_grad()
def embedding_view(model: Transformer, src_ids: list[int]) -> EmbeddingView:
    """Look the pieces up in the source embedding table, as the model does before adding PE."""
    embed = model.src_embed
    device = next(model.parameters()).device
    vectors = embed.token(torch.tensor(src_ids, device=device)).float().cpu()  # (S, d)
    raw = vectors.norm(dim=-1).numpy()
    d = model.config.d_model
    return EmbeddingView(
        tuple(embed.token.weight.shape),
        tuple(vectors.shape),
        vectors.double().numpy(),
        embed.scale,
        raw,
        raw * embed.scale,
        pe_norm(d),
    )


def embedding_question(view: EmbeddingView) -> Question:
    """What shape the lookup of S pieces in a (V, d) table gives (answer: the tensor's real shape)."""
    (v, d), (s, _) = view.table_shape, view.lookup_shape
    shapes = [(s, d), (d, s), (v, d), (s, v)]
    labels = tuple(dict.fromkeys(f"({a}, {b})" for a, b in shapes))
    answer = labels.index(f"({view.lookup_shape[0]}, {view.lookup_shape[1]})")
    return Question(
        Text("lesson.embedding.question", {"n": s, "vocab": v, "d": d}),
        labels,
        answer,
        Text("lesson.embedding.reveal", {"n": s, "d": d}),
    )


def norms_bars(pieces: list[str], view: EmbeddingView, names: tuple[str, str, str], title: str) -> go.Figure:
    """Grouped bars per piece: ‖E‖, ‖√d·E‖ and ‖PE‖."""
    x = [f"{i}: {escape(p)}" for i, p in enumerate(pieces)]
    fig = go.Figure()
    series = (view.raw_norms, view.scaled_norms, np.full(len(pieces), view.pe_norm))
    for name, y, color in zip(names, series, ("#bbbbbb", "#3b75af", "#e4572e"), strict=True):
        fig.add_trace(go.Bar(x=x, y=y, name=name, marker_color=color,
                             hovertemplate="%{x}<br>%{y:.2f}<extra></extra>"))  # fmt: skip
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.3))
    fig.update_xaxes(tickangle=-45)
    return layout(fig, title, 380)


# ---------------------------------------------------------------------------------------------
# 3. Positional encoding
# ---------------------------------------------------------------------------------------------


def pe_step_change(length: int, d_model: int) -> np.ndarray:
    """Mean |PE(pos+1) − PE(pos)| of each (sin, cos) pair over positions 0..length-1: (d/2,)."""
    pe = pe_matrix(max(length, 2), d_model)  # (L, d)
    step = np.abs(np.diff(pe, axis=0)).mean(axis=0)  # (d,)
    return step.reshape(-1, 2).mean(axis=1)


def pe_question(length: int, d_model: int) -> Question:
    """Which of three pairs changes most from one word to the next (answer: argmax of the measured change)."""
    change = pe_step_change(length, d_model)
    pairs = tuple(dict.fromkeys((0, d_model // 4, d_model // 2 - 1)))
    best = max(range(len(pairs)), key=lambda i: change[pairs[i]])
    options = tuple(Text("lesson.positional.option", {"i": i, "a": 2 * i, "b": 2 * i + 1}) for i in pairs)
    values = {f"c{i}": f"{change[i]:.3f}" for i in range(len(pairs))}
    reveal = Text(
        "lesson.positional.reveal",
        {"first": values["c0"], "last": f"{change[pairs[-1]]:.5f}", "i_last": pairs[-1], "n": length},
    )
    return Question(Text("lesson.positional.question", {"n": length}), options, best, reveal)


# ---------------------------------------------------------------------------------------------
# 4-5. Self-attention and the √d_k scaling
# ---------------------------------------------------------------------------------------------


def argmax_question(
    weights: np.ndarray,
    query: int,
    query_labels: list[str],
    key_labels: list[str],
    prompt: str,
    reveal: str,
    **fmt,
) -> Question:
    """Which key the query row puts most weight on (answer: argmax of that attention row)."""
    row = np.asarray(weights, dtype=float)[query]
    best = int(np.argmax(row))
    options = piece_options(key_labels)
    values = {"query": query_labels[query], "key": options[best], "weight": f"{row[best]:.2f}", **fmt}
    return Question(Text(prompt, values), options, best, Text(reveal, values))


def dimension_labels(n: int) -> list[str]:
    """Column labels of n vector dimensions, counted from 1 as everything on screen."""
    return [str(j + 1) for j in range(n)]


def qkv_figure(
    matrices: tuple[np.ndarray, np.ndarray, np.ndarray],
    labels: list[str],
    titles: tuple[str, str, str],
    x_title: str,
) -> go.Figure:
    """Q, K and V of one head side by side, one shared colour bar right of the last: three (S, dh) heatmaps.

    One figure, not three charts in narrow columns: a column of a third of the page left no room for cells.
    """
    stack = np.stack([np.asarray(m, dtype=float) for m in matrices])  # (3, S, dh)
    n, dh = stack.shape[1:]
    zmax = float(np.abs(stack).max()) or 1.0
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.07, subplot_titles=titles)
    dims = dimension_labels(dh)
    for col, (matrix, name) in enumerate(zip(stack, "QKV", strict=True), start=1):
        cells = [[escape(label)] * dh for label in labels]  # (S, dh): the piece of each cell, for the hover
        fig.add_trace(go.Heatmap(z=matrix, x=dims, y=list(range(n)), text=cells, coloraxis="coloraxis", xgap=1,
                                 ygap=1, hovertemplate=f"{name}: %{{text}}, %{{x}}<br>%{{z:.3f}}<extra></extra>"),
                      row=1, col=col)  # fmt: skip
        ticks = sorted({0, dh - 1})  # first and last: three panels share a phone's width
        fig.update_xaxes(tickvals=[dims[t] for t in ticks], title_text=x_title, tickangle=0, row=1, col=col)
    fig.update_yaxes(tickvals=list(range(n)), ticktext=[escape(x) for x in labels], autorange="reversed")
    fig.update_layout(coloraxis=dict(colorscale="RdBu", reversescale=True, cmin=-zmax, cmax=zmax,
                                     colorbar=dict(thickness=12, title=dict(text="value"))))  # fmt: skip
    fig.update_annotations(font_size=13)
    return layout(fig, "", max(260, 26 * n + 150))


def weighted_sum_rows(weights_row: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rows w_j · v_j for every key j and, last, their sum (the head's output for this query): (k+1, dh)."""
    parts = np.asarray(weights_row, dtype=float)[:, None] * np.asarray(v, dtype=float)  # (k, dh)
    return np.vstack([parts, parts.sum(axis=0, keepdims=True)])


@dataclass(frozen=True)
class ScalingEffect:
    """One query's softmax with and without dividing the scores by √d_k."""

    d_k: int
    unscaled: np.ndarray  # (k,) softmax(q·K)
    scaled: np.ndarray  # (k,) softmax(q·K / √d_k)

    @property
    def max_weights(self) -> tuple[float, float]:
        """(unscaled, scaled) largest weight."""
        return float(self.unscaled.max()), float(self.scaled.max())

    @property
    def entropies(self) -> tuple[float, float]:
        """(unscaled, scaled) entropy in nats."""
        return float(entropy(self.unscaled)), float(entropy(self.scaled))


def scaling_effect(scores_row: np.ndarray, d_k: int) -> ScalingEffect:
    """softmax of one row of QKᵀ (masked keys -inf) as is and divided by √d_k."""
    scores = np.asarray(scores_row, dtype=float)
    visible = np.isfinite(scores)

    def weights(s: np.ndarray) -> np.ndarray:
        out = np.zeros_like(s)
        out[visible] = softmax(s[visible])
        return out

    return ScalingEffect(d_k, weights(scores), weights(scores / math.sqrt(d_k)))


def scaling_question(effect: ScalingEffect, query_label: str) -> Question:
    """What dropping the 1/√d_k does to this row (answer: measured by the largest weight)."""
    (m_un, m_sc), (e_un, e_sc) = effect.max_weights, effect.entropies
    answer = 0 if m_un > m_sc + 1e-9 else 1 if m_un < m_sc - 1e-9 else 2
    fmt = {"query": query_label, "d_k": effect.d_k, "root": f"{math.sqrt(effect.d_k):.2f}"}
    numbers = {
        "max_un": f"{m_un:.3f}",
        "max_sc": f"{m_sc:.3f}",
        "ent_un": f"{e_un:.3f}",
        "ent_sc": f"{e_sc:.3f}",
    }
    options = tuple(Text(f"lesson.scaled.option.{o}") for o in ("sharper", "flatter", "same"))
    return Question(
        Text("lesson.scaled.question", fmt), options, answer, Text("lesson.scaled.reveal", fmt | numbers)
    )


# ---------------------------------------------------------------------------------------------
# 6-7. Multi-head attention and one encoder layer step by step
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def encoder_record(model: Transformer, src_ids: list[int], layer: int) -> tuple[LayerRecord, torch.Tensor]:
    """What encoder layer `layer` computed for one sentence (its forward pass's record) and the source mask."""
    if not 0 <= layer < len(model.encoder.layers):
        raise ValueError(f"encoder layer {layer} out of range 0..{len(model.encoder.layers) - 1}")
    device = next(model.parameters()).device
    encoded = model.encode(torch.tensor([src_ids], device=device), record=True)  # (1, S)
    return encoded.intermediates[layer], encoded.src_mask


def encoder_input(model: Transformer, src_ids: list[int], layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What encoder layer `layer` receives for one sentence: x (1, S, d) and the source mask (1, 1, 1, S)."""
    record, mask = encoder_record(model, src_ids, layer)
    return record.input, mask


@dataclass(frozen=True)
class MultiHeadView:
    """Multi-head self-attention of one encoder layer taken apart: heads, concatenation, W_O."""

    weights: np.ndarray  # (h, S, S)
    heads: np.ndarray  # (h, S, dh) each head's softmax(QKᵀ/√dk)V
    concat: np.ndarray  # (S, h·dh)
    output: np.ndarray  # (S, d) = concat · W_Oᵀ + b_O
    w_o_shape: tuple[int, int]  # (d, h·dh) as stored by nn.Linear


def multi_head_view(model: Transformer, src_ids: list[int], layer: int) -> MultiHeadView:
    """Split into heads, attend per head, concatenate, project with W_O (eval mode, no dropout)."""
    attn = encoder_record(model, src_ids, layer)[0].self_attn

    def arr(t: torch.Tensor) -> np.ndarray:
        return t[0].double().cpu().numpy()

    w_o = model.encoder.layers[layer].self_attn.w_o
    return MultiHeadView(
        arr(attn.weights), arr(attn.heads), arr(attn.concat), arr(attn.output), tuple(w_o.weight.shape)
    )


def multi_head_question(view: MultiHeadView, d_model: int, d_ff: int) -> Question:
    """How many numbers each head works with per piece (answer: the head output's real last dimension)."""
    h, _, dh = view.heads.shape
    values = {"d": d_model, "dh": dh, "h": h, "ff": d_ff}
    reveal = Text("lesson.multi_head.reveal", {"h": h, "dh": dh, "d": d_model, "hdh": h * dh})
    return _numeric_question(Text("lesson.multi_head.question", {"h": h, "d": d_model}), values, "dh", reveal)


POST_LN_STAGES = ("input", "attention", "residual1", "norm1", "hidden", "ffn", "residual2", "norm2")
PRE_LN_STAGES = ("input", "norm1", "attention", "residual1", "norm2", "hidden", "ffn", "residual2")


@dataclass(frozen=True)
class LayerTrace:
    """Every intermediate vector of one encoder layer, in the order they are computed."""

    stages: tuple[str, ...]  # names from POST_LN_STAGES or PRE_LN_STAGES
    vectors: tuple[np.ndarray, ...]  # one (S, d) array per stage ((S, d_ff) for "hidden")
    norm_first: bool

    @property
    def norms(self) -> np.ndarray:
        """‖vector‖ of every piece at every stage: (stages, S)."""
        return np.stack([np.linalg.norm(v, axis=-1) for v in self.vectors])

    def stage(self, name: str) -> np.ndarray:
        """The vectors of one stage."""
        return self.vectors[self.stages.index(name)]

    @property
    def output(self) -> np.ndarray:
        """The layer's output (S, d)."""
        return self.vectors[-1]


def encoder_layer_trace(model: Transformer, src_ids: list[int], layer: int) -> LayerTrace:
    """One encoder layer sub-layer by sub-layer, as its forward pass recorded it (eval mode)."""
    record = encoder_record(model, src_ids, layer)[0]
    attn, ffn = record.sublayers
    if attn.norm_first:  # x + Attn(LN(x)), then + FFN(LN(·))
        tensors = (attn.input, attn.normed, attn.output, attn.residual, ffn.normed, record.ffn_hidden,
                   ffn.output, ffn.residual)  # fmt: skip
        stages = PRE_LN_STAGES
    else:  # LN(x + Attn(x)), then LN(· + FFN(·))
        tensors = (attn.input, attn.output, attn.residual, attn.normed, record.ffn_hidden, ffn.output,
                   ffn.residual, ffn.normed)  # fmt: skip
        stages = POST_LN_STAGES
    vectors = tuple(t[0].double().cpu().numpy() for t in tensors)
    return LayerTrace(stages, vectors, attn.norm_first)


def ffn_question(trace: LayerTrace, piece: int, piece_label: str) -> Question:
    """Which sub-layer adds the larger vector to this piece (answer: ‖Attention‖ vs ‖FFN‖ measured)."""
    attn = float(np.linalg.norm(trace.stage("attention")[piece]))
    ffn = float(np.linalg.norm(trace.stage("ffn")[piece]))
    options = (Text("lesson.ffn.option.attention"), Text("lesson.ffn.option.ffn"))
    fmt = {"piece": piece_label, "attn": f"{attn:.2f}", "ffn": f"{ffn:.2f}"}
    return Question(Text("lesson.ffn.question", {"piece": piece_label}), options, 0 if attn >= ffn else 1,
                    Text("lesson.ffn.reveal", fmt))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 8-9. Masked self-attention and cross-attention (on a translation's attention stacks)
# ---------------------------------------------------------------------------------------------


def future_weight(decoder: np.ndarray) -> float:
    """Largest total weight any decoder query gives to later positions, over every layer and head."""
    stack = np.asarray(decoder, dtype=float)  # (L, h, T, T)
    future = future_mask(*stack.shape[-2:])
    return float((stack * future).sum(axis=-1).max()) if stack.size else 0.0


def masked_question(decoder: np.ndarray, query_label: str) -> Question:
    """How much weight goes to future words (answer: measured over every layer and head)."""
    leak = future_weight(decoder)
    n = decoder.shape[-1]
    answer = 0 if leak < 1e-6 else 1 if leak < 2.0 / max(n, 1) else 2
    options = tuple(Text(f"lesson.masked.option.{o}") for o in ("zero", "little", "much"))
    fmt = {"query": query_label, "leak": f"{leak:.1e}"}
    return Question(Text("lesson.masked.question", fmt), options, answer, Text("lesson.masked.reveal", fmt))


def produced_labels(output_pieces: list[str]) -> list[str]:
    """Row labels for decoder queries: query j produces output piece j ('→ Hunde')."""
    return [f"→ {p}" for p in output_pieces]


# ---------------------------------------------------------------------------------------------
# 10. Training: label smoothing and the Noam schedule
# ---------------------------------------------------------------------------------------------


def smoothed_target(correct: int, vocab: int, epsilon: float) -> np.ndarray:
    """The target distribution of cross-entropy with label smoothing ε (as torch computes it): (V,)."""
    target = np.full(vocab, epsilon / vocab)
    target[correct] += 1.0 - epsilon
    return target


def noam_peak(d_model: int, warmup: int, horizon: int | None = None) -> int:
    """The step with the largest Noam learning rate, found by evaluating every step up to `horizon`."""
    horizon = horizon or 3 * warmup + 1
    rates = [noam_lr(s, d_model, warmup) for s in range(1, horizon + 1)]
    return int(np.argmax(rates)) + 1


def training_question(d_model: int, warmup: int, factor: float = 1.0) -> Question:
    """At which step the learning rate peaks (answer: argmax of the schedule over steps)."""
    peak = noam_peak(d_model, warmup)
    values = {"one": 1, "half": max(2, warmup // 2), "warmup": peak, "triple": 3 * warmup}
    reveal = Text(
        "lesson.training.reveal",
        {"peak": peak, "warmup": warmup, "lr": f"{noam_lr(peak, d_model, warmup, factor):.2e}"},
    )
    question = _numeric_question(Text("lesson.training.question", {"warmup": warmup, "d": d_model}), values,
                                 "warmup", reveal)  # fmt: skip
    return question


def smoothing_figure(
    epsilon: float, vocab: int, names: tuple[str, str], categories: tuple[str, str], title: str
) -> go.Figure:
    """Bars: the probability the target gives the correct token and each other token, with and without ε."""
    hard = [1.0, 0.0]
    target = smoothed_target(0, vocab, epsilon)
    soft = [float(target[0]), float(target[1]) if vocab > 1 else 0.0]
    fig = go.Figure()
    for name, y, color in zip(names, (hard, soft), ("#bbbbbb", "#3b75af"), strict=True):
        fig.add_trace(go.Bar(x=list(categories), y=y, name=name, marker_color=color,
                             text=[f"{v:.4g}" for v in y], textposition="outside"))  # fmt: skip
    fig.update_yaxes(range=[0, 1.2])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.2))
    return layout(fig, title, 340)


# ---------------------------------------------------------------------------------------------
# 11. Decoding strategies
# ---------------------------------------------------------------------------------------------


LOGPROB_TOLERANCE = (
    5e-4  # below the 3 decimals shown: the same output scored by two code paths differs by ~1e-5
)


def decoding_question(
    greedy_logprob: float, beam_logprob: float, beam_size: int, same_output: bool = False
) -> Question:
    """Is beam search's output more probable than greedy's (answer: the two log P compared; the same output is equal)?"""
    diff = beam_logprob - greedy_logprob
    answer = 1 if same_output or abs(diff) < LOGPROB_TOLERANCE else 0 if diff > 0 else 2
    fmt = {"k": beam_size, "greedy": f"{greedy_logprob:.3f}", "beam": f"{beam_logprob:.3f}"}
    options = tuple(Text(f"lesson.decoding.option.{o}") for o in ("more", "same", "less"))
    return Question(Text("lesson.decoding.question", {"k": beam_size}), options, answer,
                    Text("lesson.decoding.reveal", fmt))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 12. Why self-attention: Table 1 of the paper with the student's n and the model's d
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Complexity:
    """One row of Table 1 evaluated for a sentence length n and width d."""

    layer: str  # "self_attention", "recurrent", "convolutional"
    formula: str
    operations: int
    sequential: int
    path: int


def complexity_rows(n: int, d: int, kernel: int = 3) -> list[Complexity]:
    """Operations per layer, sequential operations and longest path for n pieces of width d."""
    return [
        Complexity("self_attention", "O(n²·d)", n * n * d, 1, 1),
        Complexity("recurrent", "O(n·d²)", n * d * d, n, n),
        Complexity(
            "convolutional",
            "O(k·n·d²)",
            kernel * n * d * d,
            1,
            max(1, math.ceil(math.log(max(n, 2), kernel))),
        ),
    ]


def operations_figure(n: int, d: int, names: tuple[str, str], axis: tuple[str, str], title: str) -> go.Figure:
    """Operations per layer against sentence length: n²·d and n·d² cross at n = d; the student's n is marked."""
    top = max(4 * d, 2 * n, 16)
    lengths = np.unique(np.geomspace(1, top, 200).round().astype(int))  # (m,)
    fig = go.Figure()
    for name, ops, color in zip(
        names, (lengths**2 * d, lengths * d * d), ("#3b75af", "#e4572e"), strict=True
    ):
        fig.add_trace(go.Scatter(x=lengths, y=ops, mode="lines", name=name, line=dict(color=color, width=2.5),
                                 hovertemplate="n = %{x}<br>%{y:,.0f}<extra></extra>"))  # fmt: skip
    rows = {r.layer: r.operations for r in complexity_rows(n, d)}
    fig.add_trace(go.Scatter(x=[n, n], y=[rows["self_attention"], rows["recurrent"]], mode="markers+text",
                             text=[f"n = {n}", ""], textposition="top left", marker=dict(size=11, color="#222"),
                             showlegend=False, hovertemplate="%{y:,.0f}<extra></extra>"))  # fmt: skip
    low, high = float(lengths[0] ** 2 * d), float(lengths[-1] * d * d)  # the plotted range of operations
    fig.add_trace(
        go.Scatter(
            x=[d, d],
            y=[low, high],
            mode="lines+text",
            text=["", f"n = d = {d}"],
            textposition="bottom right",
            line=dict(color="#999", dash="dot"),
            showlegend=False,
            hoverinfo="skip",
        )
    )  # fmt: skip  (a trace, not add_vline: shapes on log axes take log10 x)
    fig.update_xaxes(type="log", title_text=axis[0])
    fig.update_yaxes(type="log", title_text=axis[1])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, title, 380)


def why_question(n: int, d: int) -> Question:
    """Which layer needs fewer operations for this n and d (answer: n²d compared with nd²)."""
    rows = {r.layer: r for r in complexity_rows(n, d)}
    sa, rnn = rows["self_attention"].operations, rows["recurrent"].operations
    answer = 0 if sa < rnn else 1 if rnn < sa else 2
    options = tuple(Text(f"lesson.why.option.{o}") for o in ("self_attention", "recurrent", "same"))
    fmt = {"n": n, "d": d, "sa": f"{sa:,}", "rnn": f"{rnn:,}"}
    return Question(
        Text("lesson.why.question", {"n": n, "d": d}), options, answer, Text("lesson.why.reveal", fmt)
    )
