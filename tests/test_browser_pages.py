"""Decoding, Train and Attention timeline in real Chromium: a short training run from the browser, then its replay;
the three pages in Korean; no chart title or colour bar overlapping at laptop and phone widths.

The `server` and `browser` fixtures of tests/conftest.py. Screenshots go to artifacts/screenshots/ (look at them:
the comparison table's last column, the Noam chart's title under plotly's toolbar, the Korean labels); any
Streamlit exception box fails the test.
"""

from __future__ import annotations

import pytest

from bench.bench_load import SAVED
from tests.helpers.browser import (
    SHOTS,
    TALL_VIEWPORT,
    WAIT_MS,
    charts_drawn,
    check_and_shoot,
    no_exception,
    open_view,
    visible_charts,
    wait_until_idle,
)
from visformer.explain.style import wrapped

pytestmark = pytest.mark.browser

TRAIN_WAIT_MS = 600_000  # a 200-step toy run on a busy shared machine


def _charts(page, n: int) -> None:
    """Wait until n plotly charts are visible and the script is idle."""
    wait_until_idle(page)
    page.wait_for_function(
        f"() => [...document.querySelectorAll('.js-plotly-plot')].filter(e => e.offsetParent).length >= {n}",
        timeout=WAIT_MS,
    )
    charts_drawn(page)


