"""Lesson page: the lecture's twelve steps on the student's own sentence, in Korean or English.

Each step: a few sentences (visformer/locales), a live figure on the sentence, a predict-then-reveal
question whose answer visformer.lesson computed from the model, and a link to the full page.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer import i18n
from visformer.architectures import architecture
from visformer.checkpoint import Checkpoint
from visformer.classroom import catalogue
from visformer.classroom.inputs import escape_markdown
from visformer.config import TrainConfig
from visformer.explain import analysis as an
from visformer.explain import attention as att
from visformer.explain import decoding as dfig
from visformer.explain import kinds, style, views
from visformer.explain import lesson as ls
from visformer.explain import positional as pos
from visformer.explain import training as tfig

session.ensure_frame()

# Pages of the models around the Transformer (issue 16) that steps link to
RNN_PAGE, WHY_PAGE, LM_PAGE = (
    "pages/rnn_vs_transformer.py",
    "pages/why_self_attention.py",
    "pages/language_models.py",
)
KEYS = ["sentence", "lesson_step"]  # and lang, once chosen (pages/_state.sync_url)
BEAM_SIZE = 4
DK_OPTIONS = [2**i for i in range(11)]


@dataclass(frozen=True)
class Context:
    """What every step needs: language, checkpoint, the sentence and its greedy translation."""

    lang: str
    key: tuple[str, float]  # (checkpoint path, stamp): the cache key of the loaded model
    choice: catalogue.CheckpointChoice
    ck: Checkpoint
    sentence: str
    view: views.TranslationView

    def t(self, key: str, /, **fmt: Any) -> str:
        """Interface text in this lesson's language."""
        return i18n.t(key, self.lang, **fmt)

    def text(self, item: ls.Text | str) -> str:
        """A Text (key + values, user pieces escaped for markdown) or a literal label."""
        if isinstance(item, str):
            return escape_markdown(item)
        values = {k: escape_markdown(v) if isinstance(v, str) else v for k, v in item.fmt.items()}
        return self.t(item.key, **values)


# ---------------------------------------------------------------------------------------------
# Cached computations (keyed on checkpoint path + stamp and the sentence's ids)
# ---------------------------------------------------------------------------------------------


@st.cache_data(max_entries=32, show_spinner=False)
def embedding(path: str, stamp: float, src_ids: tuple[int, ...]) -> ls.EmbeddingView:
    """The lookup of the sentence's pieces."""
    return ls.embedding_view(loading.load(path, stamp).model, list(src_ids))


@st.cache_data(max_entries=32, show_spinner=False)
def multi_head(path: str, stamp: float, src_ids: tuple[int, ...], layer: int) -> ls.MultiHeadView:
    """One encoder layer's heads, concatenation and W_O."""
    return ls.multi_head_view(loading.load(path, stamp).model, list(src_ids), layer)


@st.cache_data(max_entries=32, show_spinner=False)
def layer_trace(path: str, stamp: float, src_ids: tuple[int, ...], layer: int) -> ls.LayerTrace:
    """One encoder layer, sub-layer by sub-layer."""
    return ls.encoder_layer_trace(loading.load(path, stamp).model, list(src_ids), layer)


@st.cache_data(max_entries=32, show_spinner="…")
def greedy_and_beam(path: str, stamp: float, sentence: str) -> tuple[dfig.StrategyView, dfig.StrategyView]:
    """The sentence decoded greedily and with beam search."""
    from visformer.decoding import translate

    ck = loading.load(path, stamp)
    views = []
    for name, params in (("greedy", {}), ("beam", {"beam_size": BEAM_SIZE})):
        result = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, sentence, name, **params)
        views.append(dfig.strategy_view(result, ck.tgt_tokenizer, name, params))
    return views[0], views[1]


@st.cache_data(max_entries=4, show_spinner=False)
def saturation_curve():
    """Largest softmax weight vs d_k on random vectors, scaled and unscaled."""
    return an.saturation_curve(DK_OPTIONS)


