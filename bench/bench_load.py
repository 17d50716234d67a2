"""Load test on loopback: many browser sessions translate and look at attention while two sessions train.

`python -m bench.bench_load [--sessions 20] [--trainers 2]` starts `streamlit run app.py` in hosted mode
on a free 127.0.0.1 port, with a toy "reverse" checkpoint as the only shipped model, drives one headless
Chromium with one browser context per session, and rewrites the "Load test" section of
bench/RESULTS.md. tests/test_browser_load.py runs the same thing and asserts on the report.

Every viewer session opens the Attention page with its own sentence in the URL, types a second
sentence, and opens the "All heads" tab; each trainer trains a tiny copy-task model on the Train
page and opens it. Checked for every session: the result arrives, no exception box appears, the
checkpoint picker lists no other session's model, and a URL naming another session's model does not
open it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

if __package__ in (None, ""):  # `python bench/bench_load.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TITLE = "Load test"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]  # fmt: skip
EXCEPTION = '[data-testid="stException"]'
RUNNING = '[data-testid="stStatusWidget"]'
# The Train page's message once a run is saved (case-sensitive, so the Fast recipe's "saved as NAME" caption
# does not match before the run has ended).
SAVED = re.compile(r"Saved as .+ after [\d,]+ steps")
WAIT_MS = 240_000  # a bound on any one wait (a hung session fails instead of blocking forever)


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_shipped_checkpoint(root: Path) -> Path:
    """A tiny untrained 'reverse' task model as the only shipped checkpoint (seconds to build)."""
    import torch

    from visformer.checkpoint import save_checkpoint
    from visformer.config import ModelConfig
    from visformer.model import Transformer
    from visformer.tasks import task_tokenizer

    tok = task_tokenizer("reverse")
    cfg = ModelConfig(
        src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=32, n_heads=4,
        n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64,
    )  # fmt: skip
    torch.manual_seed(0)
    return save_checkpoint(root / "toy-reverse", Transformer(cfg), tok, tok, task="reverse")


def server_env(work: Path, max_steps: int) -> dict[str, str]:
    """Environment of the app under test: hosted mode, temp checkpoint folders, short training runs."""
    return {
        **os.environ,
        "VISFORMER_HOSTED": "1",
        "VISFORMER_CHECKPOINTS": str(work / "shipped"),
        "VISFORMER_USER_CHECKPOINTS": str(work / "user"),
        "VISFORMER_MAX_STEPS": str(max_steps),
        "VISFORMER_MAX_WALL_TIME_S": "120",
        "VISFORMER_MAX_CONCURRENT_RUNS": "2",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    }


def start_server(work: Path, port: int, max_steps: int) -> subprocess.Popen:
    """`streamlit run app.py` headless on 127.0.0.1:port (log: work/server.log); returns once it is healthy."""
    from deploy.launch import start_app

    return start_app(port, server_env(work, max_steps), work / "server.log")


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server we started (and wait for it)."""
    from deploy.launch import stop_process

    stop_process(proc)


# ---------------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------------


@dataclass
class SessionReport:
    """What one browser session did and saw."""

    name: str
    kind: str  # "viewer" or "trainer"
    requests: list[tuple[str, float]] = field(default_factory=list)  # (action, seconds until its result)
    errors: list[str] = field(default_factory=list)
    saw_other_model: bool = False
    got_results: bool = False


@dataclass
class LoadReport:
    """The whole run."""

    sessions: list[SessionReport]
    wall_s: float
    server_log_tail: str = ""

    @property
    def requests(self) -> list[tuple[str, str, float]]:
        """(session, action, seconds) of every timed request."""
        return [(s.name, a, t) for s in self.sessions for a, t in s.requests]

    @property
    def errors(self) -> list[str]:
        """Every error, prefixed with its session."""
        return [f"{s.name}: {e}" for s in self.sessions for e in s.errors]

    def slowest(self) -> tuple[str, str, float]:
        """The slowest request."""
        return max(self.requests, key=lambda r: r[2], default=("-", "-", 0.0))