def _shot(page, name: str) -> None:
    """Screenshot into artifacts/screenshots/ after checking for exceptions."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    no_exception(page)


@pytest.fixture
def page(server: str, browser):
    """A fresh tab (a fresh Streamlit session) after the frame has been loaded once on this server."""
    tab = browser.new_page(viewport=TALL_VIEWPORT)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(
        server + "/", wait_until="domcontentloaded", timeout=WAIT_MS
    )  # st.navigation registers the pages
    tab.wait_for_selector(".js-plotly-plot:visible", timeout=WAIT_MS)  # drawn (the frame's preload is hidden)
    yield tab
    tab.close()
    assert not errors, errors


def test_decoding_page_in_chromium(server: str, page) -> None:
    page.goto(server + "/decoding", wait_until="domcontentloaded", timeout=WAIT_MS)
    _charts(page, 2)
    title = wrapped("How probable is each output under the model?")  # as the chart draws it, line by line
    assert page.get_by_text(title.split("<br>")[0]).count() >= 1
    _shot(page, "decoding")
    page.get_by_role("tab", name="Beam search tree").click()
    _charts(page, 2)
    _shot(page, "decoding-beam-tree")
    page.get_by_role("tab", name="Samples").click()
    _charts(page, 2)
    assert page.get_by_text("Different outputs").count() >= 1
    _shot(page, "decoding-samples")


def test_train_then_replay_the_timeline_in_chromium(server: str, page) -> None:
    page.goto(server + "/train", wait_until="domcontentloaded", timeout=WAIT_MS)
    _charts(page, 1)  # the Noam schedule
    steps = page.locator('[data-testid="stSlider"]').filter(has_text="Training steps").get_by_role("slider")
    steps.focus()
    for _ in range(3):  # 600 → 400 → 300 → 200 steps
        steps.press("ArrowLeft")
    wait_until_idle(page)
    page.get_by_label("Checkpoint name").fill("browser-copy")
    page.get_by_label("Checkpoint name").press("Enter")
    wait_until_idle(page)
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


# Every chart's title, subplot titles, colour bars and plot areas, measured in the browser (issue 29): a title
# cut at the chart's edge, two titles that run together, or a colour bar drawn over a plot or a title fails.
MEASURE_JS = """() => {
  const box = e => { const r = e.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
  const meet = (a, b) => a.l < b.r - 2 && b.l < a.r - 2 && a.t < b.b - 2 && b.t < a.b - 2;
  const found = [];
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (!gd.offsetParent) continue;
    const name = (gd.querySelector('.gtitle') || {}).textContent || '(untitled)';
    const edge = box(gd.querySelector('svg.main-svg'));
    const titles = [...gd.querySelectorAll('.gtitle, .infolayer .annotation')].map(box).filter(b => b.r > b.l);
    const bars = [...gd.querySelectorAll('.colorbar .cbfills, .colorbar .cbaxis, .colorbar .cbtitle')].map(box);
    const plots = [...gd.querySelectorAll('.draglayer .nsewdrag')].map(box);
    titles.forEach(t => { if (t.r > edge.r + 2 || t.l < edge.l - 2) found.push(name + ': a title runs off the chart'); });
    titles.forEach((t, i) => titles.slice(i + 1).forEach(u => { if (meet(t, u)) found.push(name + ': two titles overlap'); }));
    bars.forEach(c => {
      titles.forEach(t => { if (meet(c, t)) found.push(name + ': a colour bar overlaps a title'); });
      plots.forEach(p => { if (meet(c, p)) found.push(name + ': a colour bar overlaps a plot'); });
    });
  }
  return found;
}"""
LAYOUT_VIEWS = [  # the Attention page is the app's default page: its address is "/", and "/attention" is not found
    "?checkpoint=en-de",
    "?checkpoint=en-de&tab=All+heads",
    "?checkpoint=en-de&tab=Head+statistics",
    "decoding?checkpoint=en-de",
    "why_self_attention",
    "positional_encoding",
    "lesson?checkpoint=en-de&lesson_step=4",
    "timeline?checkpoint=en-de",
    "language_models",
    "rnn_vs_transformer",
]


LAYOUT_WIDTHS = (
    1366,
    390,
)  # a laptop, then a phone: each view is loaded at the first and narrowed to the next


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_no_chart_title_or_colour_bar_overlaps_at_laptop_and_phone_width(
    server: str, browser, lang: str
) -> None:
    """Each view loaded once per language, measured at each width (narrowing the window re-lays the charts out)."""
    tab = browser.new_page(viewport={"width": LAYOUT_WIDTHS[0], "height": 2600})
    try:
        problems = []
        for view in LAYOUT_VIEWS:
            tab.set_viewport_size({"width": LAYOUT_WIDTHS[0], "height": 2600})
            tab.goto(f"{server}/{view}{'&' if '?' in view else '?'}lang={lang}", timeout=WAIT_MS)
            _charts(tab, 1)
            assert tab.get_by_text("Page not found").count() == 0, view
            for width in LAYOUT_WIDTHS:
                if width != LAYOUT_WIDTHS[0]:
                    tab.set_viewport_size({"width": width, "height": 2600})
                    charts_drawn(tab)  # every chart re-laid out within the narrower window
                problems += [f"{view} at {width} px: {p}" for p in tab.evaluate(MEASURE_JS)]
                _shot(tab, f"layout-{view.split('?')[0] or 'attention'}-{lang}-{width}")
        assert problems == [], "\n".join(problems)
    finally:
        tab.close()


def test_decoding_page_in_korean(server: str, browser) -> None:
    page, errors = open_view(browser, server + "/decoding?lang=ko&checkpoint=multi30k-en-de")
    try:
        visible_charts(page, 2)
        assert page.get_by_role("heading", name="디코딩").count() >= 1
        assert page.get_by_role("tab", name="스텝별로 보기").count() == 1
        check_and_shoot(page, "decoding-ko", errors)
    finally:
        page.close()


def test_train_page_in_korean(server: str, browser) -> None:
    page, errors = open_view(browser, server + "/train?lang=ko")
    try:
        visible_charts(page, 1)
        assert page.get_by_role("heading", name="학습").count() >= 1
        assert page.get_by_text("빠른 레시피:").count() >= 1
        check_and_shoot(page, "train-ko", errors)
    finally:
        page.close()


def test_timeline_of_an_rnn_in_korean(server: str, browser) -> None:
    page, errors = open_view(browser, server + "/timeline?lang=ko&checkpoint=reverse-rnn-bahdanau")
    try:
        visible_charts(page, 2)
        assert page.get_by_role("heading", name="어텐션 타임라인").count() >= 1
        check_and_shoot(page, "timeline-rnn-ko", errors)
    finally:
        page.close()
