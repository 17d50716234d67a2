"""explain.comparison: RNN vs Transformer on one input, the task's reference, BLEU by source length."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.helpers.paths import REPO
from visformer.checkpoint import load_checkpoint
from visformer.explain import comparison as cmp

SHIPPED = REPO / "checkpoints"


def test_task_reference_knows_copy_and_reverse_only() -> None:
    assert cmp.task_reference("reverse", "a b c") == ("c b a", [2, 1, 0])
    assert cmp.task_reference("copy", "a b") == ("a b", [0, 1])
    assert cmp.task_reference("sort", "b a") is None and cmp.task_reference(None, "a") is None


@pytest.mark.parametrize("name", ["reverse-rnn-bahdanau", "reverse", "reverse-rnn-none"])
def test_shipped_reverse_models_compared_on_one_input(name: str) -> None:
    result = cmp.run_system(load_checkpoint(SHIPPED / name), "m r z f q n o")
    assert result.text == "o n q f z r m" and result.correct is True
    assert result.held_out_exact_match is not None and result.logprob < 0
    if name == "reverse-rnn-none":  # no attention: no map, no alignment
        assert result.cross.shape[0] == 0 and math.isnan(result.alignment)
        return
    t, s = len(result.query_pieces), len(result.src_pieces)
    assert result.cross.shape[2:] == (t, s) and (
        name != "reverse-rnn-bahdanau" or result.cross.shape[:2] == (1, 1)
    )
    np.testing.assert_allclose(result.layer_map(0).sum(-1), 1.0, atol=1e-3)
    assert result.alignment > 0.8  # the anti-diagonal of reversal


def test_recorded_length_scores_become_one_bar_group_per_model() -> None:
    info = {
        "test": {
            "bleu": 30.0,
            "by_length": [{"words": "1-8", "n": 3, "bleu": 35.5}, {"words": ">17", "n": 1, "bleu": 12.0}],
        }
    }
    assert cmp.length_scores(info) == (("1-8", 35.5), (">17", 12.0))
    assert cmp.length_scores({"test": "a string from an older checkpoint"}) == ()
    assert cmp.recorded_test({}) == {}
    fig = cmp.length_figure({"rnn": cmp.length_scores(info), "transformer": ()}, "BLEU", "ko")
    assert [bar.name for bar in fig.data] == ["rnn"]  # a model without recorded buckets draws no bars
    assert list(fig.data[0].x) == ["1-8", ">17"] and fig.layout.xaxis.title.text == "원문 문장 길이 (단어 수)"
