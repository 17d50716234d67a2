"""Attention timeline: replay the probe sentences' attention at every saved training step, beside the loss."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.classroom import catalogue
from visformer.explain import kinds
from visformer.explain import training as tfig
from visformer.explain import views as sup

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
    path: str, stamp: float, index: int, probe: int, kind: str, layer: int, head: int | None
) -> go.Figure:
    """The map at one snapshot beside the loss curve marked at its step."""
    ck = loading.load(path, stamp)
    snaps = ck.snapshots
    history = ck.metrics.get("history") or []
    weights, rows, cols = _map(path, stamp, index, probe, kind, layer, head)
    who = "average of heads" if head is None else f"head {head}"
    return tfig.timeline_figure(
        weights, rows, cols,
        [h["step"] for h in history], [h["loss"] for h in history], snaps[index].step,
        snapshot_steps=[s.step for s in snaps], snapshot_losses=[s.loss for s in snaps],
        masked=_masked(kind, len(rows)),
        title=f"{kinds.KIND_TITLES[kind]} · layer {layer} · {who}",
    )  # fmt: skip


@st.cache_data(max_entries=64, show_spinner=False)
def strip_figure(
    path: str, stamp: float, index: int, probe: int, kind: str, layer: int, head: int | None
) -> go.Figure | None:
    """Every snapshot of the same map side by side (None when the probe's target changed between steps)."""
    ck = loading.load(path, stamp)
    maps = [_map(path, stamp, i, probe, kind, layer, head) for i in range(len(ck.snapshots))]
    if len({m[0].shape for m in maps}) != 1:
        return None
    _, rows, cols = maps[0]
    return tfig.timeline_strip([m[0] for m in maps], [s.step for s in ck.snapshots], rows, cols, current=index,
                               masked=_masked(kind, len(rows)))  # fmt: skip


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
    step = st.select_slider("Training step", steps, key="tl_step", persist_state=session.PERSIST,
                            help="Snapshots were taken at these steps (log-spaced: early training changes fastest).")  # fmt: skip
    index = steps.index(step)
    widgets.chart(
        timeline_figure(*key, index, probe, kind, layer, head), "attention-timeline", key="tl-figure"
    )
    strip = strip_figure(*key, index, probe, kind, layer, head)
    if strip is not None:
        st.caption("The same map at every snapshot (the framed one is shown above):")
        widgets.chart(strip, "attention-timeline-strip", key="tl-strip")
    session.sync_url(KEYS)  # the step changes inside this fragment, without a full rerun


def main() -> None:
    """Checkpoint → snapshots → probe, kind, layer, head → slider over steps."""
    state = st.session_state
    st.title("Attention timeline")
    st.markdown(
        "During training, the attention of a few fixed **probe** sentences was saved at several steps. "
        "Slide through them and watch structure appear as the loss falls: for the toy tasks, cross-attention "
        "turns into the task's alignment (a diagonal for *copy*, an anti-diagonal for *reverse*)."
    )
    loaded = loading.current_checkpoint()
    if loaded is None:
        session.sync_url(KEYS)
        return
    choice, ck = loaded
    if not ck.snapshots:
        st.info(
            f"**{choice.label}** has no attention snapshots. Every model trained on the Train page saves them: "
            "train one there, or pick another checkpoint in the sidebar."
        )
        st.page_link("pages/train.py", label="Go to the Train page", icon=":material/model_training:")
        session.sync_url(KEYS)
        return
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    steps = [s.step for s in ck.snapshots]
    state["_tl_steps"] = steps
    if state.get("tl_step") not in steps:
        state["tl_step"] = steps[-1]
    probes = ck.snapshots[0].probes
    state["tl_probe"] = sup.clamp(state.get("tl_probe", 0), 0, len(probes) - 1)
    c1, c2 = st.columns([2, 1])
    probe = c1.selectbox("Probe sentence", range(len(probes)), key="tl_probe", persist_state=session.PERSIST,
                         format_func=lambda i: probes[i])  # fmt: skip
    kind = c2.radio("Attention", kinds.KINDS, key="view", persist_state=session.PERSIST, horizontal=True,
                    format_func=kinds.KIND_TITLES.get)  # fmt: skip
    sizes = kinds.layer_counts(ck.model_config)
    c1, c2, c3, c4 = st.columns([2, 2, 1, 1])
    layer = widgets.index_slider("Layer", sizes[kind], "layer", c1)
    head = widgets.index_slider("Head", ck.model_config.n_heads, "head", c2)
    average = c3.toggle("Average heads", key="tl_average", persist_state=session.PERSIST)
    c4.toggle("▶ Play", key="tl_play", help="Step through the snapshots on its own.")
    playing = bool(state.get("tl_play"))
    st.fragment(replay, run_every=PLAY_SECONDS if playing else None)(
        key, steps, probe, kind, layer, None if average else head
    )


main()
