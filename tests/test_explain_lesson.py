"""The lesson's numbers on tiny models: every question's answer is what the model computes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.helpers.checkpoints import tiny_config
from visformer import i18n
from visformer.explain import analysis as an
from visformer.explain import lesson as ls
from visformer.model import Transformer
from visformer.training import noam_lr

SRC = [3, 7, 5, 9, 2]  # five source ids of the tiny vocabulary


def model_for(**overrides) -> Transformer:
    return Transformer(tiny_config(**overrides)).eval()


def texts(question: ls.Question) -> list[ls.Text]:
    return [question.prompt, question.reveal, *(o for o in question.options if isinstance(o, ls.Text))]


def assert_renders(question: ls.Question) -> None:
    """Every text of the question exists in both languages and formats with the values given."""
    assert 0 <= question.answer < len(question.options)
    assert len(set(map(repr, question.options))) == len(question.options), "options must differ"
    for text in texts(question):
        for lang in i18n.LANGS:
            assert i18n.t(text.key, lang, **text.fmt)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_step_by_step_encoder_layer_equals_the_layers_own_forward(norm_first: bool) -> None:
    model = model_for(n_encoder_layers=2, norm_first=norm_first)
    for layer in range(2):
        trace = ls.encoder_layer_trace(model, SRC, layer)
        x, mask = ls.encoder_input(model, SRC, layer)
        expected, _ = model.encoder.layers[layer](x, mask)
        np.testing.assert_allclose(trace.output, expected[0].detach().double().numpy(), atol=1e-5)
        assert trace.stages == (ls.PRE_LN_STAGES if norm_first else ls.POST_LN_STAGES)
        assert trace.stage("hidden").shape == (len(SRC), model.config.d_ff)  # the FFN's widening
        assert trace.norms.shape == (len(trace.stages), len(SRC))
    last = ls.encoder_layer_trace(model, SRC, 1)
    memory = model.encode(torch.tensor([SRC])).memory[0]
    if not norm_first:  # post-LN has no final encoder norm: the last layer's output is the memory
        np.testing.assert_allclose(last.output, memory.detach().double().numpy(), atol=1e-5)


def test_ffn_question_answers_with_the_larger_sub_layer_output() -> None:
    trace = ls.encoder_layer_trace(model_for(), SRC, 0)
    for piece in range(len(SRC)):
        q = ls.ffn_question(trace, piece, f"p{piece}")
        attn = np.linalg.norm(trace.stage("attention")[piece])
        ffn = np.linalg.norm(trace.stage("ffn")[piece])
        assert q.answer == (0 if attn >= ffn else 1)
        assert_renders(q)


def test_multi_head_view_splits_concatenates_and_projects_like_the_module() -> None:
    model = model_for()
    view = ls.multi_head_view(model, SRC, 0)
    x, mask = ls.encoder_input(model, SRC, 0)
    out, weights = model.encoder.layers[0].self_attn(x, x, mask, need_weights=True)
    np.testing.assert_allclose(view.output, out[0].detach().double().numpy(), atol=1e-5)
    np.testing.assert_allclose(view.weights, weights[0].detach().double().numpy(), atol=1e-6)
    h, dh = model.config.n_heads, model.config.d_model // model.config.n_heads
    assert view.heads.shape == (h, len(SRC), dh) and view.concat.shape == (len(SRC), h * dh)
    np.testing.assert_allclose(view.concat[:, dh : 2 * dh], view.heads[1])  # head 1 sits in the second block
    q = ls.multi_head_question(view, model.config.d_model, model.config.d_ff)
    assert q.options[q.answer] == f"{dh:,}"
    assert_renders(q)


def test_attention_question_answer_is_the_argmax_of_the_attention_row(tiny_model: Transformer) -> None:
    pieces = [f"t{i}" for i in SRC]
    for layer in range(2):
        for head in range(tiny_model.config.n_heads):
            inside = an.head_internals(tiny_model, SRC, [], "encoder", layer, head)
            for query in range(len(SRC)):
                q = ls.argmax_question(inside.weights, query, pieces, pieces, "lesson.self_attention.question",
                                       "lesson.self_attention.reveal", layer=layer, head=head)  # fmt: skip
                assert q.answer == int(np.argmax(inside.weights[query]))
                assert q.options[q.answer] == pieces[q.answer]
    assert_renders(q)


def test_repeated_pieces_become_distinct_options() -> None:
    assert ls.piece_options(["a", "b", "a"]) == ("a (0)", "b", "a (2)")


def test_most_decided_picks_the_lowest_entropy_row_but_not_the_last() -> None:
    weights = np.array([[0.5, 0.5, 0.0], [0.9, 0.05, 0.05], [1.0, 0.0, 0.0]])
    assert ls.most_decided(weights) == 1
    assert ls.most_decided(weights, skip_last=False) == 2


def test_without_the_scaling_the_softmax_is_sharper_for_large_d_k() -> None:
    model = model_for(d_model=256, n_heads=1, d_ff=64, src_vocab_size=20)
    inside = an.head_internals(model, SRC, [], "encoder", 0, 0)
    d_k = inside.q.shape[1]
    assert d_k == 256
    for query in range(len(SRC)):
        effect = ls.scaling_effect(inside.scores[query], d_k)
        np.testing.assert_allclose(effect.scaled, inside.weights[query], atol=1e-6)  # the model's own weights
        (m_un, m_sc), (e_un, e_sc) = effect.max_weights, effect.entropies
        assert m_un > m_sc and e_un < e_sc
        q = ls.scaling_question(effect, "x")
        assert q.options[q.answer] == ls.Text("lesson.scaled.option.sharper")
        assert_renders(q)


def test_scaling_effect_leaves_masked_keys_at_zero() -> None:
    effect = ls.scaling_effect(np.array([2.0, 1.0, -np.inf]), 4)
    assert effect.unscaled[2] == 0 and effect.scaled[2] == 0
    assert math.isclose(effect.unscaled.sum(), 1.0) and math.isclose(effect.scaled.sum(), 1.0)
    same = ls.scaling_question(ls.scaling_effect(np.zeros(3), 16), "x")  # equal scores: nothing changes
    assert same.options[same.answer] == ls.Text("lesson.scaled.option.same")


def test_embedding_question_answers_with_the_real_lookup_shape() -> None:
    model = model_for()
    view = ls.embedding_view(model, SRC)
    assert view.lookup_shape == (len(SRC), 16) and view.table_shape == (20, 16)
    np.testing.assert_allclose(view.scaled_norms, view.raw_norms * 4.0, rtol=1e-6)  # √16
    assert math.isclose(view.pe_norm, math.sqrt(8))
    expected = model.src_embed.token.weight[SRC].detach().double().numpy()  # rows SRC of the table
    np.testing.assert_allclose(view.vectors, expected)
    np.testing.assert_allclose(np.linalg.norm(view.vectors, axis=-1), view.raw_norms, rtol=1e-6)
    q = ls.embedding_question(view)
    assert q.options[q.answer] == f"({len(SRC)}, 16)"
    assert_renders(q)


def test_pe_question_answers_with_the_fastest_pair() -> None:
    change = ls.pe_step_change(10, 64)
    assert change.shape == (32,)
    assert np.argmax(change) == 0 and change[0] > change[-1]
    q = ls.pe_question(10, 64)
    assert q.answer == int(np.argmax(change[[0, 16, 31]]))  # the candidate pairs 0, d/4, d/2 - 1
    assert_renders(q)


def test_masked_question_measures_zero_weight_on_future_positions(tiny_model: Transformer) -> None:
    out = tiny_model(torch.tensor([SRC]), torch.tensor([[1, 4, 6, 8]]), need_weights=True)
    decoder = an.stack_maps(out.attention, "decoder")  # (L, h, T, T)
    assert ls.future_weight(decoder) == 0.0
    q = ls.masked_question(decoder, "<s>")
    assert q.options[q.answer] == ls.Text("lesson.masked.option.zero")
    leaky = np.full((1, 1, 4, 4), 0.25)  # an unmasked, uniform map
    assert ls.future_weight(leaky) == pytest.approx(0.75)
    assert ls.masked_question(leaky, "<s>").answer == 2
    assert_renders(q)


def test_produced_labels_name_the_piece_each_decoder_query_produces() -> None:
    assert ls.produced_labels(["Zwei", "Hunde", "</s>"]) == ["→ Zwei", "→ Hunde", "→ </s>"]


def test_the_smoothed_target_is_what_torch_trains_towards() -> None:
    torch.manual_seed(1)
    logits = torch.randn(1, 11)
    target = torch.from_numpy(ls.smoothed_target(3, 11, 0.1))
    expected = F.cross_entropy(logits, torch.tensor([3]), label_smoothing=0.1)
    mine = -(target * torch.log_softmax(logits.double(), -1)).sum()
    assert math.isclose(float(mine), float(expected), rel_tol=1e-5)
    assert math.isclose(float(target.sum()), 1.0)


@pytest.mark.parametrize(("d_model", "warmup"), [(128, 300), (512, 4000), (16, 7)])
def test_training_question_answers_with_the_schedules_peak(d_model: int, warmup: int) -> None:
    assert ls.noam_peak(d_model, warmup) == warmup
    q = ls.training_question(d_model, warmup)
    assert q.options[q.answer] == f"{warmup:,}"
    assert max(noam_lr(s, d_model, warmup) for s in range(1, 3 * warmup)) == noam_lr(warmup, d_model, warmup)
    assert_renders(q)
    scaled = ls.training_question(d_model, warmup, factor=0.5)  # the same lr the Noam figure marks
    assert scaled.reveal.fmt["lr"] == f"{noam_lr(warmup, d_model, warmup, 0.5):.2e}"


@pytest.mark.parametrize(
    ("greedy", "beam", "answer"),
    [(-3.0, -2.0, 0), (-2.0, -2.0, 1), (-2.0, -2.5, 2), (-2.02200, -2.02201, 1), (-2.0, -2.002, 2)],
)
def test_decoding_question_compares_the_two_log_probabilities(
    greedy: float, beam: float, answer: int
) -> None:
    q = ls.decoding_question(greedy, beam, 4)
    assert q.answer == answer  # equal to the 3 decimals shown counts as equal
    assert_renders(q)


def test_the_same_output_is_equally_probable_whatever_the_rounding() -> None:
    assert ls.decoding_question(-2.0221, -2.0231, 4, same_output=True).answer == 1


def test_complexity_rows_and_the_why_question_follow_table_1() -> None:
    rows = {r.layer: r for r in ls.complexity_rows(10, 128)}
    assert (
        rows["self_attention"].operations == 10 * 10 * 128 and rows["recurrent"].operations == 10 * 128 * 128
    )
    assert rows["recurrent"].sequential == 10 and rows["self_attention"].sequential == 1
    assert ls.why_question(10, 128).answer == 0  # n < d: self-attention is cheaper
    assert ls.why_question(200, 128).answer == 1
    assert ls.why_question(128, 128).answer == 2
    assert_renders(ls.why_question(10, 128))


def test_rnn_question_needs_one_step_per_piece() -> None:
    q = ls.rnn_question(7)
    assert q.options[q.answer] == "7"
    assert ls.rnn_question(1).options == ("1",)  # equal values merge
    assert_renders(q)


def test_figures_draw_the_given_numbers() -> None:
    fig = ls.seq2seq_figure(
        ["a", "b", "</s>"], ["x", "</s>"], np.array([[0.9, 0.1, 0.0], [0.2, 0.2, 0.6]]), ("L", "R")
    )
    texts_drawn = [t for tr in fig.data if tr.text is not None for t in tr.text]
    assert "&lt;/s&gt;" in texts_drawn and "c" in texts_drawn
    assert fig.layout.xaxis.domain == fig.layout.xaxis2.domain  # one panel above the other: titles never meet
    assert len({a.y for a in fig.layout.annotations}) == 2
    with pytest.raises(ValueError, match="does not match"):
        ls.seq2seq_figure(["a"], ["x"], np.ones((2, 2)), ("L", "R"))
    view = ls.embedding_view(model_for(), SRC)
    bars = ls.norms_bars([f"p{i}" for i in SRC], view, ("raw", "scaled", "pe"), "t")
    np.testing.assert_allclose(bars.data[1].y, view.scaled_norms)
    smooth = ls.smoothing_figure(0.1, 10, ("hard", "soft"), ("correct", "other"), "t")
    assert list(smooth.data[1].y) == pytest.approx([0.91, 0.01])


def test_the_operations_figure_crosses_at_n_equal_d_and_marks_the_students_n() -> None:
    fig = ls.operations_figure(10, 64, ("sa", "rnn"), ("n", "ops"), "t")
    sa, rnn, mark, crossover = fig.data
    assert list(crossover.x) == [64, 64]
    n = np.asarray(sa.x)
    np.testing.assert_array_equal(np.asarray(sa.y), n * n * 64)
    np.testing.assert_array_equal(np.asarray(rnn.y), n * 64 * 64)
    cheaper = np.asarray(sa.y) < np.asarray(rnn.y)
    assert cheaper[n < 64].all() and not cheaper[n >= 64].any()  # the crossover is n = d
    assert list(mark.x) == [10, 10] and list(mark.y) == [10 * 10 * 64, 10 * 64 * 64]


def test_q_k_v_are_one_figure_with_one_colour_bar_and_dimensions_from_one() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 8)) for _ in range(3))
    fig = ls.qkv_figure((q, k, v), ["▁a", "<s>", "▁c"], ("Q", "K", "V"), "dimension")
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 3 and {t.coloraxis for t in heatmaps} == {"coloraxis"}  # one shared colour bar
    np.testing.assert_allclose(np.asarray(heatmaps[2].z), v)
    assert list(heatmaps[0].x) == ls.dimension_labels(8) == [str(i) for i in range(1, 9)]
    assert list(fig.layout.yaxis.ticktext) == ["▁a", "&lt;s&gt;", "▁c"]  # <s> escaped, not a strike tag
    assert fig.layout.coloraxis.cmin == -fig.layout.coloraxis.cmax == -np.abs(np.stack([q, k, v])).max()
