"""Figures of attention: one map, every layer and head, head statistics, one decoding step, softmax saturation.

Pure plotly builders: arrays and labels in, `go.Figure` out (no streamlit, no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import i18n
from .analysis import confidence_level, with_head_average
from .style import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    add_traces,
    cell_labels,
    check_labels,
    escape,
    escaped,
    layout,
    masked_heatmap,
    token_axes,
)

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: not needed by the first page

LONG = 24  # more tokens than this: smaller labels, thinner rows, labels upright
LABEL_CHARS = 14  # longer tick labels are cut (hover shows them whole)
TITLE_ROOM = 60  # px above a plot for its title (style.layout's top margin)


def text(key: str, lang: str = i18n.DEFAULT_LANG, /, **fmt: object) -> str:
    """A figure's text `attention.fig.KEY` in `lang`."""
    return i18n.t(f"attention.fig.{key}", lang, **fmt)


def short_label(label: str, limit: int = LABEL_CHARS) -> str:
    """A tick label cut to `limit` characters with '…' (the hover text keeps the whole token)."""
    label = str(label)
    return label if len(label) <= limit else label[: limit - 1] + "…"


def tick_font_size(n: int) -> int:
    """Tick label size for an axis of n tokens: 13 up to LONG, then smaller down to 10 at 48+."""
    return 13 if n <= LONG else 11 if n < 48 else 10


def token_height(n_rows: int) -> int:
    """Pixel height of a token heatmap: 26 px a row up to LONG rows, 17 px beyond (64 rows stay legible)."""
    return int(max(320, (26 if n_rows <= LONG else 17) * n_rows + 190))


def numeric_ticks(n: int, most: int = 9) -> list[int]:
    """At most `most` evenly spaced ticks over 0..n-1 on round steps (1, 2, 4, 8, 16 ...)."""
    step = 1
    while n / step > most:
        step *= 2
    return list(range(0, n, step))


def legible_axes(
    fig: go.Figure, row_labels: list[str], col_labels: list[str], numeric_cols: bool = False
) -> int:
    """Tick labels that stay readable up to 64 tokens: cut, smaller, upright columns; numbers on round steps.

    Returns the top margin (px) the figure needs: room for the title, and for the top labels if there are any.
    """
    n_rows, n_cols = len(row_labels), len(col_labels)
    fig.update_yaxes(
        ticktext=escaped([short_label(x) for x in row_labels]), tickfont=dict(size=tick_font_size(n_rows))
    )
    if numeric_cols:
        ticks = numeric_ticks(n_cols)
        fig.update_xaxes(tickvals=ticks, ticktext=[col_labels[i] for i in ticks], tickangle=0)
        return TITLE_ROOM
    labels = escaped([short_label(x) for x in col_labels])
    font = dict(size=tick_font_size(n_cols))
    angle = -45 if n_cols <= 12 else -90
    if n_cols <= LONG:
        fig.update_xaxes(ticktext=labels, tickangle=angle, tickfont=font, automargin=True)
        return TITLE_ROOM
    # Long sentences: every other key named at the top, so each label has two columns of room.
    bottom, top = list(range(0, n_cols, 2)), list(range(1, n_cols, 2))
    fig.update_xaxes(
        tickvals=bottom, ticktext=labels[::2], tickangle=angle, tickfont=font, automargin=True, zeroline=False
    )
    fig.update_layout(
        xaxis2=dict(
            overlaying="x", side="top", matches="x", tickvals=top, ticktext=labels[1::2], tickangle=angle,
            tickfont=font, showgrid=False, zeroline=False, showline=False,
        ),
        yaxis_zeroline=False,
    )  # fmt: skip
    middle = [(n_rows - 1) / 2] * 2  # inside the heatmap, so the y range gains no padding
    invisible = go.Scatter(
        x=[0, n_cols - 1], y=middle, xaxis="x2", mode="markers", opacity=0, hoverinfo="skip", showlegend=False
    )  # plotly draws an axis only when a trace uses it
    fig.add_trace(invisible)
    longest = max(len(short_label(x)) for x in col_labels[1::2])
    return TITLE_ROOM + 10 * longest  # upright labels: about 10 px a character (Hangul is the widest)


