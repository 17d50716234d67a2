"""Figures of the Train page and the attention timeline: curves, the Noam schedule, attention over steps.

Pure plotly builders (lists and arrays in, `go.Figure` out); no streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..data import fit_tokens
from ..training import noam_lr
from .kinds import get_kind
from .style import ATTENTION_SCALE, add_traces, cell_labels, check_labels, layout, masked_heatmap, token_axes

LOSS_COLOR = "#3b75af"
VALID_COLOR = "#2e9e5b"
LR_COLOR = "#ef8636"
MARK_COLOR = "#e4572e"
PAPER = (512, 4000)  # the paper's d_model and warmup (section 5.3)


def _check_series(xs: Sequence, ys: Sequence, name: str) -> None:
    """Refuse x and y series of different lengths."""
    if len(xs) != len(ys):
        raise ValueError(f"{name}: {len(xs)} steps but {len(ys)} values")


def curves_figure(
    steps: Sequence[int],
    losses: Sequence[float],
    lrs: Sequence[float],
    *,
    valid_steps: Sequence[int] = (),
    valid_losses: Sequence[float] = (),
    total_steps: int | None = None,
) -> go.Figure:
    """Training loss (and validation loss) beside the learning rate, over steps; x spans the whole run."""
    _check_series(steps, losses, "loss")
    _check_series(steps, lrs, "learning rate")
    _check_series(valid_steps, valid_losses, "validation loss")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Loss (cross-entropy per token)", "Learning rate"),
                        horizontal_spacing=0.12)  # fmt: skip
    fig.add_trace(go.Scatter(x=list(steps), y=list(losses), mode="lines", name="training loss",
                             line=dict(color=LOSS_COLOR, width=2.5)), row=1, col=1)  # fmt: skip
    if len(valid_steps):
        fig.add_trace(go.Scatter(x=list(valid_steps), y=list(valid_losses), mode="lines+markers", name="validation loss",
                                 line=dict(color=VALID_COLOR, width=2, dash="dot"), marker=dict(size=8)), row=1, col=1)  # fmt: skip
    fig.add_trace(go.Scatter(x=list(steps), y=list(lrs), mode="lines", name="learning rate",
                             line=dict(color=LR_COLOR, width=2.5), showlegend=False), row=1, col=2)  # fmt: skip
    end = total_steps or (max(steps) if len(steps) else 1)
    fig.update_xaxes(title="step", range=[0, end * 1.02])
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(exponentformat="e", rangemode="tozero", row=1, col=2)
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "", 360)


def noam_figure(d_model: int, warmup: int, factor: float = 1.0, steps: int | None = None) -> go.Figure:
    """lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), peak and run length marked."""
    span = max(steps or 0, 3 * warmup, 10)
    x = np.unique(
        np.append(np.linspace(1, span, 400).round(), warmup).astype(int)
    )  # the peak is on the curve
    y = [noam_lr(int(s), d_model, warmup, factor) for s in x]
    peak = noam_lr(warmup, d_model, warmup, factor)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"d_model={d_model}, warmup={warmup}, factor={factor:g}",
                             line=dict(color=LR_COLOR, width=3),
                             hovertemplate="step %{x}<br>lr = %{y:.2e}<extra></extra>"))  # fmt: skip
    if (d_model, warmup, factor) != (*PAPER, 1.0):
        paper = [noam_lr(int(s), PAPER[0], PAPER[1]) for s in x]
        fig.add_trace(go.Scatter(x=x, y=paper, mode="lines", name="paper: d_model=512, warmup=4000",
                                 line=dict(color="#999", width=1.5, dash="dash"),
                                 hovertemplate="step %{x}<br>lr = %{y:.2e}<extra>paper</extra>"))  # fmt: skip
    fig.add_trace(go.Scatter(x=[warmup], y=[peak], mode="markers+text", name="peak",
                             text=[f"peak {peak:.2e} at step {warmup}"], textposition="top right",
                             marker=dict(color=MARK_COLOR, size=10), showlegend=False))  # fmt: skip
    if steps:
        fig.add_vline(x=steps, line=dict(color="#444", dash="dot"), annotation_text=f"your run ends: step {steps}",
                      annotation_position="bottom left")  # fmt: skip
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="learning rate", exponentformat="e", range=[0, peak * 1.3])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Noam schedule: linear warm-up, then 1/√step decay", 380)


def loss_marker_figure(
    steps: Sequence[int],
    losses: Sequence[float],
    at_step: int,
    *,
    snapshot_steps: Sequence[int] = (),
    snapshot_losses: Sequence[float] = (),
) -> go.Figure:
    """The loss curve with the snapshot steps dotted and a marker at `at_step`."""
    _check_series(steps, losses, "loss")
    _check_series(snapshot_steps, snapshot_losses, "snapshot loss")
    fig = go.Figure()
    if len(steps):
        fig.add_trace(go.Scatter(x=list(steps), y=list(losses), mode="lines", name="training loss",
                                 line=dict(color=LOSS_COLOR, width=2.5)))  # fmt: skip
    fig.add_trace(go.Scatter(x=list(snapshot_steps), y=list(snapshot_losses), mode="markers", name="snapshots",
                             marker=dict(color="#888", size=7)))  # fmt: skip
    at_loss = _loss_at(at_step, steps, losses, snapshot_steps, snapshot_losses)
    all_steps = [*steps, *snapshot_steps, at_step]
    log_axis = max(all_steps) / max(min(all_steps), 1) > 50  # log-spaced snapshots: early steps get room
    where = _position(at_step, min(all_steps), max(all_steps), log_axis)
    fig.add_vline(x=at_step, line=dict(color=MARK_COLOR, width=2, dash="dash"))
    fig.add_trace(go.Scatter(x=[at_step], y=[at_loss], mode="markers+text", name="this step",
                             text=[f"step {at_step}: loss {at_loss:.3f}"],
                             textposition="top left" if where > 0.5 else "top right",
                             marker=dict(color=MARK_COLOR, size=14, symbol="star")))  # fmt: skip
    if log_axis:
        fig.update_xaxes(type="log")
    fig.update_xaxes(title="step")
    fig.update_yaxes(title="loss", rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "Loss during training", 420)


def _position(x: float, low: float, high: float, log: bool) -> float:
    """Where x lies between low and high on a linear or log axis, 0..1."""
    if log:
        x, low, high = (np.log(max(v, 1e-9)) for v in (x, low, high))
    return float((x - low) / (high - low)) if high > low else 0.5


def _loss_at(
    step: int,
    steps: Sequence[int],
    losses: Sequence[float],
    snap_steps: Sequence[int],
    snap_losses: Sequence[float],
) -> float:
    """The snapshot's loss at `step`, else the logged loss interpolated there."""
    for s, loss in zip(snap_steps, snap_losses, strict=True):
        if s == step:
            return float(loss)
    if len(steps):
        return float(np.interp(step, list(steps), list(losses)))
    return float("nan")


