"""visformer: watch a Transformer translate, layer by layer and head by head.

The frame: page config, navigation, the shared sidebar (checkpoint, device, credits). Pages live in pages/.
Run with `streamlit run app.py`.
"""

from __future__ import annotations

import os

# torch's OpenMP threads must not spin while waiting: on a shared or busy machine spinning threads made
# decoding several times slower and the cold start slower (bench/RESULTS.md, App). Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

# Loaded first, whole, by every session: imported lazily (by plotly, inside a figure) by two sessions at once on
# a fresh server, one of them got a partially initialised pandas ("no attribute 'Series'"; bench/RESULTS.md,
# Class load).
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.utils import resolve_device

ROOT = Path(__file__).resolve().parent
# The tab icon 🔭 drawn the way Streamlit's frontend draws an emoji favicon (the emoji as SVG text), passed
# as an ASCII data URL: given the emoji itself, set_page_config loads Streamlit's emoji catalogue to check
# it, 50-350 ms of every cold start.
FAVICON = "data:image/svg+xml," + quote(
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 100 100'><text y='.9em' font-size='90'>🔭</text></svg>"
)


@dataclass(frozen=True)
class PageInfo:
    """One page of the app; pages whose file does not exist yet are left out."""

    file: str
    title: str
    icon: str
    about: str  # the sidebar's "what am I looking at" line


PAGES = [
    PageInfo(
        "pages/attention.py",
        "Attention",
        ":material/grid_view:",
        "Where each word looks: the model's attention weights while it translates your sentence.",
    ),
    PageInfo(
        "pages/positional_encoding.py",
        "Positional encoding",
        ":material/waves:",
        "How the model knows word order: sines and cosines of many wavelengths added to each word.",
    ),
    PageInfo(
        "pages/decoding.py",
        "Decoding",
        ":material/account_tree:",
        "How a translation is chosen word by word: greedy, beam search and sampling.",
    ),
    PageInfo(
        "pages/train.py",
        "Train",
        ":material/model_training:",
        "Train a small Transformer yourself and watch its loss and attention change.",
    ),
    PageInfo(
        "pages/timeline.py",
        "Attention timeline",
        ":material/movie:",
        "Replay training: how the probe sentences' attention looked at each saved step, beside the loss.",
    ),
    PageInfo(
        "pages/lesson.py",
        "Lesson",
        ":material/school:",
        "A guided path through the lecture, on your own sentence.",
    ),
]

CREDITS = """
**Data.** Multi30k (Elliott et al., 2016), for research and education.
Tatoeba sentence pairs ([tatoeba.org](https://tatoeba.org), CC BY 2.0 FR) via
[manythings.org/anki](https://www.manythings.org/anki/).
Model: Vaswani et al., *Attention is all you need* (2017).
"""


def sidebar(about: str) -> None:
    """Checkpoint picker, device, what this page shows, data credits."""
    with st.sidebar:
        st.caption(about)
        options = loading.choices()
        if options:
            keys = [c.key for c in options]
            if st.session_state.get("checkpoint") not in keys:
                st.session_state["checkpoint"] = loading.current_choice().key
            labels = {c.key: c.label for c in options}
            st.selectbox(
                "Checkpoint",
                keys,
                key="checkpoint",
                persist_state=session.PERSIST,
                format_func=labels.get,
                help="Shipped models from checkpoints/ and your own from user_checkpoints/.",
                on_change=_checkpoint_changed,
            )
        else:
            st.info("No checkpoint found yet.")
        st.caption(f"Device: `{resolve_device('auto')}`")
        widgets.checkpoint_transfer(loading.current_choice())
        st.divider()
        st.caption(CREDITS)


def _checkpoint_changed() -> None:
    """A new model: drop the old model's example sentence and start at layer 0, head 0."""
    state = st.session_state
    if state.get("sentence") in state.get("_examples", []):
        state["sentence"] = ""
    state["step"] = 0
    state["ablate"] = []


def main() -> None:
    """Build the frame and run the chosen page."""
    st.set_page_config(page_title="visformer", page_icon=FAVICON, layout="wide")
    session.init_state()
    pages = [p for p in PAGES if (ROOT / p.file).exists()]
    nav = st.navigation([st.Page(p.file, title=p.title, icon=p.icon) for p in pages])
    about = {p.title: p.about for p in pages}.get(nav.title, "")
    sidebar(about)
    nav.run()


main()
