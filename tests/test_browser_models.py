"""The model-family pages in real Chromium, in Korean: RNN vs Transformer, why self-attention, encoder vs decoder.

The `server` and `browser` fixtures of tests/conftest.py; each page is opened by
its own link on the server (the deep link the frame hands over to app.py). Screenshots go to
artifacts/screenshots/; any Streamlit exception box or JavaScript error fails the test.
"""

from __future__ import annotations

import pytest

from tests.helpers.browser import SHOTS, charts_drawn
from visformer import i18n

pytestmark = pytest.mark.browser

WAIT_MS = 300_000  # a busy shared 2-core machine: loading two models and drawing six charts can take minutes
VIEWPORT = {"width": 1440, "height": 2400}  # tall: Streamlit scrolls inside its own container
VIEWS = (  # (url path, charts drawn, the page's title key)
    ("rnn_vs_transformer", 3, "models.cmp.page_title"),  # the RNN's map, the Transformer's, BLEU by length
    ("why_self_attention", 1, "models.cx.page_title"),
    ("language_models", 2, "models.lm.page_title"),
)


@pytest.mark.parametrize(("path", "charts", "title"), VIEWS)
def test_model_pages_in_korean(server: str, browser, path: str, charts: int, title: str) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/{path}?lang=ko", wait_until="domcontentloaded", timeout=WAIT_MS)
    page.get_by_role("heading", name=i18n.t(title, "ko")).first.wait_for(timeout=WAIT_MS)
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= {charts}"
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=WAIT_MS,
        polling=500,
    )
    charts_drawn(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"models-{path}-ko.png"), full_page=True)
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()
    page.close()
    assert not errors, errors
