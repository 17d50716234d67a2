"""An imported Marian with OPUS-MT's 6 + 6 layers and 8 heads in real Chromium: the all-heads grid of every kind.

The `server` and `browser` fixtures of tests/conftest.py, with the checkpoints
folder pointed at an imported model. Screenshots go to artifacts/screenshots/marian-all-heads-*.png: look at them
(48 heads and 6 layer means per kind must stay legible on one screen).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import WAIT_MS, check_and_shoot, open_view, visible_charts, wait_until_idle
from tests.helpers.marian import SOURCES, build_marian
from visformer import i18n
from visformer.marian import import_marian

pytestmark = pytest.mark.browser
pytest.importorskip("transformers")

NAME = "opus-mt-ko-en"


@pytest.fixture(scope="module")
def imported_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose checkpoints/ holds the imported model only."""
    root = tmp_path_factory.mktemp("marian-browser")
    build_marian(root / "hf", d_model=32, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, steps=40)  # fmt: skip
    import_marian(str(root / "hf"), root / "checkpoints" / NAME)
    return root


@pytest.fixture(scope="module")
def server(app_servers: Callable[..., str], imported_model: Path) -> str:
    """The session's server that lists the imported model as its only shipped checkpoint."""
    return app_servers(imported_model / "checkpoints")


@pytest.mark.parametrize("kind", ["cross", "encoder", "decoder"])
def test_all_heads_grid_of_an_imported_6x8_model(server: str, browser, kind: str) -> None:
    query = {"checkpoint": NAME, "sentence": SOURCES[0], "lang": "ko", "view": kind, "tab": "All heads"}
    page, errors = open_view(browser, f"{server}/?{urlencode(query)}")
    try:
        visible_charts(page, 1)
        wait_until_idle(page)
        # the compact grid: one mosaic heatmap, named by 8 head numbers, the mean and 6 layers
        labels = page.evaluate(
            "() => Math.max(...[...document.querySelectorAll('.js-plotly-plot')]"
            ".map(p => (p.layout.annotations || []).length))"
        )
        assert labels == 9 + 6
        # the compact switch, waited for: count() alone does not wait, and the switch may draw after the chart
        expect(page.get_by_text(i18n.t("attention.grid_compact", "ko"))).to_have_count(1, timeout=WAIT_MS)
        check_and_shoot(page, f"marian-all-heads-{kind}", errors)
    finally:
        page.close()
