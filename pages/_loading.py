"""Checkpoints and heavy computations, each behind a cache keyed on what it depends on.

Not a page. Keys: checkpoint path + modification stamp, sentence, parameters.
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from pages import _state as session
from pages._state import session_id, tr
from visformer import i18n
from visformer.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from visformer.classroom import catalogue
from visformer.classroom.hosting import HostedLimits, load_limits, sweep_leftovers, user_checkpoint_root
from visformer.classroom.inputs import InputError, clean_sentence, escape_markdown, fit_to_model
from visformer.data import token_room
from visformer.explain import analysis as an
from visformer.explain import views as sup
from visformer.explain.examples import SCRIPT_LANGS, example_sentences, script_mismatch
from visformer.model import HeadMask
from visformer.models import attention_layers
from visformer.utils import resolve_device

log = logging.getLogger(__name__)


def limits() -> HostedLimits:
    """Hosted or local limits from the environment and the [visformer] secrets section."""
    try:
        secrets = dict(st.secrets)
    except Exception:  # no secrets.toml
        secrets = {}
    return load_limits(secrets=secrets)


@st.cache_resource(show_spinner=False)
def swept(root: str) -> int:
    """Once per server process and folder: remove what killed saves and imports left (hosting.sweep_leftovers)."""
    return len(sweep_leftovers(root))


def user_root() -> Path:
    """Where this user's checkpoints live (in hosted mode: this session's private folder)."""
    root = catalogue.checkpoint_roots()[1]
    swept(str(root))
    return user_checkpoint_root(root, session_id(), limits())


def choices() -> list[catalogue.CheckpointChoice]:
    """Shipped checkpoints and this user's (in hosted mode: this session's only), listed afresh each run."""
    return catalogue.discover_checkpoints(user_root=user_root())


def current_choice() -> catalogue.CheckpointChoice | None:
    """The picked checkpoint (the default when nothing valid is picked)."""
    return catalogue.find_choice(choices(), st.session_state.get("checkpoint"))


def fitted_sentence(ck: Checkpoint, text: str) -> str:
    """The sentence cleaned and cut to fit the model, saying on the page what changed; ValueError if unusable.

    Also says when the sentence is written in another script than the model reads, with a button to switch.
    """
    bounds = limits()
    if not " ".join(str(text or "").split()):
        raise InputError("frame.empty")
    whole = clean_sentence(text, replace(bounds, max_sentence_chars=sys.maxsize))  # only cleaned, not cut
    if whole.changed:
        st.info(tr("frame.controls"))
    if len(whole.text) > bounds.max_sentence_chars:
        st.info(tr("frame.cut_chars", limit=bounds.max_sentence_chars, n=len(whole.text)))
    cleaned = clean_sentence(whole.text, bounds)
    fitted = fit_to_model(cleaned.text, ck.src_tokenizer, ck.model_config.max_len, bounds)
    if fitted.changed:
        room = min(token_room(ck.model_config.max_len), bounds.max_sentence_tokens or math.inf)
        total = len(cleaned.text.split(" "))
        st.info(tr("frame.cut_words", kept=len(fitted.text.split(" ")), total=total, room=room))
    if not script_notice(fitted.text):  # a sentence in another script: that warning says it already
        unseen_notice(ck, fitted.text)
    return fitted.text


def label(choice: catalogue.CheckpointChoice) -> str:
    """A checkpoint's name in the picker and in messages, in the interface language."""
    return choice.key if choice.shipped else tr("frame.yours", name=choice.key[len(catalogue.USER_PREFIX) :])


def language_name(code: str | None) -> str:
    """A language code in words, in the interface language ('ko' -> 'Korean' / '한국어')."""
    key = f"frame.lang.{code}"
    return tr(key) if code and i18n.has(key) else str(code or "?")


@st.cache_data(max_entries=64, show_spinner=False)
def model_card(path: str, stamp: float, key: str) -> catalogue.ModelCard:
    """The model card of a checkpoint folder (card.json and config.json's info)."""
    return catalogue.model_card(Path(path), key)


def card_of(choice: catalogue.CheckpointChoice) -> catalogue.ModelCard:
    """The model card of a picked checkpoint."""
    return model_card(str(choice.path), catalogue.checkpoint_stamp(choice.path), choice.key)


