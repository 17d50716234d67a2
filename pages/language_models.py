"""Encoder only vs decoder only: one sentence, bidirectional vs masked self-attention, [MASK] filled in, continued."""

from __future__ import annotations

import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer.checkpoint import CheckpointError, safe_checkpoint_dir
from visformer.classroom import catalogue
from visformer.classroom.inputs import clean_sentence, escape_markdown
from visformer.explain import analysis as an
from visformer.explain import attention as figs
from visformer.explain import language_models as lms

session.ensure_frame()
tr = session.tr

ENCODER, DECODER = "lm-encoder-en", "lm-decoder-en"  # shipped checkpoints (visformer.lm_recipe)
EXAMPLE = "A little girl is [MASK] in the park with her dog."
METRICS = schema.LM_METRICS
# written into the URL: a link restores the view
KEYS = [k for k in schema.MODELS_PARAMS if k.startswith("lm_")]


def where(name: str) -> tuple[str, float]:
    """(folder, modification stamp) of one shipped language model: the key of every cache below."""
    path = safe_checkpoint_dir(catalogue.checkpoint_roots()[0], name)
    return str(path), catalogue.checkpoint_stamp(path)


def load(name: str):
    """The loaded checkpoint (cached and shared), or None when it is missing or broken."""
    try:
        return loading.load(*where(name))
    except (CheckpointError, OSError):
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def encoder_view(path: str, stamp: float, text: str) -> tuple[lms.SelfAttentionView, list[lms.Prediction]]:
    """Bidirectional self-attention and [MASK] guesses of the encoder-only model."""
    ck = loading.load(path, stamp)
    return lms.encoder_view(ck.model, ck.src_tokenizer, text)


@st.cache_data(max_entries=64, show_spinner=False)
def decoder_view(path: str, stamp: float, text: str) -> lms.SelfAttentionView:
    """Masked self-attention of the decoder-only model."""
    ck = loading.load(path, stamp)
    return lms.decoder_view(ck.model, ck.src_tokenizer, text)


@st.cache_data(max_entries=64, show_spinner=False)
def continuation(
    path: str, stamp: float, text: str, max_new: int, strategy: str, params: tuple
) -> lms.Continuation:
    """The decoder-only model's continuation of text."""
    ck = loading.load(path, stamp)
    return lms.continue_text(ck.model, ck.src_tokenizer, text, max_new, strategy, **dict(params))


def perplexity(ck) -> str:
    """Held-out perplexity recorded in the checkpoint, or '?'."""
    value = ck.info.get("valid_perplexity")
    return "?" if value is None else f"{value:.1f}"


def head_map(view: lms.SelfAttentionView, layer: int, head: int):
    """One layer's map (L, L): one head, or the mean of the heads (head -1)."""
    stack = view.stack[layer]
    return stack.mean(axis=0) if head < 0 else stack[head]


st.title(tr("models.lm.page_title"))
st.markdown(tr("models.lm.intro"))
enc_ck, dec_ck = load(ENCODER), load(DECODER)
if enc_ck is None or dec_ck is None:
    st.warning(tr("models.lm.missing", names=f"{ENCODER}, {DECODER}"))
    session.end_page()
cfg = enc_ck.model_config
st.caption(tr("models.lm.about_models", layers=cfg.n_encoder_layers, heads=cfg.n_heads, d=cfg.d_model,
              params=f"{enc_ck.model.num_parameters():,}", enc_ppl=perplexity(enc_ck), dec_ppl=perplexity(dec_ck)))  # fmt: skip

state = st.session_state
if not state.get("_lm_seeded"):  # the example on a first visit, unless the link names a sentence
    state["_lm_seeded"] = True
    state["lm_sentence"] = state.get("lm_sentence") or EXAMPLE
raw = st.text_input(tr("models.lm.sentence"), key="lm_sentence", persist_state=session.PERSIST)
try:
    sentence = clean_sentence(raw, loading.limits()).text
except ValueError as exc:
    st.warning(tr("models.lm.bad_sentence", reason=session.error(exc, capital=False)))
    session.sync_url(KEYS)
    session.end_page()

# [MASK]: the one the student wrote, or a word picked to hide
words = lms.mask_words(sentence)
written = lms.MASK_TOKEN in sentence
if not -1 <= state.get("lm_hide", -1) < len(words):  # a shorter sentence than the word picked before
    state["lm_hide"] = -1
hide_labels = {-1: tr("models.lm.hide_written" if written else "models.lm.hide_none")}
hide_labels |= {
    i: word for i, (_, _, word) in enumerate(words)
}  # labels made now: format_func runs outside the page
hide = st.selectbox(tr("models.lm.hide"), list(hide_labels), key="lm_hide", format_func=hide_labels.get,
                    persist_state=session.PERSIST)  # fmt: skip
masked_text = sentence if hide < 0 else lms.hide_word(sentence, hide)

(enc_path, enc_stamp), (dec_path, dec_stamp) = where(ENCODER), where(DECODER)
enc_view, predictions = encoder_view(enc_path, enc_stamp, masked_text)
dec_view = decoder_view(dec_path, dec_stamp, sentence)

st.header(tr("models.lm.mask_header"))
left, right = st.columns(2)
left.metric(
    tr("models.lm.future_encoder"), f"{lms.future_weight(enc_view):.3f}", help=tr("models.lm.future_help")
)
right.metric(
    tr("models.lm.future_decoder"), f"{lms.future_weight(dec_view):.3f}", help=tr("models.lm.future_help")
)
st.info(tr("models.lm.lesson"))

