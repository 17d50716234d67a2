"""A class on one server, measured at the protocol level: simulated students speak Streamlit's websocket.

`python -m bench.bench_class --students 10 25 50 100 [--trainers 5]` starts `streamlit run app.py` in hosted
mode on a free 127.0.0.1 port for each level (the shipped checkpoints, fresh user folders), and drives the
students as asyncio websocket clients that send `BackMsg` protobufs and read `ForwardMsg` deltas, as the
browser's JavaScript does: widget ids are learned from the deltas, so no browser runs and 100 students cost
the client little CPU. Each student follows a script with think time: open the app, type a class example
and a sentence of their own, move the layer and head sliders, open "All heads", run the Decoding page's
comparison. The trainers also train a toy copy-task model on the Train page (retrying while the server is
busy) and open it. Reported per level (section "Class load" of bench/RESULTS.md): requests, errors,
p50/p95/max response per request kind, the server's CPU, memory and threads, cache entries, and leaks
(a student seeing another's model in the picker or opening it through a URL).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

if __package__ in (None, ""):  # `python bench/bench_class.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_load import free_port, make_shipped_checkpoint, server_env, start_server, write_section
from bench.class_protocol import (
    Run,
    Session,
    click_state,
    pick_state,
    text_state,
)
from bench.process_sampler import (
    Sample,
    Sampler,
    SharedWork,
    cpu_percent,
    read_processes,
)

REPO = Path(__file__).resolve().parents[1]
TITLE = "Class load"
SAVED = re.compile(r"Saved as .+ after [\d,]+ steps")
TOY_TASK = re.compile(r"Toy task \*\*(\w+)\*\*")
VIEWING = ("open app", "type class example", "type own sentence", "change layer", "change head", "all heads")


# ---------------------------------------------------------------------------------------------
# Students
# ---------------------------------------------------------------------------------------------


@dataclass
class StudentReport:
    """What one simulated student did and saw."""

    name: str
    role: str  # "viewer" or "trainer"
    server: str = ""  # the upstream that served the websocket (behind a proxy), else ""
    timings: list[tuple[str, float]] = field(default_factory=list)  # (request kind, seconds)
    errors: list[str] = field(default_factory=list)
    busy: int = 0  # "the server is busy" answers to Start training
    leaks: list[str] = field(default_factory=list)  # another student's model seen or opened
    trained: str = ""  # the checkpoint this student saved


@dataclass
class Script:
    """What every student shares: addresses, think time, the class's trained model names, a finish line."""

    http_url: str
    think_s: float
    trainer_names: list[str]
    trainers_done: asyncio.Event
    headers: Callable[[int], dict[str, str]] = lambda i: {}
    train_deadline_s: float = 900.0
    trainers_left: int = 0

    def trainer_finished(self) -> None:
        """One trainer is done training (saved or given up); the last one opens the finish line."""
        self.trainers_left -= 1
        if self.trainers_left <= 0:
            self.trainers_done.set()

    @property
    def ws_url(self) -> str:
        """The websocket route of the app."""
        return self.http_url.replace("http", "ws", 1) + "/_stcore/stream"


async def request(session: Session, report: StudentReport, kind: str, **rerun) -> Run | None:
    """One timed script run; its errors go into the report (None when it failed outright)."""
    try:
        run = await session.rerun(**rerun)
    except Exception as exc:  # noqa: BLE001 - a timeout or a closed socket is an error of this request
        report.errors.append(f"{kind}: {type(exc).__name__}: {str(exc)[:200]}")
        return None
    report.timings.append((kind, run.seconds))
    report.errors += [f"{kind}: {e}" for e in run.errors() if "server is busy" not in e]
    return run


def check_picker(run: Run | None, report: StudentReport, own: str = "") -> None:
    """Record a leak when the picker lists a trained model other than this student's own."""
    if run is None:
        return
    others = [label for label in run.yours() if label != f"{own} (yours)"]
    if others:
        report.leaks.append(f"picker lists {others}")


async def think(rng: random.Random, script: Script) -> None:
    """A pause between two actions (uniform around the think time)."""
    await asyncio.sleep(script.think_s * rng.uniform(0.5, 1.5))


