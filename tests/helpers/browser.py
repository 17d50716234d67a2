"""Drive the real app in headless Chromium: open a view, wait for Streamlit to settle, check and screenshot."""

from __future__ import annotations

from tests.helpers.paths import REPO
from visformer.checkpoint import list_checkpoints

SHOTS = REPO / "artifacts" / "screenshots"
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
TALL_VIEWPORT = {"width": 1440, "height": 2200}  # Streamlit scrolls inside its own container


# Streamlit marks its root with the script's state ("initial" before the first run, then "running", "notRunning");
# its "running" status widget shows only after a delay, so its absence alone can come before the run has started.
IDLE_JS = """() => (document.querySelector('[data-testid="stApp"]') || {dataset: {}}).dataset.testScriptState === 'notRunning'
  && !document.querySelector('[data-testid="stStatusWidget"]')"""


def wait_until_idle(page) -> None:
    """Wait until Streamlit has finished running the script (its root says so, no 'running' status widget)."""
    page.wait_for_function(IDLE_JS, timeout=WAIT_MS, polling=100)


def visible_charts(page, at_least: int) -> None:
    """Wait for at least `at_least` drawn plotly charts on screen."""
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= {at_least}",
        timeout=WAIT_MS,
    )


# True once the script is idle, every visible chart is drawn no wider than the window (plotly has re-laid it out
# for the window's width) and none of them has changed for `quiet` ms (plotly re-lays out after its first draw).
DRAWN_JS = """([quiet, width]) => {
  const plots = [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent);
  const ready = (IDLE_JS)()
    && plots.every(p => p._fullLayout && p._fullLayout.width <= width);
  const state = JSON.stringify(plots.map(p => [p.clientWidth, p.clientHeight, p.getElementsByTagName('*').length]));
  const now = performance.now();
  if (!ready || state !== window.__drawn) { window.__drawn = state; window.__drawnSince = now; }
  return ready && now - window.__drawnSince >= quiet;
}""".replace("IDLE_JS", IDLE_JS)


def charts_drawn(page, quiet_ms: int = 250) -> None:
    """Wait until every visible chart is drawn for the window's size and has stayed unchanged for `quiet_ms`."""
    page.evaluate("() => { window.__drawn = null; }")
    page.wait_for_function(DRAWN_JS, arg=[quiet_ms, page.viewport_size["width"]], timeout=WAIT_MS, polling=50)


def no_exception(page) -> None:
    """Fail on a Streamlit exception box."""
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()


def check_and_shoot(page, name: str, errors: list[str]) -> None:
    """No Streamlit exception box, no JavaScript error; save a screenshot."""
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMainBlockContainer\"]');"
        " return m ? m.scrollHeight + 150 : 0; }"
    )
    if height > VIEWPORT["height"]:  # Streamlit scrolls inside the page: grow the window to see it all
        page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height), 8000)})
    charts_drawn(page)  # let plotly finish drawing (and re-layout) before the picture
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size(VIEWPORT)
    no_exception(page)
    assert not errors, f"{name}: {errors}"


def go_to_view(page, url: str) -> None:
    """Go to `url` (a fresh Streamlit session) and wait until the app has drawn it."""
    page.goto(url, wait_until="domcontentloaded", timeout=WAIT_MS)
    page.wait_for_selector('[data-testid="stSidebar"]', timeout=WAIT_MS)
    wait_until_idle(page)


def open_view(browser, url: str):
    """A new page at `url` once the app has drawn it; returns (page, JavaScript errors seen)."""
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    go_to_view(page, url)
    return page, errors


def korean_checkpoint() -> str:
    """The shipped Korean→English model when present (the lecture's example), else the server's default."""
    names = [p.name for p in list_checkpoints(REPO / "checkpoints")]
    return "tatoeba-ko-en" if "tatoeba-ko-en" in names else ""
