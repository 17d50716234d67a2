"""Figures of attention: one map, every layer and head, head statistics, one decoding step, softmax saturation.

Pure plotly builders: arrays and labels in, `go.Figure` out (no streamlit, no torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    add_traces,
    cell_labels,
    check_labels,
    escaped,
    layout,
    masked_heatmap,
    token_axes,
)  # fmt: skip

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: not needed by the first page


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
) -> go.Figure:
    """Heatmap of any (rows, cols) matrix with labelled axes, hover values and hatched masked cells."""
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
    fig = go.Figure()
    add_traces(fig, masked_heatmap(
        matrix, masked, cell_labels(row_labels, col_labels),
        x=list(range(len(col_labels))), y=list(range(len(row_labels))), colorscale=colorscale,
        reversescale=diverging, zmin=zmin, zmax=zmax, xgap=1, ygap=1,
        texttemplate="%{z:.2f}" if show_values else None,
        colorbar=dict(title=dict(text=value_name), thickness=12),
        hovertemplate=f"%{{customdata[0]}} → %{{customdata[1]}}<br>{value_name} = %{{z:.4f}}<extra></extra>",
    ))  # fmt: skip
    token_axes(fig, row_labels, col_labels)
    fig.update_xaxes(title=dict(text=x_title))
    fig.update_yaxes(title=dict(text=y_title))
    height = int(min(900, max(320, 26 * len(row_labels) + 170)))
    return layout(fig, title, height)


def attention_heatmap(
    weights: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    title: str = "",
    masked: np.ndarray | None = None,
    zmax: float | None = None,
) -> go.Figure:
    """One attention map (queries, keys): rows are queries, columns the keys they attend to."""
    return matrix_heatmap(
        weights,
        query_labels,
        key_labels,
        title=title,
        masked=masked,
        value_name="weight",
        colorscale=ATTENTION_SCALE,
        zmin=0.0,
        zmax=zmax,
        x_title="keys (attended to)",
        y_title="queries",
    )


def attention_grid(
    stack: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    *,
    title: str = "",
    masked: np.ndarray | None = None,
    highlight: tuple[int, int] | None = None,
) -> go.Figure:
    """Every layer × head of one attention kind as small heatmaps (layers down, heads across)."""
    stack = np.asarray(stack, dtype=float)
    if stack.ndim != 4:
        raise ValueError(f"expected (layers, heads, queries, keys), got shape {stack.shape}")
    n_layers, n_heads = stack.shape[:2]
    check_labels(stack[0, 0], query_labels, key_labels)
    fig = make_subplots(
        rows=n_layers,
        cols=n_heads,
        column_titles=[f"head {h}" for h in range(n_heads)],
        row_titles=[f"layer {layer}" for layer in range(n_layers)],
        horizontal_spacing=min(0.02, 0.5 / max(n_heads, 1)),
        vertical_spacing=min(0.03, 0.5 / max(n_layers, 1)),
    )
    cells = cell_labels(query_labels, key_labels)
    for layer in range(n_layers):
        for head in range(n_heads):
            add_traces(fig, masked_heatmap(
                stack[layer, head], masked, cells, coloraxis="coloraxis",
                hovertemplate=(
                    f"layer {layer}, head {head}<br>%{{customdata[0]}} → %{{customdata[1]}}"
                    "<br>weight = %{z:.3f}<extra></extra>"
                ),
            ), row=layer + 1, col=head + 1)  # fmt: skip
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
        coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0.0, colorbar=dict(title="weight", thickness=12))
    )
    panel = 120 if n_heads > 4 else 170
    return layout(fig, title, 70 + panel * n_layers)


def metric_heatmap(
    values: np.ndarray,
    *,
    title: str = "",
    value_name: str = "",
    zmin: float | None = None,
    zmax: float | None = None,
    colorscale: str = "Viridis",
) -> go.Figure:
    """A (layers, heads) grid of one head statistic, each cell printed."""
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    fig = go.Figure(
        go.Heatmap(
            z=values,
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            colorscale=colorscale,
            zmin=zmin,
            zmax=zmax,
            texttemplate="%{z:.2f}",
            xgap=2,
            ygap=2,
            colorbar=dict(title=dict(text=value_name), thickness=12),
            hovertemplate=f"layer %{{y}}, head %{{x}}<br>{value_name} = %{{z:.3f}}<extra></extra>",
        )
    )
    fig.update_xaxes(title="head", tickvals=list(range(n_heads)), showgrid=False)
    fig.update_yaxes(title="layer", tickvals=list(range(n_layers)), autorange="reversed", showgrid=False)
    return layout(fig, title, 120 + 45 * n_layers)


def step_figure(weights: np.ndarray, source_labels: list[str], *, title: str = "") -> go.Figure:
    """Bars: how much one output step attended to each source token."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(source_labels),):
        raise ValueError(f"{len(weights)} weights for {len(source_labels)} source tokens")
    fig = go.Figure(
        go.Bar(
            x=list(range(len(source_labels))),
            y=weights,
            customdata=escaped(source_labels),
            marker=dict(
                color=weights,
                colorscale=ATTENTION_SCALE,
                cmin=0,
                cmax=max(float(weights.max()), 1e-9),
                line=dict(color="#2b4b7e", width=1),
            ),
            hovertemplate="%{customdata}: %{y:.3f}<extra></extra>",
        )
    )
    fig.update_xaxes(tickvals=list(range(len(source_labels))), ticktext=escaped(source_labels), tickangle=-45)
    fig.update_yaxes(title="cross-attention weight", range=[0, 1])
    return layout(fig, title, 340)


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention
# ---------------------------------------------------------------------------------------------


def saturation_figure(curve: pd.DataFrame) -> go.Figure:
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
    fig.update_yaxes(title="mean largest weight", range=[0, 1.05])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Without scaling, softmax saturates as d_k grows", 360)


def softmax_bars(unscaled: np.ndarray, scaled: np.ndarray, d_k: int) -> go.Figure:
    """The softmax of one random query's scores, unscaled vs scaled."""
    keys = [f"key {j}" for j in range(len(unscaled))]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=keys, y=unscaled, name="softmax(q·k)", marker_color="#e4572e"))
    fig.add_trace(go.Bar(x=keys, y=scaled, name="softmax(q·k / √d_k)", marker_color="#3b75af"))
    fig.update_yaxes(title="weight", range=[0, 1.05])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.25))
    return layout(fig, f"One random query, d_k = {d_k}", 340)