# ---------------------------------------------------------------------------------------------
# Shared pieces of a step: pickers, the question, the link
# ---------------------------------------------------------------------------------------------


def pick_layer_head(ctx: Context, n_layers: int, *, head: bool = True) -> tuple[int, int]:
    """Layer (and head) sliders shared by the steps that look at one head."""
    left, right = st.columns(2)
    layer = widgets.index_slider(ctx.t("lesson.layer"), n_layers, "lesson_layer", left, from_one=True)
    if not head:
        return layer, 0
    n_heads = ctx.ck.model_config.n_heads
    return layer, widgets.index_slider(ctx.t("lesson.head"), n_heads, "lesson_head", right, from_one=True)


def pick_piece(ctx: Context, label: str, labels: list[str], default: int, name: str) -> int:
    """A select box over pieces; it starts at `default` again whenever the pieces or the default change.

    Repeated pieces are numbered ("▁a (3)"): a select box tells its options apart by their shown text.
    """
    shown = ls.piece_options(labels)
    tag = zlib.crc32(repr((labels, default)).encode())
    return st.selectbox(label, range(len(shown)), index=default, format_func=shown.__getitem__,
                        key=f"lesson_{name}_{tag}")  # fmt: skip


def ask(ctx: Context, question: ls.Question, name: str) -> bool:
    """Predict (radio, nothing chosen), then reveal the computed answer with feedback; True once revealed.

    The reveal belongs to this question on this sentence: another sentence asks again. The step draws what
    the model computed for the question only when this returns True (predict first, then look).
    """
    state = st.session_state
    qid = f"lq_{name}_{zlib.crc32(repr((ctx.sentence, question.prompt, question.options)).encode())}"
    labels = [ctx.text(o) for o in question.options]
    with st.container(border=True):
        st.markdown(f"**{ctx.t('lesson.predict')}** · {ctx.text(question.prompt)}")
        guess = st.radio(ctx.t("lesson.predict"), range(len(labels)), index=None, format_func=labels.__getitem__,
                         key=qid, label_visibility="collapsed")  # fmt: skip
        st.button(ctx.t("lesson.reveal"), key=f"{qid}_reveal", on_click=state.__setitem__, args=(f"{qid}_shown", True),
                  icon=":material/visibility:")  # fmt: skip
        if state.get(f"{qid}_shown"):
            answer = labels[question.answer]
            if guess is None:
                st.info(ctx.t("lesson.no_guess", answer=answer))
            elif guess == question.answer:
                st.success(ctx.t("lesson.correct", answer=answer))
            else:
                st.error(ctx.t("lesson.wrong", answer=answer))
            st.markdown(ctx.text(question.reveal))
    return bool(state.get(f"{qid}_shown"))


def link(ctx: Context, page: str, name: str, **view: Any) -> None:
    """A link to the full page for this topic, with the same checkpoint and sentence in its URL."""
    values = {"checkpoint": ctx.choice.key, "sentence": ctx.sentence, "lang": ctx.lang, **view}
    params = schema.url_params(values, list(values))
    st.page_link(page, label=ctx.t("lesson.open_page", page=ctx.t(f"lesson.page.{name}")), query_params=params,
                 icon=":material/open_in_new:")  # fmt: skip


def axes(fig: go.Figure, ctx: Context, x: str = "", y: str = "") -> go.Figure:
    """Axis titles in the lesson's language (keys of lesson.axis.*); an empty name leaves the axis as it is."""
    if x:
        fig.update_xaxes(title_text=ctx.t(f"lesson.axis.{x}"))
    if y:
        fig.update_yaxes(title_text=ctx.t(f"lesson.axis.{y}"))
    return fig


def chart(fig: go.Figure, name: str) -> None:
    """A figure with its PNG button, keyed by name."""
    widgets.chart(fig, f"lesson-{name}")