def timeline_strip(
    maps: Sequence[np.ndarray],
    steps: Sequence[int],
    query_labels: list[str],
    key_labels: list[str],
    *,
    current: int | None = None,
    masked: np.ndarray | None = None,
) -> go.Figure:
    """One small heatmap per snapshot (same probe, layer and head), the current one framed."""
    if len(maps) != len(steps) or not len(maps):
        raise ValueError(f"need one step per map, got {len(maps)} maps and {len(steps)} steps")
    for m in maps:
        check_labels(np.asarray(m), query_labels, key_labels)
    n = len(maps)
    fig = make_subplots(rows=1, cols=n, subplot_titles=[f"step {s}" for s in steps], horizontal_spacing=0.01)
    cells = cell_labels(query_labels, key_labels)
    for i, (m, s) in enumerate(zip(maps, steps, strict=True)):
        add_traces(fig, masked_heatmap(
            m, masked, cells, hatch=False, coloraxis="coloraxis",
            hovertemplate=f"step {s}<br>%{{customdata[0]}} → %{{customdata[1]}}<br>weight = %{{z:.3f}}<extra></extra>",
        ), row=1, col=i + 1)  # fmt: skip
        if i == current:
            fig.add_shape(type="rect", xref="x domain", yref="y domain", x0=0, x1=1, y0=0, y1=1,
                          line=dict(color=MARK_COLOR, width=3), row=1, col=i + 1)  # fmt: skip
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    fig.update_annotations(font=dict(size=10))
    fig.update_layout(coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0.0, cmax=1.0, showscale=False))
    return layout(fig, "", 170)


