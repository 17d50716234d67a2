"""Why self-attention, measured: one self-attention layer against one recurrent layer (Table 1).

The paper compares layer types by complexity per layer (self-attention O(n²·d), recurrent O(n·d²)),
sequential operations (O(1) vs O(n)) and maximum path length between positions (O(1) vs O(n)).
`benchmark()` times both layers on this machine as n grows at fixed d and as d grows at fixed n, and
counts sequential steps and path lengths on each layer's dependency graph; the figure builders are
pure (numbers in, `go.Figure` out). Self-attention is cheaper than recurrence when n < d.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch import nn

from .. import i18n
from ..model import MultiHeadAttention
from .style import layout

LAYERS = ("self-attention", "recurrent")
COLORS = {"self-attention": "#3b75af", "recurrent": "#e4572e"}
N_SWEEP = (8, 16, 32, 64, 128, 256, 512)
D_SWEEP = (16, 32, 64, 128, 256, 512)

# The paper's Table 1: (layer type, complexity per layer, sequential operations, maximum path length)
TABLE_1 = (
    ("Self-Attention", "O(n²·d)", "O(1)", "O(1)"),
    ("Recurrent", "O(n·d²)", "O(n)", "O(n)"),
    ("Convolutional", "O(k·n·d²)", "O(1)", "O(log_k(n))"),
    ("Self-Attention (restricted)", "O(r·n·d)", "O(1)", "O(n/r)"),
)


@dataclass(frozen=True)
class LayerCost:
    """One layer at one size: measured time, counted sequential steps and path length, the Table 1 term."""

    layer: str  # "self-attention" or "recurrent"
    n: int  # sequence length
    d: int  # representation size
    seconds: float  # median wall time of one forward pass (batch 1)
    sequential_steps: int  # longest chain of operations that must run one after another
    max_path_length: int  # edges on the shortest path from the first input to the last output
    operations: int  # n²·d (self-attention) or n·d² (recurrent): the per-layer complexity term


# ---------------------------------------------------------------------------------------------
# Dependency graphs: what the layer's outputs read, and the paths through it
# ---------------------------------------------------------------------------------------------


def dependency_graph(layer: str, n: int) -> dict[str, list[str]]:
    """Edges of one layer over n positions: inputs x_j, outputs y_i (a recurrent y_i is the state h_i).

    Self-attention: every y_i reads every x_j. Recurrent: h_i reads x_i and h_{i-1}.
    """
    _check_layer(layer)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    edges: dict[str, list[str]] = {f"x{j}": [] for j in range(n)} | {f"y{i}": [] for i in range(n)}
    for i in range(n):
        if layer == "self-attention":
            for j in range(n):
                edges[f"x{j}"].append(f"y{i}")
        else:
            edges[f"x{i}"].append(f"y{i}")
            if i:
                edges[f"y{i - 1}"].append(f"y{i}")
    return edges


def path_length(edges: dict[str, list[str]], start: str, end: str) -> int:
    """Edges on the shortest path from `start` to `end` (breadth-first search); ValueError if none."""
    seen, queue = {start: 0}, deque([start])
    while queue:
        node = queue.popleft()
        if node == end:
            return seen[node]
        for nxt in edges[node]:
            if nxt not in seen:
                seen[nxt] = seen[node] + 1
                queue.append(nxt)
    raise ValueError(f"no path from {start} to {end}")


def sequential_steps(edges: dict[str, list[str]]) -> int:
    """Longest chain of dependent operations: the graph's depth in edges (a DAG, so Kahn's order)."""
    indegree = {node: 0 for node in edges}
    for targets in edges.values():
        for t in targets:
            indegree[t] += 1
    depth = dict.fromkeys(edges, 0)
    ready = deque(node for node, k in indegree.items() if k == 0)
    while ready:
        node = ready.popleft()
        for t in edges[node]:
            depth[t] = max(depth[t], depth[node] + 1)
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    return max(depth.values())


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------


def _check_layer(layer: str) -> None:
    """Refuse unknown layer names."""
    if layer not in LAYERS:
        raise ValueError(f"unknown layer {layer!r}; choose one of {', '.join(LAYERS)}")


def make_layer(layer: str, d: int) -> nn.Module:
    """One self-attention layer (one head of size d) or one GRU layer with state size d, in eval mode."""
    _check_layer(layer)
    module = MultiHeadAttention(d, 1) if layer == "self-attention" else nn.GRU(d, d, batch_first=True)
    return module.eval()


@torch.no_grad()
def time_layer(
    layer: str, n: int, d: int, repeats: int = 3, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Median seconds of one forward pass over x (1, n, d), after one warm-up pass."""
    module = make_layer(layer, d)
    x = torch.randn(1, n, d)
    run = (lambda: module(x, x)) if layer == "self-attention" else (lambda: module(x))
    run()
    times = []
    for _ in range(max(1, repeats)):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def layer_cost(
    layer: str, n: int, d: int, repeats: int = 3, clock: Callable[[], float] = time.perf_counter
) -> LayerCost:
    """Time, sequential steps, path length and Table 1 term of one layer at (n, d)."""
    edges = dependency_graph(layer, n)
    operations = n * n * d if layer == "self-attention" else n * d * d
    return LayerCost(
        layer, n, d, time_layer(layer, n, d, repeats, clock), sequential_steps(edges),
        path_length(edges, "x0", f"y{n - 1}"), operations,
    )  # fmt: skip


