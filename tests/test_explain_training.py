"""Train page and timeline figures on small hand-made series and snapshots."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from visformer.explain import training as tfig
from visformer.model import AttentionMaps
from visformer.records import Snapshot
from visformer.tasks import task_tokenizer
from visformer.training import noam_lr


def test_curves_figure_draws_loss_valid_and_lr() -> None:
    fig = tfig.curves_figure([10, 20, 30], [3.0, 2.0, 1.5], [1e-3, 2e-3, 1.5e-3], valid_steps=[30],
                             valid_losses=[1.8], total_steps=100)  # fmt: skip
    names = [t.name for t in fig.data]
    assert names == [  # two different losses, each named for what it measures (issue 15)
        "training loss (label smoothing 0.1, dropout 0.1)",
        "validation loss (plain cross-entropy)",
        "learning rate",
    ]
    assert list(fig.data[0].y) == [3.0, 2.0, 1.5]
    assert fig.data[2].xaxis == "x2"  # the learning rate has its own panel
    assert fig.layout.xaxis.range[1] == pytest.approx(102)  # the whole run is on the axis from the start
    with pytest.raises(ValueError, match="3 steps but 2 values"):
        tfig.curves_figure([1, 2, 3], [1.0, 2.0], [0.1, 0.1, 0.1])


def test_noam_figure_peaks_at_warmup() -> None:
    fig = tfig.noam_figure(64, 200, 2.0, steps=1000)
    curve, paper, peak = fig.data
    assert max(curve.y) == pytest.approx(noam_lr(200, 64, 200, 2.0))
    assert list(peak.x) == [200] and peak.y[0] == pytest.approx(2.0 * 64**-0.5 * 200**-0.5)
    assert curve.x[int(np.argmax(curve.y))] == pytest.approx(200, abs=5)
    assert "paper" in paper.name
    assert any(shape.x0 == 1000 for shape in fig.layout.shapes)  # the run's end is marked
    assert len(tfig.noam_figure(512, 4000).data) == 2  # the paper's own setting is not drawn twice


def test_loss_marker_uses_the_snapshot_loss_and_log_axis() -> None:
    fig = tfig.loss_marker_figure([1, 10, 100, 1000], [4.0, 3.0, 2.0, 1.0], 100, snapshot_steps=[1, 100],
                                  snapshot_losses=[4.2, 2.1])  # fmt: skip
    marker = fig.data[-1]
    assert list(marker.x) == [100] and marker.y[0] == pytest.approx(2.1)
    assert fig.layout.xaxis.type == "log"
    fig = tfig.loss_marker_figure([10, 20], [2.0, 1.0], 15)
    assert "this step" not in [
        t.name for t in fig.data
    ]  # no snapshot at 15: a line marks it, no made-up loss
    assert fig.layout.xaxis.type != "log"


def test_timeline_figure_puts_the_map_beside_the_loss() -> None:
    weights = np.array([[1.0, 0.0], [0.4, 0.6]])
    masked = np.array([[False, True], [False, False]])
    fig = tfig.timeline_figure(weights, ["<s>", "a"], ["<s>", "a"], [1, 5], [3.0, 1.0], 5, snapshot_steps=[5],
                               snapshot_losses=[0.9], masked=masked, title="decoder")  # fmt: skip
    heat = fig.data[0]
    assert np.isnan(heat.z[0][1]) and heat.z[1][1] == pytest.approx(0.6)
    assert fig.layout.xaxis.ticktext == ("&lt;s&gt;", "a")  # escaped: plotly reads text as HTML
    star = [t for t in fig.data if t.name == "this step"][0]
    assert list(star.x) == [5] and star.y[0] == pytest.approx(0.9) and star.xaxis == "x2"
    assert fig.layout.title.text == "decoder"
    with pytest.raises(ValueError):
        tfig.timeline_figure(weights, ["a"], ["b", "c"], [], [], 1)


def test_timeline_strip_frames_the_current_snapshot() -> None:
    maps = [np.eye(3) * s / 10 for s in (1, 5, 10)]
    fig = tfig.timeline_strip(maps, [1, 5, 10], list("abc"), list("xyz"), current=1)
    assert len(fig.data) == 3
    assert [a.text for a in fig.layout.annotations] == [
        "step<br>1",
        "step<br>5",
        "step<br>10",
    ]  # two short lines
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].xref == "x2 domain"
    with pytest.raises(ValueError):
        tfig.timeline_strip(maps, [1, 5], list("abc"), list("xyz"))


def test_snapshot_map_cuts_the_padding_and_labels_the_tokens() -> None:
    tok = task_tokenizer("copy")
    probes, targets = ["a b c", "d"], ["a b c", "d"]
    s_pad, t_pad, heads = 4, 4, 2  # longest source "a b c" + </s>; longest target <s> + "a b c"
    cross = torch.rand(2, heads, t_pad, s_pad)
    maps = AttentionMaps([torch.rand(2, heads, s_pad, s_pad)], [torch.rand(2, heads, t_pad, t_pad)], [cross])
    snap = Snapshot(7, 1.5, probes, maps, targets)
    weights, rows, cols = tfig.snapshot_map(snap, 1, "cross", 0, 1, tok, tok, max_len=16)
    assert rows == ["→ d", "→ </s>"] and cols == ["d", "</s>"]  # a decoder row is named by what it produces
    assert np.allclose(weights, cross[1, 1, :2, :2].numpy())
    mean, _, _ = tfig.snapshot_map(snap, 0, "cross", 0, None, tok, tok, max_len=16)
    assert np.allclose(mean, cross[0].mean(0).numpy(), atol=1e-6)
    enc, rows, cols = tfig.snapshot_map(snap, 0, "encoder", 0, 0, tok, tok, max_len=16)
    assert rows == cols == ["a", "b", "c", "</s>"] and enc.shape == (4, 4)


def test_snapshot_losses_are_their_own_series_and_the_star_sits_on_one() -> None:
    """Issue 13: the snapshot dots (one batch) sat under the curve (a window mean) as if one quantity, and the star
    of a step before the curve's first point was drawn at the curve's first value, left of the curve."""
    fig = tfig.loss_marker_figure([25, 50], [3.0, 2.0], 1, snapshot_steps=[1, 25, 50], snapshot_losses=[3.4, 2.6, 1.9],
                                  mean_over=25)  # fmt: skip
    curve, dots, star = fig.data
    assert curve.name == "training loss, mean over 25 steps" and dots.name == "batch loss at a snapshot step"
    assert list(star.x) == [1] and star.y[0] == pytest.approx(3.4)  # on its own dot, not on the curve
    fig = tfig.loss_marker_figure([25, 50], [3.0, 2.0], 1, snapshot_steps=[1], snapshot_losses=[float("nan")])
    assert "this step" not in [
        t.name for t in fig.data
    ]  # before: a star at (1, 3.0), before the curve starts
    ko = tfig.loss_marker_figure(
        [25, 50], [3.0, 2.0], 25, snapshot_steps=[25], snapshot_losses=[2.6], lang="ko"
    )
    assert ko.data[1].name == "스냅숏 스텝의 배치 손실" and ko.layout.title.text == "학습 중 손실"


def test_noam_title_sits_below_plotlys_toolbar() -> None:
    """Issue 13: the toolbar (top right, about 30 px) covered the title; it now starts 34 px from the top."""
    fig = tfig.noam_figure(64, 100, 1.0, steps=600)
    title = fig.layout.title
    assert title.yref == "container" and title.y == 1.0 and title.yanchor == "top" and title.pad.t >= 30
    assert fig.layout.margin.t >= title.pad.t + 30  # room for the title line under the toolbar
    assert tfig.noam_figure(64, 100, lang="ko").layout.title.text.startswith("Noam 스케줄")


def test_share_text_never_rounds_up_to_the_stop_rules_target() -> None:
    """Issue 13: 0.995 was shown as "100%" although the rule (exact match >= 1.0) had not fired."""
    assert tfig.share_text(0.995) == "99.5%" and tfig.share_text(0.9999) == "99.9%"
    assert tfig.share_text(1.0) == "100%" and tfig.share_text(0.5) == "50%" and tfig.share_text(0.0) == "0%"


def test_curves_and_timeline_in_korean() -> None:
    fig = tfig.curves_figure([10], [3.0], [1e-3], valid_steps=[10], valid_losses=[2.5], label_smoothing=0.0,
                             dropout=0.0, lang="ko")  # fmt: skip
    assert [t.name for t in fig.data][:2] == [
        "학습 손실 (레이블 스무딩 0, 드롭아웃 0)",
        "검증 손실 (순수 크로스 엔트로피)",
    ]
    strip = tfig.timeline_strip([np.eye(2)], [7], ["a", "b"], ["c", "d"], lang="ko")
    assert [a.text.replace("<br>", " ") for a in strip.layout.annotations] == ["7 스텝"]


def test_the_timeline_colour_bar_sits_beside_the_map_and_off_the_loss_chart() -> None:
    rows = [f"→ ▁{w}" for w in ("Er", "sitzt", "auf", "der", "Bank", ".", "</s>")]
    weights = np.full((7, 5), 0.2)
    fig = tfig.timeline_figure(weights, rows, list("abcde"), [1, 5, 9], [3.0, 2.0, 1.0], 5, snapshot_steps=[5],
                               snapshot_losses=[2.1], title="cross")  # fmt: skip
    bar = fig.data[0].colorbar
    bar_x = bar.x if bar.x is not None else 1.02  # plotly's default: right of every plot area
    assert bar_x >= max(fig.layout.xaxis.domain[1], fig.layout.xaxis2.domain[1])  # never over a chart
    bar_bottom, bar_top = bar.y, bar.y + bar.len
    loss_bottom, loss_top = fig.layout.yaxis2.domain
    assert bar_bottom >= loss_top - 1e-9 and bar_top <= 1 + 1e-9  # beside the map, above the loss chart
    assert fig.layout.yaxis.automargin is True  # whole row labels ("→ ▁Er")
    assert fig.layout.legend.y >= loss_top  # the legend above the loss chart, not on the map's labels
