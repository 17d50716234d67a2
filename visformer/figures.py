"""Pure plotly figure builders: arrays and labels in, `go.Figure` out (no streamlit, no torch).

Token axes are numeric (0..n-1) with the pieces as tick text, so repeated pieces stay separate cells.
Masked cells (the decoder's future positions) are left empty and covered by a grey hatched patch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: not needed by the first page

ATTENTION_SCALE = "Blues"
DIVERGING_SCALE = "RdBu"
MASK_COLOR = "#b0b0b0"
MASK_BACKGROUND = "#efefef"
MASK_HOVER = "masked: a future position the decoder may not see"
FONT = dict(family="Inter, 'Source Sans Pro', sans-serif", size=13)


def chart_config(filename: str) -> dict:
    """plotly config for `st.plotly_chart`: PNG download button named `filename`, no plotly logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Shared look: title, height, margins, white background."""
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left"),
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
        template="plotly_white",
        font=FONT,
    )
    return fig


def escape(label: str) -> str:
    """A token as plotly text: '<s>' would otherwise be read as a strike-through tag and vanish."""
    return str(label).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escaped(labels: list[str]) -> list[str]:
    """escape() of every label."""
    return [escape(label) for label in labels]


def _check_labels(matrix: np.ndarray, row_labels: list[str], col_labels: list[str]) -> None:
    """Refuse labels that do not match the matrix they name."""
    if matrix.ndim != 2 or matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrix of shape {matrix.shape} needs {matrix.shape[0]} row and "
            f"{matrix.shape[-1]} column labels, got {len(row_labels)} and {len(col_labels)}"
        )


def _cell_labels(row_labels: list[str], col_labels: list[str]) -> np.ndarray:
    """(rows, cols, 2) array of (row label, column label) strings for hover text."""
    shape = (len(row_labels), len(col_labels))
    rows = np.broadcast_to(np.asarray(_escaped(row_labels), dtype=object)[:, None], shape)
    cols = np.broadcast_to(np.asarray(_escaped(col_labels), dtype=object)[None, :], shape)
    return np.stack([rows, cols], axis=-1)


def _mask_rectangles(masked: np.ndarray) -> tuple[list[float | None], list[float | None]]:
    """Outline of every run of masked cells in a row, as polygon x/y lists separated by None."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i, row in enumerate(np.asarray(masked, dtype=bool)):
        j = 0
        while j < len(row):
            if not row[j]:
                j += 1
                continue
            start = j
            while j < len(row) and row[j]:
                j += 1
            x0, x1, y0, y1 = start - 0.5, j - 0.5, i - 0.5, i + 0.5
            xs += [x0, x1, x1, x0, x0, None]
            ys += [y0, y0, y1, y1, y0, None]
    return xs, ys


def mask_trace(masked: np.ndarray, **kwargs) -> go.Scatter | None:
    """A grey hatched patch over the masked cells (None when nothing is masked)."""
    if masked is None or not np.asarray(masked).any():
        return None
    xs, ys = _mask_rectangles(masked)
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        fill="toself",
        fillcolor=MASK_BACKGROUND,
        fillpattern=dict(shape="/", fgcolor=MASK_COLOR, bgcolor=MASK_BACKGROUND, size=6, solidity=0.25),
        line=dict(color=MASK_COLOR, width=0.5),
        hoveron="fills",
        hoverinfo="text",
        text=MASK_HOVER,
        name="masked",
        showlegend=False,
        **kwargs,
    )