@dataclass
class ComplexityBenchmark:
    """Both layers as n grows at fixed d, and as d grows at fixed n."""

    d: int  # fixed d of the n sweep
    n: int  # fixed n of the d sweep
    by_n: list[LayerCost]
    by_d: list[LayerCost]


def benchmark(
    ns: Sequence[int] = N_SWEEP,
    d: int = 64,
    ds: Sequence[int] = D_SWEEP,
    n: int = 64,
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> ComplexityBenchmark:
    """Measure both layers over the n sweep (at d) and the d sweep (at n); a few seconds at the defaults."""
    by_n = [layer_cost(layer, size, d, repeats, clock) for layer in LAYERS for size in ns]
    by_d = [layer_cost(layer, n, size, repeats, clock) for layer in LAYERS for size in ds]
    return ComplexityBenchmark(d, n, by_n, by_d)


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def _series(costs: Sequence[LayerCost], layer: str, sweep: str, value: str) -> tuple[list[int], list[float]]:
    """x (n or d) and a value of one layer's costs, sorted by x."""
    rows = sorted((getattr(c, sweep), getattr(c, value)) for c in costs if c.layer == layer)
    return [x for x, _ in rows], [y for _, y in rows]


def _text(key: str, lang: str, **fmt: object) -> str:
    """Figure text of this module in `lang` (keys models.cx.* in visformer/locales/models/)."""
    return i18n.t(f"models.cx.{key}", lang, **fmt)


def layer_name(layer: str, lang: str = "en") -> str:
    """A layer's name in `lang`: "self-attention" / "recurrent" in English."""
    _check_layer(layer)
    return _text(f"layer.{layer}", lang)


def _crossover_trace(x: float, ys: Sequence[float], show_legend: bool, lang: str) -> go.Scatter:
    """A dashed vertical line at x = n = d spanning ys (a trace: shapes misplace on log axes)."""
    return go.Scatter(x=[x, x], y=[min(ys), max(ys)], mode="lines+text", name=_text("crossover", lang),
                      text=["", f"n = d = {x}"], textposition="top right", line=dict(color="#888", dash="dash"),
                      showlegend=show_legend, hoverinfo="name")  # fmt: skip


def complexity_figure(bench: ComplexityBenchmark, sweep: str = "n", lang: str = "en") -> go.Figure:
    """Measured time (top) and Table 1 term (below) of one layer against n (fixed d) or d (fixed n).

    Log-log; the crossover n = d, where n²·d = n·d², is marked on both.
    """
    if sweep not in ("n", "d"):
        raise ValueError(f"sweep must be 'n' or 'd', got {sweep!r}")
    costs, fixed = (bench.by_n, bench.d) if sweep == "n" else (bench.by_d, bench.n)
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22,  # one above the other: side by side, a phone cut both
                        subplot_titles=(_text("measured", lang), _text("table_term", lang)))  # fmt: skip
    for col, value, scale in ((1, "seconds", 1e3), (2, "operations", 1)):
        values = []
        for layer in LAYERS:
            xs, ys = _series(costs, layer, sweep, value)
            values += [y * scale for y in ys]
            fig.add_trace(go.Scatter(x=xs, y=[y * scale for y in ys], mode="lines+markers", name=layer_name(layer, lang),
                                     line=dict(color=COLORS[layer], width=2.5), showlegend=col == 1),
                          row=col, col=1)  # fmt: skip
        fig.add_trace(_crossover_trace(fixed, values, col == 1, lang), row=col, col=1)
    fig.update_xaxes(type="log", title=_text(f"x_{sweep}", lang, fixed=fixed))
    fig.update_yaxes(type="log", title=_text("y_time", lang), row=1, col=1)
    fig.update_yaxes(type="log", title=_text("y_operations", lang), row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.15))
    return layout(fig, _text(f"title_{sweep}", lang), 720)


