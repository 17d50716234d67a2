"""RNN with attention vs Transformer: the same input through both toy models, alignments side by side, scores."""

from __future__ import annotations

import math
from pathlib import Path

import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer.architectures import Family, architecture
from visformer.checkpoint import CheckpointError, architecture_of, list_checkpoints, read_config
from visformer.classroom import catalogue
from visformer.classroom.inputs import clean_sentence, escape_markdown
from visformer.explain import attention as figs
from visformer.explain import comparison as cmp

session.ensure_frame()
tr = session.tr

EXAMPLE = "m r z f q n o"  # a toy task's input
CORPUS_EXAMPLE = "A little girl in a pink dress is climbing the stairs of a wooden house with her father."
KEYS = [
    k for k in schema.MODELS_PARAMS if k.startswith("cmp_")
]  # written into the URL: a link restores the view


def family(folder: Path) -> Family:
    """The family of the architecture a checkpoint folder holds."""
    return architecture(architecture_of(folder)).family


def pairs() -> dict[str, str]:
    """Shipped RNN checkpoints and their Transformer ({rnn name: transformer name}).

    The Transformer is the one the RNN's info names (`compare_with`, for corpus models), else the one trained
    on the same toy task.
    """
    found, transformers = {}, {}
    folders = list_checkpoints(catalogue.checkpoint_roots()[0])
    config = {p.name: read_config(p) for p in folders}
    for p in folders:
        if family(p) is Family.TRANSFORMER and config[p.name].get("task"):
            transformers.setdefault(config[p.name]["task"], p.name)
    for p in folders:
        if family(p) is not Family.RNN:
            continue
        partner = (config[p.name].get("info") or {}).get("compare_with") or transformers.get(
            config[p.name].get("task")
        )
        if partner in config and family(catalogue.checkpoint_roots()[0] / partner) is Family.TRANSFORMER:
            found[p.name] = partner
    return found


def task_of(name: str) -> str | None:
    """The toy task a shipped model was trained on (None for a corpus model such as Multi30k)."""
    return read_config(catalogue.checkpoint_roots()[0] / name).get("task")


def example_for(name: str) -> str:
    """The input a model's view opens with: letters for a toy task, an English sentence for a corpus model."""
    return EXAMPLE if task_of(name) else CORPUS_EXAMPLE


def _new_model() -> None:
    """Callback of the RNN choice: open the new model on its own kind of input."""
    st.session_state["cmp_sentence"] = example_for(st.session_state["cmp_rnn"])


@st.cache_data(max_entries=64, show_spinner=False)
def run(path: str, stamp: float, sentence: str) -> cmp.SystemRun:
    """One model's greedy output, cross-attention and scores on the sentence."""
    return cmp.run_system(loading.load(path, stamp), sentence)


def folder(name: str) -> tuple[str, float]:
    """(path, stamp) of a shipped checkpoint: the cache key."""
    path = catalogue.checkpoint_roots()[0] / name
    return str(path), catalogue.checkpoint_stamp(path)


def scores(column, result: cmp.SystemRun, test_help: str) -> None:
    """Output and scores of one model: a toy task's right answer, alignment and exact match, else the test BLEU."""
    column.markdown(tr("models.cmp.arch", arch=result.architecture))
    column.markdown(tr("models.cmp.output", text=escape_markdown(result.text)))
    if result.correct is None and result.test_bleu is not None:  # a corpus model: no known answer to score
        a, b = column.columns(2)
        a.metric(tr("models.cmp.logprob"), f"{result.logprob:.3f}")
        b.metric(tr("models.cmp.test_bleu"), f"{result.test_bleu:.1f}", help=test_help)
        return
    a, b = column.columns(2)  # two by two: four across, in half a page, cut every label
    c, d = column.columns(2)
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
    session.end_page()
# the RNNs with attention first, the one without last
names = sorted(
    found,
    key=lambda n: (not architecture(architecture_of(catalogue.checkpoint_roots()[0] / n)).has_attention, n),
)
state = st.session_state
if state.get("cmp_rnn") not in names:  # a first visit, or a link naming a model that is not here
    state["cmp_rnn"] = names[0]
if not state.get("_cmp_seeded"):  # the model's example on a first visit, unless the link names a sentence
    state["_cmp_seeded"] = True
    state["cmp_sentence"] = state.get("cmp_sentence") or example_for(state["cmp_rnn"])
rnn_name = st.selectbox(tr("models.cmp.rnn"), names, key="cmp_rnn", on_change=_new_model,
                        persist_state=session.PERSIST)  # fmt: skip
sentence_label = tr("models.cmp.sentence_task" if task_of(rnn_name) else "models.cmp.sentence")
raw = st.text_input(sentence_label, key="cmp_sentence", persist_state=session.PERSIST)
try:
    sentence = clean_sentence(raw, loading.limits()).text
except ValueError as exc:
    st.warning(tr("models.cmp.bad_sentence", reason=session.error(exc, capital=False)))
    session.sync_url(KEYS)
    session.end_page()

try:
    rnn_ck, tf_ck = loading.load(*folder(rnn_name)), loading.load(*folder(found[rnn_name]))
except (CheckpointError, OSError) as exc:
    st.error(session.error(exc))
    session.end_page()
reference = cmp.task_reference(rnn_ck.task, sentence)
if reference is not None:
    st.markdown(tr("models.cmp.task", task=rnn_ck.task, answer=escape_markdown(reference[0])))
rnn, tf = run(*folder(rnn_name), sentence), run(*folder(found[rnn_name]), sentence)

recorded = cmp.recorded_test(tf_ck.info) or cmp.recorded_test(rnn_ck.info)
test_help = tr("models.cmp.test_help", set=recorded.get("set", "?"), beam=recorded.get("beam_size", "?"))
n_layers = tf.cross.shape[0]
if not 0 <= state.get("cmp_layer", -1) < n_layers:  # -1 (a first visit): the last layer
    state["cmp_layer"] = n_layers - 1
layer = widgets.index_slider(tr("models.cmp.layer"), n_layers, "cmp_layer", from_one=True)
left, right = st.columns(2)
with left:
    st.subheader(rnn.name)
    scores(st, rnn, test_help)
    if rnn.cross.shape[0]:
        widgets.chart(figs.attention_heatmap(rnn.layer_map(0), rnn.query_pieces, rnn.src_pieces,
                                             title=tr("models.cmp.rnn_map"), lang=session.lang()), "cmp-rnn")  # fmt: skip
        st.caption(tr("models.cmp.rnn_only_cross"))
    else:
        st.info(tr("models.cmp.no_attention"))
with right:
    st.subheader(tf.name)
    scores(st, tf, test_help)
    widgets.chart(figs.attention_heatmap(tf.layer_map(layer), tf.query_pieces, tf.src_pieces,
                                         title=tr("models.cmp.transformer_map", layer=layer + 1), lang=session.lang()), "cmp-transformer")  # fmt: skip
st.info(tr("models.cmp.lesson" if reference is not None else "models.cmp.lesson_corpus"))

# BLEU by source length: every RNN compared with this Transformer, and the Transformer
partners = [n for n in names if found[n] == found[rnn_name]] + [found[rnn_name]]
by_length = {
    n: cmp.length_scores(loading.load(*folder(n)).info) for n in partners
}  # recorded, not recomputed
if any(by_length.values()):
    widgets.chart(cmp.length_figure(by_length, tr("models.cmp.length_title", set=recorded.get("set", "test")),
                                    session.lang()), "cmp-length")  # fmt: skip
    st.caption(tr("models.cmp.length_lesson"))
session.sync_url(KEYS)
