"""RNN with attention vs Transformer: the same input through both toy models, alignments side by side, scores."""

from __future__ import annotations

import json
import math

import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.checkpoint import CheckpointError, list_checkpoints
from visformer.classroom import catalogue
from visformer.classroom.inputs import clean_sentence, escape_markdown
from visformer.explain import attention as figs
from visformer.explain import comparison as cmp
from visformer.models import RNN_SCORES, architecture_of

session.ensure_frame()
tr = session.tr

EXAMPLE = "m r z f q n o"


def pairs() -> dict[str, str]:
    """Shipped RNN checkpoints and the shipped Transformer trained on the same task ({rnn name: transformer name})."""
    found, transformers = {}, {}
    folders = list_checkpoints(catalogue.checkpoint_roots()[0])
    task_of = {
        p.name: json.loads((p / "config.json").read_text(encoding="utf-8")).get("task") for p in folders
    }
    for p in folders:
        if architecture_of(p) == "transformer" and task_of[p.name]:
            transformers.setdefault(task_of[p.name], p.name)
    for p in folders:
        if architecture_of(p) in RNN_SCORES and task_of[p.name] in transformers:
            found[p.name] = transformers[task_of[p.name]]
    return found


@st.cache_data(max_entries=64, show_spinner=False)
def run(path: str, stamp: float, sentence: str) -> cmp.SystemRun:
    """One model's greedy output, cross-attention and scores on the sentence."""
    return cmp.run_system(loading.load(path, stamp), sentence)


def folder(name: str) -> tuple[str, float]:
    """(path, stamp) of a shipped checkpoint: the cache key."""
    path = catalogue.checkpoint_roots()[0] / name
    return str(path), catalogue.checkpoint_stamp(path)


def scores(column, result: cmp.SystemRun) -> None:
    """Output, right answer, log-probability, alignment hits and held-out exact match of one model."""
    column.markdown(tr("models.cmp.arch", arch=result.architecture))
    column.markdown(tr("models.cmp.output", text=escape_markdown(result.text)))
    a, b, c, d = column.columns(4)
    answer = {None: "models.cmp.unknown", True: "models.cmp.yes", False: "models.cmp.no"}[result.correct]
    a.metric(tr("models.cmp.correct"), tr(answer))
    b.metric(tr("models.cmp.logprob"), f"{result.logprob:.3f}")
    c.metric(tr("models.cmp.alignment"), "–" if math.isnan(result.alignment) else f"{result.alignment:.0%}",
             help=tr("models.cmp.alignment_help"))  # fmt: skip
    held = result.held_out_exact_match
    d.metric(tr("models.cmp.held_out"), "–" if held is None else f"{held:.0%}")


st.title(tr("models.cmp.page_title"))
st.markdown(tr("models.cmp.intro"))
found = pairs()
if not found:
    st.warning(tr("models.cmp.missing"))
    st.stop()
names = sorted(found, key=lambda n: (architecture_of(catalogue.checkpoint_roots()[0] / n) == "rnn-none", n))
rnn_name = st.selectbox(tr("models.cmp.rnn"), names, key="cmp_rnn")
st.session_state.setdefault("cmp_sentence", EXAMPLE)
raw = st.text_input(tr("models.cmp.sentence"), key="cmp_sentence")
try:
    sentence = clean_sentence(raw, loading.limits()).text
except ValueError as exc:
    st.warning(tr("models.cmp.bad_sentence", reason=str(exc)))
    st.stop()

try:
    rnn_ck, tf_ck = loading.load(*folder(rnn_name)), loading.load(*folder(found[rnn_name]))
except (CheckpointError, OSError) as exc:
    st.error(str(exc))
    st.stop()
reference = cmp.task_reference(rnn_ck.task, sentence)
if reference is not None:
    st.markdown(tr("models.cmp.task", task=rnn_ck.task, answer=escape_markdown(reference[0])))
rnn, tf = run(*folder(rnn_name), sentence), run(*folder(found[rnn_name]), sentence)

n_layers = tf.cross.shape[0]
layer = st.selectbox(tr("models.cmp.layer"), list(range(n_layers)), index=n_layers - 1, key="cmp_layer")
left, right = st.columns(2)
with left:
    st.subheader(rnn.name)
    scores(st, rnn)
    if rnn.cross.shape[0]:
        widgets.chart(figs.attention_heatmap(rnn.layer_map(0), rnn.query_pieces, rnn.src_pieces,
                                             title=tr("models.cmp.rnn_map"), lang=session.lang()), "cmp-rnn")  # fmt: skip
        st.caption(tr("models.cmp.rnn_only_cross"))
    else:
        st.info(tr("models.cmp.no_attention"))
with right:
    st.subheader(tf.name)
    scores(st, tf)
    widgets.chart(figs.attention_heatmap(tf.layer_map(layer), tf.query_pieces, tf.src_pieces,
                                         title=tr("models.cmp.transformer_map", layer=layer), lang=session.lang()), "cmp-transformer")  # fmt: skip
st.info(tr("models.cmp.lesson"))
