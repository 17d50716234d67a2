"""Issue 13, app part: each test failed before its fix (AppTest, on the tiny checkpoint of test_app)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_app import env, roots, run_app  # noqa: F401  (fixtures)
from tests.test_app_timeline import open_page
from tests.test_app_train import TRAIN, has_button, poll
from visformer.checkpoint import load_checkpoint

pytestmark = pytest.mark.usefixtures("env")  # every test runs on the tiny checkpoint

LONG = " ".join(["abc"] * 700)  # 2,799 characters: over the local limit of 2,000


def notices(at: AppTest) -> list[str]:
    """Every info and warning message on the page."""
    return [m.value for m in (*at.info, *at.warning)]


def test_long_sentence_in_url_is_cut_to_the_configured_limit_with_notice() -> None:
    at = run_app(sentence=LONG)
    assert any("cut to the first 2,000 of its 2,799 characters" in m for m in notices(at)), notices(at)


def test_long_pasted_sentence_is_kept_then_cut_with_notice() -> None:
    at = run_app()
    at.text_input(key="sentence").input(LONG).run()
    assert not at.exception
    assert at.session_state["sentence"] == LONG  # not silently thrown away by the text box
    assert any("cut to the first 2,000" in m for m in notices(at)), notices(at)
    assert all(m[0].isupper() for m in notices(at))


def test_fast_recipe_shows_the_size_and_name_of_what_it_trains() -> None:
    at = open_page(TRAIN)
    at.radio(key="train_source").set_value("Built-in task").run()
    at.selectbox(key="train_task").set_value("reverse").run()
    at.radio(key="train_size").set_value("tiny").run()
    caption = next(c.value for c in at.caption if c.value.startswith("Fast recipe:"))
    shown = int(re.search(r"([\d,]+) parameters", caption).group(1).replace(",", ""))
    name = re.search(r"saved as \*\*(.+?)\*\*", caption).group(1)
    assert "fast" in name
    at.button(key="train_fast").click().run()
    poll(at, lambda at: has_button(at, "train_stop") and any(m.label == "Training loss" for m in at.metric))
    at.button(key="train_stop").click().run()
    poll(at, lambda at: has_button(at, "train_open"))
    ck = load_checkpoint(Path(os.environ["VISFORMER_USER_CHECKPOINTS"]) / name)
    assert ck.model.num_parameters() == shown