def timeline_figure(
    weights: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    steps: Sequence[int],
    losses: Sequence[float],
    at_step: int,
    *,
    snapshot_steps: Sequence[int] = (),
    snapshot_losses: Sequence[float] = (),
    masked: np.ndarray | None = None,
    title: str = "",
) -> go.Figure:
    """An attention map at one training step (left) beside the loss curve marked at that step (right)."""
    weights = np.asarray(weights, dtype=float)
    check_labels(weights, query_labels, key_labels)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.2,
                        subplot_titles=(f"attention at step {at_step}", "loss"))  # fmt: skip
    add_traces(fig, masked_heatmap(
        weights, masked, cell_labels(query_labels, key_labels), x=list(range(len(key_labels))),
        y=list(range(len(query_labels))), colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0, xgap=1, ygap=1,
        colorbar=dict(title="weight", thickness=12, x=fig.layout.xaxis.domain[1] + 0.015),
        hovertemplate="%{customdata[0]} → %{customdata[1]}<br>weight = %{z:.3f}<extra></extra>",
    ), row=1, col=1)  # fmt: skip
    token_axes(fig, query_labels, key_labels, row=1, col=1)
    loss = loss_marker_figure(
        steps, losses, at_step, snapshot_steps=snapshot_steps, snapshot_losses=snapshot_losses
    )
    for trace in loss.data:
        fig.add_trace(trace, row=1, col=2)
    fig.add_vline(x=at_step, line=dict(color=MARK_COLOR, width=2, dash="dash"), row=1, col=2)
    fig.update_xaxes(title="step", type=loss.layout.xaxis.type, row=1, col=2)
    fig.update_yaxes(title="loss", rangemode="tozero", row=1, col=2)
    fig.update_layout(legend=dict(orientation="h", y=-0.2, x=0.6))
    height = int(min(760, max(380, 26 * len(query_labels) + 200)))
    return layout(fig, title, height)


# ---------------------------------------------------------------------------------------------
# One map out of a checkpoint's snapshots
# ---------------------------------------------------------------------------------------------


def snapshot_map(
    snapshot, probe: int, kind: str, layer: int, head: int | None, src_tokenizer, tgt_tokenizer, max_len: int
) -> tuple[np.ndarray, list[str], list[str]]:
    """(weights (queries, keys), query labels, key labels) of one probe in a Snapshot; head None = mean of heads.

    The probes were run as a padded batch with source = tokens + </s> and decoder input = <s> + target
    tokens (each cut by data.fit_tokens), so the padding rows and columns are cut off here.
    """
    source, target = snapshot.probes[probe], snapshot.targets[probe] if snapshot.targets else ""
    src_ids = fit_tokens(src_tokenizer.encode(source), max_len) + [src_tokenizer.eos_id]
    query_ids = [tgt_tokenizer.bos_id] + fit_tokens(tgt_tokenizer.encode(target), max_len)
    src_pieces, query_pieces = src_tokenizer.pieces(src_ids), tgt_tokenizer.pieces(query_ids)
    rows, cols = get_kind(kind).sides(src_pieces, query_pieces)
    maps = getattr(snapshot.attention, kind)[layer][probe].float().numpy()  # (h, T_pad, S_pad)
    weights = maps.mean(axis=0) if head is None else maps[head]
    return weights[: len(rows), : len(cols)], list(rows), list(cols)
