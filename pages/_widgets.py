"""Widgets shared by the frame and the pages: charts, download buttons, sliders, the checkpoint transfer box.

Not a page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from pages import _state as session
from pages._loading import limits, user_root
from pages._state import PERSIST, clamp_state, tr
from visformer.classroom import catalogue
from visformer.classroom.archive import export_checkpoint_zip, import_checkpoint_zip
from visformer.classroom.hosting import upload_megabytes
from visformer.classroom.inputs import checkpoint_name
from visformer.explain.style import chart_config, fit_title


def _import_checkpoint() -> None:
    """Callback (runs before the widgets): check, unpack and pick the uploaded checkpoint .zip."""
    state = st.session_state
    upload = state.get("ck_import_file")
    if upload is None:
        return
    try:
        name = checkpoint_name(Path(upload.name).stem)
        path = import_checkpoint_zip(upload.getvalue(), user_root(), name, limits())
        state["checkpoint"] = catalogue.USER_PREFIX + path.name
        state["_import_message"] = ("success", tr("frame.transfer.imported", name=path.name))
    except (
        Exception
    ) as exc:  # InputError, ArchiveError, CheckpointError, and anything else: one clear message
        if not isinstance(exc, ValueError | OSError):
            logging.getLogger(__name__).exception("importing %s failed", upload.name)
        state["_import_message"] = (
            "error",
            tr("frame.transfer.refused", error=session.error(exc, capital=False)),
        )


def checkpoint_transfer(choice: catalogue.CheckpointChoice | None) -> None:
    """Sidebar: download the picked checkpoint as a .zip, or import one (checked before it is kept)."""
    megabytes = upload_mb(limits().max_archive_bytes)
    with st.expander(tr("frame.transfer.title"), icon=":material/swap_vert:"):
        if choice is not None:
            st.download_button(
                tr("frame.transfer.download"), data=lambda: export_checkpoint_zip(choice.path),
                file_name=f"{choice.path.name}.zip", mime="application/zip", on_click="ignore", key="ck_export",
            )  # fmt: skip
        st.file_uploader(
            tr("frame.transfer.file"), type=["zip"], key="ck_import_file", max_upload_size=megabytes
        )
        st.button(tr("frame.transfer.import"), key="ck_import", on_click=_import_checkpoint,
                  disabled=st.session_state.get("ck_import_file") is None)  # fmt: skip
        kind, text = st.session_state.pop("_import_message", (None, ""))
        if kind:
            getattr(st, kind)(text)


def upload_mb(limit_bytes: int) -> int:
    """An uploader's limit in MB: the app's limit, capped by server.maxUploadSize so the uploader itself refuses more."""
    return upload_megabytes(limit_bytes, st.get_option("server.maxUploadSize"))


def chart(fig: go.Figure, name: str, key: str | None = None) -> None:
    """Draw a figure full width with a PNG download button in its toolbar; a title set after layout() wrapped too."""
    st.plotly_chart(fit_title(fig), config=chart_config(name), key=key or f"chart-{name}", theme=None)


def sentence_input(label: str, container=None) -> str:
    """The sentence box every translating page shares (key "sentence"): its text carries over a page switch.

    After a switch the box remounts under this page's widget id, and for that first run it would show empty
    ("There is nothing to translate") until Streamlit copies the kept value over at the end of the run. The
    value written back under its key before the box is drawn is the one it shows at once.
    """
    state = st.session_state
    if "sentence" in state:
        state["sentence"] = state["sentence"]
    return (container or st).text_input(label, key="sentence", persist_state=PERSIST)


def csv_button(data: str | Callable[[], str], name: str, label: str | None = None) -> None:
    """A download button for a CSV string, or for a function that makes it only when the button is clicked."""
    st.download_button(
        label or tr("frame.csv"),
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


def index_slider(label: str, n: int, key: str, container=None, from_one: bool = False, on_change=None) -> int:
    """A slider over 0..n-1 bound to `key` (from_one: shown as 1..n); with a single choice, a caption instead."""
    where = container or st
    if n <= 1:
        st.session_state[key] = 0
        where.caption(tr("frame.only_one", label=label, value=int(from_one)))
        return 0
    clamp_state(key, 0, n - 1)
    if from_one:  # layers and heads are counted from 1 on screen, from 0 in the code and the URL
        return where.select_slider(
            label, list(range(n)), format_func=lambda i: str(i + 1), key=key, persist_state=PERSIST,
            on_change=on_change,
        )  # fmt: skip
    return where.slider(label, 0, n - 1, key=key, persist_state=PERSIST, on_change=on_change)