async def settle(page, timeout_ms: int = WAIT_MS) -> None:
    """Wait until the script run is over (the 'Running…' widget has gone for a moment)."""
    deadline = time.perf_counter() + timeout_ms / 1000
    quiet = 0
    while time.perf_counter() < deadline:
        quiet = quiet + 1 if await page.locator(RUNNING).count() == 0 else 0
        if quiet >= 3:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError("the page kept running")


async def wait_for_pieces(page, sentence: str, timeout_ms: int = WAIT_MS) -> None:
    """Wait until the page shows the source pieces of `sentence` (the new translation has arrived)."""
    want = " ".join(sentence.split())
    deadline = time.perf_counter() + timeout_ms / 1000
    line = page.get_by_text("Source pieces:").first
    while time.perf_counter() < deadline:
        try:
            if want in " ".join((await line.inner_text(timeout=5_000)).split()):
                return
        except Exception:  # noqa: BLE001 - the element is being redrawn
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the pieces of {sentence!r} never appeared")


async def check_no_exception(page, report: SessionReport, where: str) -> None:
    """Record an error when Streamlit shows an exception box."""
    boxes = page.locator(EXCEPTION)
    if await boxes.count():
        text = (await boxes.first.inner_text())[:300].replace("\n", " ")
        report.errors.append(f"exception box after {where}: {text}")


async def picker_options(page) -> list[str]:
    """The labels offered by the sidebar's checkpoint picker."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    if not await box.count():
        return []
    await box.click()
    options = page.locator('[role="option"]')
    await options.first.wait_for(timeout=30_000)
    labels = [t.strip() for t in await options.all_inner_texts()]
    await page.keyboard.press("Escape")
    return labels


async def timed(report: SessionReport, action: str, coro) -> None:
    """Run one request and record how long its result took."""
    start = time.perf_counter()
    await coro
    report.requests.append((action, time.perf_counter() - start))


async def viewer(
    browser, base: str, i: int, sentences: list[str], forbidden: list[str], saved: asyncio.Event
) -> SessionReport:
    """Translate two sentences and view attention; check isolation against the trainers' models."""
    report = SessionReport(f"viewer-{i:02d}", "viewer")
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    try:
        first, second = sentences

        async def open_first() -> None:
            await page.goto(f"{base}/?sentence={quote(first)}", timeout=WAIT_MS)
            await page.get_by_text("→", exact=False).filter(visible=True).first.wait_for(timeout=WAIT_MS)
            await page.locator('[data-testid="stPlotlyChart"]:visible').first.wait_for(timeout=WAIT_MS)
            await settle(page)

        await timed(report, "open + translate", open_first())
        await check_no_exception(page, report, "opening")
        if await page.get_by_text("Toy task reverse").count() == 0:
            report.errors.append("the shipped toy model is not shown")

        async def translate_second() -> None:
            box = page.get_by_label("Sentence to translate")
            await box.fill(second)
            await box.press("Enter")
            await wait_for_pieces(page, second)
            await settle(page)

        await timed(report, "type + translate", translate_second())
        await check_no_exception(page, report, "typing a sentence")

        async def all_heads() -> None:
            await page.get_by_role("tab", name="All heads").click()
            await page.locator('[data-testid="stPlotlyChart"]:visible').first.wait_for(timeout=WAIT_MS)
            await settle(page)

        await timed(report, "all heads", all_heads())
        await check_no_exception(page, report, "opening All heads")
        labels = await picker_options(page)
        if any("(yours)" in label for label in labels):
            report.saw_other_model = True
            report.errors.append(f"picker lists someone's model: {labels}")
        await asyncio.wait_for(saved.wait(), WAIT_MS / 1000)  # the trainers' models exist now
        for name in forbidden:  # a URL naming another session's model must not open it
            await page.goto(
                f"{base}/?checkpoint={quote('yours/' + name)}&sentence={quote(first)}", timeout=WAIT_MS
            )
            await page.locator('[data-testid="stPlotlyChart"]:visible').first.wait_for(timeout=WAIT_MS)
            await settle(page)
            if await page.get_by_text("Toy task copy").count():
                report.saw_other_model = True
                report.errors.append(f"opened another session's model {name} through the URL")
        report.got_results = True
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line of the report
        report.errors.append(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}")
    finally:
        await context.close()
    return report


