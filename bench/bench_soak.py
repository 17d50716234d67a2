"""Soak: one hosted server under waves of students for a long while; memory and threads over time.

`python -m bench.bench_soak [--minutes 30] [--students 10] [--trainers 2]` starts `streamlit run app.py` in
hosted mode with the shipped checkpoints and drives wave after wave of simulated students (bench.bench_class:
each wave connects, follows the class script, trains, and disconnects). The server's resident memory, thread
count and CPU are sampled every 5 s, with what the server holds (the job registry's jobs and Streamlit's
sessions, which the server writes to a probe file: `--serve` runs streamlit in this module's process for that);
the "Soak" section of bench/RESULTS.md gets one row per interval.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # `python bench/bench_soak.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_class import REPO, Script, drive_class, own_sentence, use_checkpoints
from bench.bench_load import free_port, server_env, stop_server, write_section
from bench.class_protocol import Session, text_state
from bench.process_sampler import Sample, Sampler, cpu_percent, read_process
from deploy.launch import serve, start_app, streamlit_args

TITLE = "Soak"


def serve_probed(probe: Path, args: list[str]) -> None:
    """deploy.launch.serve(ARGS) in this process, writing "jobs sessions" (held now) to `probe` every second."""

    def report() -> None:
        from streamlit.runtime import Runtime

        from visformer.classroom.jobs import REGISTRY

        while True:
            time.sleep(1.0)
            sessions = Runtime.instance()._session_mgr.num_sessions() if Runtime.exists() else 0
            partial = probe.with_suffix(".partial")
            partial.write_text(f"{len(REGISTRY)} {sessions}\n")
            partial.replace(probe)  # the reader never sees a half-written file

    threading.Thread(target=report, daemon=True, name="soak-probe").start()
    serve(args)


def start_probed_server(
    work: Path, port: int, train_steps: int, extra: Sequence[str] = ()
) -> subprocess.Popen:
    """The hosted app (as bench_load.start_server) run through `serve_probed`, its probe file at work/probe."""
    command = [
        sys.executable,
        "-m",
        "bench.bench_soak",
        "--serve",
        str(work / "probe"),
        "--",
        *streamlit_args(port),
        *extra,
    ]
    return start_app(port, server_env(work, train_steps), work / "server.log", command)


def soak(
    minutes: float, students: int, trainers: int, think_s: float, train_steps: int
) -> tuple[list[Sample], int, list[str]]:
    """(samples, waves, errors) of waves of students against one server for `minutes`."""
    with tempfile.TemporaryDirectory(prefix="visformer-soak-") as tmp:
        work = Path(tmp)
        use_checkpoints(work, REPO / "checkpoints")
        port = free_port()
        proc = start_probed_server(work, port, train_steps)
        script = Script(f"http://127.0.0.1:{port}", think_s, [], asyncio.Event())
        waves, errors = 0, []
        try:
            with Sampler(proc.pid, every_s=5.0, probe=work / "probe") as sampler:
                end = time.perf_counter() + 60 * minutes
                while time.perf_counter() < end:
                    script.trainer_names = [f"soak-{waves}-{i}" for i in range(trainers)]
                    reports = asyncio.run(drive_class(script, students, trainers, ramp_s=5.0))
                    errors += [f"wave {waves} {r.name}: {e}" for r in reports for e in r.errors + r.leaks]
                    waves += 1
        finally:
            stop_server(proc)
        return sampler.samples, waves, errors


def curve_rows(samples: list[Sample], every_s: float) -> list[str]:
    """One table row per `every_s` seconds: time, RSS, threads, jobs and sessions held, CPU, load average."""
    rows, last = [], None
    for sample in samples:
        if last is None or sample.t - last.t >= every_s or sample is samples[-1]:
            cpu = cpu_percent([last, sample])[0] if last else 0.0
            jobs, sessions = sample.held if len(sample.held) == 2 else ("?", "?")
            rows.append(
                f"| {sample.t / 60:.1f} | {sample.rss_mib:.0f} | {sample.threads} | {jobs} | {sessions} | "
                f"{cpu:.0f} % | {sample.load:.2f} |"
            )
            last = sample
    return rows


def section(samples: list[Sample], waves: int, errors: list[str], minutes: float, students: int, trainers: int,
            note: str) -> str:  # fmt: skip
    """The 'Soak' section of RESULTS.md."""
    from bench.common import machine_info

    info = machine_info()
    first = next((s for s in samples if s.t >= 60), samples[0])  # after the first minute (models loaded)
    lines = [
        f"## {TITLE}",
        "",
        f"`python -m bench.bench_soak --minutes {minutes:g} --students {students} --trainers {trainers}` "
        f"({info['date']}): one hosted server, {waves} waves of {students} simulated students (the Class load "
        f"script; {trainers} of each wave train) one after another, each wave connecting and leaving. "
        f"{len(errors)} errors. Server resident memory after the first minute {first.rss_mib:.0f} MiB, at the end "
        f"{samples[-1].rss_mib:.0f} MiB (peak {max(s.rss_mib for s in samples):.0f}); threads after the first "
        f"minute {first.threads}, at the end {samples[-1].threads} (peak {max(s.threads for s in samples)}). "
        f"Machine: {info['cpu']}, {info['logical cpus']} logical CPUs (load average at the end "
        f"{info['load average (1/5/15 min)']})." + (f" {note}" if note else ""),
        "",
        "| minute | RSS MiB | threads | jobs held | sessions held | server CPU | load average (1 min) |",
        "|---|---|---|---|---|---|---|",
        *curve_rows(samples, max(60.0, 60 * minutes / 30)),
    ]
    lines += [f"- error: {e}" for e in errors[:10]]
    return "\n".join(lines) + "\n"


SENTENCES_TITLE = "Soak: a new sentence on every run"
BOX = "Sentence to translate"


async def type_sentences(
    url: str, runs: int, pid: int, every: int
) -> tuple[list[tuple[int, float]], list[str]]:
    """One tab types a new sentence on the Attention page run after run (every 8th also opens Decoding and comes back).

    Returns (script runs so far, server RSS MiB) every `every` runs, and the errors the runs showed.
    """
    session = Session(url.replace("http", "ws", 1) + "/_stcore/stream")
    await session.connect()
    rows, errors, done = [(0, read_process(pid, 0.0).rss_mib)], [], 0
    try:
        await session.rerun(page=None, query="")
        done += 1
        for i in range(10**9):
            if done >= runs:
                break
            if BOX not in session.widgets:
                await session.rerun(page="Attention")
                done += 1
            run = await session.rerun(states=[text_state(session.widgets[BOX], own_sentence(i, toy=False))])
            done += 1
            errors += run.errors()
            if i % 8 == 7:
                errors += (await session.rerun(page="Decoding")).errors()
                await session.rerun(page="Attention")
                done += 2
            if done // every > rows[-1][0] // every:
                rows.append((done, read_process(pid, 0.0).rss_mib))
                print(f"{done} runs: {rows[-1][1]:.0f} MiB", flush=True)
        rows.append((done, read_process(pid, 0.0).rss_mib))
    finally:
        await session.close()
    return rows, errors


def sentence_soak(
    runs: int, budget: str | None, every: int = 100
) -> tuple[list[tuple[int, float]], list[str]]:
    """type_sentences against one hosted server; budget: server.maxCacheDataSize ("0": none, None: config.toml's)."""
    with tempfile.TemporaryDirectory(prefix="visformer-soak-") as tmp:
        work = Path(tmp)
        use_checkpoints(work, REPO / "checkpoints")
        port = free_port()
        extra = [] if budget is None else ["--server.maxCacheDataSize", budget]
        proc = start_probed_server(work, port, 100, extra)
        try:
            return asyncio.run(type_sentences(f"http://127.0.0.1:{port}", runs, proc.pid, every))
        finally:
            stop_server(proc)


def sentence_section(rows: list[tuple[int, float]], errors: list[str], budget: str | None, note: str) -> str:
    """The 'Soak: a new sentence on every run' section of RESULTS.md."""
    from bench.common import machine_info

    info = machine_info()
    shown = (
        "`server.maxCacheDataSize` from .streamlit/config.toml" if budget is None else f"`--budget {budget}`"
    )
    lines = [
        f"## {SENTENCES_TITLE}",
        "",
        f"`python -m bench.bench_soak --sentences {rows[-1][0]}` ({info['date']}, {shown}): one hosted server, one tab "
        f"typing a new sentence on the Attention page run after run (every 8th also opens Decoding and comes back). "
        f"{len(errors)} errors. Machine: {info['cpu']}, {info['logical cpus']} logical CPUs (load average at the end "
        f"{info['load average (1/5/15 min)']})." + (f" {note}" if note else ""),
        "",
        "| script runs | server RSS MiB |",
        "|---|---|",
        *(f"| {n} | {mib:.0f} |" for n, mib in rows),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the soak, print the section and write it into RESULTS.md."""
    if argv is None and sys.argv[1:2] == ["--serve"]:  # the server side: `--serve PROBE -- STREAMLIT ARGS`
        serve_probed(Path(sys.argv[2]), sys.argv[4:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--students", type=int, default=10, help="students per wave (default 10)")
    parser.add_argument("--trainers", type=int, default=2, help="trainers per wave (default 2)")
    parser.add_argument("--think", type=float, default=2.0, help="mean think time in seconds (default 2)")
    parser.add_argument("--train-steps", type=int, default=100, help="hosted max steps per run (default 100)")
    parser.add_argument("--note", default="", help="a sentence added to the section (e.g. other load)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--sentences", type=int, default=0,
                        help="instead: one tab, a new sentence on every one of this many script runs")  # fmt: skip
    parser.add_argument("--budget", default=None, help="with --sentences: server.maxCacheDataSize (0 = none)")
    args = parser.parse_args(argv)
    if args.sentences:
        rows, errors = sentence_soak(args.sentences, args.budget)
        markdown = sentence_section(rows, errors, args.budget, args.note)
        print(markdown)
        if not args.no_write:
            write_section(markdown, title=SENTENCES_TITLE)
        return 0 if not errors else 1
    samples, waves, errors = soak(args.minutes, args.students, args.trainers, args.think, args.train_steps)
    markdown = section(samples, waves, errors, args.minutes, args.students, args.trainers, args.note)
    print(markdown)
    if not args.no_write:
        write_section(markdown, title=TITLE)
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
