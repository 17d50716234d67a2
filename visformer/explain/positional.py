"""Figures of the positional encoding: sines and cosines, binary counting, rotations, norms."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..i18n import t
from .style import DIVERGING_SCALE, layout, wrapped

MARK_COLOR = "#e4572e"  # the wavelength marks and the chosen pair
MARK_FONT = dict(color=MARK_COLOR, size=11)


def pe_heatmap(
    pe: np.ndarray, *, mark_position: int | None = None, mark_pair: int | None = None, lang: str = "en"
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
            hovertemplate=t("pe.fig.heatmap_hover", lang) + "<extra></extra>",
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
            line=dict(color=MARK_COLOR, width=2),
        )
    fig.update_xaxes(title=t("pe.fig.dimension_axis", lang), showgrid=False)
    fig.update_yaxes(title=t("pe.fig.position", lang), autorange="reversed", showgrid=False)
    return layout(fig, t("pe.fig.heatmap", lang, d=d_model, n=length), 460)


def pe_pair_figure(
    sin: np.ndarray, cos: np.ndarray, wavelength: float, pair: int, d_model: int, lang: str = "en"
) -> go.Figure:
    """sin and cos of dimension pair `pair` over positions, with every full wavelength marked and labelled."""
    positions = np.arange(len(sin))
    a, b = 2 * pair, 2 * pair + 1
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=positions, y=sin, mode="lines", name=t("pe.fig.sin", lang, a=a), line=dict(width=2.5))
    )
    fig.add_trace(
        go.Scatter(
            x=positions,
            y=cos,
            mode="lines",
            name=t("pe.fig.cos", lang, b=b),
            line=dict(width=2.5, dash="dot"),
        )
    )
    n_marks = min(int((len(sin) - 1) // wavelength) if wavelength > 0 else 0, 40)
    every = max(1, -(-n_marks // 8))  # at most 8 labels, so they never overlap
    # what fig.add_vline draws, as plain layout entries set at once (15 add_vline calls took 130 ms)
    lines, notes = [], []
    for m in range(1, n_marks + 1):
        x = m * wavelength
        lines.append(dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain",
                          line=dict(color=MARK_COLOR, width=1, dash="dash")))  # fmt: skip
        if m == 1 or m % every == 0:
            label = (
                t("pe.fig.first_mark", lang, wl=f"{wavelength:,.1f}")
                if m == 1
                else t("pe.fig.mark", lang, m=m)
            )
            notes.append(dict(text=label, x=x, xref="x", xanchor="left", y=1, yref="y domain", yanchor="top",
                              showarrow=False, font=MARK_FONT))  # fmt: skip
    fig.update_layout(shapes=lines, annotations=notes)
    shown = "" if n_marks else t("pe.fig.longer", lang)
    note = t("pe.fig.wavelength", lang, a=a, d=d_model, wl=f"{wavelength:,.1f}", shown=shown)
    lines = "".join(
        f"<br><sup>{part}</sup>" for part in note.split("; ")
    )  # two short lines: one was cut on a phone
    title = t("pe.fig.pair", lang, i=pair, a=a, b=b) + lines
    fig.update_xaxes(title=t("pe.fig.position", lang))
    fig.update_yaxes(title=t("pe.fig.value", lang), range=[-1.15, 1.3])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, title, 400).update_layout(margin_t=90)


def pe_vector_figure(vector: np.ndarray, position: int, lang: str = "en") -> go.Figure:
    """The PE vector at one position, one bar per dimension (sin dimensions and cos dimensions coloured apart)."""
    vector = np.asarray(vector, dtype=float)
    dims = np.arange(len(vector))
    fig = go.Figure()
    for parity, key, color in ((0, "pe.fig.sin_even", "#3b75af"), (1, "pe.fig.cos_odd", "#ef8636")):
        keep = dims % 2 == parity
        fig.add_trace(
            go.Bar(
                x=dims[keep],
                y=vector[keep],
                name=t(key, lang),
                marker_color=color,
                hovertemplate=t("pe.fig.bar_hover", lang) + "<extra></extra>",
            )
        )
    fig.update_xaxes(title=t("pe.fig.dimension", lang))
    fig.update_yaxes(title="PE", range=[-1.1, 1.1])
    fig.update_layout(bargap=0.1, legend=dict(orientation="h", y=-0.25))
    return layout(fig, f"PE({position})", 340)


def binary_figure(bits: np.ndarray, pe: np.ndarray, lang: str = "en") -> go.Figure:
    """Bits of 0..n-1 beside the sin dimensions of PE for the same positions: both flip slower to the right."""
    bits = np.asarray(bits, dtype=float)
    sines = np.asarray(pe, dtype=float)[:, 0::2]
    n = len(bits)
    fig = make_subplots(
        rows=1,
        cols=2,
        # each title on short lines: side by side on one line, the two ran together (on a phone, on three lines)
        subplot_titles=tuple(wrapped(t(k, lang), 22) for k in ("pe.fig.binary_bits", "pe.fig.binary_pe")),
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
            hovertemplate=t("pe.fig.bits_hover", lang) + "<extra></extra>",
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
            hovertemplate=t("pe.fig.sines_hover", lang) + "<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title=t("pe.fig.bit_axis", lang), tickvals=list(range(bits.shape[1])), row=1, col=1)
    fig.update_xaxes(title=t("pe.fig.pair_axis", lang), row=1, col=2)
    fig.update_yaxes(tickvals=list(range(n)), autorange="reversed", showgrid=False)
    fig.update_yaxes(
        title=t("pe.fig.number_axis", lang), row=1, col=1
    )  # once: the second fell on the first panel
    fig.update_annotations(font_size=13)
    return layout(fig, "", 500).update_layout(margin_t=84)


def dot_product_figure(ks: np.ndarray, dots: np.ndarray, position: int, lang: str = "en") -> go.Figure:
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
    fig.update_xaxes(title=t("pe.fig.offset", lang))
    fig.update_yaxes(title=f"PE({position}) · PE({position}+k)")
    return layout(fig, t("pe.fig.similarity", lang), 340)


def rotation_figure(
    before: np.ndarray, after: np.ndarray, rotated: np.ndarray, pair: int, k: int, lang: str = "en"
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
    return layout(fig, t("pe.fig.rotation", lang, i=pair), 400)


def norms_figure(embedding_norms: np.ndarray, pe_norm: float, lang: str = "en") -> go.Figure:
    """Histogram of ‖√d·E[token]‖ with the (constant) PE norm marked."""
    fig = go.Figure(
        go.Histogram(
            x=np.asarray(embedding_norms, dtype=float),
            nbinsx=40,
            name=t("pe.fig.embeddings", lang),
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
    fig.update_xaxes(title=t("pe.fig.norm_axis", lang))
    fig.update_yaxes(title=t("pe.fig.count_axis", lang))
    return layout(fig, t("pe.fig.norms", lang), 360)