def own_sentence(i: int, toy: bool) -> str:
    """A sentence only student i types (letters for a toy task, English otherwise)."""
    rng = random.Random(1000 + i)
    if toy:
        return " ".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
    who = rng.choice(["A young girl", "Two men", "An old woman", "A small dog", "Three children", "A cook"])
    does = rng.choice(["is walking", "are playing", "sits", "is running", "is reading", "waits"])
    where = rng.choice(["on the beach", "in the park", "near a red car", "by the river", "in a kitchen"])
    return f"{who} {does} {where} with student {i}."


async def view(
    session: Session, report: StudentReport, rng: random.Random, script: Script, i: int
) -> Run | None:
    """The viewing script: open, type two sentences, move layer and head, all heads, decoding comparison."""
    run = await request(session, report, "open app", page=None, query="")
    if run is None:
        return None
    check_picker(run, report, report.trained)
    toy = TOY_TASK.search(run.text()) is not None
    examples = run.options.get("Examples") or [own_sentence(0, toy)]
    box = run.widgets.get("Sentence to translate")
    if box is None:
        report.errors.append("open app: no sentence box")
        return None
    for kind, sentence in [
        ("type class example", rng.choice(examples[:3])),
        ("type own sentence", own_sentence(i, toy)),
    ]:
        await think(rng, script)
        run = await request(session, report, kind, states=[text_state(box, sentence)])
        if run is not None and not all(f"`{w}`" in run.text() for w in sentence.split() if toy):
            report.errors.append(f"{kind}: the pieces of {sentence!r} are not shown")
    for kind, label in [("change layer", "Layer"), ("change head", "Head")]:
        await think(rng, script)
        if label in session.widgets:
            await request(session, report, kind, states=[pick_state(session, label, 1)])
    await think(rng, script)
    if "All heads" in session.widgets:
        await request(
            session, report, "all heads", states=[text_state(session.widgets["All heads"], "All heads")]
        )
    await think(rng, script)
    return await request(session, report, "decoding comparison", page="Decoding")


async def train(
    session: Session, report: StudentReport, rng: random.Random, script: Script, name: str
) -> None:
    """Train a toy model on the Train page (retrying while busy), then open it with the page's button."""
    if await request(session, report, "open app", query="") is None:
        return
    run = await request(session, report, "open train page", page="Train")
    if run is None or "Checkpoint name" not in run.widgets:
        report.errors.append("open train page: no checkpoint name box")
        return
    await think(rng, script)
    run = await request(
        session, report, "set name", states=[text_state(run.widgets["Checkpoint name"], name)]
    )
    deadline = time.perf_counter() + script.train_deadline_s
    while run is not None and time.perf_counter() < deadline and not SAVED.search(run.text()):
        if session.fragment is None:  # not training: ask to start
            await think(rng, script)
            run = await request(
                session, report, "start training", states=[click_state(run.widgets["Start training"])]
            )
            if run is not None and "server is busy" in run.text():
                report.busy += 1
                await asyncio.sleep(4 * script.think_s)
            elif run is not None and session.fragment is None and not SAVED.search(run.text()):
                report.errors.append("start training: neither started nor busy")
                return
            continue
        await asyncio.sleep(session.fragment[1])
        run = await request(session, report, "training progress", auto=True)
    if run is None or not SAVED.search(run.text()):
        report.errors.append(f"train: no saved checkpoint before the deadline ({report.busy} busy answers)")
        return
    report.trained = name
    run = await request(session, report, "train page after the run")
    button = (run.widgets if run is not None else {}).get("Open it on the Attention page")
    if button is None:
        report.errors.append("train page after the run: no button to open the model")
        return
    run = await request(session, report, "open own model", states=[click_state(button)])
    if run is not None and (run.yours() != [f"{name} (yours)"] or "Toy task **copy**" not in run.text()):
        report.errors.append(
            f"open own model: picker {run.yours()}, model shown: {TOY_TASK.findall(run.text())}"
        )
    check_picker(run, report, name)


