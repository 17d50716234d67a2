"""Positional Encoding page: the formula, its heatmap, wavelengths, the binary analogy, relative positions."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer.classroom import catalogue
from visformer.explain import analysis as an
from visformer.explain import positional

session.ensure_frame()

KEYS = ["pe_d", "pe_len", "pe_pair", "pe_pos", "pe_k"]


@st.cache_data(max_entries=32, show_spinner=False)
def heatmap(d_model: int, length: int, position: int, pair: int, lang: str) -> go.Figure:
    """PE heatmap with the chosen position and pair outlined."""
    pe = an.pe_matrix(length, d_model)
    return positional.pe_heatmap(pe, mark_position=position, mark_pair=pair, lang=lang)


@st.cache_data(max_entries=32, show_spinner=False)
def pair_figure(d_model: int, length: int, pair: int, lang: str) -> go.Figure:
    """sin/cos of one pair over positions."""
    return positional.pe_pair_figure(*an.pe_pair(length, d_model, pair), pair, d_model, lang=lang)


@st.cache_data(max_entries=8, show_spinner=False)
def binary_figure(d_model: int, lang: str) -> go.Figure:
    """Bits of 0..15 beside PE of positions 0..15."""
    return positional.binary_figure(an.binary_bits(16), an.pe_matrix(16, d_model), lang=lang)


def matrix_latex(m: np.ndarray) -> str:
    """A 2x2 matrix in LaTeX with four decimals."""
    rows = [" & ".join(f"{v:+.4f}" for v in row) for row in m]
    return r"\begin{pmatrix}" + r" \\ ".join(rows) + r"\end{pmatrix}"


tr, lang = session.tr, session.lang()
st.title(tr("pe.title"))
st.markdown(tr("pe.intro"))
st.latex(
    r"\begin{aligned} PE_{(pos,\,2i)} &= \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right) \\ "
    r"PE_{(pos,\,2i+1)} &= \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right) \end{aligned}"  # two lines: fits a phone
)

state = st.session_state
state["pe_d"] = schema.clamp(schema.even(state["pe_d"]), 4, 512)
state["pe_len"] = schema.clamp(state["pe_len"], 10, 500)
left, right = st.columns(2)
d_model = left.slider(tr("pe.d_model"), 4, 512, step=2, key="pe_d", persist_state=session.PERSIST)
length = right.slider(tr("pe.length"), 10, 500, key="pe_len", persist_state=session.PERSIST)
session.clamp_state("pe_pair", 0, d_model // 2 - 1)
session.clamp_state("pe_pos", 0, length - 1)

left, right = st.columns(2)
pair = left.slider(tr("pe.pair"), 0, d_model // 2 - 1, key="pe_pair", persist_state=session.PERSIST)
position = right.slider(tr("pe.position"), 0, length - 1, key="pe_pos", persist_state=session.PERSIST)
widgets.chart(heatmap(d_model, length, position, pair, lang), "positional-encoding")
st.caption(tr("pe.heatmap_caption"))

left, right = st.columns(2)
with left:
    widgets.chart(pair_figure(d_model, length, pair, lang), "pe-pair")
with right:
    vector = an.pe_matrix(position + 1, d_model)[position]
    widgets.chart(positional.pe_vector_figure(vector, position, lang=lang), "pe-vector")

st.subheader(tr("pe.binary_title"))
st.markdown(tr("pe.binary_text"))
widgets.chart(binary_figure(min(d_model, 16), lang), "pe-binary-counter")

st.subheader(tr("pe.rotation_title"))
st.markdown(tr("pe.rotation_text"))
k = st.slider(tr("pe.offset"), 1, 100, key="pe_k", persist_state=session.PERSIST)
check = an.rotation_check(position, k, d_model)
omega = float(1 / 10000 ** (2 * pair / d_model))
st.latex(
    r"M_{k} = \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i "
    r"\end{pmatrix}, \qquad \omega_i = 10000^{-2i/d_{model}}"
)
st.latex(  # full width, on two lines: KaTeX clips on the right in a narrow column
    rf"\begin{{aligned}} \omega_{{{pair}}} &= {omega:.5g} \\ M_{{{k}}}^{{(i={pair})}} &= "
    + matrix_latex(check.matrices[pair])
    + r"\end{aligned}"
)
st.metric(tr("pe.metric", pos=position, k=k, d=d_model), f"{check.max_error:.1e}", help=tr("pe.metric_help"))
left, right = st.columns(2)
with left:
    sl = slice(2 * pair, 2 * pair + 2)
    before = an.pe_matrix(position + 1, d_model)[position][sl]
    widgets.chart(
        positional.rotation_figure(before, check.target[sl], check.rotated[sl], pair, k, lang=lang),
        "pe-rotation",
    )
with right:
    ks, dots = an.pe_dot_products(position, 100, d_model)
    widgets.chart(positional.dot_product_figure(ks, dots, position, lang=lang), "pe-dot-products")

st.subheader(tr("pe.balance_title"))
loaded = loading.current_checkpoint()
if loaded is not None:
    choice, ck = loaded
    norms = loading.embedding_norms(str(choice.path), catalogue.checkpoint_stamp(choice.path))
    d = ck.model_config.d_model
    pe_norm = an.pe_norm(d)
    st.markdown(tr("pe.balance_text", model=loading.label(choice), d=d, root=f"{d**0.5:.1f}",
                   median=f"{np.median(norms):.2f}", pe=f"{pe_norm:.2f}"))  # fmt: skip
    widgets.chart(positional.norms_figure(norms, pe_norm, lang=lang), "embedding-vs-pe-norms")

session.sync_url(KEYS)