# ---------------------------------------------------------------------------------------------
# The twelve steps
# ---------------------------------------------------------------------------------------------


def step_rnn(ctx: Context) -> None:
    """1. seq2seq's bottleneck and attention added to it."""
    view = ctx.view
    st.markdown(ctx.t("lesson.rnn.body"))
    if ask(ctx, ls.rnn_question(len(view.src_pieces)), "rnn"):
        cross = view.cross[-1].mean(0)  # (T, S), last layer, mean of heads
        titles = (ctx.t("lesson.rnn.fig_rnn"), ctx.t("lesson.rnn.fig_attention"))
        chart(ls.seq2seq_figure(view.src_pieces, view.output_pieces, cross, titles), "seq2seq")
        st.caption(ctx.t("lesson.rnn.caption"))
    link(ctx, RNN_PAGE, "rnn")
    link(ctx, "pages/attention.py", "attention", view="cross", tab="steps")


def step_embedding(ctx: Context) -> None:
    """2. Lookup table, shapes, √d_model scaling against PE."""
    cfg, view = ctx.ck.model_config, ctx.view
    ev = embedding(*ctx.key, tuple(view.src_ids))
    st.markdown(
        ctx.t("lesson.embedding.body", d=cfg.d_model, vocab=ev.table_shape[0], scale=f"{ev.scale:.2f}")
    )
    st.markdown(
        ctx.t("lesson.pieces", n=len(view.src_pieces)) + " " + widgets.pieces_markdown(view.src_pieces)
    )
    if ask(ctx, ls.embedding_question(ev), "embedding"):
        s, d = ev.lookup_shape
        lookup = att.matrix_heatmap(ev.vectors, list(ls.piece_options(view.src_pieces)), ls.dimension_labels(d),
                                    title=ctx.t("lesson.embedding.fig_lookup", n=s, d=d), value_name="E",
                                    numeric_cols=True)  # fmt: skip
        chart(axes(lookup, ctx, x="dimension"), "embedding-lookup")
        names = tuple(ctx.t(f"lesson.embedding.bar_{k}") for k in ("raw", "scaled", "pe"))
        chart(ls.norms_bars(view.src_pieces, ev, names, ctx.t("lesson.embedding.fig")), "embedding-norms")
        st.caption(ctx.t("lesson.embedding.caption", pe=f"{ev.pe_norm:.2f}"))
    link(ctx, "pages/positional_encoding.py", "positional_encoding")


def step_positional(ctx: Context) -> None:
    """3. The four conditions, the formula, the binary counter and the rotation."""
    d, n = ctx.ck.model_config.d_model, len(ctx.view.src_pieces)
    st.markdown(ctx.t("lesson.positional.body"))
    st.latex(
        r"\begin{aligned} PE_{(pos,\,2i)} &= \sin\frac{pos}{10000^{2i/d_{model}}} \\ "
        r"PE_{(pos,\,2i+1)} &= \cos\frac{pos}{10000^{2i/d_{model}}} \end{aligned}"  # two lines: fits a phone
    )
    if ask(ctx, ls.pe_question(n, d), "positional"):
        positional_figures(ctx, n, d)
    link(ctx, "pages/positional_encoding.py", "positional_encoding", pe_d=d)