async def trainer(browser, base: str, i: int, names: list[str], saved: asyncio.Event) -> SessionReport:
    """Train a tiny copy-task model on the Train page, then open it; only its own model is listed."""
    report = SessionReport(f"trainer-{i}", "trainer")
    own = names[i]
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    try:

        async def open_train() -> None:
            await page.goto(f"{base}/train", timeout=WAIT_MS)
            await page.get_by_role("button", name="Start training", exact=True).wait_for(timeout=WAIT_MS)
            await settle(page)

        await timed(report, "open train page", open_train())
        box = page.get_by_label("Checkpoint name")
        await box.fill(own)
        await box.press("Enter")
        await settle(page)

        async def train() -> None:
            await page.get_by_role("button", name="Start training", exact=True).click()
            await page.get_by_text(SAVED).first.wait_for(timeout=WAIT_MS)
            await settle(page)

        await timed(report, "train (to saved checkpoint)", train())
        if i == 0:
            saved.set()  # the viewers try to open this model through the URL
        await check_no_exception(page, report, "training")
        labels = await picker_options(page)
        mine = [label for label in labels if "(yours)" in label]
        if mine != [f"{own} (yours)"]:
            report.saw_other_model = any(n in label for label in mine for n in names if n != own)
            report.errors.append(f"picker shows {mine}, expected only {own} (yours)")

        async def open_own() -> None:
            await page.get_by_role("button", name="Open it on the Attention page").click()
            await page.get_by_text("Toy task copy").filter(visible=True).first.wait_for(timeout=WAIT_MS)
            await page.locator('[data-testid="stPlotlyChart"]:visible').first.wait_for(timeout=WAIT_MS)
            await settle(page)

        await timed(report, "open own model", open_own())
        await check_no_exception(page, report, "opening its model")
        report.got_results = True
    except Exception as exc:  # noqa: BLE001
        report.errors.append(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}")
    finally:
        if i == 0:
            saved.set()  # never leave the viewers waiting
        await context.close()
    return report


def progress_line(report: SessionReport) -> str:
    """One line per finished session, printed as it ends (so a cut-short run still tells something)."""
    times = ", ".join(f"{action} {seconds:.1f}s" for action, seconds in report.requests)
    return f"{report.name}: {times}; errors: {report.errors or 'none'}"


def viewer_sentences(n: int) -> list[list[str]]:
    """Two distinct task sentences per viewer (distinct across viewers, so nothing is cached for them)."""
    from visformer.tasks import make_examples

    pool = list(dict.fromkeys(ex.src for ex in make_examples("reverse", 4 * n + 8, seed=4242)))
    return [[pool[2 * i], pool[2 * i + 1]] for i in range(n)]


async def drive(base: str, sessions: int, trainers: int, stagger_s: float) -> list[SessionReport]:
    """All sessions at once in one headless Chromium (one context each)."""
    from playwright.async_api import async_playwright

    names = [f"loadrun-{i}" for i in range(trainers)]
    sentences = viewer_sentences(sessions)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            saved = asyncio.Event()
            if not trainers:
                saved.set()
            tasks = [asyncio.create_task(trainer(browser, base, i, names, saved)) for i in range(trainers)]

            async def later(i: int):
                await asyncio.sleep(stagger_s * i)
                # the URL check needs the trainers' names only; their models may or may not exist yet
                return await viewer(browser, base, i, sentences[i], names[:1], saved)

            tasks += [asyncio.create_task(later(i)) for i in range(sessions)]
            for done in asyncio.as_completed(tasks):
                print(progress_line(await done), flush=True)
            return [task.result() for task in tasks]
        finally:
            await browser.close()


