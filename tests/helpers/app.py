"""Drive the app in Streamlit's AppTest (no browser): open pages and links, read charts, poll a run."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages import _views as schema
from pages._preload import page_charts
from tests.helpers.paths import REPO
from visformer import i18n

APP = str(REPO / "app.py")
ATTENTION = "pages/attention.py"
DECODING = "pages/decoding.py"
PE = "pages/positional_encoding.py"
TIMELINE = "pages/timeline.py"
TRAIN = "pages/train.py"
TIMEOUT = 120  # seconds per script run: generous for a shared 2-core machine, not a performance limit
HANGUL = re.compile("[가-힣]")
ATTENTION_TABS = list(schema.ATTENTION_TABS)  # the Attention page's tabs, by id
ATTENTION_TAB_LABELS = [i18n.t(f"attention.tab.{tab}", "en") for tab in ATTENTION_TABS]  # as shown in English


def use_checkpoints(monkeypatch: pytest.MonkeyPatch, roots: tuple[Path, Path]) -> tuple[Path, Path]:
    """Point the app at (shipped, user) checkpoint folders until the test ends."""
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(roots[0]))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(roots[1]))
    return roots


def no_exception(at: AppTest) -> AppTest:
    """Fail on any exception the script raised; return `at`."""
    assert not at.exception, [e.value for e in at.exception]
    return at


def run_app(page: str | None = None, **params: str) -> AppTest:
    """Run the app (optionally switching to `page`) with query parameters; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    if page:
        at.switch_page(page).run()
    return no_exception(at)


def open_page(page: str, checkpoint: str | None = None) -> AppTest:
    """Run the app, pick a checkpoint, switch to `page`; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    if checkpoint:
        at.selectbox(key="checkpoint").set_value(checkpoint).run()
    at.switch_page(page).run()
    at.run()  # AppTest sends the previous page's widget values on the first run after a switch
    return no_exception(at)


def open_link(page: str, **params: str) -> AppTest:
    """A link to `page` with these query parameters, in a fresh session; fail on any exception.

    One more run after the page switch, as in open_page (AppTest sends the previous page's widget values first).
    """
    at = run_app(page, **params)
    at.run()
    return no_exception(at)


def open_tab(at: AppTest, tab: str) -> AppTest:
    """Switch the Attention page's tab (by id: only the open tab is computed) and rerun."""
    at.session_state["tab"] = tab
    at.run()
    return no_exception(at)


def korean(at: AppTest) -> AppTest:
    """Switch an open app to Korean (as the sidebar's language toggle does) and rerun."""
    at.session_state["lang"] = "ko"
    at.run()
    return no_exception(at)


def charts(at: AppTest) -> list:
    """The page's plotly charts (without the frame's hidden preload chart, pages/_preload.py)."""
    return page_charts(at.get("plotly_chart"))


def specs(at: AppTest) -> list[dict]:
    """Every plotly figure on the page, as the JSON sent to the browser."""
    return [json.loads(chart.proto.spec) for chart in charts(at)]


def array(value) -> np.ndarray:
    """A plotly JSON array: a plain list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(value, dict):
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return data.reshape([int(n) for n in str(shape).split(",")]) if shape else data
    return np.array(value, dtype=float)


def title(spec: dict) -> str:
    """A figure's title on one line (a long title is wrapped with <br>)."""
    return spec["layout"].get("title", {}).get("text", "").replace("<br>", " ")


def chart_by_title(at: AppTest, start: str) -> dict:
    """The first figure whose title starts with `start`."""
    matches = [s for s in specs(at) if title(s).startswith(start)]
    assert matches, f"no chart titled {start!r}: {[title(s) for s in specs(at)]}"
    return matches[0]


def markdown(at: AppTest, start: str) -> str:
    """The first markdown element that starts with `start`."""
    return next(m.value for m in at.markdown if m.value.startswith(start))


def page_texts(at: AppTest) -> list[str]:
    """Every markdown, caption, info, warning, title and header text on the page, and every metric label."""
    groups = (at.markdown, at.caption, at.info, at.warning, at.title, at.header, at.subheader)
    return [e.value for group in groups for e in group] + [m.label for m in at.metric]


def assert_no_raw_key(at: AppTest, raw_key: re.Pattern) -> None:
    """No text on the page is an untranslated interface key (one `raw_key` matches)."""
    raw = [t for t in page_texts(at) if raw_key.search(str(t))]
    assert not raw, raw


def has_button(at: AppTest, key: str) -> bool:
    """Whether a button with this key is on the page."""
    return any(b.key == key for b in at.button)


def poll(at: AppTest, condition: Callable[[AppTest], bool], polls: int = 1500) -> None:
    """Re-run the page (as the fragment's timer would) until condition(at) holds; a bounded number of polls."""
    for _ in range(polls):
        at.run()
        no_exception(at)
        if condition(at):
            return
        time.sleep(0.1)
    raise AssertionError("the run never reached the expected state")
