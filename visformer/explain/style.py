"""The figures' shared look: colours, layout, token axes, escaped labels and the one masked heatmap.

Token axes are numeric (0..n-1) with the pieces as tick text, so repeated pieces stay separate cells.
Masked cells (the decoder's future positions) are left empty and covered by a grey hatched patch.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

ATTENTION_SCALE = "Blues"
DIVERGING_SCALE = "RdBu"
MASK_COLOR = "#b0b0b0"
MASK_BACKGROUND = "#efefef"
MASK_HOVER = "masked: a future position the decoder may not see"
# Latin first, then families with Hangul (Linux, macOS, Windows): the browser takes each glyph from the first
# family that has it, on the page and in the PNG the toolbar's camera button draws from the same SVG.
FONT = dict(
    family="Inter, 'Source Sans Pro', 'Noto Sans KR', 'Noto Sans CJK KR', 'Nanum Gothic', 'NanumGothic', "
    "'Apple SD Gothic Neo', 'Malgun Gothic', sans-serif",
    size=13,
)


def chart_config(filename: str) -> dict:
    """plotly config for `st.plotly_chart`: PNG download button named `filename`, no plotly logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }


# Every figure starts from plotly_white: set once here, which is 4x cheaper than passing template= to each figure
# (13.2 -> 3.3 ms per figure, bench/RESULTS.md "Class load").
pio.templates.default = "plotly_white"
# Plotly serialises figures (Streamlit calls plotly.io.to_json) with orjson when it is installed: for the hover
# labels of the all-heads mosaic (57,000 strings, opus-mt size) its cleaning pass took 145-246 ms where the
# standard json module took 34-62 ms (2026-11-26); for numeric heatmaps the two differ by a few ms.
pio.json.config.default_engine = "json"


TITLE_COLUMNS = 40  # one line of a chart title on a phone (about 340 px); a Hangul syllable counts two
BREAKS = ":,;·"  # a long title is best broken at the space after one of these


def _columns(text: str) -> int:
    """How wide a text is in Latin letters: Hangul and other wide characters count two."""
    return sum(2 if ord(ch) >= 0x1100 else 1 for ch in text)


