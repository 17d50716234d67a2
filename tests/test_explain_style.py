"""explain.style: chart configs, titles wrapped to fit a phone (whole and side by side)."""

from __future__ import annotations

import plotly.graph_objects as go

from visformer.explain import style


def test_chart_config_names_the_png() -> None:
    cfg = style.chart_config("pe-heatmap")
    assert cfg["toImageButtonOptions"] == {"format": "png", "filename": "pe-heatmap", "scale": 2}


def test_a_long_title_is_wrapped_to_fit_a_phone_and_reads_the_same() -> None:
    from visformer.explain.style import TITLE_COLUMNS, _columns, fit_title, wrapped

    for title in (
        "Encoder only: bidirectional self-attention, layer 2, mean of heads",
        "인코더만: 양방향 셀프 어텐션, 레이어 2, 헤드 평균",
    ):
        lines = wrapped(title).split("<br>")
        assert len(lines) > 1 and " ".join(lines) == title
        assert all(_columns(x) <= TITLE_COLUMNS for x in lines)
        assert all(line[-1] in ":," for line in lines[:-1])  # broken after a colon or comma, not mid-phrase
    assert wrapped("short") == "short" and wrapped("a<br><sup>" + "x " * 40 + "</sup>").count("<br>") == 1
    fig = go.Figure().update_layout(
        title_text="Encoder only: bidirectional self-attention, layer 2, mean of heads"
    )
    fig.update_layout(height=300, margin_t=60)
    fit_title(fig)
    assert fig.layout.margin.t == 108 and fig.layout.height == 348  # two more lines, the room for them
    assert fit_title(fig).layout.margin.t == 108  # wrapping twice changes nothing
    assert fig.layout.title.yanchor == "top"  # hung from the top: its second line never reaches the plot


def test_subplot_titles_side_by_side_are_wrapped_to_their_share_of_a_phone() -> None:
    from plotly.subplots import make_subplots

    from visformer.explain.style import fit_title

    titles = ("Measured on this machine right now", "Table 1: n²·d against n·d² operations")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles).update_layout(height=400, margin_t=60)
    fit_title(fig)
    shown = [a.text for a in fig.layout.annotations]
    assert [t.replace("<br>", " ") for t in shown] == list(titles) and all("<br>" in t for t in shown)
    assert fig.layout.margin.t > 60 and fig.layout.height > 400  # room for the second line
    alone = make_subplots(rows=2, cols=1, subplot_titles=titles)  # one above the other: a whole line each
    assert [a.text for a in fit_title(alone).layout.annotations] == list(titles)
