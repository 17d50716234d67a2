"""The frame in real Chromium, in Korean: sidebar (toggle, model card, share link), script warning, PE page, PNG.

The `server` and `browser` fixtures of tests/conftest.py. Screenshots go to artifacts/screenshots/frame-ko-*.png and the
downloaded chart to artifacts/screenshots/frame-ko-chart.png (look at them: Hangul must render everywhere).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import (
    SHOTS,
    TALL_VIEWPORT,
    WAIT_MS,
    charts_drawn,
    korean_checkpoint,
    no_exception,
    visible_charts,
    wait_until_idle,
)
from visformer import i18n

pytestmark = pytest.mark.browser


def _open(tab, base: str, path: str) -> None:
    """Open a view and wait until its charts are drawn and the script is idle."""
    tab.goto(f"{base}/{path}", wait_until="domcontentloaded", timeout=WAIT_MS)
    visible_charts(tab, 1)
    charts_drawn(tab)  # the script is idle and plotly has finished drawing


@pytest.fixture
def tab(server: str, browser):
    """A fresh tab after the frame has been loaded once on this server; no JavaScript error while it was open."""
    tab = browser.new_page(viewport=TALL_VIEWPORT)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    _open(tab, server, "")  # st.navigation registers the pages
    yield tab
    tab.close()
    assert not errors, errors


def test_korean_frame_sidebar_and_pages_in_chromium(server: str, tab) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    checkpoint = korean_checkpoint()
    query = "lang=ko" + (f"&checkpoint={checkpoint}&sentence=I+love+you." if checkpoint else "")
    _open(tab, server, f"?{query}")  # the Attention page is the default page: its address is /
    sidebar = tab.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text(i18n.t("frame.card.title", "ko")).click()  # open the model card
    sidebar.get_by_text(i18n.t("frame.share.title", "ko")).wait_for(timeout=WAIT_MS)
    if checkpoint:  # English typed into the Korean model: named, with a button to switch
        tab.get_by_text("로마자").first.wait_for(timeout=WAIT_MS)
    no_exception(tab)
    tab.screenshot(path=str(SHOTS / "frame-ko-attention.png"), full_page=True)

    chart = tab.locator(".js-plotly-plot:visible").first
    chart.hover()
    with tab.expect_download(timeout=WAIT_MS) as download:
        chart.locator('.modebar-btn[data-title*="png" i]').click(force=True)  # plotly's camera button
    download.value.save_as(str(SHOTS / "frame-ko-chart.png"))

    _open(tab, server, "positional_encoding?lang=ko")
    tab.get_by_role("heading", name="포지셔널 인코딩").first.wait_for(timeout=WAIT_MS)
    no_exception(tab)
    tab.screenshot(path=str(SHOTS / "frame-ko-pe.png"), full_page=True)

    _open(tab, server, "positional_encoding")  # a fresh language choice goes into the URL
    tab.locator('[data-testid="stSidebar"]').get_by_text("한국어", exact=True).click()
    tab.wait_for_url("**lang=ko**", timeout=WAIT_MS)
    tab.get_by_role("heading", name="포지셔널 인코딩").first.wait_for(timeout=WAIT_MS)


def test_the_sentence_and_the_share_link_carry_over_a_page_switch_in_korean(server: str, tab) -> None:
    _open(tab, server, "?lang=ko")  # the Attention page fills the box with the model's first example
    box = tab.locator('[data-testid="stTextInput"] input').first
    example = box.input_value()
    assert example
    sidebar = tab.locator('[data-testid="stSidebar"]')
    for page, title in (("lesson", "lesson.title"), ("decoding", "decoding.title")):
        sidebar.locator(f'a[href$="/{page}"]').click()  # the navigation, as a student clicks it
        tab.get_by_role("heading", name=i18n.t(title, "ko")).first.wait_for(timeout=WAIT_MS)
        wait_until_idle(tab)
        expect(tab.locator('[data-testid="stTextInput"] input').first).to_have_value(example, timeout=WAIT_MS)
        assert tab.get_by_text(i18n.t("frame.empty", "ko")).count() == 0, page  # not "nothing to translate"
        link = sidebar.locator('[data-testid="stCode"]').inner_text()
        assert "lang=ko" in link and "checkpoint=" in link, (page, link)
    for page in (
        "train",
        "why_self_attention",
    ):  # pages without a sentence keep the language and the model too
        sidebar.locator(f'a[href$="/{page}"]').click()
        tab.wait_for_url(f"**/{page}*", timeout=WAIT_MS)
        charts_drawn(tab)  # the script is idle and plotly has finished drawing
        link = sidebar.locator('[data-testid="stCode"]').inner_text()
        assert "lang=ko" in link and "checkpoint=" in link, (page, link)
    no_exception(tab)