def wrapped(title: str, columns: int = TITLE_COLUMNS) -> str:
    """A long title on several lines (<br>), broken after ':', ',', ';' or '·' where it can, each line ≤ columns.

    Replacing every '<br>' by a space gives the title back. Lines that hold markup (<sup> …) stay as they are.
    """
    lines = []
    for line in title.split("<br>"):
        while "<" not in line and _columns(line) > columns:
            fits = [i for i in range(1, len(line)) if line[i] == " " and _columns(line[:i]) <= columns]
            if not fits:
                break
            preferred = [i for i in fits if line[i - 1] in BREAKS and i >= len(line[: max(fits)]) // 3]
            cut = max(preferred or fits)
            lines.append(line[:cut])
            line = line[cut + 1 :]
        lines.append(line)
    return "<br>".join(lines)


TITLE_AT_TOP = dict(
    yref="container", y=1.0, yanchor="top", pad=dict(t=14), font=dict(size=16)
)  # hung from the top, not centred


def _fit_subplot_titles(fig: go.Figure) -> int:
    """Wrap subplot titles side by side to their share of a phone's width; the lines added to the tallest."""
    heads = [a for a in fig.layout.annotations if a.yref == "paper" and a.yanchor == "bottom" and a.text]
    beside = len({round(a.x or 0, 3) for a in heads})
    if beside < 2:
        return 0
    added = 0
    for a in heads:
        text = wrapped(a.text, TITLE_COLUMNS // beside + 2)
        added = max(added, text.count("<br>") - a.text.count("<br>"))
        a.text = text
    return added


def fit_title(fig: go.Figure) -> go.Figure:
    """Wrap the title and side-by-side subplot titles to fit a phone (wrapped()), growing the top margin and height."""
    lines = _fit_subplot_titles(fig)
    if lines:
        top = fig.layout.margin.t if fig.layout.margin.t is not None else 60
        fig.update_layout(margin_t=top + 18 * lines, height=(fig.layout.height or 450) + 18 * lines)
    title = fig.layout.title.text or ""
    added = wrapped(title).count("<br>") - title.count("<br>")
    if added:
        extra = 24 * added
        top = fig.layout.margin.t if fig.layout.margin.t is not None else 60
        fig.update_layout(
            title_text=wrapped(title), margin_t=top + extra, height=(fig.layout.height or 450) + extra
        )
        fig.update_layout(title=TITLE_AT_TOP)  # its lines grow down into the margin, not onto subplot titles
    return fig


def layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Shared look: title (wrapped to fit a phone), height, margins, font (the white background is the default template)."""
    fig.update_layout(
        title=dict(text=title, x=0.0, xanchor="left", **TITLE_AT_TOP),
        height=height,
        margin=dict(l=10, r=10, t=60 if title else 30, b=10),
        font=FONT,
    )
    return fit_title(fig)


def escape(label: str) -> str:
    """A token as plotly text: '<s>' would otherwise be read as a strike-through tag and vanish."""
    return str(label).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escaped(labels: list[str]) -> list[str]:
    """escape() of every label."""
    return [escape(label) for label in labels]


def check_labels(matrix: np.ndarray, row_labels: list[str], col_labels: list[str]) -> None:
    """Refuse labels that do not match the matrix they name."""
    if matrix.ndim != 2 or matrix.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"matrix of shape {matrix.shape} needs {matrix.shape[0]} row and "
            f"{matrix.shape[-1]} column labels, got {len(row_labels)} and {len(col_labels)}"
        )


def cell_labels(row_labels: list[str], col_labels: list[str]) -> np.ndarray:
    """(rows, cols, 2) array of (row label, column label) strings for hover text."""
    shape = (len(row_labels), len(col_labels))
    rows = np.broadcast_to(np.asarray(escaped(row_labels), dtype=object)[:, None], shape)
    cols = np.broadcast_to(np.asarray(escaped(col_labels), dtype=object)[None, :], shape)
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


def token_axes(fig: go.Figure, row_labels: list[str], col_labels: list[str], **where) -> None:
    """Numeric axes labelled with the tokens; first query at the top."""
    fig.update_xaxes(
        tickvals=list(range(len(col_labels))),
        ticktext=escaped(col_labels),
        tickangle=-45,
        showgrid=False,
        **where,
    )
    fig.update_yaxes(
        tickvals=list(range(len(row_labels))),
        ticktext=escaped(row_labels),
        autorange="reversed",
        showgrid=False,
        **where,
    )


def masked_heatmap(
    weights: np.ndarray,
    masked: np.ndarray | None,
    cells: np.ndarray,
    *,
    hatch: bool = True,
    **heatmap,
) -> list[go.Heatmap | go.Scatter]:
    """The one masked heatmap: masked and non-finite cells left empty, then (hatch) a grey hatched patch over the masked ones.

    Returns the traces to add to a figure (the heatmap first); `heatmap` holds the go.Heatmap settings.
    """
    z = np.asarray(weights, dtype=float).copy()
    if masked is not None:
        z[np.asarray(masked, dtype=bool)] = np.nan
    z[~np.isfinite(z)] = np.nan
    traces: list[go.Heatmap | go.Scatter] = [go.Heatmap(z=z, customdata=cells, hoverongaps=False, **heatmap)]
    patch = mask_trace(masked) if hatch and masked is not None else None
    return traces if patch is None else [*traces, patch]


def add_traces(fig: go.Figure, traces: list, **where) -> None:
    """Add traces to a figure (or one subplot of it: row=, col=)."""
    for trace in traces:
        fig.add_trace(trace, **where)
