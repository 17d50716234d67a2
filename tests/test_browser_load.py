"""Real-browser check under load: a few Chromium sessions translate and view attention while two train.

Starts `streamlit run app.py` in hosted mode on a free 127.0.0.1 port (see bench/bench_load.py) and
drives one headless Chromium. The class-size load (10-100 students) is measured at the protocol level by
bench/bench_class.py (tests/test_bench_class.py); this test checks the rendered page, with
VISFORMER_LOAD_SESSIONS viewer sessions (default 4). Marked slow; run it with
`python -m pytest tests/test_browser_load.py -m slow`.
"""

from __future__ import annotations

import os
import shutil

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SESSIONS = int(os.environ.get("VISFORMER_LOAD_SESSIONS", "4"))


@pytest.fixture(scope="module")
def report():
    pytest.importorskip("playwright")
    from bench.bench_load import CHROMIUM, run_load

    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM}")
    return run_load(sessions=SESSIONS, trainers=2)


def test_every_session_gets_its_results(report) -> None:
    assert len(report.sessions) == SESSIONS + 2
    assert [s.name for s in report.sessions if not s.got_results] == []
    viewers = [s for s in report.sessions if s.kind == "viewer"]
    assert all(len(s.requests) == 3 for s in viewers)  # open + translate, type + translate, all heads
    trainers = [s for s in report.sessions if s.kind == "trainer"]
    assert all(any(a.startswith("train") for a, _ in s.requests) for s in trainers)


def test_no_session_sees_an_exception_or_an_error(report) -> None:
    assert report.errors == []


def test_no_session_sees_another_sessions_model(report) -> None:
    assert [s.name for s in report.sessions if s.saw_other_model] == []


def test_checkpoint_zip_download_and_import_in_the_browser(tmp_path) -> None:
    """Sidebar: download the picked checkpoint, import it back, and refuse a path-traversal archive."""
    pytest.importorskip("playwright")
    import io
    import zipfile

    from playwright.sync_api import sync_playwright

    from bench.bench_load import (
        CHROMIUM,
        CHROMIUM_ARGS,
        WAIT_MS,
        free_port,
        make_shipped_checkpoint,
        start_server,
        stop_server,
    )

    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM}")
    make_shipped_checkpoint(tmp_path / "shipped")
    (tmp_path / "user").mkdir()
    port = free_port()
    server = start_server(tmp_path, port, max_steps=30)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_context(accept_downloads=True).new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"http://127.0.0.1:{port}/")
            page.locator('[data-testid="stPlotlyChart"]:visible').first.wait_for()
            page.get_by_text("Download or import a checkpoint").click()
            with page.expect_download() as info:
                page.get_by_role("button", name="Download the picked checkpoint (.zip)").click()
            info.value.save_as(tmp_path / "down.zip")
            data = (tmp_path / "down.zip").read_bytes()
            assert "toy-reverse/config.json" in zipfile.ZipFile(io.BytesIO(data)).namelist()

            evil = io.BytesIO()
            with zipfile.ZipFile(evil, "w") as z:
                z.writestr("../../escape.txt", "x")
                z.writestr("config.json", "{}")
            for name, payload, expected in [
                (
                    "evil.zip",
                    evil.getvalue(),
                    "Not imported: the archive holds a path that leaves its folder",
                ),
                ("my-copy.zip", data, "Imported my-copy"),
            ]:
                page.locator('[data-testid="stSidebar"] input[type="file"]').set_input_files(
                    {"name": name, "mimeType": "application/zip", "buffer": payload}
                )
                page.locator('[data-testid="stSidebar"]').get_by_text(name).wait_for()
                _settle(page)  # the upload's rerun is over: Import now sends this file
                page.get_by_role("button", name="Import", exact=True).click()
                page.get_by_text(expected).first.wait_for()
            assert page.locator('[data-testid="stException"]').count() == 0
            browser.close()
    finally:
        stop_server(server)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "user" / "escape.txt").exists()
    private = [p for p in (tmp_path / "user").iterdir()]
    assert (
        len(private) == 1 and (private[0] / "my-copy" / "config.json").is_file()
    )  # the session's own folder


def _settle(page, quiet_checks: int = 5) -> None:
    """Wait until Streamlit's 'running' widget has been absent for a few checks in a row."""
    quiet = 0
    for _ in range(1200):  # a bound, not a performance limit
        quiet = quiet + 1 if page.locator('[data-testid="stStatusWidget"]').count() == 0 else 0
        if quiet >= quiet_checks:
            return
        page.wait_for_timeout(200)
