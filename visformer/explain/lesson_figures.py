"""Figures of the lesson drawn from arrays alone (no model): the RNN's one context vector against attention."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import escape, layout


def seq2seq_figure(
    src_pieces: list[str], out_pieces: list[str], cross: np.ndarray, titles: tuple[str, str]
) -> go.Figure:
    """Top: an RNN squeezes the source into one context vector c. Below: attention links every output to every source piece.

    One panel above the other: side by side, the two titles ran into each other (and on a phone, the panels).

    cross: (T, S) cross-attention weights (e.g. head average of the last layer) drawn as line opacity.
    """
    cross = np.asarray(cross, dtype=float)
    if cross.shape != (len(out_pieces), len(src_pieces)):
        raise ValueError(
            f"cross {cross.shape} does not match {len(out_pieces)} outputs, {len(src_pieces)} sources"
        )
    fig = make_subplots(rows=2, cols=1, subplot_titles=titles, vertical_spacing=0.14)
    n_s, n_t = len(src_pieces), len(out_pieces)
    xs = np.linspace(0, 1, max(n_s, 1)) if n_s > 1 else np.array([0.5])
    xt = np.linspace(0, 1, max(n_t, 1)) if n_t > 1 else np.array([0.5])
    src_text, out_text = [escape(p) for p in src_pieces], [escape(p) for p in out_pieces]
    grey, blue, red = "#888", "#2b4b7e", "#e4572e"
    # RNN: a chain along the source, one context vector, then the decoder reads only c
    fig.add_trace(go.Scatter(x=xs, y=[0] * n_s, mode="lines+markers+text", text=src_text, textposition="bottom center",
                             line=dict(color=grey), marker=dict(size=12, color=blue), hoverinfo="skip"), 1, 1)  # fmt: skip
    fig.add_trace(go.Scatter(x=[xs[-1], 0.5], y=[0, 0.5], mode="lines", line=dict(color=red, width=4),
                             hoverinfo="skip"), 1, 1)  # fmt: skip
    fig.add_trace(go.Scatter(x=[0.5], y=[0.5], mode="markers+text", text=["c"], textposition="middle right",
                             marker=dict(size=22, color=red, symbol="square"), hoverinfo="skip"), 1, 1)  # fmt: skip
    for x in xt:
        fig.add_trace(go.Scatter(x=[0.5, x], y=[0.5, 1], mode="lines", line=dict(color=red, width=1.5),
                                 hoverinfo="skip"), 1, 1)  # fmt: skip
    fig.add_trace(go.Scatter(x=xt, y=[1] * n_t, mode="lines+markers+text", text=out_text, textposition="top center",
                             line=dict(color=grey), marker=dict(size=12, color="#3b9a5a"), hoverinfo="skip"), 1, 1)  # fmt: skip
    # attention: every output step looks at every source piece, more strongly where the weight is larger
    top = float(cross.max()) or 1.0
    for t in range(n_t):
        for s in range(n_s):
            w = cross[t, s] / top
            if w < 0.05:
                continue
            fig.add_trace(go.Scatter(x=[xs[s], xt[t]], y=[0, 1], mode="lines", opacity=float(w),
                                     line=dict(color=blue, width=1 + 4 * float(w)), hoverinfo="skip"), 2, 1)  # fmt: skip
    fig.add_trace(go.Scatter(x=xs, y=[0] * n_s, mode="markers+text", text=src_text, textposition="bottom center",
                             marker=dict(size=12, color=blue), hoverinfo="skip"), 2, 1)  # fmt: skip
    fig.add_trace(go.Scatter(x=xt, y=[1] * n_t, mode="markers+text", text=out_text, textposition="top center",
                             marker=dict(size=12, color="#3b9a5a"), hoverinfo="skip"), 2, 1)  # fmt: skip
    fig.update_xaxes(visible=False, range=[-0.15, 1.15])
    fig.update_yaxes(visible=False, range=[-0.35, 1.35])
    fig.update_layout(showlegend=False)
    fig.update_annotations(xanchor="left", x=0.0)  # each title at the left of its panel
    return layout(fig, "", 620)
