"""Streamlit side shared by the frame and every page: state, cached loading, charts, the URL.

Not a page itself. Everything heavy goes through a cache keyed on what it depends on
(checkpoint path + modification stamp, sentence, parameters).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st
import torch

from visformer import analysis as an
from visformer import app_support as sup
from visformer.archive import export_checkpoint_zip, import_checkpoint_zip
from visformer.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from visformer.figures import chart_config
from visformer.hosting import HostedLimits, load_limits, user_checkpoint_root
from visformer.model import HeadMask
from visformer.utils import resolve_device
from visformer.validation import checkpoint_name, clean_sentence, fit_to_model

PERSIST = "session"  # widget values outlive page switches


def ensure_frame() -> None:
    """Hand a deep link over to app.py's st.navigation frame on a fresh server.

    Because a pages/ folder exists, Streamlit starts in its old folder mode: until some session has run
    app.py (whose st.navigation switches that mode off), a first visit to /decoding would run the page
    alone, without the sidebar, and list every file of pages/ as a page. Switch the mode off and rerun,
    so app.py runs and opens the page the URL names inside the frame. Every page calls this first, after
    its imports (never at import time: a rerun raised inside an import races other sessions' imports).
    """
    from streamlit.runtime.pages_manager import PagesManager

    global _HANDED_OVER
    if PagesManager.uses_pages_directory and not _HANDED_OVER:  # once per server process is enough
        _HANDED_OVER = True
        PagesManager.uses_pages_directory = False
        st.rerun()


_HANDED_OVER = False


# ---------------------------------------------------------------------------------------------
# Session state: initialised here, once per session, from the URL
# ---------------------------------------------------------------------------------------------


def init_state() -> None:
    """Seed every view parameter from the URL on a session's first run.

    Widgets bound to these keys use persist_state="session" (PERSIST), so values survive page switches.
    """
    state = st.session_state
    if "_view_loaded" not in state:
        for name, value in sup.parse_view(st.query_params.to_dict()).items():
            state[name] = list(value) if isinstance(value, tuple) else value
        state["_view_loaded"] = True
        state["_examples"] = []


def sync_url(keys: list[str]) -> None:
    """Write the current view (`checkpoint` plus `keys`) into the URL so a link restores it."""
    wanted = sup.url_params(st.session_state, ["checkpoint", *keys])
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Keep an integer widget value inside the range this checkpoint allows."""
    st.session_state[key] = sup.clamp(st.session_state.get(key, lo), lo, hi)


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


def limits() -> HostedLimits:
    """Hosted or local limits from the environment and the [visformer] secrets section."""
    try:
        secrets = dict(st.secrets)
    except Exception:  # no secrets.toml
        secrets = {}
    return load_limits(secrets=secrets)


def session_id() -> str:
    """This browser session's private id (its training run and, in hosted mode, its checkpoint folder)."""
    return st.session_state.setdefault("_train_owner", uuid.uuid4().hex)


def user_root() -> Path:
    """Where this user's checkpoints live (in hosted mode: this session's private folder)."""
    return user_checkpoint_root(sup.checkpoint_roots()[1], session_id(), limits())


def choices() -> list[sup.CheckpointChoice]:
    """Shipped checkpoints and this user's (in hosted mode: this session's only), listed afresh each run."""
    return sup.discover_checkpoints(user_root=user_root())


def _import_checkpoint() -> None:
    """Callback (runs before the widgets): check, unpack and pick the uploaded checkpoint .zip."""
    state = st.session_state
    upload = state.get("ck_import_file")
    if upload is None:
        return
    try:
        name = checkpoint_name(Path(upload.name).stem)
        path = import_checkpoint_zip(upload.getvalue(), user_root(), name, limits())
        state["checkpoint"] = sup.USER_PREFIX + path.name
        state["_import_message"] = ("success", f"Imported **{path.name}**; it is now picked.")
    except (ValueError, OSError) as exc:  # InputError, ArchiveError, CheckpointError: one clear message
        state["_import_message"] = ("error", f"Not imported: {exc}")


def checkpoint_transfer(choice: sup.CheckpointChoice | None) -> None:
    """Sidebar: download the picked checkpoint as a .zip, or import one (checked before it is kept)."""
    megabytes = max(1, limits().max_archive_bytes // 2**20)
    with st.expander("Download or import a checkpoint", icon=":material/swap_vert:"):
        if choice is not None:
            st.download_button(
                "Download the picked checkpoint (.zip)", data=lambda: export_checkpoint_zip(choice.path),
                file_name=f"{choice.path.name}.zip", mime="application/zip", on_click="ignore", key="ck_export",
            )  # fmt: skip
        st.file_uploader(
            "Import a checkpoint (.zip)", type=["zip"], key="ck_import_file", max_upload_size=megabytes
        )
        st.button("Import", key="ck_import", on_click=_import_checkpoint,
                  disabled=st.session_state.get("ck_import_file") is None)  # fmt: skip
        kind, text = st.session_state.pop("_import_message", (None, ""))
        if kind:
            getattr(st, kind)(text)


def current_choice() -> sup.CheckpointChoice | None:
    """The picked checkpoint (the default when nothing valid is picked)."""
    return sup.find_choice(choices(), st.session_state.get("checkpoint"))


def fitted_sentence(ck: Checkpoint, text: str) -> str:
    """The sentence cleaned and cut to fit the model, saying on the page what changed; ValueError if unusable."""
    bounds = limits()
    cleaned = clean_sentence(text, bounds)
    fitted = fit_to_model(cleaned.text, ck.src_tokenizer, ck.model_config.max_len, bounds)
    for note in (*cleaned.notes, *fitted.notes):
        st.info(f"Your sentence was changed: {note}.")
    return fitted.text


@st.cache_resource(max_entries=4, show_spinner="Loading the checkpoint…")
def load(path: str, stamp: float) -> Checkpoint:
    """Load once per (folder, stamp) and share between sessions: eval mode, never mutated."""
    return load_checkpoint(path, device=resolve_device("auto"))


def current_checkpoint() -> tuple[sup.CheckpointChoice, Checkpoint] | None:
    """(choice, loaded checkpoint), or None with a message on the page when there is none or it is broken."""
    choice = current_choice()
    if choice is None:
        st.info("No checkpoint yet: train one on the Train page or add one to `checkpoints/`.")
        return None
    try:
        return choice, load(str(choice.path), sup.checkpoint_stamp(choice.path))
    except (CheckpointError, OSError) as exc:
        st.error(f"Could not load checkpoint **{choice.label}**: {exc}")
        return None


def offer_examples(choice: sup.CheckpointChoice, ck: Checkpoint) -> list[str]:
    """Example sentences for this checkpoint; an empty sentence becomes the first one."""
    examples = sup.example_sentences(choice.key, ck.info, ck.task)
    st.session_state["_examples"] = examples  # so a checkpoint switch can drop the old model's example
    if not st.session_state.get("sentence") and examples:
        st.session_state["sentence"] = examples[0]
    return examples


def checkpoint_sizes(ck: Checkpoint) -> dict[str, int]:
    """Number of layers per attention kind."""
    cfg = ck.model_config
    return {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers, "cross": cfg.n_decoder_layers}


# ---------------------------------------------------------------------------------------------
# Cached computations
# ---------------------------------------------------------------------------------------------


def _head_mask(ck: Checkpoint, codes: tuple[str, ...]) -> HeadMask | None:
    """A HeadMask with the coded heads off (None when every head is on)."""
    if not codes:
        return None
    rows = sup.head_mask_rows(codes, checkpoint_sizes(ck), ck.model_config.n_heads)
    device = next(ck.model.parameters()).device
    return HeadMask(**{kind: torch.from_numpy(r).to(device) for kind, r in rows.items()})


@st.cache_data(max_entries=64, show_spinner="Translating…")
def translation(path: str, stamp: float, sentence: str, ablate: tuple[str, ...] = ()) -> sup.TranslationView:
    """Greedy translation of `sentence` with the listed heads switched off, as arrays."""
    from visformer.decoding import translate

    ck = load(path, stamp)
    result = translate(
        ck.model, ck.src_tokenizer, ck.tgt_tokenizer, sentence, "greedy", head_mask=_head_mask(ck, ablate)
    )
    return sup.translation_view(result, ck.tgt_tokenizer, sentence)


@st.cache_data(max_entries=64, show_spinner=False)
def internals(
    path: str,
    stamp: float,
    src_ids: tuple[int, ...],
    query_ids: tuple[int, ...],
    kind: str,
    layer: int,
    head: int,
) -> an.HeadInternals:
    """Q, K, V, scores, softmax and output of one head on one sentence."""
    return an.head_internals(load(path, stamp).model, list(src_ids), list(query_ids), kind, layer, head)


@st.cache_data(max_entries=8, show_spinner="Measuring heads on task examples…")
def task_alignment(path: str, stamp: float, task: str) -> np.ndarray:
    """(layers, heads) argmax-alignment hit rate of each cross-attention head on held-out task examples."""
    from visformer.tasks import make_examples

    ck = load(path, stamp)
    examples = make_examples(task, 32, seed=777)
    return an.task_alignment_grid(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, examples)


@st.cache_data(max_entries=8, show_spinner=False)
def embedding_norms(path: str, stamp: float) -> np.ndarray:
    """‖√d·E[token]‖ of every source token of a checkpoint."""
    return an.embedding_norms(load(path, stamp).model)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def chart(fig: go.Figure, name: str, key: str | None = None) -> None:
    """Draw a figure full width with a PNG download button in its toolbar."""
    st.plotly_chart(fig, config=chart_config(name), key=key or f"chart-{name}", theme=None)


def csv_button(data: str | Callable[[], str], name: str, label: str = "Download attention as CSV") -> None:
    """A download button for a CSV string, or for a function that makes it only when the button is clicked."""
    st.download_button(
        label,
        data=data,
        file_name=f"{name}.csv",
        mime="text/csv",
        icon=":material/download:",
        key=f"csv-{name}",
        on_click="ignore",
    )


def pieces_markdown(pieces: list[str], highlight: int | None = None) -> str:
    """Pieces as inline code chips; the highlighted one bold on an orange background."""
    chips = []
    for i, piece in enumerate(pieces):
        text = piece.replace("`", "ˋ") or "␣"
        if i == highlight:
            escaped = "".join("\\" + ch if ch in "\\*_[]<>#|~:$" else ch for ch in text)
            chips.append(f":orange-background[**{escaped}**]")
        else:
            chips.append(f"`{text}`")
    return " ".join(chips)


def repo_path(*parts: str) -> Path:
    """A path inside the repository."""
    return sup.REPO.joinpath(*parts)


def index_slider(label: str, n: int, key: str, container=None) -> int:
    """A slider over 0..n-1 bound to `key`; with a single choice, a caption instead (sliders need two)."""
    where = container or st
    if n <= 1:
        st.session_state[key] = 0
        where.caption(f"{label}: 0 (the only one)")
        return 0
    clamp_state(key, 0, n - 1)
    return where.slider(label, 0, n - 1, key=key, persist_state=PERSIST)
