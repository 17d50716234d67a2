"""Positional Encoding page: the formula, its heatmap, wavelengths, the binary analogy, relative positions."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.classroom import catalogue
from visformer.explain import analysis as an
from visformer.explain import positional
from visformer.explain import views as sup

session.ensure_frame()

KEYS = ["pe_d", "pe_len", "pe_pair", "pe_pos", "pe_k"]


@st.cache_data(max_entries=32, show_spinner=False)
def heatmap(d_model: int, length: int, position: int, pair: int) -> go.Figure:
    """PE heatmap with the chosen position and pair outlined."""
    return positional.pe_heatmap(an.pe_matrix(length, d_model), mark_position=position, mark_pair=pair)


@st.cache_data(max_entries=32, show_spinner=False)
def pair_figure(d_model: int, length: int, pair: int) -> go.Figure:
    """sin/cos of one pair over positions."""
    return positional.pe_pair_figure(*an.pe_pair(length, d_model, pair), pair, d_model)


@st.cache_data(max_entries=8, show_spinner=False)
def binary_figure(d_model: int) -> go.Figure:
    """Bits of 0..15 beside PE of positions 0..15."""
    return positional.binary_figure(an.binary_bits(16), an.pe_matrix(16, d_model))


def matrix_latex(m: np.ndarray) -> str:
    """A 2x2 matrix in LaTeX with four decimals."""
    rows = [" & ".join(f"{v:+.4f}" for v in row) for row in m]
    return r"\begin{pmatrix}" + r" \\ ".join(rows) + r"\end{pmatrix}"


st.title("Positional encoding")
st.markdown(
    "Attention by itself does not know word order: shuffle the words and every weight stays the same. "
    "The Transformer therefore **adds** a position signal to each word embedding (section 3.5 of the paper):"
)
st.latex(
    r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right) \qquad "
    r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)"
)

state = st.session_state
state["pe_d"] = sup.clamp(sup.even(state["pe_d"]), 4, 512)
state["pe_len"] = sup.clamp(state["pe_len"], 10, 500)
left, right = st.columns(2)
d_model = left.slider(
    "d_model (size of each vector)", 4, 512, step=2, key="pe_d", persist_state=session.PERSIST
)
length = right.slider("Number of positions", 10, 500, key="pe_len", persist_state=session.PERSIST)
session.clamp_state("pe_pair", 0, d_model // 2 - 1)
session.clamp_state("pe_pos", 0, length - 1)

left, right = st.columns(2)
pair = left.slider(
    "Dimension pair i (dimensions 2i and 2i+1)",
    0,
    d_model // 2 - 1,
    key="pe_pair",
    persist_state=session.PERSIST,
)
position = right.slider("Position", 0, length - 1, key="pe_pos", persist_state=session.PERSIST)
widgets.chart(heatmap(d_model, length, position, pair), "positional-encoding")
st.caption(
    "Each row is the vector added at one position; each column one dimension. Left columns oscillate fast, "
    "right columns slowly. The black box is the chosen position, the orange box the chosen pair."
)

left, right = st.columns(2)
with left:
    widgets.chart(pair_figure(d_model, length, pair), "pe-pair")
with right:
    widgets.chart(
        positional.pe_vector_figure(an.pe_matrix(position + 1, d_model)[position], position), "pe-vector"
    )

st.subheader("Like a binary counter, but smooth")
st.markdown(
    "Write 0..15 in binary: the lowest bit flips every step, the next every two steps, then every four. "
    "PE does the same with sines: low pairs turn fast, high pairs slowly, so together they spell the position."
)
widgets.chart(binary_figure(min(d_model, 16)), "pe-binary-counter")

st.subheader("Relative positions are a rotation")
st.markdown(
    "For every offset k there is one fixed matrix M_k, the same for all positions, with "
    "M_k · PE(pos) = PE(pos + k) on each (sin, cos) pair. So attention can learn to look *k words back*."
)
k = st.slider("Offset k", 1, 100, key="pe_k", persist_state=session.PERSIST)
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
st.metric(
    f"max |M_k·PE({position}) − PE({position}+{k})| over all {d_model} dimensions",
    f"{check.max_error:.1e}",
    help="Floating-point rounding only: the identity is exact.",
)
left, right = st.columns(2)
with left:
    sl = slice(2 * pair, 2 * pair + 2)
    before = an.pe_matrix(position + 1, d_model)[position][sl]
    widgets.chart(
        positional.rotation_figure(before, check.target[sl], check.rotated[sl], pair, k), "pe-rotation"
    )
with right:
    ks, dots = an.pe_dot_products(position, 100, d_model)
    widgets.chart(positional.dot_product_figure(ks, dots, position), "pe-dot-products")

st.subheader("Balance with the word embeddings")
loaded = loading.current_checkpoint()
if loaded is not None:
    choice, ck = loaded
    norms = loading.embedding_norms(str(choice.path), catalogue.checkpoint_stamp(choice.path))
    d = ck.model_config.d_model
    st.markdown(
        f"The model **{choice.label}** (d_model = {d}) multiplies each token embedding by √d = {d**0.5:.1f} before "
        f"adding PE, so neither drowns the other. Median embedding norm: **{np.median(norms):.2f}**; "
        f"every PE vector has norm √(d/2) = **{an.pe_norm(d):.2f}**."
    )
    widgets.chart(positional.norms_figure(norms, an.pe_norm(d)), "embedding-vs-pe-norms")

session.sync_url(KEYS)