def _token_axes(fig: go.Figure, row_labels: list[str], col_labels: list[str], **where) -> None:
    """Numeric axes labelled with the tokens; first query at the top."""
    fig.update_xaxes(
        tickvals=list(range(len(col_labels))),
        ticktext=_escaped(col_labels),
        tickangle=-45,
        showgrid=False,
        **where,
    )
    fig.update_yaxes(
        tickvals=list(range(len(row_labels))),
        ticktext=_escaped(row_labels),
        autorange="reversed",
        showgrid=False,
        **where,
    )


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
    _check_labels(matrix, row_labels, col_labels)
    z = matrix.copy()
    if masked is not None:
        z[np.asarray(masked, dtype=bool)] = np.nan
    z[~np.isfinite(z)] = np.nan
    diverging = colorscale == DIVERGING_SCALE
    if diverging and zmin is None and zmax is None and np.isfinite(z).any():
        zmax = float(np.nanmax(np.abs(z))) or 1.0
        zmin = -zmax
    heat = go.Heatmap(
        z=z,
        x=list(range(len(col_labels))),
        y=list(range(len(row_labels))),
        customdata=_cell_labels(row_labels, col_labels),
        colorscale=colorscale,
        reversescale=diverging,
        zmin=zmin,
        zmax=zmax,
        hoverongaps=False,
        xgap=1,
        ygap=1,
        texttemplate="%{z:.2f}" if show_values else None,
        colorbar=dict(title=dict(text=value_name), thickness=12),
        hovertemplate=f"%{{customdata[0]}} → %{{customdata[1]}}<br>{value_name} = %{{z:.4f}}<extra></extra>",
    )
    fig = go.Figure(heat)
    patch = mask_trace(masked) if masked is not None else None
    if patch is not None:
        fig.add_trace(patch)
    _token_axes(fig, row_labels, col_labels)
    fig.update_xaxes(title=dict(text=x_title))
    fig.update_yaxes(title=dict(text=y_title))
    height = int(min(900, max(320, 26 * len(row_labels) + 170)))
    return _layout(fig, title, height)


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
    _check_labels(stack[0, 0], query_labels, key_labels)
    fig = make_subplots(
        rows=n_layers,
        cols=n_heads,
        column_titles=[f"head {h}" for h in range(n_heads)],
        row_titles=[f"layer {layer}" for layer in range(n_layers)],
        horizontal_spacing=min(0.02, 0.5 / max(n_heads, 1)),
        vertical_spacing=min(0.03, 0.5 / max(n_layers, 1)),
    )
    cells = _cell_labels(query_labels, key_labels)
    patch_mask = None if masked is None else np.asarray(masked, dtype=bool)
    for layer in range(n_layers):
        for head in range(n_heads):
            z = stack[layer, head].copy()
            if patch_mask is not None:
                z[patch_mask] = np.nan
            fig.add_trace(
                go.Heatmap(
                    z=z,
                    customdata=cells,
                    coloraxis="coloraxis",
                    hoverongaps=False,
                    hovertemplate=(
                        f"layer {layer}, head {head}<br>%{{customdata[0]}} → %{{customdata[1]}}"
                        "<br>weight = %{z:.3f}<extra></extra>"
                    ),
                ),
                row=layer + 1,
                col=head + 1,
            )
            patch = mask_trace(patch_mask) if patch_mask is not None else None
            if patch is not None:
                fig.add_trace(patch, row=layer + 1, col=head + 1)
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
    return _layout(fig, title, 70 + panel * n_layers)


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
    return _layout(fig, title, 120 + 45 * n_layers)