def matrix_heatmap(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    *,
    title: str = "",
    masked: np.ndarray | None = None,
    value_name: str = "value",
    colorscale: str = DIVERGING_SCALE,
    zmin: float | None = None,
    zmax: float | None = None,
    x_title: str = "",
    y_title: str = "",
    show_values: bool = False,
    numeric_cols: bool = False,
) -> go.Figure:
    """Heatmap of any (rows, cols) matrix with labelled axes, hover values and hatched masked cells.

    numeric_cols: the columns are numbers (dimensions), ticked on round steps instead of one by one.
    """
    matrix = np.asarray(matrix, dtype=float)
    check_labels(matrix, row_labels, col_labels)
    z = matrix.copy()
    z[~np.isfinite(z)] = np.nan
    if masked is not None:
        z[np.asarray(masked, dtype=bool)] = np.nan
    diverging = colorscale == DIVERGING_SCALE
    if diverging and zmin is None and zmax is None and np.isfinite(z).any():
        zmax = float(np.nanmax(np.abs(z))) or 1.0
        zmin = -zmax
    row_name, col_name = y_title or "row", x_title or "column"
    fig = go.Figure()
    add_traces(fig, masked_heatmap(
        matrix, masked, cell_labels(row_labels, col_labels),
        x=list(range(len(col_labels))), y=list(range(len(row_labels))), colorscale=colorscale,
        reversescale=diverging, zmin=zmin, zmax=zmax, xgap=1, ygap=1,
        texttemplate="%{z:.2f}" if show_values else None,
        colorbar=dict(title=dict(text=value_name), thickness=12),
        hovertemplate=(
            f"{row_name}: %{{customdata[0]}}<br>{col_name}: %{{customdata[1]}}"
            f"<br>{value_name} = %{{z:.4f}}<extra></extra>"
        ),
    ))  # fmt: skip
    token_axes(fig, row_labels, col_labels)
    top = legible_axes(fig, row_labels, col_labels, numeric_cols)
    fig.update_layout(xaxis_title=dict(text=x_title), yaxis_title=dict(text=y_title))  # not on the top axis
    layout(fig, title, token_height(len(row_labels)) + top - TITLE_ROOM)
    return fig.update_layout(margin_t=top) if top > TITLE_ROOM else fig


def attention_heatmap(
    weights: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    title: str = "",
    masked: np.ndarray | None = None,
    zmax: float | None = None,
    lang: str = i18n.DEFAULT_LANG,
) -> go.Figure:
    """One attention map (queries, keys): rows are queries, columns the keys they attend to."""
    return matrix_heatmap(
        weights,
        query_labels,
        key_labels,
        title=title,
        masked=masked,
        value_name=text("weight", lang),
        colorscale=ATTENTION_SCALE,
        zmin=0.0,
        zmax=zmax,
        x_title=text("keys", lang),
        y_title=text("queries", lang),
    )


def attention_grid(
    stack: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    title: str = "",
    masked: np.ndarray | None = None,
    highlight: tuple[int, int] | None = None,
    average: bool = False,
    compact: bool = False,
    lang: str = i18n.DEFAULT_LANG,
) -> go.Figure:
    """Every layer × head of one attention kind as small heatmaps (layers down, heads across, numbered from 1).

    average: one more column at the right, the mean of the layer's heads.
    compact: heads numbered only, panels sized so the whole grid fits one screen (6 × 8 heads of OPUS-MT).
    """
    stack = np.asarray(stack, dtype=float)
    if stack.ndim != 4:
        raise ValueError(f"expected (layers, heads, queries, keys), got shape {stack.shape}")
    n_layers, n_heads = stack.shape[:2]
    check_labels(stack[0, 0], query_labels, key_labels)
    panels = with_head_average(stack) if average else stack  # (L, h [+ 1], q, k)
    mean = [text("mean", lang)] if average else []
    full = [text("head", lang, n=h + 1) for h in range(n_heads)] + mean  # in the hover
    # over the panels "head 1", then numbers: a full name over each of five narrow panels ran together on a phone
    names = [full[0] if not compact else "1", *(str(h + 1) for h in range(1, n_heads))] + mean
    if compact:
        return mosaic_grid(panels, query_labels, key_labels, names, title, masked, highlight, lang)
    n_cols = len(names)
    fig = make_subplots(
        rows=n_layers,
        cols=n_cols,
        column_titles=names,
        row_titles=[text("layer", lang, n=layer + 1) for layer in range(n_layers)],
        horizontal_spacing=min(0.02, 0.5 / max(n_cols, 1)),
        vertical_spacing=min(0.03, 0.5 / max(n_layers, 1)),
    )
    cells = cell_labels(query_labels, key_labels)
    weight = text("weight", lang)
    for layer in range(n_layers):
        for col, name in enumerate(full):
            where = f"{text('layer', lang, n=layer + 1)}, {name}"
            add_traces(fig, masked_heatmap(
                panels[layer, col], masked, cells, coloraxis="coloraxis",
                hovertemplate=(
                    f"{where}<br>%{{customdata[0]}} → %{{customdata[1]}}<br>{weight} = %{{z:.3f}}<extra></extra>"
                ),
            ), row=layer + 1, col=col + 1)  # fmt: skip
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    if highlight is not None:
        layer, head = highlight
        if 0 <= layer < n_layers and 0 <= head < n_heads:
            fig.add_shape(
                type="rect",
                xref="x domain",
                yref="y domain",
                x0=0,
                x1=1,
                y0=0,
                y1=1,
                line=dict(color="#e4572e", width=3),
                row=layer + 1,
                col=head + 1,
            )
    fig.update_layout(
        coloraxis=dict(
            colorscale=ATTENTION_SCALE, cmin=0.0, colorbar=dict(title=weight, thickness=12, xpad=44)
        )
    )
    panel = max(120 if n_cols > 4 else 170, min(260, 3 * stack.shape[2]))  # long sentences: taller panels
    return layout(fig, title, 70 + panel * n_layers)


