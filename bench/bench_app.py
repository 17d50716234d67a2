"""The app: cold start of `streamlit run app.py` (server up, first page drawn in Chromium), server-side time
of the main interactions (AppTest) and resident memory with the default model.

The interactions run in a child process (`python -m bench.bench_app CONFIG_JSON OUT_JSON`) so its memory is
the app's alone and, as in the server, app.py is what first imports torch, so its OMP_WAIT_POLICY default
applies (nothing here imports torch at module level). The child leaves through os._exit after writing its
results, because a torch or Streamlit thread still alive at interpreter shutdown can abort it ("terminate
called without an active exception").
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from deploy.launch import healthy  # noqa: F401 (the one health check; tests/test_browser.py imports it from here)

if TYPE_CHECKING:  # imported where used: bench.common imports torch, which the AppTest child must not
    from .common import Section

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
TIMEOUT_S = 120.0
TARGET_COLD_S, TARGET_INTERACTION_MS, TARGET_MEMORY_MIB = 5.0, 300.0, 1024.0
# Fresh sentences for language checkpoints (none is an example the app offers, so no cache helps).
SENTENCES = [
    "A young boy in a red shirt is playing with a ball in the park.",
    "Two women are sitting on a bench and talking about their day.",
    "A man with a hat is riding a bicycle down a busy street.",
    "A group of children are running on the beach near the water.",
    "An old dog is sleeping in front of a small wooden house.",
    "A woman in a black dress is singing on a stage with a guitar.",
    "Three men are working on the roof of a tall building.",
    "A little girl is eating an ice cream cone on a sunny day.",
    "A black and white cat is sitting on the window of the kitchen.",
    "People are walking across the bridge in the snow at night.",
    "A chef in a white jacket is cooking food in a restaurant.",
    "Two boys are climbing a large tree behind the school.",
]


# ---------------------------------------------------------------------------------------------
# Cold start: server process + headless Chromium
# ---------------------------------------------------------------------------------------------


@dataclass
class ColdStart:
    """One cold start: seconds until the health check answers and until the first chart is drawn."""

    up_s: float
    shell_s: float | None  # the browser shows Streamlit's frame (sidebar): the script run starts then
    drawn_s: float | None  # None without a browser
    rss_mib: float  # the server's resident memory once the first page is drawn
    peak_mib: float  # its resident high-water mark by then


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB, from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def app_env(user_root: str) -> dict[str, str]:
    """The environment of the app as shipped: a private user-checkpoint folder, OpenMP's default waits."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    return {**env, "VISFORMER_USER_CHECKPOINTS": user_root}