def step_figure(weights: np.ndarray, source_labels: list[str], *, title: str = "") -> go.Figure:
    """Bars: how much one output step attended to each source token."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(source_labels),):
        raise ValueError(f"{len(weights)} weights for {len(source_labels)} source tokens")
    fig = go.Figure(
        go.Bar(
            x=list(range(len(source_labels))),
            y=weights,
            customdata=_escaped(source_labels),
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
    fig.update_xaxes(
        tickvals=list(range(len(source_labels))), ticktext=_escaped(source_labels), tickangle=-45
    )
    fig.update_yaxes(title="cross-attention weight", range=[0, 1])
    return _layout(fig, title, 340)


# ---------------------------------------------------------------------------------------------
# Positional encoding
# ---------------------------------------------------------------------------------------------


def pe_heatmap(
    pe: np.ndarray, *, mark_position: int | None = None, mark_pair: int | None = None
) -> go.Figure:
    """PE over positions (rows) × dimensions (columns), optionally outlining one position and one pair."""
    pe = np.asarray(pe, dtype=float)
    length, d_model = pe.shape
    fig = go.Figure(
        go.Heatmap(
            z=pe,
            colorscale=DIVERGING_SCALE,
            reversescale=True,
            zmin=-1,
            zmax=1,
            colorbar=dict(title="PE", thickness=12),
            hovertemplate="position %{y}, dimension %{x}<br>PE = %{z:.3f}<extra></extra>",
        )
    )
    if mark_position is not None and 0 <= mark_position < length:
        fig.add_shape(
            type="rect",
            x0=-0.5,
            x1=d_model - 0.5,
            y0=mark_position - 0.5,
            y1=mark_position + 0.5,
            line=dict(color="#222", width=2),
        )
    if mark_pair is not None and 0 <= 2 * mark_pair < d_model:
        fig.add_shape(
            type="rect",
            x0=2 * mark_pair - 0.5,
            x1=2 * mark_pair + 1.5,
            y0=-0.5,
            y1=length - 0.5,
            line=dict(color="#e4572e", width=2),
        )
    fig.update_xaxes(title="dimension (even = sin, odd = cos)", showgrid=False)
    fig.update_yaxes(title="position", autorange="reversed", showgrid=False)
    return _layout(fig, f"Positional encoding, d_model = {d_model}, {length} positions", 460)


def pe_pair_figure(sin: np.ndarray, cos: np.ndarray, wavelength: float, pair: int, d_model: int) -> go.Figure:
    """sin and cos of dimension pair `pair` over positions, with every full wavelength marked."""
    positions = np.arange(len(sin))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=positions, y=sin, mode="lines", name=f"dim {2 * pair}: sin", line=dict(width=2.5))
    )
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=cos,
            mode="lines",
            name=f"dim {2 * pair + 1}: cos",
            line=dict(width=2.5, dash="dot"),
        )
    )
    n_marks = int((len(sin) - 1) // wavelength) if wavelength > 0 else 0
    for m in range(1, min(n_marks, 40) + 1):
        fig.add_vline(x=m * wavelength, line=dict(color="#e4572e", width=1, dash="dash"))
    shown = "" if n_marks else " (longer than shown)"
    title = (
        f"Pair i = {pair}: dimensions {2 * pair} and {2 * pair + 1}"
        f"<br><sup>wavelength 2π·10000^({2 * pair}/{d_model}) = {wavelength:,.1f} positions{shown}</sup>"
    )
    fig.update_xaxes(title="position")
    fig.update_yaxes(title="value", range=[-1.15, 1.15])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return _layout(fig, title, 380)


def pe_vector_figure(vector: np.ndarray, position: int) -> go.Figure:
    """The PE vector at one position, one bar per dimension (sin dimensions and cos dimensions coloured apart)."""
    vector = np.asarray(vector, dtype=float)
    dims = np.arange(len(vector))
    fig = go.Figure()
    for parity, name, color in ((0, "sin (even)", "#3b75af"), (1, "cos (odd)", "#ef8636")):
        keep = dims % 2 == parity
        fig.add_trace(
            go.Bar(
                x=dims[keep],
                y=vector[keep],
                name=name,
                marker_color=color,
                hovertemplate="dimension %{x}: %{y:.3f}<extra></extra>",
            )
        )
    fig.update_xaxes(title="dimension")
    fig.update_yaxes(title="PE", range=[-1.1, 1.1])
    fig.update_layout(bargap=0.1, legend=dict(orientation="h", y=-0.25))
    return _layout(fig, f"PE({position})", 340)


def binary_figure(bits: np.ndarray, pe: np.ndarray) -> go.Figure:
    """Bits of 0..n-1 beside the sin dimensions of PE for the same positions: both flip slower to the right."""
    bits = np.asarray(bits, dtype=float)
    sines = np.asarray(pe, dtype=float)[:, 0::2]
    n = len(bits)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "binary counter: bit k flips every 2^k",
            "PE sin dimensions: pair i turns slower as i grows",
        ),
        horizontal_spacing=0.12,
    )
    fig.add_trace(
        go.Heatmap(
            z=bits,
            colorscale=[[0, "#f7f7f7"], [1, "#2b4b7e"]],
            showscale=False,
            xgap=2,
            ygap=2,
            texttemplate="%{z:.0f}",
            hovertemplate="number %{y}, bit %{x}: %{z:.0f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Heatmap(
            z=sines,
            colorscale=DIVERGING_SCALE,
            reversescale=True,
            zmin=-1,
            zmax=1,
            xgap=2,
            ygap=2,
            colorbar=dict(title="PE", thickness=12),
            hovertemplate="position %{y}, pair %{x}: %{z:.2f}<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title="bit k (1s, 2s, 4s, ...)", tickvals=list(range(bits.shape[1])), row=1, col=1)
    fig.update_xaxes(title="pair i (sin dimension 2i)", row=1, col=2)
    fig.update_yaxes(title="number / position", tickvals=list(range(n)), autorange="reversed", showgrid=False)
    return _layout(fig, "", 470)


def dot_product_figure(ks: np.ndarray, dots: np.ndarray, position: int) -> go.Figure:
    """PE(pos)·PE(pos+k) against k: symmetric, largest at k = 0, depends on k only."""
    fig = go.Figure(
        go.Scatter(
            x=ks,
            y=dots,
            mode="lines+markers",
            marker=dict(size=4),
            hovertemplate="k = %{x}: %{y:.3f}<extra></extra>",
        )
    )
    fig.add_vline(x=0, line=dict(color="#999", dash="dot"))
    fig.update_xaxes(title="offset k")
    fig.update_yaxes(title=f"PE({position}) · PE({position}+k)")
    return _layout(fig, "Similarity of positions k apart", 340)


def rotation_figure(
    before: np.ndarray, after: np.ndarray, rotated: np.ndarray, pair: int, k: int
) -> go.Figure:
    """One (sin, cos) pair on the unit circle: PE(pos), PE(pos+k), and M_k·PE(pos) landing on it."""
    angle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure(
        go.Scatter(
            x=np.cos(angle),
            y=np.sin(angle),
            mode="lines",
            line=dict(color="#ccc"),
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[0, before[1]],
            y=[0, before[0]],
            mode="lines+markers",
            name="PE(pos)",
            line=dict(color="#3b75af", width=3),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[0, after[1]],
            y=[0, after[0]],
            mode="lines+markers",
            name=f"PE(pos+{k})",
            line=dict(color="#ef8636", width=3),
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[rotated[1]],
            y=[rotated[0]],
            mode="markers",
            name=f"M_{k}·PE(pos)",
            marker=dict(symbol="x", size=14, color="#222"),
        )
    )
    fig.update_xaxes(title=f"cos (dim {2 * pair + 1})", range=[-1.25, 1.25], scaleanchor="y", zeroline=True)
    fig.update_yaxes(title=f"sin (dim {2 * pair})", range=[-1.25, 1.25], zeroline=True)
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return _layout(fig, f"Pair i = {pair}: a rotation", 400)


def norms_figure(embedding_norms: np.ndarray, pe_norm: float) -> go.Figure:
    """Histogram of ‖√d·E[token]‖ with the (constant) PE norm marked."""
    fig = go.Figure(
        go.Histogram(
            x=np.asarray(embedding_norms, dtype=float),
            nbinsx=40,
            name="token embeddings",
            marker_color="#3b75af",
            opacity=0.85,
        )
    )
    fig.add_vline(
        x=pe_norm,
        line=dict(color="#e4572e", width=3, dash="dash"),
        annotation_text=f"‖PE(pos)‖ = √(d/2) = {pe_norm:.2f}",
        annotation_position="top right",
    )
    fig.update_xaxes(title="vector norm")
    fig.update_yaxes(title="number of tokens")
    return _layout(fig, "Word embeddings (×√d_model) vs positional encoding", 360)


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
    return _layout(fig, "Without scaling, softmax saturates as d_k grows", 360)


def softmax_bars(unscaled: np.ndarray, scaled: np.ndarray, d_k: int) -> go.Figure:
    """The softmax of one random query's scores, unscaled vs scaled."""
    keys = [f"key {j}" for j in range(len(unscaled))]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=keys, y=unscaled, name="softmax(q·k)", marker_color="#e4572e"))
    fig.add_trace(go.Bar(x=keys, y=scaled, name="softmax(q·k / √d_k)", marker_color="#3b75af"))
    fig.update_yaxes(title="weight", range=[0, 1.05])
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.25))
    return _layout(fig, f"One random query, d_k = {d_k}", 340)
