"""The real app in a real browser: `streamlit run app.py` headless, every page opened in Debian's chromium.

Fails on any Streamlit exception box; saves screenshots to artifacts/screenshots/ (look at them).
Skipped when chromium is missing, except in CI (env CI set), where that is a failure (conftest: server, browser).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pages._views import OLD_ATTENTION_TABS
from tests.helpers.browser import (
    WAIT_MS,
    check_and_shoot,
    go_to_view,
    open_view,
    visible_charts,
    wait_until_idle,
)
from tests.helpers.paths import REPO

pytestmark = pytest.mark.browser


def _open_tab(page, tab: str) -> None:
    """Click a tab and wait for the rerun it starts: the URL names the tab (the first tab is the default)."""
    page.get_by_role("tab", name=tab, exact=True).click()
    expected = "" if tab == next(iter(ATTENTION_TABS)) else "tab=" + OLD_ATTENTION_TABS[tab]  # the tab's id
    page.wait_for_function(
        "(t) => t ? location.search.includes(t) : !location.search.includes('tab=')",
        arg=expected,
        timeout=WAIT_MS,
    )
    wait_until_idle(page)


# tab label -> charts it draws at least (for the tiny and the real checkpoints alike)
def test_deep_link_on_a_fresh_server_opens_inside_the_frame(app_servers, browser) -> None:
    """The first visit to a fresh server is a link to /decoding: it must get the frame, not pages/ as files.

    A server of its own (conftest: app_servers), so that this really is the server's first visit.
    """
    page, errors = open_view(browser, app_servers(fresh="deep-link") + "/decoding")
    try:
        # Streamlit's folder-mode nav shows while the first run imports; then the frame's nav replaces it
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=\"stSidebarNav\"]') || {}).innerText"
            "?.includes('Attention timeline')",
            timeout=WAIT_MS,
        )
        wait_until_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Positional encoding" in nav and "Attention timeline" in nav
        helpers = {"app", *(f.stem.lstrip("_") for f in (REPO / "pages").glob("_*.py"))}
        assert not helpers & set(nav.split())  # pages/'s helper modules are not listed as pages
        # the frame's sidebar picker and the page's heading (waited for: a loaded machine draws them late)
        page.get_by_text("Checkpoint").first.wait_for(timeout=WAIT_MS)
        page.get_by_role("heading", name="Decoding").first.wait_for(timeout=WAIT_MS)
        check_and_shoot(page, "deep-link-decoding", errors)
    finally:
        page.close()


ATTENTION_TABS = {
    "One head": 2,
    "All heads": 1,
    "Step through generation": 2,
    "Head statistics": 3,
    "Ablation": 2,
    "Inside one head": 9,
}


def test_attention_page_every_tab(server: str, browser) -> None:
    page, errors = open_view(browser, server + "/")
    try:
        for tab, charts in [*list(ATTENTION_TABS.items())[1:], *list(ATTENTION_TABS.items())[:1]]:
            _open_tab(page, tab)
            if tab == "Ablation":  # switch the selected head off with one click
                page.get_by_role("button", name="Switch off this head").click()
                page.wait_for_function("() => location.search.includes('ablate=')", timeout=WAIT_MS)
                wait_until_idle(page)
            visible_charts(page, charts)
            check_and_shoot(page, "attention-" + tab.lower().replace(" ", "-"), errors)
    finally:
        page.close()


def test_decoder_view_from_a_link(server: str, browser) -> None:
    """A shared link opens the decoder's masked self-attention on the All heads tab."""
    page, errors = open_view(browser, server + "/?view=decoder&layer=0&head=0&tab=All+heads")
    try:
        visible_charts(page, 1)
        # the chart title wraps after its colon (style.fit_title): two lines of SVG text
        assert page.get_by_text("Decoder masked self-attention:").count() >= 1
        assert page.get_by_text("every layer and head").count() >= 1
        check_and_shoot(page, "attention-decoder-all-heads", errors)
        _open_tab(page, "One head")
        visible_charts(page, 2)
        check_and_shoot(page, "attention-decoder-one-head", errors)
    finally:
        page.close()


def test_attention_csv_download_is_built_on_click(server: str, browser) -> None:
    """The CSV is made only when the button is clicked, and the file holds every weight of the view."""
    page, errors = open_view(browser, server + "/")
    try:
        visible_charts(page, 2)
        with page.expect_download(timeout=WAIT_MS) as download:
            page.get_by_role("button", name="Download attention as CSV").click()
        text = Path(download.value.path()).read_text(encoding="utf-8")
        header, *rows = text.strip().splitlines()
        assert "layer" in header and "head" in header and "weight" in header, header
        assert len(rows) >= 4
        assert not errors, errors
    finally:
        page.close()


def test_positional_encoding_page(server: str, browser) -> None:
    page, errors = open_view(browser, server + "/positional_encoding?pe_d=16&pe_pos=7&pe_pair=3&pe_k=4")
    try:
        visible_charts(page, 6)
        assert page.get_by_text("Positional encoding, d_model = 16").count() >= 1
        assert page.get_by_text("PE(7)").count() >= 1
        assert "pe_d=16" in page.url and "checkpoint=" in page.url
        check_and_shoot(page, "positional-encoding", errors)
    finally:
        page.close()


def test_every_other_page_opens(server: str, browser) -> None:
    """Pages written by others (decoding, train, ...) open without an exception box or a JavaScript error.

    One tab goes to each page's address in turn: every visit is a fresh Streamlit session, and the tab keeps
    the browser's cache of the app's scripts instead of compiling them again for each page.
    """
    others = [p.stem for p in sorted((REPO / "pages").glob("*.py"))]
    slugs = [
        slug
        for slug in others
        if slug not in ("attention", "positional_encoding") and not slug.startswith("_")
    ]
    page, errors = open_view(browser, f"{server}/{slugs[0]}")
    try:
        for slug in slugs:
            if slug != slugs[0]:
                errors.clear()
                go_to_view(page, f"{server}/{slug}")
            check_and_shoot(page, f"page-{slug}", errors)
    finally:
        page.close()