def mosaic_grid(
    panels: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    names: list[str],
    title: str,
    masked: np.ndarray | None,
    highlight: tuple[int, int] | None,
    lang: str,
) -> go.Figure:
    """The compact grid: every panel (L, C, q, k) tiled into one heatmap with one-cell gaps, so 48 heads and their
    means fit one screen and draw as one trace (54 subplots took plotly about a second to build)."""
    n_layers, n_cols, n_q, n_k = panels.shape
    height, width = n_layers * (n_q + 1) - 1, n_cols * (n_k + 1) - 1
    z = np.full((height, width), np.nan)
    hidden = np.zeros((height, width), dtype=bool)
    cells = np.full((height, width, 3), "", dtype=object)
    pair = cell_labels(query_labels, key_labels)  # (q, k, 2)
    for layer in range(n_layers):
        for col, name in enumerate(names):
            r, c = layer * (n_q + 1), col * (n_k + 1)
            z[r : r + n_q, c : c + n_k] = panels[layer, col]
            cells[r : r + n_q, c : c + n_k, 0] = f"{text('layer', lang, n=layer + 1)}, {name}"
            cells[r : r + n_q, c : c + n_k, 1:] = pair
            if masked is not None:
                hidden[r : r + n_q, c : c + n_k] = masked
    weight = text("weight", lang)
    traces = masked_heatmap(
        z, hidden, cells, coloraxis="coloraxis",
        hovertemplate=f"%{{customdata[0]}}<br>%{{customdata[1]}} → %{{customdata[2]}}<br>{weight} = %{{z:.3f}}<extra></extra>",
    )  # fmt: skip
    fig = go.Figure(traces)
    heads = [dict(x=col * (n_k + 1) + (n_k - 1) / 2, y=1.0, yref="paper", yanchor="bottom", text=name,
                  showarrow=False) for col, name in enumerate(names)]  # fmt: skip
    layers = [dict(x=0, xref="paper", xanchor="right", y=layer * (n_q + 1) + (n_q - 1) / 2, showarrow=False,
                   text=text("layer", lang, n=layer + 1)) for layer in range(n_layers)]  # fmt: skip
    fig.update_layout(annotations=heads + layers, plot_bgcolor="white")
    if highlight is not None and 0 <= highlight[0] < n_layers and 0 <= highlight[1] < n_cols:
        r, c = highlight[0] * (n_q + 1), highlight[1] * (n_k + 1)
        fig.add_shape(type="rect", x0=c - 0.5, x1=c + n_k - 0.5, y0=r - 0.5, y1=r + n_q - 0.5,
                      line=dict(color="#e4572e", width=3))  # fmt: skip
    fig.update_xaxes(visible=False, range=[-0.5, width - 0.5])
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(
        coloraxis=dict(
            colorscale=ATTENTION_SCALE, cmin=0.0, colorbar=dict(title=weight, thickness=12, xpad=44)
        )
    )
    layout(fig, title, 70 + max(60, min(90, 560 // n_layers)) * n_layers)
    fig.update_layout(margin_l=70)  # room for the layer names at the left
    return fig


def metric_heatmap(
    values: np.ndarray,
    *,
    title: str = "",
    value_name: str = "",
    zmin: float | None = None,
    zmax: float | None = None,
    colorscale: str = "Viridis",
    lang: str = i18n.DEFAULT_LANG,
) -> go.Figure:
    """A (layers, heads) grid of one head statistic, each cell printed; layers and heads numbered from 1."""
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    layer_name, head_name = text("layer_axis", lang), text("head_axis", lang)
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            customdata=np.stack(np.meshgrid(np.arange(n_heads) + 1, np.arange(n_layers) + 1), axis=-1),
            colorscale=colorscale,
            zmin=zmin,
            zmax=zmax,
            texttemplate="%{z:.2f}",
            xgap=2,
            ygap=2,
            colorbar=dict(title=dict(text=value_name), thickness=12),
            hovertemplate=(
                f"{layer_name} %{{customdata[1]}}, {head_name} %{{customdata[0]}}"
                f"<br>{value_name} = %{{z:.3f}}<extra></extra>"
            ),
        )
    )
    numbered(fig, n_layers, n_heads, layer_name, head_name)
    return layout(fig, title, 120 + 45 * n_layers)


def numbered(fig: go.Figure, n_layers: int, n_heads: int, layer_name: str, head_name: str) -> None:
    """Axes of a (layers, heads) grid: cells at 0-based positions, ticks labelled from 1."""
    fig.update_xaxes(
        title=head_name,
        tickvals=list(range(n_heads)),
        ticktext=[str(h + 1) for h in range(n_heads)],
        showgrid=False,
    )
    fig.update_yaxes(
        title=layer_name,
        tickvals=list(range(n_layers)),
        ticktext=[str(layer + 1) for layer in range(n_layers)],
        autorange="reversed",
        showgrid=False,
    )


def step_figure(
    weights: np.ndarray, source_labels: list[str], *, title: str = "", lang: str = i18n.DEFAULT_LANG
) -> go.Figure:
    """Horizontal bars: how much one output step attended to each source token (tokens top to bottom)."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(source_labels),):
        raise ValueError(f"{len(weights)} weights for {len(source_labels)} source tokens")
    n = len(source_labels)
    fig = go.Figure(
        go.Bar(
            y=list(range(n)),
            x=weights,
            orientation="h",
            customdata=escaped(source_labels),
            marker=dict(
                color=weights,
                colorscale=ATTENTION_SCALE,
                cmin=0,
                cmax=max(float(weights.max()), 1e-9),
                line=dict(color="#2b4b7e", width=1),
            ),
            hovertemplate="%{customdata}: %{x:.3f}<extra></extra>",
        )
    )
    fig.update_yaxes(
        tickvals=list(range(n)),
        ticktext=escaped([short_label(x) for x in source_labels]),
        tickfont=dict(size=tick_font_size(n)),
        autorange="reversed",
    )
    fig.update_xaxes(title=text("cross_weight", lang), range=[0, 1])
    return layout(fig, title, max(300, (22 if n <= LONG else 16) * n + 130))


def top_word_grid(
    words: np.ndarray,
    weights: np.ndarray,
    *,
    title: str = "",
    average: bool = True,
    lang: str = i18n.DEFAULT_LANG,
) -> go.Figure:
    """A (layers, heads) grid naming the word each head attends to most, coloured by its weight.

    words, weights: (L, h) arrays, or (L, h + 1) with the heads' mean as the last column when `average`.
    """
    words = np.asarray(words, dtype=object)
    weights = np.asarray(weights, dtype=float)
    if words.shape != weights.shape or words.ndim != 2:
        raise ValueError(f"words {words.shape} and weights {weights.shape} must be one (layers, heads) grid")
    n_layers, n_cols = weights.shape
    n_heads = n_cols - 1 if average else n_cols
    shown = np.vectorize(lambda w: escape(short_label(w, 10)))(words) if words.size else words
    full = np.vectorize(escape)(words) if words.size else words
    layer_name, head_name = text("layer_axis", lang), text("head_axis", lang)
    heads = [str(h + 1) for h in range(n_heads)] + ([text("mean", lang)] if average else [])
    fig = go.Figure(
        go.Heatmap(
            z=weights,
            x=list(range(n_cols)),
            y=list(range(n_layers)),
            text=shown,
            customdata=full,
            texttemplate="%{text}<br>%{z:.2f}",
            textfont=dict(size=12),
            colorscale=ATTENTION_SCALE,
            zmin=0,
            zmax=1,
            xgap=3,
            ygap=3,
            colorbar=dict(title=dict(text=text("weight", lang)), thickness=12),
            hovertemplate="%{customdata}<br>%{z:.3f}<extra></extra>",
        )
    )
    numbered(fig, n_layers, n_heads, layer_name, head_name)
    fig.update_xaxes(tickvals=list(range(n_cols)), ticktext=heads)
    return layout(fig, title, 130 + 58 * n_layers)


CONFIDENCE_COLORS = ("#e4572e", "#f2a541", "#c9e3c4")  # a guess, unsure, sure (confidence_level)


def confidence_strip(
    pieces: list[str], probs: np.ndarray, *, title: str = "", per_row: int = 10, lang: str = i18n.DEFAULT_LANG
) -> go.Figure:
    """Output tokens in reading order, wrapped `per_row` to a line, each on its probability's colour."""
    probs = np.asarray(probs, dtype=float)
    if probs.shape != (len(pieces),):
        raise ValueError(f"{len(probs)} probabilities for {len(pieces)} tokens")
    n_rows = max(1, -(-len(pieces) // per_row))
    levels = np.full((n_rows, per_row), np.nan)
    cells = np.full((n_rows, per_row), "", dtype=object)
    hover = np.full((n_rows, per_row), "", dtype=object)
    for i, (piece, p) in enumerate(zip(pieces, probs, strict=True)):
        r, c = divmod(i, per_row)
        levels[r, c] = confidence_level(float(p))
        cells[r, c] = f"{escape(short_label(piece, 10))}<br>{p:.0%}"
        hover[r, c] = text("strip_hover", lang, i=i + 1, piece=escape(piece), p=f"{p:.1%}")
    scale = [[0.0, CONFIDENCE_COLORS[0]], [0.5, CONFIDENCE_COLORS[1]], [1.0, CONFIDENCE_COLORS[2]]]
    fig = go.Figure(
        go.Heatmap(
            z=levels, text=cells, customdata=hover, texttemplate="%{text}", textfont=dict(size=13),
            colorscale=scale, zmin=0, zmax=2, showscale=False, xgap=3, ygap=3, hoverongaps=False,
            hovertemplate="%{customdata}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    return layout(fig, title, 90 + 52 * n_rows)


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention
# ---------------------------------------------------------------------------------------------


def saturation_figure(curve: pd.DataFrame, lang: str = i18n.DEFAULT_LANG) -> go.Figure:
    """Mean largest softmax weight vs d_k, with and without dividing the scores by √d_k."""
    fig = go.Figure()
    for variant, color in (("unscaled", "#e4572e"), ("scaled", "#3b75af")):
        part = curve[curve["variant"] == variant]
        label = "softmax(q·k)" if variant == "unscaled" else "softmax(q·k / √d_k)"
        fig.add_trace(
            go.Scatter(
                x=part["d_k"],
                y=part["max weight"],
                mode="lines+markers",
                name=label,
                line=dict(color=color, width=2.5),
            )
        )
    fig.update_xaxes(title="d_k", type="log", tickvals=sorted(set(curve["d_k"])))
    fig.update_yaxes(title=text("max_weight", lang), range=[0, 1.05])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, text("saturation_title", lang), 360)


def softmax_bars(
    unscaled: np.ndarray, scaled: np.ndarray, d_k: int, lang: str = i18n.DEFAULT_LANG
) -> go.Figure:
    """The softmax of one random query's scores, unscaled vs scaled."""
    keys = [text("key_n", lang, n=j + 1) for j in range(len(unscaled))]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=keys, y=unscaled, name="softmax(q·k)", marker_color="#e4572e"))
    fig.add_trace(go.Bar(x=keys, y=scaled, name="softmax(q·k / √d_k)", marker_color="#3b75af"))
    fig.update_yaxes(title=text("weight", lang), range=[0, 1.05])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.25))
    return layout(fig, text("random_query", lang, d_k=d_k), 340)
