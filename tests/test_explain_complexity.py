"""Why self-attention, measured: dependency-graph counts, benchmark shapes, figures (no wall-clock checks)."""

from __future__ import annotations

import itertools

import pytest

from visformer.explain.complexity import (
    LAYERS,
    TABLE_1,
    benchmark,
    complexity_figure,
    dependency_graph,
    layer_cost,
    path_length,
    sequential_steps,
    steps_figure,
)


def fake_clock():
    """A clock that advances by one per call, so timings are deterministic."""
    counter = itertools.count()
    return lambda: float(next(counter))


@pytest.mark.parametrize("n", [1, 2, 5, 17])
def test_path_length_and_sequential_steps_follow_table_1(n: int) -> None:
    attention, recurrent = dependency_graph("self-attention", n), dependency_graph("recurrent", n)
    assert path_length(attention, "x0", f"y{n - 1}") == 1  # O(1)
    assert sequential_steps(attention) == 1
    assert path_length(recurrent, "x0", f"y{n - 1}") == n  # x0 -> h0 -> ... -> h_{n-1}: O(n)
    assert sequential_steps(recurrent) == n


def test_no_path_backwards_in_a_recurrence() -> None:
    with pytest.raises(ValueError, match="no path"):
        path_length(dependency_graph("recurrent", 4), "x3", "y0")


def test_benchmark_shapes_and_monotone_counts() -> None:
    ns, ds = (4, 8, 16), (8, 16)
    bench = benchmark(ns=ns, d=8, ds=ds, n=4, repeats=1, clock=fake_clock())
    assert len(bench.by_n) == len(LAYERS) * len(ns) and len(bench.by_d) == len(LAYERS) * len(ds)
    assert {(c.layer, c.n, c.d) for c in bench.by_n} == {(layer, n, 8) for layer in LAYERS for n in ns}
    assert {(c.layer, c.n, c.d) for c in bench.by_d} == {(layer, 4, d) for layer in LAYERS for d in ds}
    assert all(c.seconds == 1.0 for c in bench.by_n + bench.by_d)  # the fake clock: one tick per pass
    recurrent = sorted((c for c in bench.by_n if c.layer == "recurrent"), key=lambda c: c.n)
    attention = sorted((c for c in bench.by_n if c.layer == "self-attention"), key=lambda c: c.n)
    assert [c.sequential_steps for c in recurrent] == list(ns)  # grows with n
    assert [c.max_path_length for c in recurrent] == list(ns)
    assert {c.sequential_steps for c in attention} == {c.max_path_length for c in attention} == {1}
    assert [c.operations for c in attention] == [n * n * 8 for n in ns]
    assert [c.operations for c in recurrent] == [n * 8 * 8 for n in ns]


def test_table_1_terms_cross_where_n_equals_d() -> None:
    for n, sign in ((8, -1), (16, 0), (32, 1)):
        att, rec = (layer_cost(layer, n, 16, 1, fake_clock()).operations for layer in LAYERS)
        assert (att > rec) - (att < rec) == sign
    assert TABLE_1[0][1:] == ("O(n²·d)", "O(1)", "O(1)") and TABLE_1[1][1:] == ("O(n·d²)", "O(n)", "O(n)")


