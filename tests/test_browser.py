"""The real app in a real browser: `streamlit run app.py` headless, every page opened in Debian's chromium.

Fails on any Streamlit exception box; saves screenshots to artifacts/screenshots/ (look at them).
Skipped when chromium is missing, except in CI (env CI set), where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.bench_app import free_port, healthy
from pages._views import OLD_ATTENTION_TABS
from visformer.checkpoint import list_checkpoints

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_S = 120  # how long the server may take to answer /_stcore/health before the test gives up
WAIT_MS = 120_000  # how long one page may take to draw its charts on a busy machine

VIEWPORT = {"width": 1440, "height": 1200}


def _chromium_or_skip() -> str:
    """The chromium binary; skip locally when it is missing, fail in CI."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run should have installed chromium")
    pytest.skip(f"{CHROMIUM} not installed")


def _tiny_checkpoint(root: Path) -> None:
    """A small reverse-task checkpoint for when no shipped checkpoint exists yet."""
    from tests.test_app import make_checkpoint

    make_checkpoint(root)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start `streamlit run app.py` on a free loopback port; yield its URL; stop it afterwards."""
    _chromium_or_skip()
    env = dict(os.environ)
    user = tmp_path_factory.mktemp("user-checkpoints")
    env["VISFORMER_USER_CHECKPOINTS"] = str(user)
    if not list_checkpoints(REPO / "checkpoints"):
        shipped = tmp_path_factory.mktemp("shipped")
        _tiny_checkpoint(shipped)
        env["VISFORMER_CHECKPOINTS"] = str(shipped)
    port = free_port()
    log = (tmp_path_factory.mktemp("server") / "streamlit.log").open("w")
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while not healthy(url):
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with code {proc.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not become healthy within {STARTUP_S} s; see {log.name}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(server: str):
    """One headless chromium for all views."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=_chromium_or_skip(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _wait_until_idle(page) -> None:
    """Wait until Streamlit has finished running the script (no 'running' status widget)."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=WAIT_MS, polling=250
    )


def _visible_charts(page, at_least: int) -> None:
    """Wait for at least `at_least` drawn plotly charts on screen."""
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= {at_least}",
        timeout=WAIT_MS,
    )


def _check_and_shoot(page, name: str, errors: list[str]) -> None:
    """No Streamlit exception box, no JavaScript error; save a screenshot."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMainBlockContainer\"]');"
        " return m ? m.scrollHeight + 150 : 0; }"
    )
    if height > VIEWPORT["height"]:  # Streamlit scrolls inside the page: grow the window to see it all
        page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height), 8000)})
    page.wait_for_timeout(400)  # let plotly finish drawing (and re-layout) before the picture
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size(VIEWPORT)
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, f"{name}: {exceptions.first.inner_text()}"
    assert not errors, f"{name}: {errors}"


def _open(browser, url: str):
    """A new page at `url` once the app has drawn it; returns (page, JavaScript errors seen)."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, wait_until="domcontentloaded", timeout=WAIT_MS)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=WAIT_MS)
    _wait_until_idle(page)
    return page, errors


def _open_tab(page, tab: str) -> None:
    """Click a tab and wait for the rerun it starts: the URL names the tab (the first tab is the default)."""
    page.get_by_role("tab", name=tab, exact=True).click()
    expected = "" if tab == next(iter(ATTENTION_TABS)) else "tab=" + OLD_ATTENTION_TABS[tab]  # the tab's id
    page.wait_for_function(
        "(t) => t ? location.search.includes(t) : !location.search.includes('tab=')",
        arg=expected,
        timeout=WAIT_MS,
    )
    _wait_until_idle(page)


# tab label -> charts it draws at least (for the tiny and the real checkpoints alike)
def test_deep_link_on_a_fresh_server_opens_inside_the_frame(server: str, browser) -> None:
    """The first visit to a fresh server is a link to /decoding: it must get the frame, not pages/ as files.

    Kept first in this module so that it really is the server's first visit.
    """
    page, errors = _open(browser, server + "/decoding")
    try:
        # Streamlit's folder-mode nav shows while the first run imports; then the frame's nav replaces it
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=\"stSidebarNav\"]') || {}).innerText"
            "?.includes('Attention timeline')",
            timeout=WAIT_MS,
        )
        _wait_until_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Positional encoding" in nav and "Attention timeline" in nav
        helpers = {"app", *(f.stem.lstrip("_") for f in (REPO / "pages").glob("_*.py"))}
        assert not helpers & set(nav.split())  # pages/'s helper modules are not listed as pages
        # the frame's sidebar picker and the page's heading (waited for: a loaded machine draws them late)
        page.get_by_text("Checkpoint").first.wait_for(timeout=WAIT_MS)
        page.get_by_role("heading", name="Decoding").first.wait_for(timeout=WAIT_MS)
        _check_and_shoot(page, "deep-link-decoding", errors)
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
    page, errors = _open(browser, server + "/")
    try:
        for tab, charts in [*list(ATTENTION_TABS.items())[1:], *list(ATTENTION_TABS.items())[:1]]:
            _open_tab(page, tab)
            if tab == "Ablation":  # switch the selected head off with one click
                page.get_by_role("button", name="Switch off this head").click()
                page.wait_for_function("() => location.search.includes('ablate=')", timeout=WAIT_MS)
                _wait_until_idle(page)
            _visible_charts(page, charts)
            _check_and_shoot(page, "attention-" + tab.lower().replace(" ", "-"), errors)
    finally:
        page.close()


def test_decoder_view_from_a_link(server: str, browser) -> None:
    """A shared link opens the decoder's masked self-attention on the All heads tab."""
    page, errors = _open(browser, server + "/?view=decoder&layer=0&head=0&tab=All+heads")
    try:
        _visible_charts(page, 1)
        # the chart title wraps after its colon (style.fit_title): two lines of SVG text
        assert page.get_by_text("Decoder masked self-attention:").count() >= 1
        assert page.get_by_text("every layer and head").count() >= 1
        _check_and_shoot(page, "attention-decoder-all-heads", errors)
        _open_tab(page, "One head")
        _visible_charts(page, 2)
        _check_and_shoot(page, "attention-decoder-one-head", errors)
    finally:
        page.close()


def test_attention_csv_download_is_built_on_click(server: str, browser) -> None:
    """The CSV is made only when the button is clicked, and the file holds every weight of the view."""
    page, errors = _open(browser, server + "/")
    try:
        _visible_charts(page, 2)
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
    page, errors = _open(browser, server + "/positional_encoding?pe_d=16&pe_pos=7&pe_pair=3&pe_k=4")
    try:
        _visible_charts(page, 6)
        assert page.get_by_text("Positional encoding, d_model = 16").count() >= 1
        assert page.get_by_text("PE(7)").count() >= 1
        assert "pe_d=16" in page.url and "checkpoint=" in page.url
        _check_and_shoot(page, "positional-encoding", errors)
    finally:
        page.close()


def test_every_other_page_opens(server: str, browser) -> None:
    """Pages written by others (decoding, train, ...) open without an exception box."""
    others = [p.stem for p in sorted((REPO / "pages").glob("*.py"))]
    for slug in others:
        if slug in ("attention", "positional_encoding") or slug.startswith("_"):
            continue
        page, errors = _open(browser, f"{server}/{slug}")
        try:
            _check_and_shoot(page, f"page-{slug}", errors)
        finally:
            page.close()
