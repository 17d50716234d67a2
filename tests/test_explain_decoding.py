"""Decoding page views, scores and figures on a tiny model and on hand-made traces."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from visformer.decoding import BeamNode, Step, translate
from visformer.explain import decoding as dfig
from visformer.model import Transformer
from visformer.tasks import task_tokenizer


@pytest.fixture(scope="module")
def setup():
    """A tiny untrained copy-task model and its tokenizer."""
    torch.manual_seed(0)
    tok = task_tokenizer("copy")
    model = Transformer(
        tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, max_len=16)
    ).eval()
    return model, tok


def _view(setup, strategy: str, **params) -> dfig.StrategyView:
    model, tok = setup
    result = translate(model, tok, tok, "c a t", strategy, **params)
    return dfig.strategy_view(result, tok, strategy, params)


# ---------------------------------------------------------------------------------------------
# Views
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["greedy", "beam", "temperature", "top-k", "top-p", "sample"])
def test_strategy_view_matches_the_translation(setup, strategy: str) -> None:
    view = _view(setup, strategy)
    assert view.length == len(view.pieces) == len(view.steps)
    assert view.text == setup[1].decode(setup[1].encode(view.text))
    for step, piece in zip(view.steps, view.pieces, strict=True):
        assert step.candidates[step.chosen] == piece  # the marked bar is the token that was written
        assert len(step.candidates) == len(step.probs) == len(step.filtered) == len(step.kept)
    assert math.isclose(view.logprob, view.steps[-1].logprob, rel_tol=1e-5)
    assert bool(view.tree) == (strategy == "beam")


def test_greedy_keeps_only_the_most_probable(setup) -> None:
    for step in _view(setup, "greedy").steps:
        assert step.kept == [i == step.chosen for i in range(len(step.kept))]
        assert step.chosen == int(np.argmax(step.probs))


def test_top_k_keeps_k_and_renormalises(setup) -> None:
    for step in _view(setup, "top-k", top_k=3, seed=1).steps:
        assert step.n_kept == 3
        assert sum(step.kept[:3]) == 3 and not any(step.kept[3:])
        assert math.isclose(sum(step.filtered[:3]), 1.0, rel_tol=1e-4)


def test_beam_tree_prefixes_follow_parents(setup) -> None:
    view = _view(setup, "beam", beam_size=3)
    by_key = {(n.step, n.beam): n for layer in view.tree for n in layer}
    for node in by_key.values():
        if node.step > 1:
            parent = by_key[(node.step - 1, node.parent)]
            assert node.prefix == f"{parent.prefix} {node.piece}"
        else:
            assert node.prefix == node.piece
    assert view.best_node in by_key


def test_step_view_appends_a_chosen_token_outside_the_top() -> None:
    step = Step(token=9, token_prob=0.01, logprob=-4.6, candidates=[5, 6], probs=[0.6, 0.3], filtered=[0.7, 0.3],
                kept=[True, True], n_kept=5)  # fmt: skip
    view = dfig.step_view(step, lambda i: f"t{i}")
    assert view.candidates == ["t5", "t6", "t9"]
    assert view.chosen == 2 and view.kept[2] and math.isnan(view.filtered[2])


def test_params_label() -> None:
    assert dfig.params_label("greedy", {}) == "greedy"
    assert dfig.params_label("top-p", {"top_p": 0.9, "seed": 3}) == "top-p (top_p=0.9, seed=3)"


# ---------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------


def test_bleu_and_diversity_scores() -> None:
    assert dfig.sentence_bleu("a man rides a bike", "a man rides a bike") == pytest.approx(100.0)
    assert dfig.sentence_bleu("x y z", "a man rides a bike") < 10
    assert dfig.distinct_n(["a b", "a b"], 1) == pytest.approx(0.5)
    assert dfig.distinct_n(["a b c", "d e f"], 2) == 1.0
    assert dfig.distinct_n(["a"], 2) == 0.0
    same = dfig.diversity(["the cat sat down"] * 4)
    varied = dfig.diversity(["the cat sat down", "a dog ran off", "birds fly south now", "snow is cold"])
    assert same.distinct == 1 and varied.distinct == 4
    assert same.self_bleu > 90 > varied.self_bleu
    assert math.isnan(dfig.self_bleu(["one"]))


def test_comparison_table_adds_bleu_only_with_a_reference(setup) -> None:
    views = [_view(setup, "greedy"), _view(setup, "beam")]
    assert "BLEU" not in dfig.comparison_table(views).columns
    table = dfig.comparison_table(views, "c a t")
    assert list(table["strategy"]) == ["greedy", "beam"]
    assert table.loc[0, "BLEU"] == pytest.approx(dfig.sentence_bleu(views[0].text, "c a t"), abs=0.05)
    assert table["BLEU"].between(0, 100).all()
    assert (table["length"] == [v.length for v in views]).all()


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def test_candidates_figure_highlights_kept_and_marks_the_choice() -> None:
    step = dfig.StepView(
        ["a", "b", "c"], [0.5, 0.3, 0.2], [0.625, 0.375, 0.0], [True, True, False], 1, 2, -1.2
    )
    fig = dfig.candidates_figure(step)
    model, after, dropped = fig.data
    assert list(model.y) == [0.5, 0.3, 0.2]
    assert list(after.y) == [0.625, 0.375, 0.0]
    assert list(after.marker.color) == [dfig.KEPT_COLOR, dfig.KEPT_COLOR, dfig.DROPPED_COLOR]
    outline = list(after.marker.line.color)
    assert outline[1] == dfig.CHOSEN_COLOR and outline[0] != dfig.CHOSEN_COLOR
    assert list(dropped.x) == [2]
    assert fig.layout.annotations[0].x == 1 and "b" in fig.layout.annotations[0].text
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "c"]


def _tree() -> list[list[dfig.TreeNode]]:
    """Step 1: beams 0, 1. Step 2: beam 0 extends beam 0 and finishes; beam 1 extends beam 0; beam 1 of step 1 is
    pruned. Step 3: extends step-2 beam 1."""
    raw = [
        [BeamNode(1, 0, 0, 5, -0.1, -0.1, False), BeamNode(1, 1, 0, 6, -0.5, -0.5, False)],
        [BeamNode(2, 0, 0, 3, -0.3, -0.3, True), BeamNode(2, 1, 0, 7, -0.6, -0.6, False)],
        [BeamNode(3, 0, 1, 3, -0.9, -0.9, True)],
    ]
    return dfig.tree_nodes(raw, lambda i: {3: "</s>"}.get(i, f"t{i}"))


def test_beam_tree_marks_finished_pruned_and_best() -> None:
    tree = _tree()
    fig = dfig.beam_tree_figure(tree, best=(2, 0))
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name["finished (&lt;/s&gt;)"].x) == [2, 3]
    assert list(by_name["pruned (no extension survived)"].x) == [1]  # step 1, beam 1 has no child
    assert list(by_name["pruned (no extension survived)"].y) == [1]
    best = by_name["best hypothesis"]
    assert [v for v in best.x if v is not None] == [0, 1, 1, 2]  # root → (1, 0) → (2, 0)
    assert tree[2][0].prefix == "t5 t7 </s>"
    with pytest.raises(ValueError, match="not beam search"):
        dfig.beam_tree_figure([])
    assert not fig.layout.xaxis.rangeslider.visible  # three steps: all on screen


def test_a_long_beam_tree_opens_on_its_first_steps_with_a_slider_along_the_rest() -> None:
    raw = [[BeamNode(s, 0, 0, 5, -0.1 * s, -0.1 * s, s == 39)] for s in range(1, 40)]  # a 39-token output
    fig = dfig.beam_tree_figure(dfig.tree_nodes(raw, lambda i: f"t{i}"), best=(39, 0))
    shown = fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
    assert shown <= dfig.TREE_WINDOW + 1.2 and fig.layout.xaxis.rangeslider.visible
    assert fig.layout.xaxis.rangeslider.range[1] >= 39  # the slider reaches the last step
    assert list(fig.layout.yaxis.ticktext) == ["1"]  # beams ranked from 1 on screen


def test_comparison_and_samples_figures(setup) -> None:
    views = [_view(setup, "greedy"), _view(setup, "top-k", top_k=5)]
    fig = dfig.comparison_figure(views)
    assert list(fig.data[0].x) == [v.logprob for v in views]
    assert list(fig.data[0].text) == [f"{v.length} tokens" for v in views]
    fig = dfig.samples_figure(["a b", "c", "a b", ""], [-1.0, -2.0, -1.0, -3.0])
    assert list(fig.data[0].x) == [2, 1, 1]
    assert list(fig.data[0].y)[0] == "a b" and "(empty)" in list(fig.data[0].y)
    assert "3 different outputs in 4 samples" in fig.layout.title.text


def test_allowed_tokens_counts_a_start_token_that_is_also_padding_once() -> None:
    """Marian starts from <pad>: decoding forbids one token there, two where <s> and <pad> differ."""
    from types import SimpleNamespace

    from visformer.decoding import forbidden_ids

    paper = SimpleNamespace(vocab_size=100, pad_id=0, bos_id=1)
    marian = SimpleNamespace(vocab_size=100, pad_id=5, bos_id=5)
    assert forbidden_ids(0, 1) == (0, 1) and forbidden_ids(5, 5) == (5,)
    assert dfig.allowed_tokens(paper) == 98
    assert dfig.allowed_tokens(marian) == 99
