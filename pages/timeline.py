"""Attention timeline: replay the probe sentences' attention at every saved training step, beside the loss."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer import i18n
from visformer.classroom import catalogue
from visformer.explain import kinds
from visformer.explain import training as tfig

session.ensure_frame()

KEYS = ["tl_probe", "view", "layer", "head", "tl_average", "tl_step"]  # the view a link restores
PLAY_SECONDS = 1.2  # one snapshot per tick while playing

# ---------------------------------------------------------------------------------------------
# Cached figures (keyed on checkpoint and view)
# ---------------------------------------------------------------------------------------------


def _map(path: str, stamp: float, index: int, probe: int, kind: str, layer: int, head: int | None):
    """(weights, query labels, key labels) of one snapshot."""
    ck = loading.load(path, stamp)
    snap = ck.snapshots[index]
    return tfig.snapshot_map(
        snap, probe, kind, layer, head, ck.src_tokenizer, ck.tgt_tokenizer, ck.model_config.max_len
    )


def _masked(kind: str, n: int):
    """Cells this kind of attention hides on an n × n map (None when it hides none)."""
    return kinds.KIND[kind].mask(n, n)


@st.cache_data(max_entries=128, show_spinner=False)
def timeline_figure(
    path: str, stamp: float, index: int, probe: int, kind: str, layer: int, head: int | None, lang: str
) -> go.Figure:
    """The map at one snapshot beside the loss curve marked at its step."""
    ck = loading.load(path, stamp)
    snaps = ck.snapshots
    history = ck.metrics.get("history") or []
    weights, rows, cols = _map(path, stamp, index, probe, kind, layer, head)
    who = i18n.t("timeline.average", lang) if head is None else i18n.t("timeline.head_n", lang, n=head + 1)
    title = i18n.t(
        "timeline.figure_title", lang, kind=i18n.t(f"timeline.kind.{kind}", lang), layer=layer + 1, who=who
    )
    return tfig.timeline_figure(
        weights, rows, cols,
        [h["step"] for h in history], [h["loss"] for h in history], snaps[index].step,
        snapshot_steps=[s.step for s in snaps], snapshot_losses=[s.loss for s in snaps],
        masked=_masked(kind, len(rows)), title=title,
        mean_over=ck.train_config.log_every if ck.train_config is not None else None, lang=lang,
    )  # fmt: skip


@st.cache_data(max_entries=64, show_spinner=False)
def strip_figure(
    path: str, stamp: float, index: int, probe: int, kind: str, layer: int, head: int | None, lang: str
) -> go.Figure | None:
    """Every snapshot of the same map side by side (None when the probe's target changed between steps)."""
    ck = loading.load(path, stamp)
    maps = [_map(path, stamp, i, probe, kind, layer, head) for i in range(len(ck.snapshots))]
    if len({m[0].shape for m in maps}) != 1:
        return None
    _, rows, cols = maps[0]
    return tfig.timeline_strip([m[0] for m in maps], [s.step for s in ck.snapshots], rows, cols, current=index,
                               masked=_masked(kind, len(rows)), lang=lang)  # fmt: skip


def kind_titles(lang: str) -> dict[str, str]:
    """Each attention kind's name in `lang` (a dict, so AppTest can format options after the run)."""
    return {kind: i18n.t(f"timeline.kind.{kind}", lang) for kind in kinds.KINDS}


def attention_sizes(ck) -> dict[str, tuple[int, int]]:
    """(layers, heads) of each attention kind the snapshots hold (an RNN: cross-attention only, one head)."""
    maps = ck.snapshots[0].attention
    return {kind: (len(getattr(maps, kind)), getattr(maps, kind)[0].shape[1])
            for kind in kinds.KINDS if getattr(maps, kind)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


def _advance() -> None:
    """While playing: move the step slider one snapshot on (wrapping round)."""
    state = st.session_state
    steps = state.get("_tl_steps", [])
    if state.get("tl_play") and steps:
        at = steps.index(state["tl_step"]) if state.get("tl_step") in steps else -1
        state["tl_step"] = steps[(at + 1) % len(steps)]


def replay(key: tuple, steps: list[int], probe: int, kind: str, layer: int, head: int | None) -> None:
    """The step slider and the figures; re-run on its own every tick while playing."""
    _advance()
    step = st.select_slider(session.tr("timeline.step"), steps, key="tl_step", persist_state=session.PERSIST,
                            help=session.tr("timeline.step_help"))  # fmt: skip
    index = steps.index(step)
    lang = session.lang()
    widgets.chart(
        timeline_figure(*key, index, probe, kind, layer, head, lang), "attention-timeline", key="tl-figure"
    )
    st.caption(session.tr("timeline.loss_caption"))
    strip = strip_figure(*key, index, probe, kind, layer, head, lang)
    if strip is not None:
        st.caption(session.tr("timeline.strip_caption"))
        widgets.chart(strip, "attention-timeline-strip", key="tl-strip")
    session.sync_url(KEYS)  # the step changes inside this fragment, without a full rerun


def main() -> None:
    """Checkpoint → snapshots → probe, kind, layer, head → slider over steps."""
    state = st.session_state
    st.title(session.tr("timeline.title"))
    st.markdown(session.tr("timeline.intro"))
    loaded = loading.current_checkpoint()
    if loaded is None:
        session.sync_url(KEYS)
        return
    choice, ck = loaded
    imported = ck.info.get("imported")
    if imported:  # an imported model (visformer.marian) was never trained here: no history at all
        st.info(session.tr("marian.no_history", name=choice.label, source=imported.get("source", "?")))
    elif not ck.snapshots:
        st.info(session.tr("timeline.no_snapshots", name=choice.label))
    if imported or not ck.snapshots:
        st.page_link(
            "pages/train.py", label=session.tr("timeline.go_train"), icon=":material/model_training:"
        )
        session.sync_url(KEYS)
        return
    sizes = attention_sizes(ck)
    if not sizes:
        st.info(session.tr("timeline.no_attention", name=choice.label))
        session.sync_url(KEYS)
        return
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    steps = [s.step for s in ck.snapshots]
    state["_tl_steps"] = steps
    if state.get("tl_step") not in steps:
        state["tl_step"] = steps[-1]
    probes = ck.snapshots[0].probes
    state["tl_probe"] = schema.clamp(state.get("tl_probe", 0), 0, len(probes) - 1)
    c1, c2 = st.columns([2, 1])
    probe = c1.selectbox(session.tr("timeline.probe"), range(len(probes)), key="tl_probe",
                         persist_state=session.PERSIST, format_func=lambda i: probes[i])  # fmt: skip
    offered = [k for k in kinds.KINDS if k in sizes]
    if state.get("view") not in offered:
        state["view"] = "cross" if "cross" in offered else offered[0]
    kind = c2.radio(session.tr("timeline.kind"), offered, key="view", persist_state=session.PERSIST,
                    horizontal=True, format_func=kind_titles(session.lang()).get)  # fmt: skip
    if len(offered) < len(kinds.KINDS):
        st.caption(session.tr("timeline.rnn_kinds"))
    n_layers, n_heads = sizes[kind]
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1])
    layer = widgets.index_slider(session.tr("timeline.layer"), n_layers, "layer", c1, from_one=True)
    head = widgets.index_slider(session.tr("timeline.head"), n_heads, "head", c2, from_one=True)
    average = c3.toggle(session.tr("timeline.average_toggle"), key="tl_average", persist_state=session.PERSIST,
                        disabled=n_heads == 1)  # fmt: skip
    c4.toggle(session.tr("timeline.play"), key="tl_play", help=session.tr("timeline.play_help"))
    playing = bool(state.get("tl_play"))
    st.fragment(replay, run_every=PLAY_SECONDS if playing else None)(
        key, steps, probe, kind, layer, None if average and n_heads > 1 else head
    )


main()
