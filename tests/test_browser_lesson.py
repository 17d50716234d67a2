"""The Lesson page in real Chromium, in Korean: every step drawn, its answer revealed, a screenshot each.

The `server` and `browser` fixtures of tests/conftest.py. Screenshots go to
artifacts/screenshots/lesson-ko-NN.png (look at them: Hangul must render, in the page and in the charts).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.browser import (
    VIEWPORT,
    WAIT_MS,
    charts_drawn,
    check_and_shoot,
    korean_checkpoint,
    wait_until_idle,
)
from visformer import i18n
from visformer.explain import lesson as ls

pytestmark = pytest.mark.browser


@pytest.fixture
def tab(server: str, browser) -> Iterator[tuple[object, list[str]]]:
    """A fresh tab (a fresh Streamlit session) once the frame has run on this server, and its JS errors."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server + "/", wait_until="domcontentloaded", timeout=WAIT_MS)  # st.navigation registers pages
    page.locator('[data-testid="stSidebar"]').wait_for(timeout=WAIT_MS)
    wait_until_idle(page)
    yield page, errors
    page.close()


def test_every_lesson_step_in_korean_in_chromium(server: str, tab) -> None:
    page, errors = tab
    checkpoint = korean_checkpoint()
    for step, name in enumerate(ls.STEPS, start=1):
        query = f"lang=ko&lesson_step={step}" + (f"&checkpoint={checkpoint}" if checkpoint else "")
        page.goto(f"{server}/lesson?{query}", wait_until="domcontentloaded", timeout=WAIT_MS)
        page.get_by_role("heading", name=i18n.t(f"lesson.{name}.title", "ko")).wait_for(timeout=WAIT_MS)
        wait_until_idle(page)
        page.get_by_role("button", name=i18n.t("lesson.reveal", "ko")).click()
        feedback = i18n.t("lesson.no_guess", "ko", answer="").split("**")[0].strip()
        page.get_by_text(feedback).first.wait_for(timeout=WAIT_MS)  # the computed answer is shown
        wait_until_idle(page)
        # what the model computed is drawn after the reveal (issue 29): a chart, or a table
        page.locator('.js-plotly-plot:visible, [data-testid="stTable"]').first.wait_for(timeout=WAIT_MS)
        charts_drawn(page)  # plotly finishes drawing
        check_and_shoot(page, f"lesson-ko-{step:02d}", errors)  # whole page, no exception box, no JS error
        assert "lang=ko" in page.url