def streamlit_cmd(port: int) -> list[str]:
    """`streamlit run app.py` as deployed: headless, loopback, no file watcher, no usage stats."""
    return [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip


def open_first_page(browser, url: str, start: float) -> tuple[float, float]:
    """Open the app in a fresh browser page; seconds since `start` until the frame shows and until a
    plotly chart is drawn."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    try:
        page.goto(url, wait_until="commit", timeout=TIMEOUT_S * 1e3)
        page.wait_for_selector('[data-testid="stSidebar"]', timeout=TIMEOUT_S * 1e3)
        shell = time.perf_counter() - start
        page.wait_for_function(
            "() => [...document.querySelectorAll('.js-plotly-plot')].some(e => e.offsetParent)",
            timeout=TIMEOUT_S * 1e3,
            polling=20,
        )
        return shell, time.perf_counter() - start
    finally:
        page.close()


def cold_start(browser, env: dict[str, str]) -> ColdStart:
    """Start the server, time the health check and (with a browser) the first drawn chart, then stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    proc = subprocess.Popen(
        streamlit_cmd(port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while not healthy(url):
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode}")
            if time.perf_counter() - start > TIMEOUT_S:
                raise TimeoutError(f"streamlit did not answer within {TIMEOUT_S:.0f} s")
            time.sleep(0.02)
        up = time.perf_counter() - start
        shell = drawn = None
        if browser is not None:
            shell, drawn = open_first_page(browser, url, start)
            time.sleep(1.0)  # let the script run finish (figures are sent before the run ends)
        rss, peak = proc_memory_mib(proc.pid)
        return ColdStart(up, shell, drawn, rss, peak)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


HEAVY_IMPORTS = (
    "torch, numpy, pandas, plotly.graph_objects, visformer.explain.analysis, visformer.explain.views, visformer.classroom.archive, "
    "visformer.checkpoint, visformer.decoding, visformer.explain.attention, visformer.classroom.hosting, "
    "visformer.classroom.inputs"
)


def import_seconds(modules: str = HEAVY_IMPORTS) -> float:
    """Seconds a fresh Python needs to import the app's libraries (what its first script run imports)."""
    code = f"import time; t = time.perf_counter(); import {modules}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def cold_starts(n: int, env: dict[str, str]) -> tuple[list[ColdStart], str]:
    """n cold starts with one headless Chromium (started beforehand, not timed); (results, note)."""
    if not Path(CHROMIUM).exists():
        return [cold_start(None, env) for _ in range(n)], f"{CHROMIUM} missing: first page not timed"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return [cold_start(None, env) for _ in range(n)], "playwright missing: first page not timed"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            return [cold_start(browser, env) for _ in range(n)], ""
        finally:
            browser.close()


# ---------------------------------------------------------------------------------------------
# Interactions: AppTest in a child process
# ---------------------------------------------------------------------------------------------


def default_checkpoint() -> tuple[str, str | None] | None:
    """(name, task) of the checkpoint the app opens with, or None when there is none."""
    from visformer.checkpoint import read_config
    from visformer.classroom.catalogue import default_choice, discover_checkpoints

    choice = default_choice(discover_checkpoints())
    if choice is None:
        return None
    return choice.key, read_config(choice.path).get("task")


def fresh_sentences(task: str | None, n: int) -> list[str]:
    """n sentences the app has not seen (task examples for toy tasks, else English sentences)."""
    if task:
        from visformer.tasks import make_examples

        return [ex.src for ex in make_examples(task, n, seed=4242)]
    return [SENTENCES[i % len(SENTENCES)] for i in range(n)]


def _timed(at) -> float:
    """Seconds of one AppTest script run; fails on an exception box."""
    start = time.perf_counter()
    at.run(timeout=TIMEOUT_S)
    seconds = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"the app raised: {at.exception[0].value}")
    return seconds


def _next_index(n: int, current: int) -> int:
    """Another index in 0..n-1 (n > 1)."""
    return (current + 1) % n


def measure_interactions(sentences: list[str]) -> dict[str, list[float]]:
    """Interaction name -> seconds per repetition; each repetition starts from a fresh sentence."""
    from streamlit.testing.v1 import AppTest

    from pages._preload import page_charts

    times: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    app = str(ROOT / "app.py")
    at = AppTest.from_file(app, default_timeout=TIMEOUT_S)
    record("open the app (Attention page; loads the model)", _timed(at))
    for sentence in sentences[: len(sentences) // 2]:
        at.session_state["tab"] = "One head"
        at.text_input(key="sentence").input(sentence)
        record("translate a new sentence (translation, one head + layer mean)", _timed(at))
        layer, head = at.select_slider(key="layer"), at.select_slider(key="head")
        layer.set_value(_next_index(len(layer.options), layer.value))
        record("change layer", _timed(at))
        head.set_value(_next_index(len(head.options), head.value))
        record("change head", _timed(at))
        at.session_state["tab"] = "All heads"
        record("open 'All heads' (every head of every layer)", _timed(at))
        view = at.radio(key="view")
        kinds = ["encoder", "decoder", "cross"]  # the radio shows titles; set_value takes the kind
        view.set_value(kinds[_next_index(3, kinds.index(view.value))])
        record("switch attention kind on 'All heads'", _timed(at))
    for sentence in sentences[len(sentences) // 2 :]:
        at.session_state["tab"] = "All heads"
        at.text_input(key="sentence").input(sentence)
        record("translate a new sentence on 'All heads' (translation + every map of a kind)", _timed(at))
    at.switch_page("pages/decoding.py")
    at.run(timeout=TIMEOUT_S)
    for sentence in sentences[: len(sentences) // 2]:
        at.session_state["dec_tab"] = "Step by step"
        at.text_input(key="sentence").input(sentence)
        record("decoding comparison of a new sentence (5 strategies, open tab: step by step)", _timed(at))
        if not page_charts(at.get("plotly_chart")):  # the frame's hidden one aside
            raise RuntimeError("the Decoding page drew no chart")
        at.session_state["dec_tab"] = "Beam search tree"
        record("open 'Beam search tree' (Decoding page)", _timed(at))
        at.session_state["dec_tab"] = "Samples"
        record("open 'Samples' (Decoding page: 10 samples, diversity)", _timed(at))
    for page in ("pages/positional_encoding.py", "pages/timeline.py", "pages/train.py"):
        at.switch_page(page)
        record(f"open {Path(page).stem.replace('_', ' ')} page", _timed(at))
    return times


def peak_rss_mib() -> float:
    """This process's resident high-water mark in MiB.

    VmHWM belongs to the process's own memory map. ru_maxrss does not: Linux carries it over fork and exec,
    so a child of a large bench process (e.g. after the scaling section) would report its parent's peak.
    """
    if Path("/proc/self/status").exists():
        return proc_memory_mib(os.getpid())[1]
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_main(config_json: str, out_path: str) -> None:
    """Child process: run the interactions, write JSON, leave without interpreter teardown."""
    config = json.loads(config_json)
    try:
        result = {"times": measure_interactions(config["sentences"]), "peak_rss_mib": peak_rss_mib()}
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        result = {"error": f"{type(exc).__name__}: {exc}"}
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def interactions_in_child(sentences: list[str], env: dict[str, str]) -> dict:
    """Run measure_interactions in a fresh process (so its peak memory is the app's) and read its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "app.json"
        cmd = [sys.executable, "-m", "bench.bench_app", json.dumps({"sentences": sentences}), str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
        if not out.exists():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"exit code {proc.returncode}: {tail}"}
        return json.loads(out.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Section
# ---------------------------------------------------------------------------------------------


def verdict(value: float, target: float) -> str:
    """'met' or 'missed by x%'."""
    return "met" if value < target else f"missed ({value / target:.1f}× the target)"


PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}  # OpenMP threads sleep instead of spinning while they wait


def timing_cells(seconds: list[float] | None, first: bool) -> list[str]:
    """'median (min–max) ms' and the verdict (on the slowest repetition) of one interaction."""
    from .common import Stat

    if not seconds:
        return ["", ""]
    t = Stat.of(seconds).scaled(1e3)
    return [f"{t.fmt(0)} ms ({t.n})", "" if first else verdict(t.high, TARGET_INTERACTION_MS)]


def cold_cells(seconds: list[float | None], target: float | None) -> list[str]:
    """'median (min–max) s' and the verdict (on the median) of one cold-start milestone."""
    from .common import Stat

    if any(v is None for v in seconds) or not seconds:
        return ["", ""]
    t = Stat.of(seconds)
    return [f"{t.fmt(2)} s ({t.n})", verdict(t.median, target) if target else ""]


def analysis_notes(
    starts: list[ColdStart],
    imports_s: float,
    shipped: dict[str, list[float]],
    passive: dict[str, list[float]],
) -> list[str]:
    """What the cold start is made of and what the OpenMP wait policy does, from this run's numbers."""
    from .common import Stat

    notes = []
    if starts and starts[0].drawn_s is not None:
        up, shell, drawn = (
            Stat.of([getattr(c, a) for c in starts]).median for a in ("up_s", "shell_s", "drawn_s")
        )
        notes.append(
            f"Where the cold start goes (medians): {up:.1f} s until the server answers (Python starts, imports "
            f"Streamlit, starts Tornado), {shell - up:.1f} s for Chromium to load Streamlit's JavaScript and open "
            f"the session, {drawn - shell:.1f} s for the first script run and the first chart: the run imports "
            f"torch and the app's libraries ({imports_s:.1f} s measured alone), loads the checkpoint, translates "
            "and builds the figures, then Chromium loads plotly.js and draws. Nothing of the app runs before a "
            "browser connects, so the torch import cannot overlap the server start unless something imports "
            "torch when the server starts (e.g. a launcher that imports it in a thread before starting Streamlit)."
        )
    pairs = [
        (k, Stat.of(shipped[k]).median * 1e3, Stat.of(passive[k]).median * 1e3)
        for k in shipped
        if k in passive and not k.startswith("open the app")
    ]
    if pairs:
        changes = ", ".join(f"{k}: {a:,.0f} → {b:,.0f} ms" for k, a, b in pairs)
        notes.append(
            f"Medians as shipped → with `OMP_WAIT_POLICY=PASSIVE`: {changes}. torch runs 2 OpenMP threads that "
            "by default spin while they wait for each other; when the 2 cores are also busy with anything else "
            "(another session, the Train page's training thread, other processes), each small op of a decoding "
            "step can wait for a descheduled thread: in a stand-alone test on this shared machine (02:05 UTC) "
            "greedy decoding of one sentence took 3-10 s with spinning waits and 17 ms with sleeping ones. The "
            "variable must be set before torch is imported: app.py sets it (unless the environment does) before "
            "anything imports torch, so the two columns run with the same setting and should agree within noise."
        )
    return notes


def run(quick: bool = False) -> Section:
    """The App section: cold starts, AppTest interactions (as shipped and with passive OpenMP), memory."""
    from .common import Section, Stat

    section = Section(
        title="App",
        intro=(
            "Cold start: `streamlit run app.py` (headless, loopback, no file watcher) until `/_stcore/health` "
            "answers (server up) and until headless Chromium (/usr/bin/chromium via playwright, launched "
            "beforehand) has drawn the first plotly chart of the first page (first page drawn). Interactions: "
            "server-side time of one script run through Streamlit's `AppTest` in a fresh process, each "
            "repetition on a sentence the app has not seen (no cache hit), median (min–max) with the number "
            "of runs; the verdict uses the slowest run. Measured twice: the app as shipped, and with the "
            "environment variable `OMP_WAIT_POLICY=PASSIVE` (see the notes). Memory: resident set of the "
            "server process once the first page is drawn, and the peak of the AppTest process after every "
            "interaction. Targets: cold start < 5 s, every interaction < 300 ms, memory < 1 GB."
        ),
        header=["measurement", "as shipped", "verdict", "OMP_WAIT_POLICY=PASSIVE", "verdict", "target"],
    )
    if not (ROOT / "app.py").exists():
        section.notes.append("skipped: app.py does not exist yet")
        return section
    found = default_checkpoint()
    if found is None:
        section.notes.append("skipped: no checkpoint in checkpoints/ (the app would show an empty page)")
        return section
    name, task = found
    sentences = fresh_sentences(task, 2 if quick else 6)
    with tempfile.TemporaryDirectory() as user_root:
        env = app_env(user_root)
        starts, note = cold_starts(1 if quick else 3, env)
        starts_passive, _ = cold_starts(1 if quick else 3, {**env, **PASSIVE})
        imports_s = [import_seconds() for _ in range(1 if quick else 3)]
        shipped = interactions_in_child(sentences, env)
        passive = interactions_in_child(sentences, {**env, **PASSIVE})
    for attr, label, target in (
        ("up_s", "cold start: server up", None),
        ("shell_s", "cold start: frame shown in the browser (first script run starts)", None),
        ("drawn_s", "cold start: first page drawn", TARGET_COLD_S),
    ):
        cells = [cold_cells([getattr(c, attr) for c in runs], target) for runs in (starts, starts_passive)]
        section.rows.append([label, *cells[0], *cells[1], f"< {target:.0f} s" if target else ""])
    if note:
        section.notes.append(note)
    imports = Stat.of(imports_s)
    section.rows.append(["part of the first script run: importing torch + the app's libraries (alone, fresh Python)",
                         f"{imports.fmt(2)} s ({imports.n})", "", "", "", ""])  # fmt: skip
    times, other = shipped.get("times", {}), passive.get("times", {})
    for what in [*times, *(w for w in other if w not in times)]:
        first = what.startswith("open the app")
        target = "(in the cold start)" if first else "< 300 ms"
        row = [what, *timing_cells(times.get(what), first), *timing_cells(other.get(what), first), target]
        section.rows.append(row)
    rss = [Stat.of([c.rss_mib for c in runs]) for runs in (starts, starts_passive)]
    section.rows.append([
        "server RSS, first page drawn",
        *(cell for r in rss for cell in (f"{r.fmt(0)} MiB ({r.n})", verdict(r.high, TARGET_MEMORY_MIB))),
        "< 1024 MiB",
    ])  # fmt: skip
    peaks = [d.get("peak_rss_mib") for d in (shipped, passive)]
    section.rows.append([
        "peak RSS of the AppTest process (all interactions)",
        *(cell for p in peaks for cell in ((f"{p:.0f} MiB", verdict(p, TARGET_MEMORY_MIB)) if p else ("", ""))),
        "< 1024 MiB",
    ])  # fmt: skip
    section.notes.append(f"default model: `checkpoints/{name}`" + (f" (toy task {task})" if task else ""))
    section.notes += analysis_notes(starts, imports.median, times, other)
    for label, data in (("as shipped", shipped), ("OMP_WAIT_POLICY=PASSIVE", passive)):
        if "error" in data:
            section.notes.append(f"interactions ({label}) failed: {data['error']}")
    return section


def run_json(quick: bool = False) -> str:
    """The cold starts alone as JSON (for a quick look from the shell)."""
    with tempfile.TemporaryDirectory() as user_root:
        starts, note = cold_starts(1 if quick else 3, app_env(user_root))
    return json.dumps({"cold_starts": [asdict(s) for s in starts], "note": note})


if __name__ == "__main__":
    if len(sys.argv) == 3:
        child_main(sys.argv[1], sys.argv[2])
    print(run_json("--quick" in sys.argv))