def script_notice(text: str) -> bool:
    """A warning when the sentence's script is not the model's source language, and a button to switch model."""
    choice = current_choice()
    if choice is None:
        return False
    card = card_of(choice)
    script = script_mismatch(text, card.src_lang)
    if script is None:
        return False
    st.warning(tr(f"frame.script.{script}", model=label(choice), lang=language_name(card.src_lang)))
    other = catalogue.choice_for_language(choices(), SCRIPT_LANGS[script])
    if other is not None:
        theirs = card_of(other)
        text = tr("frame.script.switch", model=label(other), src=language_name(theirs.src_lang),
                  tgt=language_name(theirs.tgt_lang))  # fmt: skip
        st.button(text, key="frame_switch_model", icon=":material/swap_horiz:",
                  on_click=session.switch_checkpoint, args=(other.key, True))  # fmt: skip
    return True


def unseen_notice(ck: Checkpoint, text: str) -> None:
    """A warning naming the characters the model never saw in training (emoji, symbols): it reads them as bytes."""
    choice = current_choice()
    unseen = sup.unseen_characters(ck.src_tokenizer.pieces(ck.src_tokenizer.encode(text)))
    if unseen and choice is not None:
        chars = " ".join(escape_markdown(c) for c in unseen)
        st.warning(tr("frame.unseen", model=label(choice), chars=chars), icon=":material/help:")


@st.cache_resource(max_entries=4, show_spinner=False)
def load(path: str, stamp: float) -> Checkpoint:
    """Load once per (folder, stamp) and share between sessions: eval mode, never mutated."""
    return load_checkpoint(path, device=resolve_device("auto"))


def current_checkpoint() -> tuple[catalogue.CheckpointChoice, Checkpoint] | None:
    """(choice, loaded checkpoint), or None with a message on the page when there is none or it is broken."""
    choice = current_choice()
    if choice is None:
        st.info(tr("frame.no_checkpoint"))
        return None
    try:
        with st.spinner(tr("frame.loading")):
            return choice, load(str(choice.path), catalogue.checkpoint_stamp(choice.path))
    except Exception as exc:  # the page boundary: a broken checkpoint is one message, never a traceback
        if not isinstance(exc, CheckpointError | OSError):
            log.exception("loading %s failed", choice.key)
        st.error(tr("frame.load_error", name=label(choice), error=session.error(exc, capital=False)))
        return None


def offer_examples(choice: catalogue.CheckpointChoice, ck: Checkpoint) -> list[str]:
    """Example sentences for this checkpoint (its card's, then the lecture's); an empty sentence becomes the first one."""
    card = card_of(choice)
    info = {**ck.info, "src_lang": card.src_lang, "tgt_lang": card.tgt_lang}
    examples = example_sentences(choice.key, info, ck.task, suited=card.examples)
    st.session_state["_examples"] = examples  # so a checkpoint switch can drop the old model's example
    if not st.session_state.get("sentence") and examples:
        st.session_state["sentence"] = examples[0]
    return examples


def _head_mask(ck: Checkpoint, codes: tuple[str, ...]) -> HeadMask | None:
    """A HeadMask with the coded heads off (None when every head is on)."""
    if not codes:
        return None
    rows = sup.head_mask_rows(codes, attention_layers(ck.model_config), ck.model_config.n_heads)
    device = next(ck.model.parameters()).device
    return HeadMask(**{kind: torch.from_numpy(r).to(device) for kind, r in rows.items()})


def translation(path: str, stamp: float, sentence: str, ablate: tuple[str, ...] = ()) -> sup.TranslationView:
    """Greedy translation of `sentence` with the listed heads switched off, as arrays (a spinner while it runs)."""
    with st.spinner(tr("frame.translating")):
        return _translation(path, stamp, sentence, ablate)


@st.cache_data(max_entries=64, show_spinner=False)
def _translation(path: str, stamp: float, sentence: str, ablate: tuple[str, ...] = ()) -> sup.TranslationView:
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


def task_alignment(path: str, stamp: float, task: str) -> np.ndarray:
    """(layers, heads) argmax-alignment hit rate of each cross-attention head on held-out task examples."""
    with st.spinner(tr("frame.measuring")):
        return _task_alignment(path, stamp, task)


@st.cache_data(max_entries=8, show_spinner=False)
def _task_alignment(path: str, stamp: float, task: str) -> np.ndarray:
    """task_alignment(), cached."""
    from visformer.tasks import make_examples

    ck = load(path, stamp)
    examples = make_examples(task, 32, seed=777)
    return an.task_alignment_grid(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, examples)


@st.cache_data(max_entries=8, show_spinner=False)
def embedding_norms(path: str, stamp: float) -> np.ndarray:
    """‖√d·E[token]‖ of every source token of a checkpoint."""
    return an.embedding_norms(load(path, stamp).model)
