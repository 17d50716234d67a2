"""The Attention page in real Chromium, in Korean, on a long sentence: every tab drawn, a screenshot each.

The `server` and `browser` fixtures of tests/conftest.py. Screenshots go to
artifacts/screenshots/attention-ko-long-*.png: look at them (Hangul token labels must not run into each other).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.helpers.browser import WAIT_MS, check_and_shoot, open_view, visible_charts, wait_until_idle
from tests.helpers.paths import REPO
from visformer import i18n
from visformer.checkpoint import list_checkpoints

pytestmark = pytest.mark.browser

LONG_KO = (
    "강아지가 책상 위에 있는 음식을 먹었는데 그가 그것을 먹은 이유는 배고팠기 때문이다. 드디어 금요일이다. "
    "우리는 내일 아침 일찍 기차를 타고 바닷가에 있는 할머니 댁에 가서 맛있는 저녁을 먹을 거예요."
)
TABS = {"One head": "one", "All heads": "all", "Step through generation": "steps", "Follow a word": "word",
        "Inside one head": "inside"}  # URL value -> its text key  # fmt: skip


def test_attention_page_in_korean_with_a_long_sentence(server: str, browser) -> None:
    names = {p.name for p in list_checkpoints(REPO / "checkpoints")}
    if "tatoeba-ko-en" not in names:
        pytest.skip("the shipped Korean→English checkpoint is missing")
    query = {"checkpoint": "tatoeba-ko-en", "sentence": LONG_KO, "lang": "ko", "view": "encoder"}
    page, errors = open_view(browser, f"{server}/?{urlencode(query)}")
    try:
        visible_charts(page, 2)
        assert page.get_by_role("heading", name="어텐션").count() >= 1
        pieces = page.get_by_text(i18n.t("attention.source_pieces", "ko")).first.inner_text()
        assert pieces.count("▁") >= 20  # a long sentence: the views below must stay legible
        for tab, text in TABS.items():
            if tab != "One head":
                page.get_by_role("tab", name=i18n.t(f"attention.tab.{text}", "ko"), exact=True).click()
                page.wait_for_function(
                    "(t) => location.search.includes(t)", arg="tab=" + text, timeout=WAIT_MS
                )
                wait_until_idle(page)
            visible_charts(page, 1)
            check_and_shoot(page, "attention-ko-long-" + tab.lower().replace(" ", "-"), errors)
        assert "tab=inside" in page.url  # a Korean tab label, the tab's id in the link
    finally:
        page.close()