def test_figures_have_labelled_log_axes_and_mark_the_crossover() -> None:
    bench = benchmark(ns=(4, 8), d=8, ds=(4, 8), n=4, repeats=1, clock=fake_clock())
    for sweep, fixed in (("n", 8), ("d", 4)):
        fig = complexity_figure(bench, sweep)
        for axis in (fig.layout.xaxis, fig.layout.yaxis, fig.layout.xaxis2, fig.layout.yaxis2):
            assert axis.type == "log" and axis.title.text
        names = [*LAYERS, "n = d (crossover)"]
        assert [t.name for t in fig.data] == names + names  # measured time, then the Table 1 term
        sizes = (4, 8)
        n_of, d_of = (sizes, (8, 8)) if sweep == "n" else ((4, 4), sizes)
        assert list(fig.data[3].y) == [n * n * d for n, d in zip(n_of, d_of, strict=True)]  # n²·d
        assert list(fig.data[4].y) == [n * d * d for n, d in zip(n_of, d_of, strict=True)]  # n·d²
        for line in (fig.data[2], fig.data[5]):  # the crossover, on both panels
            assert list(line.x) == [fixed, fixed] and f"n = d = {fixed}" in line.text[1]
    steps = steps_figure(bench.by_n)
    assert len(steps.data) == 4 and steps.layout.xaxis.title.text and steps.layout.yaxis2.title.text
    assert list(steps.data[1].y) == [4, 8] and list(steps.data[2].y) == [
        1,
        1,
    ]  # recurrent steps, attention path
    with pytest.raises(ValueError, match="sweep"):
        complexity_figure(bench, "h")


def test_bleu_by_source_length_scores_each_bucket_on_its_own() -> None:
    from visformer.evaluation import bleu_by_source_length

    short = "a man is walking his dog"
    long = "a man in a red jacket is walking his small dog along the river in the park today"
    sources = [short, long, short]
    refs = [
        "ein mann geht mit seinem hund",
        "ein mann in roter jacke geht heute mit seinem hund im park",
        "ein hund",
    ]
    hyps = [refs[0], "eine frau", refs[2]]  # short sentences right, the long one wrong
    buckets = bleu_by_source_length(sources, hyps, refs, edges=(10,))
    assert [(b.label, b.n) for b in buckets] == [("1-10", 2), (">10", 1)]
    assert buckets[0].bleu == pytest.approx(100.0) and buckets[1].bleu < 10
    with pytest.raises(ValueError, match="increasing"):
        bleu_by_source_length(sources, hyps, refs, edges=(10, 5))


def test_figures_speak_korean_with_every_axis_labelled() -> None:
    from visformer import i18n

    bench = benchmark(ns=(4, 8), d=8, ds=(4, 8), n=4, repeats=1, clock=fake_clock())
    for fig in (
        complexity_figure(bench, "n", "ko"),
        complexity_figure(bench, "d", "ko"),
        steps_figure(bench.by_n, "ko"),
    ):
        titles = [
            a.title.text for a in (fig.layout.xaxis, fig.layout.yaxis, fig.layout.xaxis2, fig.layout.yaxis2)
        ]
        assert all(titles) and fig.layout.title.text
        assert {t.name for t in fig.data} >= {i18n.t("models.cx.layer.self-attention", "ko")}
    assert complexity_figure(bench, "n", "ko").layout.xaxis.title.text == i18n.t(
        "models.cx.x_n", "ko", fixed=8
    )


def test_measured_rows_and_crossover_read_the_sweep() -> None:
    from visformer.explain.complexity import ComplexityBenchmark, LayerCost, measured_crossover, measured_rows

    def cost(layer: str, n: int, seconds: float) -> LayerCost:
        steps = 1 if layer == "self-attention" else n
        return LayerCost(layer, n, 16, seconds, steps, steps, 0)

    by_n = [cost("self-attention", 8, 1.0), cost("self-attention", 32, 4.0), cost("recurrent", 8, 2.0),
            cost("recurrent", 32, 3.0)]  # fmt: skip
    bench = ComplexityBenchmark(16, 8, by_n, [])
    rows = measured_rows(bench)
    assert [r["n"] for r in rows] == [8, 32] and rows[0]["ratio"] == 2.0 and rows[1]["recurrent_steps"] == 32
    assert rows[0]["attention_ms"] == 1000.0 and rows[1]["attention_path"] == 1
    assert measured_crossover(by_n) == 32  # self-attention slower from n = 32 on
    assert measured_crossover(by_n[:1] + by_n[2:3]) is None  # faster everywhere