async def try_another(report: StudentReport, script: Script, i: int) -> None:
    """Once the trainers are done: a new tab whose URL names another student's model must not open it."""
    others = [n for n in script.trainer_names if n != report.trained]
    if not others:
        return
    await asyncio.wait_for(script.trainers_done.wait(), script.train_deadline_s + 300)
    name = others[i % len(others)]
    session = Session(script.ws_url, script.headers(i))
    try:
        await session.connect()
        run = await request(
            session, report, "url to another's model", query=f"checkpoint={quote('yours/' + name)}"
        )
        check_picker(run, report, "")
        if run is not None and "Toy task **copy**" in run.text():
            report.leaks.append(f"opened {name} through the URL")
    finally:
        await session.close()


async def student(i: int, role: str, script: Script, start_after_s: float) -> StudentReport:
    """One student from arrival to leaving: the viewing script, training for trainers, the isolation check."""
    report = StudentReport(f"{role}-{i:03d}", role)
    rng = random.Random(i)
    await asyncio.sleep(start_after_s)
    session = Session(script.ws_url, script.headers(i))
    try:
        await session.connect()
        report.server = session.response_headers.get("x-visformer-upstream", "")
        if role == "trainer":
            try:
                await train(session, report, rng, script, script.trainer_names[i])
            finally:
                script.trainer_finished()
        await view(session, report, rng, script, i)
        await try_another(report, script, i)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line of the report
        report.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await session.close()
    return report


async def drive_class(script: Script, students: int, trainers: int, ramp_s: float) -> list[StudentReport]:
    """All students at once: trainers first, viewers arriving over `ramp_s` seconds."""
    script.trainers_done, script.trainers_left = asyncio.Event(), trainers
    if not trainers:
        script.trainers_done.set()
    roles = ["trainer"] * trainers + ["viewer"] * (students - trainers)
    return list(
        await asyncio.gather(
            *(student(i, role, script, ramp_s * i / max(students, 1)) for i, role in enumerate(roles))
        )
    )


async def shared_work_probe(script: Script, pids: Sequence[int], sentence: str) -> SharedWork:
    """Type `sentence` (new to the server) in one session, then in another: is the work done twice?

    Behind a proxy both sessions go to the process of student 0's cookie (caches are per process).
    """
    measured = []
    for _ in range(2):
        session = Session(script.ws_url, script.headers(0))
        await session.connect()
        try:
            run = await session.rerun(query="")
            before = read_processes(pids, 0.0).cpu_s
            run = await session.rerun(states=[text_state(run.widgets["Sentence to translate"], sentence)])
            measured += [read_processes(pids, 0.0).cpu_s - before, run.seconds]
        finally:
            await session.close()
    return SharedWork(*measured)


# ---------------------------------------------------------------------------------------------
# A level: one server, N students
# ---------------------------------------------------------------------------------------------


@dataclass
class LevelReport:
    """One load level."""

    students: int
    trainers: int
    reports: list[StudentReport]
    wall_s: float
    samples: list[Sample]
    client_cpu_s: float
    shared: SharedWork | None = None
    processes: int = 1  # app processes (behind nginx when more than one)

    @property
    def errors(self) -> list[str]:
        """Every error, prefixed with its student."""
        return [f"{r.name}: {e}" for r in self.reports for e in r.errors]

    @property
    def leaks(self) -> list[str]:
        """Every leak, prefixed with its student."""
        return [f"{r.name}: {e}" for r in self.reports for e in r.leaks]

    def by_kind(self) -> dict[str, list[float]]:
        """Response times per request kind."""
        out: dict[str, list[float]] = {}
        for r in self.reports:
            for kind, seconds in r.timings:
                out.setdefault(kind, []).append(seconds)
        return out


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest-rank method."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))] if ordered else 0.0


def use_checkpoints(work: Path, source: Path | None) -> None:
    """work/shipped: a link to `source`, or a tiny toy model when None; work/user starts empty."""
    if source is None:
        make_shipped_checkpoint(work / "shipped")
    else:
        (work / "shipped").symlink_to(source.resolve(), target_is_directory=True)
    (work / "user").mkdir()