def run_load(
    sessions: int = 20, trainers: int = 2, max_steps: int = 30, stagger_s: float = 0.3
) -> LoadReport:
    """Start the server, drive the sessions, stop the server; the report of what happened."""
    with tempfile.TemporaryDirectory(prefix="visformer-load-") as tmp:
        work = Path(tmp)
        make_shipped_checkpoint(work / "shipped")
        (work / "user").mkdir()
        port = free_port()
        proc = start_server(work, port, max_steps)
        start = time.perf_counter()
        try:
            reports = asyncio.run(drive(f"http://127.0.0.1:{port}", sessions, trainers, stagger_s))
        finally:
            stop_server(proc)
        wall = time.perf_counter() - start
        log = (work / "server.log").read_text(errors="replace")
        tail = "\n".join(line for line in log.splitlines()[-40:] if "Traceback" in line or "Error" in line)
        return LoadReport(reports, wall, tail)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def section(report: LoadReport) -> str:
    """The 'Load test' section of RESULTS.md."""
    from bench.common import machine_info

    requests = report.requests
    by_action: dict[str, list[float]] = {}
    for _, action, seconds in requests:
        by_action.setdefault(action, []).append(seconds)
    viewers = [s for s in report.sessions if s.kind == "viewer"]
    trainers = [s for s in report.sessions if s.kind == "trainer"]
    who, what, slowest = report.slowest()
    info = machine_info()
    lines = [
        f"## {TITLE}",
        "",
        f"`python -m bench.bench_load` ({info['date']}): `streamlit run app.py` in hosted mode on 127.0.0.1, "
        f"{len(report.sessions)} concurrent sessions in one headless Chromium (one browser context each): "
        f"{len(viewers)} translate two sentences each and view attention (one head, all heads) while "
        f"{len(trainers)} train a tiny copy-task model on the Train page and open it. Machine: "
        f"{info['cpu']}, {info['logical cpus']} logical CPUs shared with other jobs (load average "
        f"{info['load average (1/5/15 min)']}).",
        "",
        "| sessions | requests | errors | sessions with results | saw another's model | slowest response | "
        "median response | wall time |",
        "|---|---|---|---|---|---|---|---|",
        f"| {len(report.sessions)} | {len(requests)} | {len(report.errors)} | "
        f"{sum(s.got_results for s in report.sessions)}/{len(report.sessions)} | "
        f"{sum(s.saw_other_model for s in report.sessions)} | {slowest:.1f} s ({what}, {who}) | "
        f"{statistics.median([t for *_, t in requests]) if requests else 0:.1f} s | {report.wall_s:.0f} s |",
        "",
        "| request | count | median | max |",
        "|---|---|---|---|",
        *(
            f"| {action} | {len(ts)} | {statistics.median(ts):.1f} s | {max(ts):.1f} s |"
            for action, ts in by_action.items()
        ),
        "",
        "- A response is timed from the click/navigation until the result is drawn and the script run is over.",
        "- Isolation: every viewer's checkpoint picker is checked for anyone's trained model, and a URL naming "
        "a trainer's model (`?checkpoint=yours/loadrun-0`) must fall back to the shipped model.",
    ]
    lines += [f"- error: {e}" for e in report.errors[:10]]
    return "\n".join(lines) + "\n"


def write_section(markdown: str, path: Path = RESULTS, title: str = TITLE) -> None:
    """Replace (or append) only the section `title` of RESULTS.md, leaving the rest untouched."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# visformer benchmarks\n"
    head = f"## {title}"
    if head in text:
        start = text.index(head)
        end = text.find("\n## ", start + len(head))
        text = text[:start] + markdown + ("" if end < 0 else text[end + 1 :])
    else:
        text = text.rstrip() + "\n\n" + markdown
    path.write_text(text, encoding="utf-8")


def run(quick: bool = False) -> str:
    """bench.run entry point: the section's markdown (fewer sessions when quick)."""
    return section(run_load(sessions=6 if quick else 20))


def main(argv: list[str] | None = None) -> int:
    """Run the load test, print the section and write it into RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="viewer sessions (default 20)")
    parser.add_argument("--trainers", type=int, default=2, help="training sessions (default 2)")
    parser.add_argument("--max-steps", type=int, default=30, help="training steps of each trainer")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args(argv)
    report = run_load(args.sessions, args.trainers, args.max_steps)
    markdown = section(report)
    print(markdown)
    if report.server_log_tail:
        print("server log:\n" + report.server_log_tail)
    if not args.no_write:
        write_section(markdown)
    return 0 if not report.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
