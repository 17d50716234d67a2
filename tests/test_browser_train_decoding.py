"""The Decoding, Train and timeline pages in Korean in a real browser; screenshots in artifacts/screenshots/.

Reuses test_browser's server (`streamlit run app.py` on loopback) and headless chromium. Look at the pictures:
the comparison table's last column, the Noam chart's title under plotly's toolbar, the Korean labels.
"""

from __future__ import annotations

import pytest

from tests.helpers.browser import check_and_shoot, open_view, visible_charts

pytestmark = pytest.mark.browser


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
