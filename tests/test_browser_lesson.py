"""The Lesson page in real Chromium, in Korean: every step drawn, its answer revealed, a screenshot each.

Same launch conventions as tests/test_browser.py (its `server` and `browser` fixtures). Screenshots go to
artifacts/screenshots/lesson-ko-NN.png (look at them: Hangul must render, in the page and in the charts).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.test_browser import (  # noqa: F401 (fixtures)
    REPO,
    VIEWPORT,
    WAIT_MS,
    _check_and_shoot,
    _wait_until_idle,
    browser,
    server,
)
from visformer import i18n
from visformer.checkpoint import list_checkpoints
from visformer.explain import lesson as ls

pytestmark = pytest.mark.browser


def _korean_checkpoint() -> str:
    """The shipped Korean→English model when present (the lecture's example), else the server's default."""
    names = [p.name for p in list_checkpoints(REPO / "checkpoints")]
    return "tatoeba-ko-en" if "tatoeba-ko-en" in names else ""


@pytest.fixture
def tab(server: str, browser) -> Iterator[tuple[object, list[str]]]:  # noqa: F811
    """A fresh tab (a fresh Streamlit session) once the frame has run on this server, and its JS errors."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/", wait_until="domcontentloaded", timeout=WAIT_MS)  # st.navigation registers pages
    page.locator('[data-testid="stSidebar"]').wait_for(timeout=WAIT_MS)
    _wait_until_idle(page)
    yield page, errors
    page.close()


def test_every_lesson_step_in_korean_in_chromium(server: str, tab) -> None:  # noqa: F811
    page, errors = tab
    checkpoint = _korean_checkpoint()
    for step, name in enumerate(ls.STEPS, start=1):
        query = f"lang=ko&lesson_step={step}" + (f"&checkpoint={checkpoint}" if checkpoint else "")
        page.goto(f"{server}/lesson?{query}", wait_until="domcontentloaded", timeout=WAIT_MS)
        page.get_by_role("heading", name=i18n.t(f"lesson.{name}.title", "ko")).wait_for(timeout=WAIT_MS)
        _wait_until_idle(page)
        page.get_by_role("button", name=i18n.t("lesson.reveal", "ko")).click()
        feedback = i18n.t("lesson.no_guess", "ko", answer="").split("**")[0].strip()
        page.get_by_text(feedback).first.wait_for(timeout=WAIT_MS)  # the computed answer is shown
        _wait_until_idle(page)
        # what the model computed is drawn after the reveal (issue 29): a chart, or a table
        page.locator('.js-plotly-plot, [data-testid="stTable"]').first.wait_for(timeout=WAIT_MS)
        page.wait_for_timeout(800)  # plotly finishes drawing
        _check_and_shoot(page, f"lesson-ko-{step:02d}", errors)  # whole page, no exception box, no JS error
        assert "lang=ko" in page.url
