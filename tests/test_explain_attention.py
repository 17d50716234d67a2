"""explain.attention: attention figures on small arrays: labels, masked cells, shapes, no hard-coded counts."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from visformer.explain import analysis as an
from visformer.explain import attention as fg
from visformer.explain import kinds, style


def _heatmaps(fig: go.Figure) -> list[go.Heatmap]:
    return [t for t in fig.data if isinstance(t, go.Heatmap)]


def test_attention_heatmap_labels_hover_and_duplicates() -> None:
    w = an.softmax(np.random.default_rng(0).standard_normal((3, 4)))
    fig = fg.attention_heatmap(w, ["<s>", "the", "the"], ["a", "b", "a", "</s>"], title="t")
    (heat,) = _heatmaps(fig)
    assert np.asarray(heat.z).shape == (3, 4)
    # repeated pieces stay separate columns; "<s>" is escaped, or plotly would read it as a strike-through tag
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "a", "&lt;/s&gt;"]
    assert list(fig.layout.yaxis.ticktext) == ["&lt;s&gt;", "the", "the"]
    assert fig.layout.yaxis.autorange == "reversed"
    assert tuple(np.asarray(heat.customdata)[2, 3]) == ("the", "&lt;/s&gt;")
    assert "weight" in heat.hovertemplate


def test_masked_cells_are_empty_and_hatched_not_zero() -> None:
    w = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    masked = kinds.future_mask(3, 3)
    fig = fg.attention_heatmap(w, list("abc"), list("abc"), masked=masked)
    z = np.asarray(_heatmaps(fig)[0].z, dtype=float)
    assert np.isnan(z[masked]).all() and not np.isnan(z[~masked]).any()
    patches = [t for t in fig.data if isinstance(t, go.Scatter)]
    assert len(patches) == 1 and patches[0].fillpattern.shape == "/"
    assert style.MASK_HOVER in patches[0].text
    xs = [x for x in patches[0].x if x is not None]
    assert min(xs) == 0.5 and max(xs) == 2.5  # covers columns 1..2 only
    # no mask, no patch
    assert not [
        t for t in fg.attention_heatmap(w, list("abc"), list("abc")).data if isinstance(t, go.Scatter)
    ]


def test_mask_rectangles_one_polygon_per_run() -> None:
    xs, _ = style._mask_rectangles(np.array([[False, True, True], [True, False, True]]))
    assert xs.count(None) == 3


def test_label_mismatch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="labels"):
        fg.attention_heatmap(np.zeros((2, 3)), ["a", "b"], ["x", "y"])


@pytest.mark.parametrize(("layers", "heads"), [(1, 1), (2, 3), (3, 8)])
def test_attention_grid_has_one_panel_per_layer_and_head(layers: int, heads: int) -> None:
    stack = np.random.default_rng(1).random((layers, heads, 3, 3))
    masked = kinds.future_mask(3, 3)
    fig = fg.attention_grid(stack, list("abc"), list("xyz"), masked=masked, highlight=(layers - 1, heads - 1))
    heats = _heatmaps(fig)
    assert len(heats) == layers * heads
    assert all(np.isnan(np.asarray(h.z, dtype=float)[masked]).all() for h in heats)
    titles = [a.text for a in fig.layout.annotations]
    assert (
        "head 1" in titles and (heads == 1 or str(heads) in titles) and f"layer {layers}" in titles
    )  # from 1
    assert f"layer 1, head {heads}" in heats[heads - 1].hovertemplate  # the hover names the head in full
    assert "head 0" not in titles and "layer 0" not in titles
    assert len(fig.layout.shapes) == 1  # the highlighted head
    assert "layer 1, head 1" in heats[0].hovertemplate


def test_metric_heatmap_and_step_figure_shapes() -> None:
    fig = fg.metric_heatmap(np.arange(6.0).reshape(2, 3), value_name="entropy")
    assert np.asarray(fig.data[0].z).shape == (2, 3)
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2]
    bars = fg.step_figure(np.array([0.2, 0.8]), ["Ein", "</s>"], title="step 1")
    assert list(bars.layout.yaxis.ticktext) == ["Ein", "&lt;/s&gt;"]  # tokens upright, one per row
    with pytest.raises(ValueError):
        fg.step_figure(np.array([1.0]), ["a", "b"])


def test_inside_head_figures() -> None:
    fig = fg.matrix_heatmap(np.array([[1.0, -2.0]]), ["q0"], ["d0", "d1"], value_name="Q")
    assert fig.data[0].zmin == -2.0 and fig.data[0].zmax == 2.0  # diverging scale centred on 0
    curve = an.saturation_curve([2, 8], trials=5)
    assert len(fg.saturation_figure(curve).data) == 2
    unscaled, scaled = an.saturation_example(16, n_keys=5)
    bars = fg.softmax_bars(unscaled, scaled, 16)
    assert len(bars.data) == 2 and len(bars.data[0].x) == 5


# ---------------------------------------------------------------------------------------------
# Attention figures: head average in the grid, long sentences, 1-based numbering, word grid, confidence
# ---------------------------------------------------------------------------------------------


def test_attention_grid_can_end_each_layer_with_the_mean_of_its_heads() -> None:
    stack = np.random.default_rng(2).random((2, 3, 4, 4))
    fig = fg.attention_grid(stack, list("abcd"), list("abcd"), average=True, highlight=(1, 2))
    heats = _heatmaps(fig)
    assert len(heats) == 2 * (3 + 1)
    titles = [a.text for a in fig.layout.annotations]
    assert "mean" in titles and "3" in titles and "layer 2" in titles
    assert np.allclose(np.asarray(heats[3].z, dtype=float), stack[0].mean(axis=0))  # layer 1's last panel
    assert np.allclose(np.asarray(heats[7].z, dtype=float), stack[1].mean(axis=0))
    assert "mean" in heats[7].hovertemplate


@pytest.mark.parametrize("script", ["latin", "hangul"])
def test_sixty_four_tokens_stay_legible(script: str) -> None:
    n = 64
    words = (
        [f"▁word{i}" for i in range(n)] if script == "latin" else [f"▁강아지가먹었다{i}" for i in range(n)]
    )
    w = an.softmax(np.random.default_rng(3).standard_normal((n, n)))
    fig = fg.attention_heatmap(w, words, words)
    assert fig.layout.xaxis.tickangle == -90  # upright column labels: they do not run into each other
    assert fig.layout.xaxis.tickfont.size <= 11 and fig.layout.yaxis.tickfont.size <= 11
    assert fig.layout.height >= 17 * n  # each row gets at least 17 px, more than the 10-11 px font
    bottom, top = fig.layout.xaxis, fig.layout.xaxis2  # every other key named at the top: twice the room
    assert list(bottom.tickvals) == list(range(0, n, 2)) and list(top.tickvals) == list(range(1, n, 2))
    assert top.side == "top" and top.matches == "x" and top.tickangle == -90
    named = dict(zip([*bottom.tickvals, *top.tickvals], [*bottom.ticktext, *top.ticktext], strict=True))
    assert sorted(named) == list(range(n))  # every token still named (cut ones in full on hover)
    assert named[3] == fg.short_label(words[3]) and all(len(t) <= fg.LABEL_CHARS for t in named.values())
    assert np.asarray(fig.data[0].customdata)[0, 1][1] == words[1]
    short = fg.attention_heatmap(w[:5, :5], words[:5], words[:5])
    assert short.layout.xaxis.tickangle == -45 and short.layout.xaxis.tickfont.size == 13


def test_head_dimensions_are_ticked_on_round_steps() -> None:
    dims = [str(j + 1) for j in range(64)]
    fig = fg.matrix_heatmap(np.ones((3, 64)), ["a", "b", "c"], dims, numeric_cols=True)
    assert list(fig.layout.xaxis.tickvals) == list(range(0, 64, 8))
    assert list(fig.layout.xaxis.ticktext) == ["1", "9", "17", "25", "33", "41", "49", "57"]
    assert fig.layout.xaxis.tickangle == 0
    assert fg.numeric_ticks(5) == [0, 1, 2, 3, 4]


def test_metric_and_word_grids_count_layers_and_heads_from_one() -> None:
    fig = fg.metric_heatmap(np.arange(6.0).reshape(2, 3), value_name="entropy")
    assert list(fig.layout.xaxis.ticktext) == ["1", "2", "3"] and list(fig.layout.yaxis.ticktext) == [
        "1",
        "2",
    ]
    assert "layer %{customdata[1]}, head %{customdata[0]}" in fig.data[0].hovertemplate
    assert np.asarray(fig.data[0].customdata)[1, 2].tolist() == [3, 2]  # (head, layer) of the last cell
    words = np.array([["▁animal", "</s>", "▁it"], ["▁street", "▁animal", "▁animal"]], dtype=object)
    weights = np.array([[0.6, 0.2, 0.4], [0.3, 0.7, 0.5]])
    grid = fg.top_word_grid(words, weights, title="t")
    assert list(grid.layout.xaxis.ticktext) == ["1", "2", "mean"]
    assert np.asarray(grid.data[0].text)[0, 1] == "&lt;/s&gt;"  # escaped, or plotly drops it as a tag
    assert "%{text}" in grid.data[0].texttemplate and np.allclose(np.asarray(grid.data[0].z), weights)
    with pytest.raises(ValueError):
        fg.top_word_grid(words, weights[:, :2])


def test_confidence_strip_colours_each_piece_by_its_probability() -> None:
    pieces = [f"▁w{i}" for i in range(12)]
    probs = np.linspace(0.05, 0.95, 12)
    fig = fg.confidence_strip(pieces, probs, per_row=5)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (3, 5)  # 12 pieces wrapped 5 to a line
    assert z.ravel()[:12].tolist() == [an.confidence_level(p) for p in probs]
    assert np.isnan(z.ravel()[12:]).all()
    assert "5%" in np.asarray(fig.data[0].text)[0, 0]
    with pytest.raises(ValueError):
        fg.confidence_strip(pieces, probs[:3])


def test_figure_text_follows_the_language() -> None:
    w = np.full((2, 2), 0.5)
    ko = fg.attention_heatmap(w, ["a", "b"], ["a", "b"], lang="ko")
    assert ko.layout.yaxis.title.text == "쿼리" and ko.layout.xaxis.title.text.startswith("키")
    grid = fg.attention_grid(w[None, None], ["a", "b"], ["a", "b"], average=True, lang="ko")
    assert {"헤드 1", "평균", "레이어 1"} <= {a.text for a in grid.layout.annotations}
    assert fg.softmax_bars(np.ones(3) / 3, np.ones(3) / 3, 8, lang="ko").layout.title.text.startswith(
        "무작위"
    )
