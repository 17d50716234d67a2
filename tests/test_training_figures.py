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
    assert names == ["training loss", "validation loss", "learning rate"]
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
    assert fig.data[-1].y[0] == pytest.approx(1.5)  # interpolated between logged points
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
    assert [a.text for a in fig.layout.annotations] == ["step 1", "step 5", "step 10"]
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
    assert rows == ["<s>", "d"] and cols == ["d", "</s>"]
    assert np.allclose(weights, cross[1, 1, :2, :2].numpy())
    mean, _, _ = tfig.snapshot_map(snap, 0, "cross", 0, None, tok, tok, max_len=16)
    assert np.allclose(mean, cross[0].mean(0).numpy(), atol=1e-6)
    enc, rows, cols = tfig.snapshot_map(snap, 0, "encoder", 0, 0, tok, tok, max_len=16)
    assert rows == cols == ["a", "b", "c", "</s>"] and enc.shape == (4, 4)
