"""The Attention page's words and its two deepest sections: inside one head, and where one word looks."""

from __future__ import annotations

import numpy as np
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.explain import analysis as an
from visformer.explain import attention as fg
from visformer.explain import kinds
from visformer.explain import views as sup
from visformer.explain.style import escape

SIDE_BY_SIDE = 10  # Inside one head: up to this many tokens its three steps stand side by side, else stacked
DK_OPTIONS = [2**i for i in range(11)]  # 1 .. 1024


def tr(key: str, /, **fmt: object) -> str:
    """This page's text `attention.KEY` in the session's language."""
    return session.tr(f"attention.{key}", **fmt)


def kind_name(kind: str, short: bool = False) -> str:
    """An attention kind's title (or short name) in the session's language."""
    return tr(f"kind.{kind}.{'short' if short else 'title'}")


def where(layer: int, head: int | None = None) -> str:
    """'layer 2 · head 3', counted from 1 (code and URLs count from 0)."""
    text = tr("layer_n", n=layer + 1)
    return text if head is None else f"{text} · {tr('head_n', n=head + 1)}"


def axis_labels(view: sup.TranslationView, kind: str) -> tuple[list[str], list[str]]:
    """(row, column) labels: decoder rows are named by the token they produce ('→ ▁Hunde')."""
    return kinds.KIND[kind].axis_labels(view.src_pieces, view.query_pieces, view.output_pieces)


@st.cache_data(max_entries=4, show_spinner=False)
def saturation_curve():
    """Largest softmax weight vs d_k, scaled and unscaled."""
    return an.saturation_curve(DK_OPTIONS)


def inside_section(key: tuple, view: sup.TranslationView, kind: str, layer: int, head: int) -> None:
    """softmax(QKᵀ/√d_k)V for the chosen head, step by step, and why the √d_k is there."""
    inside = loading.internals(key[0], key[1], tuple(view.src_ids), tuple(view.query_ids), kind, layer, head)
    queries, keys = axis_labels(view, kind)
    d_k = inside.q.shape[1]
    dims = [str(j + 1) for j in range(d_k)]
    lang = session.lang()
    dim_title = tr("inside.dimension")
    st.markdown(tr("inside.intro", where=where(layer, head), kind=kind_name(kind), d_k=d_k))
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")
    long = max(len(queries), len(keys)) > SIDE_BY_SIDE  # in a third of the page, 15 key labels overlapped
    columns = (
        [st.container()] * 3 if long else st.columns(3)
    )  # long sentences: full width, one below the other
    for column, (name, matrix, rows) in zip(
        columns,
        (
            (tr("inside.q"), inside.q, queries),
            (tr("inside.k"), inside.k, keys),
            (tr("inside.v"), inside.v, keys),
        ),
        strict=True,
    ):
        with column:
            fig = fg.matrix_heatmap(
                matrix, rows, dims, title=name, value_name=name[0], x_title=dim_title, numeric_cols=True
            )
            widgets.chart(fig, f"inside-{name[0]}")
    masked = inside.masked if inside.masked.any() else None
    columns = [st.container()] * 3 if long else st.columns(3)
    steps = (
        ("QKᵀ", inside.scores, "score"),
        (f"QKᵀ / √{d_k}", inside.scaled, "scaled"),
        (tr("inside.softmax"), inside.weights, "weight"),
    )
    for column, (name, matrix, value_name) in zip(columns, steps, strict=True):
        with column:
            if value_name == "weight":
                fig = fg.attention_heatmap(matrix, queries, keys, masked=masked, title=name, lang=lang)
            else:
                fig = fg.matrix_heatmap(
                    matrix, queries, keys, masked=masked, title=name, value_name=value_name,
                    x_title=fg.text("keys", lang), y_title=fg.text("queries", lang),
                )  # fmt: skip
            widgets.chart(fig, f"inside-{value_name}")
    left, right = st.columns([1, 2])
    fig = fg.matrix_heatmap(
        inside.output, queries, dims, title=tr("inside.output"), value_name="out", x_title=dim_title,
        numeric_cols=True,
    )  # fmt: skip
    with left:
        widgets.chart(fig, "inside-output")
    right.markdown(tr("inside.output_text"))

    st.markdown("##### " + tr("inside.why"))
    st.markdown(tr("inside.why_text"))
    if st.session_state.get("dk") not in DK_OPTIONS:
        st.session_state["dk"] = 64
    dk = st.select_slider("d_k", DK_OPTIONS, key="dk", persist_state=session.PERSIST)
    unscaled, scaled = an.saturation_example(dk)
    left, right = st.columns(2)
    with left:
        widgets.chart(fg.softmax_bars(unscaled, scaled, dk, lang=lang), "softmax-saturation-example")
    with right:
        widgets.chart(fg.saturation_figure(saturation_curve(), lang=lang), "softmax-saturation-curve")


def _new_word() -> None:
    """A new source word: its output counterpart is chosen afresh."""
    st.session_state["tword"] = None


def word_section(view: sup.TranslationView) -> None:
    """Pick a source word (e.g. 'it'): where it looks in every encoder head, and where its translation looks."""
    state = st.session_state
    src, out = view.src_pieces, view.output_pieces
    st.markdown(tr("word.intro"))
    if (
        state.get("_attn_word_for", view.source) != view.source
    ):  # a new sentence: start again from its pronoun
        state["word"] = state["tword"] = None
    state["_attn_word_for"] = view.source
    if not isinstance(state.get("word"), int) or not 0 <= state["word"] < len(src):
        found = an.pronoun_position(src)
        state["word"] = found if found is not None else max(0, len(src) // 2 - 1)
    left, mid, right = st.columns([2, 2, 1], vertical_alignment="bottom")
    word = left.selectbox(
        tr("word.source"), list(range(len(src))), key="word", on_change=_new_word,
        format_func=lambda i: f"{i + 1}: {src[i]}",
    )  # fmt: skip
    if not isinstance(state.get("tword"), int) or not 0 <= state["tword"] < len(out):
        found = an.pronoun_position(out)
        state["tword"] = found if found is not None else an.attending_position(view.cross, word)
    target = mid.selectbox(
        tr("word.target"), list(range(len(out))), key="tword", format_func=lambda i: f"{i + 1}: → {out[i]}"
    )
    skip_own = right.checkbox(tr("word.skip"), value=True, key="word_skip", help=tr("word.skip_help"))
    eos = len(src) - 1
    lang = session.lang()
    sides = (
        ("encoder", word, (word, eos), tr("word.encoder_title", piece=escape(src[word]))),
        ("cross", target, (eos,), tr("word.cross_title", piece=escape(out[target]))),
    )
    columns = st.columns(2)
    for column, (kind, query, skip, title) in zip(columns, sides, strict=True):
        stack = view.stack(kind)
        skip = skip if skip_own else ()
        top = an.top_keys(an.with_head_average(stack), query, skip)  # (L, h + 1): the heads and their mean
        words = np.asarray(src, dtype=object)[top.index]
        with column:
            widgets.chart(
                fg.top_word_grid(words, top.weight, title=title, lang=lang), f"word-{kind}-{query + 1}"
            )
            counts = an.top_keys(stack, query, skip).counts()
            best, n = next(iter(counts.items()))
            st.caption(tr("word.most", piece=src[best], n=n, total=stack.shape[0] * stack.shape[1]))
    st.caption(tr("word.caption"))
    card = loading.card_of(loading.current_choice())
    if (card.src_lang, card.tgt_lang) == ("en", "de"):  # the lecture's example is about English → German
        st.caption(tr("word.caption_de"))