def positional_figures(ctx: Context, n: int, d: int) -> None:
    """Step 3 after the reveal: PE of the sentence's positions, the binary counter and the rotation."""
    fig = pos.pe_heatmap(an.pe_matrix(n, d), lang=ctx.lang)
    chart(fig.update_layout(title_text=ctx.t("lesson.positional.fig", n=n, d=d)), "pe")
    st.markdown(ctx.t("lesson.positional.binary"))
    chart(pos.binary_figure(an.binary_bits(16), an.pe_matrix(16, min(d, 16)), lang=ctx.lang), "pe-binary")
    k = max(1, n - 1)
    check = an.rotation_check(0, k, d)
    st.markdown(ctx.t("lesson.positional.rotation", k=k, pos=0, err=f"{check.max_error:.1e}"))
    left, _ = st.columns([3, 1])  # wide enough for its title
    with left:
        pe0, sl = an.pe_matrix(1, d)[0], slice(0, 2)  # pair 0 of PE(0)
        rotation = pos.rotation_figure(pe0[sl], check.target[sl], check.rotated[sl], 0, k, lang=ctx.lang)
        chart(rotation.update_layout(title_text=ctx.t("lesson.positional.fig_rotation", k=k)), "pe-rotation")


def _to_korean(key: str) -> None:
    """Switch to a Korean→English model with the lecture's example as the sentence."""
    session.switch_checkpoint(key)
    st.session_state["sentence"] = ls.LECTURE_EXAMPLE


def self_attention_view(ctx: Context) -> views.TranslationView:
    """The sentence of steps 4-5: the lecture's example for a Korean source model when chosen, else the student's."""
    if loading.card_of(ctx.choice).src_lang != "ko":
        korean = catalogue.choice_for_language(loading.choices(), ("ko",))
        if korean is not None:
            text = ctx.t("lesson.example_switch", example=ls.LECTURE_EXAMPLE, model=loading.label(korean))
            st.button(text, key="lesson_to_korean", icon=":material/swap_horiz:", on_click=_to_korean,
                      args=(korean.key,))  # fmt: skip
        return ctx.view
    if st.toggle(
        ctx.t("lesson.example_toggle", example=ls.LECTURE_EXAMPLE), value=True, key="lesson_example"
    ):
        return loading.translation(*ctx.key, ls.LECTURE_EXAMPLE)
    return ctx.view


def one_head(ctx: Context) -> tuple[views.TranslationView, int, int, int, an.HeadInternals]:
    """Pickers and internals of one encoder head on the step's sentence: (view, layer, head, query, internals)."""
    view = self_attention_view(ctx)
    layer, head = pick_layer_head(ctx, ctx.ck.model_config.n_encoder_layers)
    inside = loading.internals(*ctx.key, tuple(view.src_ids), tuple(view.query_ids), "encoder", layer, head)
    query = pick_piece(ctx, ctx.t("lesson.query"), view.src_pieces, ls.most_decided(inside.weights), "query")
    return view, layer, head, query, inside


def step_self_attention(ctx: Context) -> None:
    """4. Q, K, V, QKᵀ, softmax and the weighted sum of V on one head."""
    st.markdown(ctx.t("lesson.self_attention.body"))
    view, layer, head, query, inside = one_head(ctx)
    pieces = view.src_pieces
    n, dh = inside.q.shape
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")
    st.caption(ctx.t("lesson.self_attention.shapes", n=n, dh=dh))
    labels = list(ls.piece_options(pieces))
    titles = tuple(ctx.t(f"lesson.self_attention.fig_{name}", n=n, dh=dh) for name in ("q", "k", "v"))
    qkv = ls.qkv_figure((inside.q, inside.k, inside.v), labels, titles, ctx.t("lesson.axis.dimension"))
    chart(qkv, "self-attention-qkv")
    question = ls.argmax_question(inside.weights, query, pieces, pieces, "lesson.self_attention.question",
                                  "lesson.self_attention.reveal", layer=layer + 1, head=head + 1)  # fmt: skip
    if ask(ctx, question, "self_attention"):
        self_attention_figures(ctx, view, layer, head, query, inside)
    link(ctx, "pages/attention.py", "attention", view="encoder", tab="inside", layer=layer, head=head)