tab_maps, tab_grid, tab_stats = st.tabs(
    [tr("models.lm.tab_maps"), tr("models.lm.tab_grid"), tr("models.lm.tab_stats")]
)
with tab_maps:
    n_layers, n_heads = enc_view.stack.shape[:2]
    c1, c2 = st.columns(2)
    if not 0 <= state.get("lm_layer", -1) < n_layers:  # -1 (a first visit): the last layer
        state["lm_layer"] = n_layers - 1
    layer = widgets.index_slider(tr("models.lm.layer"), n_layers, "lm_layer", container=c1, from_one=True)
    head_labels = {-1: tr("models.lm.head_mean")} | {
        h: tr("models.lm.head_n", head=h + 1) for h in range(n_heads)
    }  # counted from 1 on screen
    if state.get("lm_head", -1) not in head_labels:
        state["lm_head"] = -1
    head = c2.selectbox(tr("models.lm.head"), list(head_labels), key="lm_head", format_func=head_labels.get,
                        persist_state=session.PERSIST)  # fmt: skip
    head_text = head_labels[head]
    left, right = st.columns(2)
    with left:
        widgets.chart(figs.attention_heatmap(head_map(enc_view, layer, head), enc_view.pieces, enc_view.pieces,
                      title=tr("models.lm.map_encoder", layer=layer + 1, head=head_text), lang=session.lang()), "lm-encoder")  # fmt: skip
    with right:
        widgets.chart(figs.attention_heatmap(head_map(dec_view, layer, head), dec_view.pieces, dec_view.pieces,
                      title=tr("models.lm.map_decoder", layer=layer + 1, head=head_text), masked=dec_view.hidden,
                      lang=session.lang()),
                      "lm-decoder")  # fmt: skip
with tab_grid:
    widgets.chart(figs.attention_grid(enc_view.stack, enc_view.pieces, enc_view.pieces,
                                      title=tr("models.lm.grid_encoder"), lang=session.lang()), "lm-encoder-grid")  # fmt: skip
    widgets.chart(figs.attention_grid(dec_view.stack, dec_view.pieces, dec_view.pieces, masked=dec_view.hidden,
                                      title=tr("models.lm.grid_decoder"), lang=session.lang()), "lm-decoder-grid")  # fmt: skip
with tab_stats:
    metric_labels = {m: tr(f"models.lm.metric.{m}") for m in METRICS}
    metric = st.selectbox(tr("models.lm.metric"), METRICS, key="lm_metric", format_func=metric_labels.get,
                          persist_state=session.PERSIST)  # fmt: skip
    left, right = st.columns(2)
    for column, view, key in ((left, enc_view, "encoder"), (right, dec_view, "decoder")):
        grid = an.metric_grid(an.head_statistics(view.stack), metric)
        with column:
            widgets.chart(figs.metric_heatmap(grid, title=tr(f"models.lm.stat_{key}", metric=metric_labels[metric]),
                                              value_name=metric, lang=session.lang()), f"lm-{key}-stats")  # fmt: skip

st.header(tr("models.lm.fill_header"))
st.caption(tr("models.lm.what_it_sees", text=escape_markdown(masked_text)))
if not predictions:
    st.info(tr("models.lm.no_mask"))
for guess in predictions:
    st.markdown(tr("models.lm.guess", pos=guess.position + 1))  # counted from 1 for students
    st.dataframe({tr("models.lm.col_piece"): guess.pieces, tr("models.lm.col_prob"): [round(p, 3) for p in guess.probs]},
                 hide_index=True)  # fmt: skip

st.header(tr("models.lm.continue_header"))
strategy_labels = {s: tr(f"models.lm.strategy.{s}") for s in lms.STRATEGIES}
strategy = st.radio(
    tr("models.lm.strategy"),
    lms.STRATEGIES,
    horizontal=True,
    key="lm_strategy",
    format_func=strategy_labels.get,
    persist_state=session.PERSIST,
)
params: dict[str, float] = {}
if strategy == "sampling":
    c1, c2, c3, c4 = st.columns(4)
    keep = {"persist_state": session.PERSIST}
    params["temperature"] = c1.slider(
        tr("models.lm.temperature"), 0.1, 2.0, step=0.1, key="lm_temperature", **keep
    )
    params["top_k"] = c2.slider(tr("models.lm.top_k"), 0, 50, key="lm_top_k", **keep)
    params["top_p"] = c3.slider(tr("models.lm.top_p"), 0.05, 1.0, step=0.05, key="lm_top_p", **keep)
    params["seed"] = int(c4.number_input(tr("models.lm.seed"), 0, 10_000, key="lm_seed", **keep))
max_new = st.slider(tr("models.lm.max_new"), 1, 30, key="lm_max_new", persist_state=session.PERSIST)
prompt = lms.prompt_before_mask(masked_text)
result = continuation(dec_path, dec_stamp, prompt, max_new, strategy, tuple(sorted(params.items())))
st.markdown(tr("models.lm.continuation", prompt=escape_markdown(prompt), text=escape_markdown(result.text)))
st.dataframe(
    {
        tr("models.lm.col_step"): list(range(1, len(result.steps) + 1)),
        tr("models.lm.col_chosen"): [s.piece for s in result.steps],
        tr("models.lm.col_prob"): [round(s.prob, 3) for s in result.steps],
        tr("models.lm.col_candidates"): [
            ", ".join(f"{p} {q:.2f}" for p, q in zip(s.candidates, s.candidate_probs, strict=True))
            for s in result.steps
        ],
    },
    hide_index=True,
)
if lms.MASK_TOKEN in masked_text:
    st.caption(tr("models.lm.left_only", prompt=escape_markdown(prompt)))
st.caption(tr("models.lm.continue_caption"))
session.sync_url(KEYS)
