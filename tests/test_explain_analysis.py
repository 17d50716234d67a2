"""Head statistics, positional-encoding facts and one head opened up (tiny configs)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from visformer.explain import analysis as an
from visformer.explain import kinds
from visformer.model import Transformer


def test_entropy_of_uniform_is_log_n_and_of_one_hot_is_zero() -> None:
    uniform = np.full((3, 5), 1 / 5)
    assert np.allclose(an.entropy(uniform), math.log(5))
    assert np.allclose(an.entropy(np.eye(4)), 0.0)


def test_pattern_scores_recognise_their_patterns() -> None:
    n = 5
    identity = np.eye(n)
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1.0
    assert an.diagonal_score(identity) == pytest.approx(1.0)
    assert an.previous_token_score(identity) == pytest.approx(0.0)
    assert an.previous_token_score(previous) == pytest.approx(1.0)
    assert an.diagonal_score(previous) == pytest.approx(1 / n)
    first = np.zeros((n, n))
    first[:, 0] = 1
    assert an.first_token_score(first) == pytest.approx(1.0)
    assert an.last_token_score(first) == pytest.approx(0.0)
    assert an.last_token_score(np.fliplr(first)) == pytest.approx(1.0)


def test_head_statistics_alignment_column_uses_argmax_hits() -> None:
    w = np.eye(3)[::-1][None, None]  # query j looks at key 2-j
    assert an.head_statistics(w, [2, 1, 0])["alignment"].iloc[0] == pytest.approx(1.0)
    assert an.head_statistics(w, [0, -1, 2])["alignment"].iloc[0] == pytest.approx(0.0)


def test_task_alignment_grid_shape_and_range() -> None:
    from visformer.tasks import make_examples, task_tokenizer

    tok = task_tokenizer("reverse")
    cfg = tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, n_decoder_layers=2)
    grid = an.task_alignment_grid(Transformer(cfg).eval(), tok, tok, make_examples("reverse", 4, seed=1))
    assert grid.shape == (2, cfg.n_heads)
    assert ((grid >= 0) & (grid <= 1)).all()


def test_head_statistics_has_one_row_per_head_and_grids_back() -> None:
    rng = np.random.default_rng(0)
    stack = an.softmax(rng.standard_normal((3, 2, 4, 6)))  # 3 layers, 2 heads
    stats = an.head_statistics(stack, alignment=[0, 1, 2, 3])
    assert len(stats) == 6
    assert {"entropy", "diagonal", "previous", "first", "last", "alignment"} <= set(stats.columns)
    grid = an.metric_grid(stats, "entropy")
    assert grid.shape == (3, 2)
    assert grid[2, 1] == pytest.approx(an.entropy(stack[2, 1]).mean())


def test_future_mask_marks_the_upper_triangle() -> None:
    mask = kinds.future_mask(3, 3)
    assert mask.tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    assert not kinds.future_mask(1, 4).any()  # the last query of a longer sequence sees everything


def test_attention_frame_is_long_and_labelled() -> None:
    stack = np.arange(2 * 1 * 2 * 3, dtype=float).reshape(2, 1, 2, 3)
    df = an.attention_frame(stack, ["a", "b"], ["x", "y", "x"], "cross")
    assert len(df) == 12
    row = df[(df.layer == 1) & (df.query_index == 1) & (df.key_index == 2)].iloc[0]
    assert row["weight"] == stack[1, 0, 1, 2] and row["query"] == "b" and row["key"] == "x"
    with pytest.raises(ValueError, match="labels"):
        an.attention_frame(stack, ["a"], ["x", "y", "x"], "cross")


def test_pe_facts() -> None:
    pe = an.pe_matrix(10, 8)
    assert pe.shape == (10, 8)
    assert np.allclose(np.linalg.norm(pe, axis=1), an.pe_norm(8))
    sin, cos, wavelength = an.pe_pair(50, 8, 0)
    assert wavelength == pytest.approx(2 * math.pi)
    assert np.allclose(sin**2 + cos**2, 1)
    with pytest.raises(ValueError, match="pair index"):
        an.pe_pair(10, 8, 4)
    with pytest.raises(ValueError, match="even"):
        an.pe_matrix(10, 7)


def test_binary_bits_count_up() -> None:
    bits = an.binary_bits(16)
    assert bits.shape == (16, 4)
    assert (bits @ (2 ** np.arange(4)) == np.arange(16)).all()


@pytest.mark.parametrize("k", [1, 5, -3])
def test_rotation_moves_pe_by_k(k: int) -> None:
    check = an.rotation_check(7, k, 16)
    assert check.matrices.shape == (8, 2, 2)
    assert check.max_error < 1e-6  # float32 rounding only
    assert np.allclose(check.rotated, check.target)


def test_pe_dot_product_depends_on_offset_only() -> None:
    ks, dots = an.pe_dot_products(10, 5, 32)
    assert ks[0] == -5 and ks[-1] == 5
    assert dots[ks.tolist().index(0)] == pytest.approx(16.0)  # ‖PE‖² = d/2
    ks2, dots2 = an.pe_dot_products(30, 5, 32)
    assert np.allclose(dots, dots2[-len(dots) :])


def test_embedding_norms_skip_padding() -> None:
    model = Transformer(tiny_config()).eval()
    norms = an.embedding_norms(model)
    assert norms.shape == (19,)
    assert (norms > 0).all()


@pytest.mark.parametrize("kind", kinds.KINDS)
@pytest.mark.parametrize("layer", [0, 1])
def test_head_internals_match_the_models_attention(kind: str, layer: int) -> None:
    for norm_first in (False, True):
        cfg = tiny_config(n_encoder_layers=2, n_decoder_layers=2, norm_first=norm_first)
        model = Transformer(cfg).eval()
        src, tgt = [5, 6, 7, 3], [2, 8, 9]
        out = model(torch.tensor([src]), torch.tensor([tgt]), need_weights=True)
        expected = an.stack_maps(out.attention, kind)[layer, 1]
        inside = an.head_internals(model, src, tgt, kind, layer, 1)
        assert np.allclose(inside.weights, expected, atol=1e-5)
        assert inside.q.shape == (len(tgt) if kind != "encoder" else len(src), cfg.d_head)
        assert np.allclose(inside.output, inside.weights @ inside.v)
        assert np.allclose(
            inside.scaled[~inside.masked], inside.scores[~inside.masked] / math.sqrt(cfg.d_head)
        )
        assert inside.masked.any() == (kind == "decoder")


def test_softmax_saturates_without_scaling() -> None:
    curve = an.saturation_curve([4, 256], trials=100)
    big = curve[curve.d_k == 256].set_index("variant")["max weight"]
    assert big["unscaled"] > 0.8 > big["scaled"]
    unscaled, scaled = an.saturation_example(512)
    assert unscaled.max() > scaled.max()
    assert unscaled.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# Which head to open first, where one word looks, how sure the model was
# ---------------------------------------------------------------------------------------------


def test_informative_head_is_the_sharpest_head_not_parked_on_a_fixed_key() -> None:
    n = 5
    uniform = np.full((n, n), 1 / n)
    parked = np.zeros((n, n))
    parked[:, -1] = 1.0  # every query on </s>: one-hot, but trivial
    shifted = np.roll(np.eye(n), 1, axis=1) * 0.9 + 0.1 / n  # sharp, on another piece each time
    stack = np.stack([[uniform, parked], [shifted, uniform]])  # (2 layers, 2 heads, q, k)
    pick = an.informative_head(stack, "encoder")
    assert (pick.layer, pick.head) == (1, 0) and not pick.all_trivial
    assert pick.sharpness == pytest.approx(an.normalized_entropy(shifted))
    assert an.parked_head(parked, "encoder") and not an.parked_head(shifted, "encoder")
    only_parked = an.informative_head(np.stack([[parked, np.eye(n)]]), "encoder")
    assert only_parked.all_trivial  # every head parked: still a pick, and it says so


def test_normalized_entropy_counts_only_visible_keys() -> None:
    causal = np.tril(np.ones((4, 4)))
    causal /= causal.sum(axis=1, keepdims=True)  # uniform over what each row may see
    assert an.normalized_entropy(causal, kinds.future_mask(4, 4)) == pytest.approx(1.0)
    assert an.normalized_entropy(np.eye(3)) == pytest.approx(0.0)
    assert an.informative_head(causal[None, None], "decoder").sharpness == pytest.approx(1.0)


def test_top_keys_skip_and_counts() -> None:
    rows = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])  # two heads, query 0 of three keys
    stack = np.zeros((1, 2, 2, 3))
    stack[0, :, 0] = rows
    top = an.top_keys(stack, 0)
    assert top.index.tolist() == [[0, 2]] and top.weight.tolist() == [[0.5, 0.8]]
    skipped = an.top_keys(stack, 0, skip=(0, 2))
    assert skipped.index.tolist() == [[1, 1]] and skipped.weight.tolist() == [[0.3, 0.1]]  # the real weights
    assert skipped.counts() == {1: 2}
    assert an.top_keys(stack, 0, skip=(0, 1, 2)).index.tolist() == [[0, 2]]  # nothing left: skip ignored
    with pytest.raises(ValueError):
        an.top_keys(stack, 5)
    averaged = an.with_head_average(stack)
    assert averaged.shape == (1, 3, 2, 3) and np.allclose(averaged[0, 2, 0], rows.mean(0))


def test_pronouns_and_the_output_position_that_reads_a_source_word() -> None:
    assert an.pronoun_position(["▁The", "▁animal", "▁because", "▁it", "▁was", "</s>"]) == 3
    assert an.pronoun_position(["▁Das", "▁Tier", "▁weil", "▁es", "</s>"]) == 3
    assert an.pronoun_position(["▁강아지가", "▁그것을", "▁먹었다"]) == 1
    assert an.pronoun_position(["▁a", "▁dog", "</s>"]) is None
    assert an.pronoun_position(["▁Italy"]) is None  # a whole piece, not a prefix
    cross = np.zeros((2, 2, 3, 4))  # (layers, heads, T, S)
    cross[:, :, 1, 2] = 0.9
    assert an.attending_position(cross, 2) == 1


def test_step_probabilities_are_the_model_probabilities_of_the_chosen_tokens() -> None:
    from visformer.decoding import translate
    from visformer.tasks import task_tokenizer

    tok = task_tokenizer("reverse")
    model = Transformer(tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)).eval()
    result = translate(model, tok, tok, "a b c", "greedy")
    probs = an.step_probabilities(result)
    assert probs.shape == (len(result.tgt_ids),) and ((probs > 0) & (probs <= 1)).all()
    src = torch.tensor([result.src_ids])  # (1, S)
    tgt = torch.tensor([result.decoder_input_ids])  # (1, T)
    with torch.no_grad():
        logits = model(src, tgt).logits.float()[0]  # (T, V) teacher-forced
    logits[:, [model.config.pad_id, tok.bos_id]] = -math.inf  # decoding never offers padding or <s>
    logp = torch.log_softmax(logits, dim=-1)
    expected = logp.gather(1, torch.tensor(result.tgt_ids)[:, None]).exp().squeeze(1).numpy()
    assert np.allclose(probs, expected, atol=1e-4)
    assert [an.confidence_level(p) for p in (0.05, 0.29, 0.3, 0.59, 0.6, 1.0)] == [0, 0, 1, 1, 2, 2]


def test_target_rows_are_named_by_the_token_they_produce() -> None:
    src, inputs, produced = ["▁a", "</s>"], ["<s>", "▁Zwei"], ["▁Zwei", "▁Hunde"]
    assert kinds.CROSS.axis_labels(src, inputs, produced) == (["→ ▁Zwei", "→ ▁Hunde"], src)
    assert kinds.DECODER.axis_labels(src, inputs, produced) == (["→ ▁Zwei", "→ ▁Hunde"], inputs)
    assert kinds.ENCODER.axis_labels(src, inputs, produced) == (src, src)