def self_attention_figures(
    ctx: Context, view: views.TranslationView, layer: int, head: int, query: int, inside: an.HeadInternals
) -> None:
    """Step 4 after the reveal: QKᵀ, the softmax weights and the query's output as a weighted sum of V."""
    pieces = view.src_pieces
    labels, dh = list(ls.piece_options(pieces)), inside.q.shape[1]
    left, right = st.columns(2)
    with left:
        fig = att.matrix_heatmap(inside.scores, labels, labels, title=ctx.t("lesson.self_attention.fig_scores"),
                                 value_name="q·k")  # fmt: skip
        fig.update_xaxes(title_text=att.text("keys", ctx.lang))  # the attention figures' own axis names
        chart(fig.update_yaxes(title_text=att.text("queries", ctx.lang)), "self-attention-scores")
    with right:
        title = ctx.t("lesson.self_attention.fig_weights", layer=layer + 1, head=head + 1)
        fig = att.attention_heatmap(inside.weights, pieces, pieces, title=title, lang=ctx.lang)
        chart(fig, "self-attention")
    st.caption(ctx.t("lesson.self_attention.scores_caption", root=f"{dh**0.5:.2f}", dh=dh))
    row = inside.weights[query]
    left, right = st.columns([1, 2])
    formula = " + ".join(f"{w:.2f}·V({escape_markdown(p)})" for w, p in zip(row, pieces, strict=True))
    left.markdown(
        ctx.t("lesson.self_attention.row_formula", query=escape_markdown(pieces[query]), formula=formula)
    )
    with right:
        terms = [f"{w:.2f} × V({p})" for w, p in zip(row, pieces, strict=True)]
        fig = att.matrix_heatmap(ls.weighted_sum_rows(row, inside.v), [*terms, ctx.t("lesson.self_attention.sum_row")],
                                 ls.dimension_labels(dh), title=ctx.t("lesson.self_attention.fig_sum",
                                 query=style.escape(pieces[query])), value_name="w·V", numeric_cols=True)  # fmt: skip
        chart(axes(fig, ctx, x="dimension"), "weighted-sum")
        st.caption(ctx.t("lesson.self_attention.sum_caption", query=escape_markdown(pieces[query]), dh=dh))


def step_scaled(ctx: Context) -> None:
    """5. softmax(QKᵀ) against softmax(QKᵀ/√d_k) for one query of this sentence."""
    st.markdown(ctx.t("lesson.scaled.body"))
    view, layer, head, query, inside = one_head(ctx)
    d_k = inside.q.shape[1]
    effect = ls.scaling_effect(inside.scores[query], d_k)
    if ask(ctx, ls.scaling_question(effect, view.src_pieces[query]), "scaled"):
        scaling_figures(ctx, view, query, effect)
    link(ctx, "pages/attention.py", "attention", view="encoder", tab="inside", layer=layer, head=head)


def scaling_figures(ctx: Context, view: views.TranslationView, query: int, effect: ls.ScalingEffect) -> None:
    """Step 5 after the reveal: the query's row with and without the division, and the effect on random vectors."""
    d_k = effect.d_k
    fig = att.matrix_heatmap(
        np.vstack([effect.scaled, effect.unscaled]),
        [f"QKᵀ/√{d_k}", "QKᵀ"],  # short: long tick labels are cut
        view.src_pieces,
        title=ctx.t("lesson.scaled.fig", query=style.escape(view.src_pieces[query]), d_k=d_k),
        value_name=att.text("weight", ctx.lang),
        colorscale=style.ATTENTION_SCALE,
        zmin=0.0,
        zmax=1.0,
        show_values=True,
    )
    chart(fig, "scaling")
    st.caption(ctx.t("lesson.scaled.fig_caption", d_k=d_k))
    st.markdown(ctx.t("lesson.scaled.curve"))
    curve = att.saturation_figure(saturation_curve(), lang=ctx.lang)
    chart(curve.update_layout(title_text=ctx.t("lesson.scaled.curve_title")), "saturation")


