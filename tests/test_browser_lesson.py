"""The Lesson page in real Chromium, in Korean: every step drawn, its answer revealed, a screenshot each.

Same launch conventions as tests/test_browser.py (its `server` and `browser` fixtures). Screenshots go to
artifacts/screenshots/lesson-ko-NN.png (look at them: Hangul must render, in the page and in the charts).
"""

from __future__ import annotations

import pytest

from tests.test_browser import SHOTS, WAIT_MS, _wait_until_idle, browser, server  # noqa: F401 (fixtures)
from tests.test_browser_pages import page  # noqa: F401 (fixture: a fresh tab after the frame has loaded)
from visformer import i18n
from visformer.checkpoint import list_checkpoints
from visformer.explain import lesson as ls

pytestmark = pytest.mark.browser


def _korean_checkpoint() -> str:
    """The shipped Korean→English model when present (the lecture's example), else the server's default."""
    from tests.test_browser import REPO

    names = [p.name for p in list_checkpoints(REPO / "checkpoints")]
    return "tatoeba-ko-en" if "tatoeba-ko-en" in names else ""


def test_every_lesson_step_in_korean_in_chromium(server: str, page) -> None:  # noqa: F811
    tab = page
    checkpoint = _korean_checkpoint()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for step, name in enumerate(ls.STEPS, start=1):
        query = f"lang=ko&lesson_step={step}" + (f"&checkpoint={checkpoint}" if checkpoint else "")
        tab.goto(f"{server}/lesson?{query}", wait_until="domcontentloaded", timeout=WAIT_MS)
        tab.get_by_role("heading", name=i18n.t(f"lesson.{name}.title", "ko")).wait_for(timeout=WAIT_MS)
        _wait_until_idle(tab)
        tab.get_by_role("button", name=i18n.t("lesson.reveal", "ko")).click()
        feedback = i18n.t("lesson.no_guess", "ko", answer="").split("**")[0].strip()
        tab.get_by_text(feedback).first.wait_for(timeout=WAIT_MS)  # the computed answer is shown
        _wait_until_idle(tab)
        tab.wait_for_timeout(800)  # plotly finishes drawing
        boxes = tab.locator('[data-testid="stException"]')
        assert boxes.count() == 0, boxes.first.inner_text()
        tab.screenshot(path=str(SHOTS / f"lesson-ko-{step:02d}.png"), full_page=True)
        assert "lang=ko" in tab.url
