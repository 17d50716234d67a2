"""Checkpoints and heavy computations, each behind a cache keyed on what it depends on.

Not a page. Keys: checkpoint path + modification stamp, sentence, parameters.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import streamlit as st
import torch

from pages._state import session_id
from visformer.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from visformer.classroom import catalogue
from visformer.classroom.hosting import HostedLimits, load_limits, user_checkpoint_root
from visformer.classroom.inputs import clean_sentence, fit_to_model
from visformer.explain import analysis as an
from visformer.explain import kinds
from visformer.explain import views as sup
from visformer.explain.examples import example_sentences
from visformer.model import HeadMask
from visformer.utils import resolve_device


def limits() -> HostedLimits:
    """Hosted or local limits from the environment and the [visformer] secrets section."""
    try:
        secrets = dict(st.secrets)
    except Exception:  # no secrets.toml
        secrets = {}
    return load_limits(secrets=secrets)


def user_root() -> Path:
    """Where this user's checkpoints live (in hosted mode: this session's private folder)."""
    return user_checkpoint_root(catalogue.checkpoint_roots()[1], session_id(), limits())


def choices() -> list[catalogue.CheckpointChoice]:
    """Shipped checkpoints and this user's (in hosted mode: this session's only), listed afresh each run."""
    return catalogue.discover_checkpoints(user_root=user_root())


def current_choice() -> catalogue.CheckpointChoice | None:
    """The picked checkpoint (the default when nothing valid is picked)."""
    return catalogue.find_choice(choices(), st.session_state.get("checkpoint"))


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


def current_checkpoint() -> tuple[catalogue.CheckpointChoice, Checkpoint] | None:
    """(choice, loaded checkpoint), or None with a message on the page when there is none or it is broken."""
    choice = current_choice()
    if choice is None:
        st.info("No checkpoint yet: train one on the Train page or add one to `checkpoints/`.")
        return None
    try:
        return choice, load(str(choice.path), catalogue.checkpoint_stamp(choice.path))
    except (CheckpointError, OSError) as exc:
        st.error(f"Could not load checkpoint **{choice.label}**: {exc}")
        return None


def offer_examples(choice: catalogue.CheckpointChoice, ck: Checkpoint) -> list[str]:
    """Example sentences for this checkpoint; an empty sentence becomes the first one."""
    examples = example_sentences(choice.key, ck.info, ck.task)
    st.session_state["_examples"] = examples  # so a checkpoint switch can drop the old model's example
    if not st.session_state.get("sentence") and examples:
        st.session_state["sentence"] = examples[0]
    return examples


def _head_mask(ck: Checkpoint, codes: tuple[str, ...]) -> HeadMask | None:
    """A HeadMask with the coded heads off (None when every head is on)."""
    if not codes:
        return None
    rows = sup.head_mask_rows(codes, kinds.layer_counts(ck.model_config), ck.model_config.n_heads)
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