def step_multi_head(ctx: Context) -> None:
    """6. Split into heads, concatenate, W_O."""
    cfg, view = ctx.ck.model_config, ctx.view
    pieces = view.src_pieces
    layer, _ = pick_layer_head(ctx, cfg.n_encoder_layers, head=False)
    mh = multi_head(*ctx.key, tuple(view.src_ids), layer)
    h, n, dh = mh.heads.shape
    st.markdown(ctx.t("lesson.multi_head.body", d=cfg.d_model, h=h))
    chart(
        att.attention_grid(view.encoder, pieces, pieces, title=ctx.t("lesson.multi_head.fig"), lang=ctx.lang),
        "heads",
    )
    query = pick_piece(ctx, ctx.t("lesson.query"), pieces, 0, "mh_query")
    where = ", ".join(
        f"{ctx.t('lesson.head')} {i + 1}: `{pieces[j]}`"
        for i, j in enumerate(mh.weights[:, query].argmax(-1))
    )
    st.markdown(ctx.t("lesson.multi_head.per_head", query=escape_markdown(pieces[query]), where=where))
    if ask(ctx, ls.multi_head_question(mh, cfg.d_model, cfg.d_ff), "multi_head"):
        st.caption(
            ctx.t("lesson.multi_head.shapes", n=n, dh=dh, hdh=mh.concat.shape[1], d=mh.output.shape[1])
        )
    link(ctx, "pages/attention.py", "attention", view="encoder", tab="all", layer=layer)


def step_ffn(ctx: Context) -> None:
    """7. FFN, residual connections and LayerNorm: one token's vector through one encoder layer."""
    cfg, view = ctx.ck.model_config, ctx.view
    variant = ctx.t("lesson.ffn.pre_ln" if cfg.norm_first else "lesson.ffn.post_ln")
    ratio = f"{cfg.d_ff / cfg.d_model:g}"
    st.markdown(ctx.t("lesson.ffn.body", d=cfg.d_model, ff=cfg.d_ff, ratio=ratio, variant=variant))
    layer, _ = pick_layer_head(ctx, cfg.n_encoder_layers, head=False)
    trace = layer_trace(*ctx.key, tuple(view.src_ids), layer)
    piece = pick_piece(ctx, ctx.t("lesson.query"), view.src_pieces, 0, "ffn_piece")
    if ask(ctx, ls.ffn_question(trace, piece, view.src_pieces[piece]), "ffn"):
        stages = [ctx.t(f"lesson.stage.{s}") for s in trace.stages]
        fig = att.matrix_heatmap(trace.norms.T, view.src_pieces, stages, title=ctx.t("lesson.ffn.fig", layer=layer + 1),
                                value_name="‖x‖", colorscale=style.ATTENTION_SCALE, zmin=0.0, show_values=True)  # fmt: skip
        chart(fig, "layer-trace")
        st.caption(ctx.t("lesson.ffn.caption", root=f"{cfg.d_model**0.5:.1f}"))
    link(ctx, "pages/attention.py", "attention", view="encoder", layer=layer)