def route_cookie(url: str) -> str:
    """The sticky-route cookie a first visit through the proxy gets (what a browser sends from then on)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.headers.get("Set-Cookie", "").split(";")[0]


@contextmanager
def hosted_servers(work: Path, train_steps: int, processes: int) -> Iterator[tuple[str, list[int]]]:
    """(url, app pids): one hosted app process, or several behind deploy/'s nginx (sticky by cookie)."""
    from deploy.launch import NGINX, start_app, start_nginx, stop_process, wait_healthy

    ports = [free_port() for _ in range(processes)]
    procs: list[subprocess.Popen] = []
    try:
        if processes == 1:
            procs.append(start_server(work, ports[0], train_steps))
            yield f"http://127.0.0.1:{ports[0]}", [procs[0].pid]
            return
        env = server_env(work, train_steps)
        apps = [start_app(port, env, work / f"app-{port}.log") for port in ports]
        procs += apps
        listen = free_port()
        procs.append(
            start_nginx(ports, f"127.0.0.1:{listen}", work / "nginx", shutil.which("nginx") or NGINX)
        )
        url = f"http://127.0.0.1:{listen}"
        wait_healthy(url)
        yield url, [p.pid for p in apps]
    finally:
        for proc in reversed(procs):
            stop_process(proc)


def run_level(
    students: int, trainers: int = 5, think_s: float = 3.0, train_steps: int = 300, checkpoints: Path | None = None,
    ramp_s: float | None = None, processes: int = 1,
) -> LevelReport:  # fmt: skip
    """Start a hosted server (or `processes` behind nginx), drive one class of students, stop it; the report."""
    trainers = min(trainers, students)
    with tempfile.TemporaryDirectory(prefix="visformer-class-") as tmp:
        work = Path(tmp)
        use_checkpoints(work, checkpoints)
        with hosted_servers(work, train_steps, processes) as (url, pids):
            cookies = [route_cookie(url) for _ in range(students)] if processes > 1 else [""] * students
            script = Script(url, think_s, [f"class-{i}" for i in range(trainers)], asyncio.Event(),
                            headers=lambda i: {"Cookie": cookies[i]} if cookies[i] else {})  # fmt: skip
            client_start, start = time.process_time(), time.perf_counter()
            with Sampler(pids) as sampler:
                ramp = min(30.0, 0.3 * students) if ramp_s is None else ramp_s
                reports = asyncio.run(drive_class(script, students, trainers, ramp))
            probe = own_sentence(10_000 + students, checkpoints is None)
            shared = asyncio.run(shared_work_probe(script, pids, probe))
        return LevelReport(students, trainers, reports, time.perf_counter() - start, sampler.samples,
                           time.process_time() - client_start, shared, processes)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def level_row(level: LevelReport) -> str:
    """One row of the summary table."""
    requests = [t for ts in level.by_kind().values() for t in ts]
    viewing = [t for k, ts in level.by_kind().items() if k in VIEWING for t in ts]
    mean, peak = cpu_percent(level.samples)
    cpu_total = level.samples[-1].cpu_s - level.samples[0].cpu_s if level.samples else 0.0
    rss = [s.rss_mib for s in level.samples] or [0.0]
    threads = [s.threads for s in level.samples] or [0]
    busy = sum(r.busy for r in level.reports)
    saved = sum(bool(r.trained) for r in level.reports)
    return (
        f"| {level.students} | {level.processes} | {len(requests)} | {len(level.errors)} | {len(level.leaks)} | "
        f"{percentile(viewing, 0.5):.2f} / {percentile(viewing, 0.95):.2f} / {max(viewing, default=0):.2f} s | "
        f"{saved}/{level.trainers} ({busy} busy) | {cpu_total:.0f} s | {mean:.0f} % / {peak:.0f} % | {rss[0]:.0f} → {max(rss):.0f} MiB | "
        f"{max(threads)} | {level.client_cpu_s:.0f} s | {level.wall_s:.0f} s |"
    )


def kind_rows(level: LevelReport) -> list[str]:
    """Per request kind: count, p50, p95, max."""
    return [
        f"| {level.students} | {level.processes} | {kind} | {len(ts)} | {percentile(ts, 0.5):.2f} s | {percentile(ts, 0.95):.2f} s | "
        f"{max(ts):.2f} s |"
        for kind, ts in level.by_kind().items()
    ]


