"""Decoding, Train and Attention timeline in real Chromium: a short training run from the browser, then its replay.

Same launch conventions as tests/test_browser.py (its `server` and `browser` fixtures). Screenshots go to
artifacts/screenshots/; any Streamlit exception box fails the test.
"""

from __future__ import annotations

import pytest

from bench.bench_load import SAVED
from tests.test_browser import SHOTS, WAIT_MS, _wait_until_idle, browser, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

TRAIN_WAIT_MS = 600_000  # a 200-step toy run on a busy shared machine
VIEWPORT = {"width": 1440, "height": 2200}  # tall: Streamlit scrolls inside its own container


def _no_exception(page) -> None:
    """Fail on a Streamlit exception box or a JavaScript error."""
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()


def _charts(page, n: int) -> None:
    """Wait until n plotly charts are visible and the script is idle."""
    _wait_until_idle(page)
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= {n}",
        timeout=WAIT_MS,
    )
    page.wait_for_timeout(500)


def _shot(page, name: str) -> None:
    """Screenshot into artifacts/screenshots/ after checking for exceptions."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    _no_exception(page)


@pytest.fixture
def page(server: str, browser):  # noqa: F811
    """A fresh tab (a fresh Streamlit session) after the frame has been loaded once on this server."""
    tab = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(
        server + "/", wait_until="domcontentloaded", timeout=WAIT_MS
    )  # st.navigation registers the pages
    tab.wait_for_selector(".js-plotly-plot", state="attached", timeout=WAIT_MS)
    yield tab
    tab.close()
    assert not errors, errors


def test_decoding_page_in_chromium(server: str, page) -> None:  # noqa: F811 (fixture imported above)
    page.goto(server + "/decoding", wait_until="domcontentloaded", timeout=WAIT_MS)
    _charts(page, 2)
    assert page.get_by_text("How probable is each output under the model?").count() >= 1
    _shot(page, "decoding")
    page.get_by_role("tab", name="Beam search tree").click()
    _charts(page, 2)
    _shot(page, "decoding-beam-tree")
    page.get_by_role("tab", name="Samples").click()
    _charts(page, 2)
    assert page.get_by_text("Different outputs").count() >= 1
    _shot(page, "decoding-samples")


def test_train_then_replay_the_timeline_in_chromium(server: str, page) -> None:  # noqa: F811 (fixture imported above)
    page.goto(server + "/train", wait_until="domcontentloaded", timeout=WAIT_MS)
    _charts(page, 1)  # the Noam schedule
    steps = page.locator('[data-testid="stSlider"]').filter(has_text="Training steps").get_by_role("slider")
    steps.focus()
    for _ in range(3):  # 600 → 400 → 300 → 200 steps
        steps.press("ArrowLeft")
    _wait_until_idle(page)
    page.get_by_label("Checkpoint name").fill("browser-copy")
    page.get_by_label("Checkpoint name").press("Enter")
    _wait_until_idle(page)
    _shot(page, "train-settings")
    page.get_by_role("button", name="Start training", exact=True).click()
    page.get_by_text("Training…").first.wait_for(timeout=WAIT_MS)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= 2",
        timeout=TRAIN_WAIT_MS,
    )  # the live curves
    _shot(page, "train-running")
    page.get_by_role("button", name="Open it on the Attention page").wait_for(timeout=TRAIN_WAIT_MS)
    _charts(page, 2)
    assert page.get_by_text(SAVED).count() >= 1
    _shot(page, "train-done")

    page.get_by_role("button", name="Replay its attention timeline").click()
    page.get_by_role("heading", name="Attention timeline").wait_for(timeout=WAIT_MS)
    _charts(page, 2)
    _shot(page, "timeline")
    titles = page.locator(".js-plotly-plot .annotation-text").all_text_contents()
    assert "attention at step 200" in titles, titles

    page.get_by_role(
        "link", name="Attention", exact=True
    ).click()  # the new model opens on the Attention page
    page.get_by_role("heading", name="Attention", exact=True).wait_for(timeout=WAIT_MS)
    _charts(page, 2)
    _shot(page, "attention-own-model")
    assert "browser-copy" in page.url  # the URL names the checkpoint on view