def steps_figure(costs: Sequence[LayerCost], lang: str = "en") -> go.Figure:
    """Sequential operations (top) and maximum path length (below) against n, both layers, log-log."""
    titles = (_text("sequential", lang), _text("path", lang))
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22, subplot_titles=titles)  # one above the other
    for col, value in ((1, "sequential_steps"), (2, "max_path_length")):
        for layer in LAYERS:
            xs, ys = _series(costs, layer, "n", value)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=layer_name(layer, lang), showlegend=col == 1,
                                     line=dict(color=COLORS[layer], width=2.5)), row=col, col=1)  # fmt: skip
    fig.update_xaxes(type="log", title=_text("x_length", lang))
    fig.update_yaxes(type="log", title=_text("y_sequential", lang), row=1, col=1)
    fig.update_yaxes(type="log", title=_text("y_path", lang), row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", y=-0.15))
    return layout(fig, _text("title_steps", lang), 680)


# ---------------------------------------------------------------------------------------------
# Numbers beside Table 1
# ---------------------------------------------------------------------------------------------


def measured_crossover(costs: Sequence[LayerCost], sweep: str = "n") -> int | None:
    """The smallest n (or d) from which self-attention measured slower than the recurrent layer; None if never."""
    times = {(c.layer, getattr(c, sweep)): c.seconds for c in costs}
    sizes = sorted({getattr(c, sweep) for c in costs})
    slower = [
        x for x in sizes if times.get(("self-attention", x), 0.0) > times.get(("recurrent", x), float("inf"))
    ]
    return slower[0] if slower else None


def measured_rows(bench: ComplexityBenchmark) -> list[dict[str, float | int | str]]:
    """One row per n of the n sweep: both layers' measured ms, their ratio, sequential steps, path lengths."""
    by = {(c.layer, c.n): c for c in bench.by_n}
    rows = []
    for n in sorted({c.n for c in bench.by_n}):
        att, rec = by[("self-attention", n)], by[("recurrent", n)]
        rows.append({
            "n": n, "d": bench.d, "attention_ms": att.seconds * 1e3, "recurrent_ms": rec.seconds * 1e3,
            "ratio": rec.seconds / att.seconds if att.seconds > 0 else float("nan"),
            "attention_steps": att.sequential_steps, "recurrent_steps": rec.sequential_steps,
            "attention_path": att.max_path_length, "recurrent_path": rec.max_path_length,
        })  # fmt: skip
    return rows
