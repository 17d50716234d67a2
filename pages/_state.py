"""Per-session view state, seeded once from the URL and written back to it.

Not a page: a helper module of pages/ (st.navigation in app.py lists the pages).
"""

from __future__ import annotations

import tempfile
import uuid
from contextvars import ContextVar
from pathlib import Path
from typing import NoReturn

import streamlit as st

from pages import _views as schema
from visformer import i18n
from visformer.classroom import catalogue
from visformer.classroom.inputs import error_markdown, escape_markdown, hide_paths

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


def init_state() -> None:
    """Seed every view parameter from the URL on a session's first run.

    Widgets bound to these keys use persist_state="session" (PERSIST), so values survive page switches.
    """
    state = st.session_state
    if "_view_loaded" not in state:
        for name, value in schema.parse_view(st.query_params.to_dict()).items():
            state[name] = list(value) if isinstance(value, tuple) else value
        state["_view_loaded"] = True
        state["_examples"] = []
        state["_lang_pinned"] = bool(state.get("lang"))  # a link that names its language keeps naming it


def sync_url(keys: list[str]) -> None:
    """Write the current view (`checkpoint`, a chosen language, `keys`) into the URL so a link restores it."""
    chosen = ["lang"] if st.session_state.get("_lang_pinned") else []
    wanted = schema.url_params(st.session_state, ["checkpoint", *chosen, *keys])
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def clamp_state(key: str, lo: int, hi: int) -> None:
    """Keep an integer widget value inside the range this checkpoint allows."""
    st.session_state[key] = schema.clamp(st.session_state.get(key, lo), lo, hi)


def session_id() -> str:
    """This browser session's private id (its training run and, in hosted mode, its checkpoint folder)."""
    return st.session_state.setdefault("_train_owner", uuid.uuid4().hex)


def lang() -> str:
    """The interface language: the URL's ?lang= (seeded into state), else the browser's locale, else English."""
    state = st.session_state
    if state.get("lang") not in i18n.LANGS:
        raw = st.query_params.get("lang")
        state["lang"] = raw if raw in i18n.LANGS else i18n.language_from_locale(st.context.locale)
    return state["lang"]


def tr(key: str, /, **fmt: object) -> str:
    """Interface text for `key` in this session's language (visformer.i18n.t)."""
    return i18n.t(key, lang(), **fmt)


def choose_lang(code: str) -> None:
    """Switch the interface language; from now on the URL names it, so a shared link opens in it."""
    st.session_state["lang"] = i18n.normalize_lang(code)
    st.session_state["_lang_pinned"] = True


def switch_checkpoint(key: str, keep_sentence: bool = False) -> None:
    """Pick another model: start at layer 0, head 0, no heads off; drop the old model's example sentence."""
    state = st.session_state
    state["checkpoint"] = key
    if not keep_sentence and state.get("sentence") in state.get("_examples", []):
        state["sentence"] = ""
    state["step"] = 0
    state["ablate"] = []


class PageEnd(Exception):
    """Raised by end_page(): the page has said all it can; the frame (app.py) still draws its share link."""


FRAMED: ContextVar[bool] = ContextVar("framed", default=False)  # set by app.py while it runs a page


def end_page() -> NoReturn:
    """End the page here, like st.stop(), but let the frame finish the sidebar (st.stop() would stop it too)."""
    if FRAMED.get():
        raise PageEnd
    st.stop()  # a page run on its own, outside app.py's frame


def capitalised(text: str) -> str:
    """A message that starts with a capital letter (the package's messages start in lower case)."""
    return text[:1].upper() + text[1:]


def _roots() -> list[str]:
    """Folders whose paths a message never shows (checkpoints, the temporary folder), as given and resolved."""
    folders = [*catalogue.checkpoint_roots(), Path(tempfile.gettempdir())]
    return [str(f) for folder in folders for f in (folder, folder.resolve())]


def error(exc: BaseException, capital: bool = True) -> str:
    """An error's message in this session's language for st.error / st.markdown: literal text, names for paths.

    Capitalised unless it starts with a file name. Any exception gives one line: the page boundary never shows
    a traceback (classroom.inputs.error_markdown).
    """
    return error_markdown(exc, lang(), capital, _roots())


def literal(text: str) -> str:
    """Text from outside the app (a job's message, a file name) for st.markdown: names for paths, every character literal."""
    return escape_markdown(hide_paths(text, _roots()))
