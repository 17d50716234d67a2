"""Figures of the Train page and the attention timeline: curves, the Noam schedule, attention over steps.

Pure plotly builders (lists and arrays in, `go.Figure` out); no streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..data import encode_source, fit_tokens
from ..i18n import t
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


def share_text(share: float) -> str:
    """A share as a percentage rounded down to 0.1% ('99.5%', never '100%' below 1.0), as stop rules read it."""
    tenths = math.floor(share * 1000 + 1e-9) / 10
    return f"{tenths:.0f}%" if tenths == int(tenths) else f"{tenths:.1f}%"


def curves_figure(
    steps: Sequence[int],
    losses: Sequence[float],
    lrs: Sequence[float],
    *,
    valid_steps: Sequence[int] = (),
    valid_losses: Sequence[float] = (),
    total_steps: int | None = None,
    label_smoothing: float = 0.1,
    dropout: float = 0.1,
    lang: str = "en",
) -> go.Figure:
    """Training loss (label smoothing and dropout on) and validation loss (plain cross-entropy) beside the learning rate.

    The two losses measure different things, so each is named for what it is; x spans the whole run.
    """
    _check_series(steps, losses, "loss")
    _check_series(steps, lrs, "learning rate")
    _check_series(valid_steps, valid_losses, "validation loss")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(t("train.fig.loss_title", lang), t("train.fig.lr", lang)))  # fmt: skip
    train_name = t("train.fig.train_loss", lang, eps=f"{label_smoothing:g}", p=f"{dropout:g}")
    fig.add_trace(go.Scatter(x=list(steps), y=list(losses), mode="lines", name=train_name,
                             line=dict(color=LOSS_COLOR, width=2.5)), row=1, col=1)  # fmt: skip
    if len(valid_steps):
        fig.add_trace(go.Scatter(x=list(valid_steps), y=list(valid_losses), mode="lines+markers",
                                 name=t("train.fig.valid_loss", lang),
                                 line=dict(color=VALID_COLOR, width=2, dash="dot"), marker=dict(size=8)), row=1, col=1)  # fmt: skip
    fig.add_trace(go.Scatter(x=list(steps), y=list(lrs), mode="lines", name=t("train.fig.lr", lang),
                             line=dict(color=LR_COLOR, width=2.5), showlegend=False), row=1, col=2)  # fmt: skip
    end = total_steps or (max(steps) if len(steps) else 1)
    fig.update_xaxes(title=t("train.fig.step", lang), range=[0, end * 1.02])
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(exponentformat="e", rangemode="tozero", row=1, col=2)
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, "", 380)


def noam_figure(
    d_model: int, warmup: int, factor: float = 1.0, steps: int | None = None, lang: str = "en"
) -> go.Figure:
    """lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), peak and run length marked."""
    span = max(steps or 0, 3 * warmup, 10)
    x = np.unique(
        np.append(np.linspace(1, span, 400).round(), warmup).astype(int)
    )  # the peak is on the curve
    y = [noam_lr(int(s), d_model, warmup, factor) for s in x]
    peak = noam_lr(warmup, d_model, warmup, factor)
    step_word = t("train.fig.step", lang)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"d_model={d_model}, warmup={warmup}, factor={factor:g}",
                             line=dict(color=LR_COLOR, width=3),
                             hovertemplate=f"{step_word} %{{x}}<br>lr = %{{y:.2e}}<extra></extra>"))  # fmt: skip
    if (d_model, warmup, factor) != (*PAPER, 1.0):
        paper = [noam_lr(int(s), PAPER[0], PAPER[1]) for s in x]
        name = t("train.fig.noam_paper", lang)
        fig.add_trace(go.Scatter(x=x, y=paper, mode="lines", name=name,
                                 line=dict(color="#999", width=1.5, dash="dash"),
                                 hovertemplate=f"{step_word} %{{x}}<br>lr = %{{y:.2e}}<extra>{name}</extra>"))  # fmt: skip
    fig.add_trace(go.Scatter(x=[warmup], y=[peak], mode="markers+text", name="peak",
                             text=[t("train.fig.noam_peak", lang, lr=f"{peak:.2e}", step=warmup)],
                             textposition="top right", marker=dict(color=MARK_COLOR, size=10), showlegend=False))  # fmt: skip
    if steps:
        fig.add_vline(x=steps, line=dict(color="#444", dash="dot"), annotation_position="bottom left",
                      annotation_text=t("train.fig.noam_end", lang, step=steps))  # fmt: skip
    fig.update_xaxes(title=step_word)
    fig.update_yaxes(title=t("train.fig.lr", lang), exponentformat="e", range=[0, peak * 1.3])
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    layout(fig, t("train.fig.noam_title", lang), 400)
    # the title sits below plotly's toolbar (top right, about 30 px high), which would otherwise cover it
    fig.update_layout(title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=34)), margin=dict(t=80))
    return fig


def loss_marker_figure(
    steps: Sequence[int],
    losses: Sequence[float],
    at_step: int,
    *,
    snapshot_steps: Sequence[int] = (),
    snapshot_losses: Sequence[float] = (),
    mean_over: int | None = None,
    lang: str = "en",
) -> go.Figure:
    """The logged loss curve, the batch loss at each snapshot as its own series, and a star on the current snapshot.

    The curve is the mean over `mean_over` steps, logged at the end of each window; a snapshot's loss is the
    one batch trained at that step. They are different quantities (early on the window mean lies above the
    batch at its end), so they are two series with their own names; the star sits on the snapshot's own
    value, never on the curve (the first snapshots come before the curve's first point).
    """
    _check_series(steps, losses, "loss")
    _check_series(snapshot_steps, snapshot_losses, "snapshot loss")
    fig = go.Figure()
    step_word = t("train.fig.step", lang)
    if len(steps):
        curve = (
            t("timeline.fig.curve", lang, n=mean_over) if mean_over else t("timeline.fig.curve_plain", lang)
        )
        fig.add_trace(go.Scatter(x=list(steps), y=list(losses), mode="lines", name=curve,
                                 line=dict(color=LOSS_COLOR, width=2.5),
                                 hovertemplate=f"{step_word} %{{x}}<br>%{{y:.3f}}<extra></extra>"))  # fmt: skip
    fig.add_trace(go.Scatter(x=list(snapshot_steps), y=list(snapshot_losses), mode="markers",
                             name=t("timeline.fig.snapshots", lang),
                             marker=dict(color="#777", size=8, symbol="circle-open", line=dict(width=2)),
                             hovertemplate=f"{step_word} %{{x}}<br>%{{y:.3f}}<extra></extra>"))  # fmt: skip
    at_loss = _snapshot_loss(at_step, snapshot_steps, snapshot_losses)
    all_steps = [*steps, *snapshot_steps, at_step]
    log_axis = max(all_steps) / max(min(all_steps), 1) > 50  # log-spaced snapshots: early steps get room
    where = _position(at_step, min(all_steps), max(all_steps), log_axis)
    fig.add_vline(x=at_step, line=dict(color=MARK_COLOR, width=2, dash="dash"))
    if at_loss is not None:
        fig.add_trace(go.Scatter(x=[at_step], y=[at_loss], mode="markers+text", name=t("timeline.fig.this_step", lang),
                                 text=[t("timeline.fig.star", lang, step=at_step, loss=f"{at_loss:.3f}")],
                                 textposition="top left" if where > 0.5 else "top right",
                                 marker=dict(color=MARK_COLOR, size=14, symbol="star")))  # fmt: skip
    if log_axis:
        fig.update_xaxes(type="log")
    fig.update_xaxes(title=step_word)
    fig.update_yaxes(title=t("timeline.fig.loss_axis", lang), rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return layout(fig, t("timeline.fig.loss_title", lang), 420)


def _position(x: float, low: float, high: float, log: bool) -> float:
    """Where x lies between low and high on a linear or log axis, 0..1."""
    if log:
        x, low, high = (np.log(max(v, 1e-9)) for v in (x, low, high))
    return float((x - low) / (high - low)) if high > low else 0.5


def _snapshot_loss(step: int, snap_steps: Sequence[int], snap_losses: Sequence[float]) -> float | None:
    """The batch loss of the snapshot taken at `step` (None when there is none or it is not a number)."""
    for s, loss in zip(snap_steps, snap_losses, strict=True):
        if s == step and math.isfinite(loss):
            return float(loss)
    return None


def timeline_strip(
    maps: Sequence[np.ndarray],
    steps: Sequence[int],
    query_labels: list[str],
    key_labels: list[str],
    *,
    current: int | None = None,
    masked: np.ndarray | None = None,
    lang: str = "en",
) -> go.Figure:
    """One small heatmap per snapshot (same probe, layer and head), the current one framed."""
    if len(maps) != len(steps) or not len(maps):
        raise ValueError(f"need one step per map, got {len(maps)} maps and {len(steps)} steps")
    for m in maps:
        check_labels(np.asarray(m), query_labels, key_labels)
    n = len(maps)
    fig = make_subplots(
        rows=1,
        cols=n,
        subplot_titles=[
            t("timeline.fig.step_n", lang, step=s).replace(" ", "<br>", 1) for s in steps
        ],  # narrow
        horizontal_spacing=0.01,
    )
    cells = cell_labels(query_labels, key_labels)
    for i, (m, s) in enumerate(zip(maps, steps, strict=True)):
        add_traces(fig, masked_heatmap(
            m, masked, cells, hatch=False, coloraxis="coloraxis",
            hovertemplate=t("timeline.fig.step_n", lang, step=s)
            + f"<br>%{{customdata[0]}} → %{{customdata[1]}}<br>{t('timeline.fig.weight', lang)} = %{{z:.3f}}<extra></extra>",
        ), row=1, col=i + 1)  # fmt: skip
        if i == current:
            fig.add_shape(type="rect", xref="x domain", yref="y domain", x0=0, x1=1, y0=0, y1=1,
                          line=dict(color=MARK_COLOR, width=3), row=1, col=i + 1)  # fmt: skip
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, zeroline=False, autorange="reversed")
    fig.update_annotations(font=dict(size=10))
    fig.update_layout(coloraxis=dict(colorscale=ATTENTION_SCALE, cmin=0.0, cmax=1.0, showscale=False))
    return layout(fig, "", 190).update_layout(margin_t=44)


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
    mean_over: int | None = None,
    lang: str = "en",
) -> go.Figure:
    """An attention map at one training step (top) above the loss curve marked at that step (bottom).

    One above the other, not side by side: beside the loss, the map's colour bar fell on the loss chart (or,
    with long labels, on the map itself) and its row labels were cut. Here the colour bar sits right of the
    map, over the map's rows only, and the row labels get the room they need.
    """
    weights = np.asarray(weights, dtype=float)
    check_labels(weights, query_labels, key_labels)
    map_px, loss_px, gap_px = max(200, 26 * len(query_labels) + 40), 240, 150  # the gap: the map's key labels
    total = map_px + loss_px + gap_px
    fig = make_subplots(rows=2, cols=1, row_heights=[map_px, loss_px], vertical_spacing=gap_px / total,
                        subplot_titles=(t("timeline.fig.attention_at", lang, step=at_step), ""))  # fmt: skip
    map_domain = fig.layout.yaxis.domain  # (bottom, top) of the map in paper coordinates
    add_traces(fig, masked_heatmap(
        weights, masked, cell_labels(query_labels, key_labels), x=list(range(len(key_labels))),
        y=list(range(len(query_labels))), colorscale=ATTENTION_SCALE, zmin=0.0, zmax=1.0, xgap=1, ygap=1,
        colorbar=dict(title=t("timeline.fig.weight", lang), thickness=12, y=map_domain[0], yanchor="bottom",
                      len=map_domain[1] - map_domain[0]),
        hovertemplate=f"%{{customdata[0]}} → %{{customdata[1]}}<br>{t('timeline.fig.weight', lang)} = %{{z:.3f}}<extra></extra>",
    ), row=1, col=1)  # fmt: skip
    token_axes(fig, query_labels, key_labels, row=1, col=1)
    fig.update_yaxes(automargin=True, row=1, col=1)  # whole row labels ("→ ▁Er"), never cut
    fig.update_xaxes(automargin=True, row=1, col=1)
    loss = loss_marker_figure(steps, losses, at_step, snapshot_steps=snapshot_steps, snapshot_losses=snapshot_losses,
                              mean_over=mean_over, lang=lang)  # fmt: skip
    for trace in loss.data:
        fig.add_trace(trace, row=2, col=1)
    fig.add_vline(x=at_step, line=dict(color=MARK_COLOR, width=2, dash="dash"), row=2, col=1)
    fig.update_xaxes(title=t("train.fig.step", lang), type=loss.layout.xaxis.type, row=2, col=1)
    fig.update_yaxes(title=t("timeline.fig.loss_axis", lang), rangemode="tozero", row=2, col=1)
    loss_top = fig.layout.yaxis2.domain[1]
    fig.update_layout(
        legend=dict(orientation="h", x=0, y=loss_top + 0.01, yanchor="bottom")
    )  # above the loss
    return layout(fig, title, total + 90)


# ---------------------------------------------------------------------------------------------
# One map out of a checkpoint's snapshots
# ---------------------------------------------------------------------------------------------


def snapshot_map(
    snapshot, probe: int, kind: str, layer: int, head: int | None, src_tokenizer, tgt_tokenizer, max_len: int
) -> tuple[np.ndarray, list[str], list[str]]:
    """(weights (queries, keys), query labels, key labels) of one probe in a Snapshot; head None = mean of heads.

    The probes were run as a padded batch with source = tokens + </s> and decoder input = <s> + target
    tokens (each cut by data.encode_example, which is encode_source's cut), so the padding rows and columns are cut off here. A decoder row
    is named by the token it produces ('→ a': teacher forcing, so the target shifted by one, then </s>).
    """
    source, target = snapshot.probes[probe], snapshot.targets[probe] if snapshot.targets else ""
    src_ids = encode_source(src_tokenizer, source, max_len)[0]
    target_ids = fit_tokens(tgt_tokenizer.encode(target), max_len)
    src_pieces = src_tokenizer.pieces(src_ids)
    query_pieces = tgt_tokenizer.pieces([tgt_tokenizer.bos_id, *target_ids])
    produced = tgt_tokenizer.pieces([*target_ids, tgt_tokenizer.eos_id])
    rows, cols = get_kind(kind).axis_labels(src_pieces, query_pieces, produced)
    maps = getattr(snapshot.attention, kind)[layer][probe].float().numpy()  # (h, T_pad, S_pad)
    weights = maps.mean(axis=0) if head is None else maps[head]
    return weights[: len(rows), : len(cols)], list(rows), list(cols)