def section(levels: list[LevelReport], think_s: float, train_steps: int, note: str = "") -> str:
    """The 'Class load' section of RESULTS.md."""
    from bench.common import machine_info

    info = machine_info()
    lines = [
        f"## {TITLE}",
        "",
        f"`python -m bench.bench_class --students {' '.join(dict.fromkeys(str(lv.students) for lv in levels))}"
        + (
            f" --processes {' '.join(dict.fromkeys(str(lv.processes) for lv in levels))}"
            if any(lv.processes > 1 for lv in levels)
            else ""
        )
        + f"` ({info['date']}): "
        "one `streamlit run app.py` in hosted mode on 127.0.0.1 per level (or several behind deploy/'s nginx, "
        "each student with the route cookie of a first visit; CPU, memory and threads summed over them), "
        "the shipped checkpoints, students "
        "simulated at the protocol level (websocket + BackMsg/ForwardMsg protobufs, no browser). Each student: "
        f"open the app, type a class example and a sentence of their own, move Layer and Head, open All heads, "
        f"run the Decoding comparison, with {think_s:g} s ± 50 % think time between actions; students arrive "
        f"over min(30 s, 0.3 s × students). {levels[0].trainers} of them first train a toy copy-task model on "
        f"the Train page (hosted cap: 2 runs at once, {train_steps} steps each; a busy answer is retried), "
        "then every student tries a URL naming each trainer's model. Machine: "
        f"{info['cpu']}, {info['logical cpus']} logical CPUs (load average {info['load average (1/5/15 min)']})."
        + (f" {note}" if note else ""),
        "",
        "| students | app processes | requests | errors | leaks | viewing p50 / p95 / max | trained (busy answers) | "
        "server CPU total | server CPU mean / peak 5 s | server RSS start → peak | threads peak | client CPU | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(level_row(lv) for lv in levels),
        "",
        "| students | app processes | request | count | p50 | p95 | max |",
        "|---|---|---|---|---|---|---|",
        *(row for lv in levels for row in kind_rows(lv)),
        "",
        "Shared work (after each level, on the idle server: one new sentence typed in a session, then the same "
        "sentence in another session; server CPU seconds and response of each): "
        + "; ".join(
            f"{lv.students} students ({lv.processes} process{'es' if lv.processes > 1 else ''}): first {lv.shared.first_cpu_s:.2f} CPU s / {lv.shared.first_s:.2f} s, "
            f"second {lv.shared.second_cpu_s:.2f} CPU s / {lv.shared.second_s:.2f} s"
            for lv in levels
            if lv.shared
        ),
        "",
        "- A response is timed from sending the BackMsg until `script_finished` arrives; viewing = open app, "
        "typing, sliders, All heads. CPU is % of one core (100 % = one core busy); server CPU total (CPU seconds "
        "the server used for the level, its training runs included) depends little on what else shares the cores, "
        "response times depend on it a lot.",
        "- Leaks: a trained model of another student in a picker, or opened through `?checkpoint=yours/<name>`.",
    ]
    errors = [e for lv in levels for e in (lv.errors + lv.leaks)]
    lines += [f"- error: {e}" for e in errors[:10]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the levels, print the section and write it into RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[10, 25, 50, 100])
    parser.add_argument("--trainers", type=int, default=5, help="students who also train (default 5)")
    parser.add_argument("--think", type=float, default=3.0, help="mean think time in seconds (default 3)")
    parser.add_argument("--train-steps", type=int, default=300, help="hosted max steps per run (default 300)")
    parser.add_argument("--note", default="", help="a sentence added to the section (e.g. other load)")
    parser.add_argument("--processes", type=int, nargs="+", default=[1],
                        help="app processes per level (more than 1: behind deploy/'s nginx); each count is a level")  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args(argv)
    levels = []
    for n, processes in [(n, p) for n in args.students for p in args.processes]:
        level = run_level(
            n, args.trainers, args.think, args.train_steps, REPO / "checkpoints", processes=processes
        )
        print(level_row(level), *level.errors[:5], *level.leaks[:5], sep="\n", flush=True)
        levels.append(level)
    markdown = section(levels, args.think, args.train_steps, args.note)
    print(markdown)
    if not args.no_write:
        write_section(markdown, title=TITLE)
    return 0 if not any(lv.errors or lv.leaks for lv in levels) else 1


if __name__ == "__main__":
    raise SystemExit(main())