def step_masked(ctx: Context) -> None:
    """8. The decoder's masked self-attention."""
    view = ctx.view
    st.markdown(ctx.t("lesson.masked.body"))
    layer, head = pick_layer_head(ctx, ctx.ck.model_config.n_decoder_layers)
    n = len(view.query_pieces)
    if ask(ctx, ls.masked_question(view.decoder, view.query_pieces[n // 2]), "masked"):
        title = ctx.t("lesson.masked.fig", layer=layer + 1, head=head + 1)
        rows = ls.produced_labels(view.output_pieces)
        fig = att.attention_heatmap(view.decoder[layer, head], rows, view.query_pieces,
                                    masked=kinds.future_mask(n, n), title=title, lang=ctx.lang)  # fmt: skip
        chart(fig, "masked")
        st.caption(ctx.t("lesson.masked.caption"))
    link(ctx, "pages/attention.py", "attention", view="decoder", layer=layer, head=head)
    link(ctx, LM_PAGE, "language_models")  # a decoder-only model (GPT) uses the same mask


def step_cross(ctx: Context) -> None:
    """9. Cross-attention, rows labelled by the piece each decoder query produces."""
    view = ctx.view
    st.markdown(ctx.t("lesson.cross.body"))
    layer, _ = pick_layer_head(ctx, ctx.ck.model_config.n_decoder_layers, head=False)
    weights = view.cross[layer].mean(0)  # (T, S)
    rows = ls.produced_labels(view.output_pieces)
    step = pick_piece(ctx, ctx.t("lesson.produced"), rows, ls.most_decided(weights), "produced")
    question = ls.argmax_question(weights, step, view.output_pieces, view.src_pieces, "lesson.cross.question",
                                  "lesson.cross.reveal", layer=layer + 1)  # fmt: skip
    if ask(ctx, question, "cross"):
        title = ctx.t("lesson.cross.fig", layer=layer + 1)
        chart(att.attention_heatmap(weights, rows, view.src_pieces, title=title, lang=ctx.lang), "cross")
    link(
        ctx,
        "pages/attention.py",
        "attention",
        view="cross",
        tab="steps",
        layer=layer,
        step=step,
    )


def step_training(ctx: Context) -> None:
    """10. Label smoothing and the Noam learning-rate schedule of this checkpoint."""
    cfg = ctx.ck.model_config
    tc = ctx.ck.train_config or TrainConfig()
    eps = tc.label_smoothing
    st.markdown(ctx.t("lesson.training.body", eps=f"{eps:g}", vocab=cfg.tgt_vocab_size, warmup=tc.warmup,
                      factor=f"{tc.lr_factor:g}"))  # fmt: skip
    left, right = st.columns(2)
    with left:
        names = (ctx.t("lesson.training.target_hard"), ctx.t("lesson.training.target_soft", eps=f"{eps:g}"))
        categories = (ctx.t("lesson.training.correct"), ctx.t("lesson.training.other"))
        fig = ls.smoothing_figure(
            eps, cfg.tgt_vocab_size, names, categories, ctx.t("lesson.training.fig_smoothing")
        )
        chart(fig, "label-smoothing")
    with right:
        revealed = ask(ctx, ls.training_question(cfg.d_model, tc.warmup, tc.lr_factor), "training")
        if revealed:
            noam = tfig.noam_figure(cfg.d_model, tc.warmup, tc.lr_factor, tc.steps, lang=ctx.lang)
            chart(noam.update_layout(title_text=ctx.t("lesson.training.noam_title")), "noam")
    link(ctx, "pages/train.py", "train")


def step_decoding(ctx: Context) -> None:
    """11. Greedy against beam search on this sentence."""
    st.markdown(ctx.t("lesson.decoding.body", k=BEAM_SIZE))
    greedy, beam = greedy_and_beam(*ctx.key, ctx.sentence)
    same = greedy.pieces == beam.pieces
    if ask(ctx, ls.decoding_question(greedy.logprob, beam.logprob, BEAM_SIZE, same_output=same), "decoding"):
        st.markdown(ctx.t("lesson.decoding.outputs", greedy=escape_markdown(greedy.text),
                          beam=escape_markdown(beam.text), k=BEAM_SIZE))  # fmt: skip
        comparison = dfig.comparison_figure([greedy, beam], lang=ctx.lang)
        chart(comparison.update_layout(title_text=ctx.t("lesson.decoding.fig")), "decoding")
    link(ctx, "pages/decoding.py", "decoding")


def step_why(ctx: Context) -> None:
    """12. Table 1 of the paper for this sentence and model."""
    n, d = len(ctx.view.src_pieces), ctx.ck.model_config.d_model
    st.markdown(ctx.t("lesson.why.body"))
    if ask(ctx, ls.why_question(n, d), "why"):
        columns = [ctx.t(f"lesson.why.col_{c}") for c in ("layer", "formula", "ops", "sequential", "path")]
        table = [
            dict(zip(columns, (ctx.t(f"lesson.why.row.{r.layer}"), r.formula, f"{r.operations:,}", r.sequential,
                               r.path), strict=True))
            for r in ls.complexity_rows(n, d)
        ]  # fmt: skip
        st.table(table, hide_index=True)  # wraps in a narrow column, never scrolls sideways
        names = (
            ctx.t("lesson.why.row.self_attention") + " n²·d",
            ctx.t("lesson.why.row.recurrent") + " n·d²",
        )
        axis = (ctx.t("lesson.axis.length"), ctx.t("lesson.axis.operations"))
        chart(ls.operations_figure(n, d, names, axis, ctx.t("lesson.why.fig", d=d)), "complexity")
    link(ctx, WHY_PAGE, "why")


STEP_VIEWS = {
    "rnn": step_rnn,
    "embedding": step_embedding,
    "positional": step_positional,
    "self_attention": step_self_attention,
    "scaled": step_scaled,
    "multi_head": step_multi_head,
    "ffn": step_ffn,
    "masked": step_masked,
    "cross": step_cross,
    "training": step_training,
    "decoding": step_decoding,
    "why": step_why,
}

# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


def _move(delta: int) -> None:
    """Previous / next step."""
    state = st.session_state
    state["lesson_step"] = schema.clamp(state.get("lesson_step", 1) + delta, 1, len(ls.STEPS))


def main() -> None:
    """Sentence, table of contents, then the chosen step, in the language the sidebar picked."""
    state = st.session_state
    lang = session.lang()  # chosen with the sidebar's toggle (app.py)
    st.title(i18n.t("lesson.title", lang))
    st.markdown(i18n.t("lesson.intro", lang))
    loaded = loading.current_checkpoint()
    if loaded is None:
        session.sync_url(KEYS)
        return
    choice, ck = loaded
    if "lesson" not in architecture(ck.model_config.architecture).pages:  # it takes a Transformer apart
        st.info(i18n.t("lesson.needs_transformer", lang, name=choice.key), icon=":material/info:")
        session.sync_url(KEYS)
        return
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    loading.offer_examples(choice, ck)
    widgets.sentence_input(i18n.t("lesson.sentence", lang))
    try:
        sentence = loading.fitted_sentence(ck, state["sentence"])
        view = loading.translation(*key, sentence)
    except ValueError as exc:
        st.error(session.error(exc))
        session.sync_url(KEYS)
        return
    st.markdown(f"{i18n.t('lesson.translation', lang)} **{escape_markdown(view.text)}**")
    ctx = Context(lang, key, choice, ck, sentence, view)

    n = len(ls.STEPS)
    state["lesson_step"] = schema.clamp(state.get("lesson_step", 1), 1, n)
    toc, body = st.columns([1, 3], gap="large")
    step = toc.radio(ctx.t("lesson.steps"), range(1, n + 1), key="lesson_step", persist_state=session.PERSIST,
                     format_func=lambda i: f"{i}. {ctx.t(f'lesson.{ls.STEPS[i - 1]}.title')}")  # fmt: skip
    name = ls.STEPS[step - 1]
    with body:
        st.caption(ctx.t("lesson.step_of", i=step, n=n))
        st.header(ctx.t(f"lesson.{name}.title"), anchor=False)
        STEP_VIEWS[name](ctx)
        back, forward = st.columns(2)
        back.button(ctx.t("lesson.prev"), on_click=_move, args=(-1,), disabled=step == 1,
                    icon=":material/arrow_back:", width="stretch")  # fmt: skip
        forward.button(ctx.t("lesson.next"), on_click=_move, args=(1,), disabled=step == n,
                       icon=":material/arrow_forward:", width="stretch")  # fmt: skip
    session.sync_url(KEYS)


main()
