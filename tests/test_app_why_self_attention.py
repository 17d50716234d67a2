"""The Why self-attention page in AppTest (English and Korean): Table 1 of the paper and the measurements."""

from __future__ import annotations

import re

import pytest

from tests.helpers.app import assert_no_raw_key, charts, run_app
from visformer import i18n

PAGE = "pages/why_self_attention.py"
RAW_KEY = re.compile(r"\bmodels\.cx\.[a-z_.]+\b")
pytestmark = pytest.mark.usefixtures("shipped_checkpoints")


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_why_self_attention_shows_table_1_and_the_measurements(lang: str) -> None:
    at = run_app(PAGE, lang=lang)
    assert at.title[0].value == i18n.t("models.cx.page_title", lang)
    table, measured = at.table[0].value, at.table[1].value  # static tables: they wrap, never scroll sideways
    assert len(table) == 4 and i18n.t("models.cx.col_path", lang) in table.columns
    assert list(measured[i18n.t("models.cx.col_n", lang)]) == [8, 16, 32, 64, 128, 256, 512]
    ns = [8, 16, 32, 64, 128, 256, 512]
    assert list(measured[i18n.t("models.cx.col_steps", lang)]) == [f"1 / {n}" for n in ns]  # O(1) vs O(n)
    assert list(measured[i18n.t("models.cx.col_paths", lang)]) == [f"1 / {n}" for n in ns]
    assert len(charts(at)) == 3
    assert_no_raw_key(at, RAW_KEY)
    if lang == "ko":
        assert "셀프 어텐션" in at.markdown[0].value
    at.button(key="cx_remeasure").click().run()
    assert not at.exception and len(at.table[1].value) == 7
