"""The app: cold start of `streamlit run app.py`, server-side time of interactions (AppTest), memory."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .common import Section, Stat

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cold_start_s(timeout_s: float = 60.0) -> float:
    """Seconds from `streamlit run app.py` until the server answers the health check and serves the page."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - start < timeout_s:
            try:
                for path in ("/_stcore/health", "/"):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                        r.read()
                return time.perf_counter() - start
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"streamlit did not answer within {timeout_s} s")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _timed_run(at) -> float:
    """Seconds of one AppTest script run (server side)."""
    start = time.perf_counter()
    at.run(timeout=120)
    return time.perf_counter() - start


def _change(widget) -> bool:
    """Move a selectbox/radio/slider to a different value; False when it has no other value."""
    options = list(getattr(widget, "options", []) or [])
    if len(options) > 1 and hasattr(widget, "select_index"):  # selectbox, radio: pick by position
        widget.select_index(1 if widget.index == 0 else 0)
        return True
    if hasattr(widget, "min") and hasattr(widget, "max") and widget.value != widget.max:
        value = widget.max if not isinstance(widget.value, tuple) else (widget.min, widget.max)
        widget.set_value(value)
        return True
    return False


def page_interactions(max_widgets: int = 4) -> list[tuple[str, str, float]]:
    """(page, interaction, seconds): first run of every page, then changing its first few widgets."""
    from streamlit.testing.v1 import AppTest

    rows = []
    pages = [None] + sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "pages").glob("*.py") if p.stem != "common"
    )
    for page in pages:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        if page is not None:
            at.run(timeout=120)
            at.switch_page(page)
        name = page or "app.py"
        rows.append((name, "first run", _timed_run(at)))
        widgets = [*at.selectbox, *at.radio, *at.slider, *at.select_slider][:max_widgets]
        for w in widgets:
            try:
                if _change(w):
                    rows.append((name, f"change '{w.label}'", _timed_run(at)))
            except ValueError:  # a widget AppTest cannot drive (e.g. options shown through format_func)
                continue
        for button in at.button[:1]:
            button.click()
            rows.append((name, f"click '{button.label}'", _timed_run(at)))
    return rows


def rss_mib() -> float:
    """Peak resident memory of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(quick: bool) -> dict:
    """Cold starts, AppTest interactions and this process's peak RSS, as plain data."""
    starts = [cold_start_s() for _ in range(1 if quick else 3)]
    rows = [] if quick else page_interactions()
    return {"cold_start_s": starts, "interactions": rows, "rss_mib": rss_mib()}


def run(quick: bool = False) -> Section:
    """The app section, measured in a fresh process so its memory is the app's alone."""
    section = Section(
        title="App",
        intro=(
            "Cold start: `streamlit run app.py` until the health check and the page answer (median of 3). "
            "Interactions: server-side time of one script run through `AppTest` in a fresh process (model "
            "loading is cached, so the first run of the first page includes it). Memory: peak RSS of that "
            "process. Targets: cold start < 5 s, every interaction < 300 ms, memory < 1 GB."
        ),
        header=["what", "page", "time ms", "target ms"],
    )
    if not (ROOT / "app.py").exists():
        section.notes.append("skipped: app.py does not exist yet")
        return section
    cmd = [sys.executable, "-m", "bench.bench_app"] + (["--quick"] if quick else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        section.notes.append(f"app measurement failed: {tail[0]}")
        return section
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    section.rows.append(["cold start", "app.py", Stat.of(data["cold_start_s"]).scaled(1e3).fmt(0), "< 5000"])
    for page, what, seconds in data["interactions"]:
        section.rows.append([what, page, f"{seconds * 1e3:.0f}", "< 300"])
    section.notes.append(f"peak RSS of the AppTest process: {data['rss_mib']:.0f} MiB (target < 1024)")
    return section


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv)))
