"""The app server's processes sampled while a bench runs: CPU, memory and threads from /proc."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The server process: CPU, memory, threads
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One reading of a process: seconds since start, CPU seconds used, resident MiB, threads (and more)."""

    t: float
    cpu_s: float
    rss_mib: float
    threads: int
    load: float = 0.0  # the machine's 1-minute load average
    held: tuple[int, ...] = ()  # what the server reports it holds (bench_soak: jobs, sessions), if it does


def read_process(pid: int, t: float) -> Sample:
    """CPU time, resident memory and thread count of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return Sample(t, (int(stat[11]) + int(stat[12])) / ticks, int(status["VmRSS"].split()[0]) / 1024,
                  int(status["Threads"]))  # fmt: skip


def read_processes(pids: Sequence[int], t: float) -> Sample:
    """read_process summed over several processes (the app processes behind one proxy)."""
    parts = [read_process(pid, t) for pid in pids]
    return Sample(
        t, sum(p.cpu_s for p in parts), sum(p.rss_mib for p in parts), sum(p.threads for p in parts)
    )


class Sampler:
    """Reads processes (summed; and the numbers `probe` holds, if given) every `every_s` seconds until stopped."""

    def __init__(self, pid: int | Sequence[int], every_s: float = 1.0, probe: Path | None = None) -> None:
        self.pids = [pid] if isinstance(pid, int) else list(pid)
        self.every_s, self.probe = every_s, probe
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        """Sample until stopped or the process is gone."""
        while True:
            try:
                sample = read_processes(self.pids, time.perf_counter() - self._start)
            except (OSError, KeyError, IndexError):
                return
            self.samples.append(replace(sample, load=os.getloadavg()[0], held=self._held()))
            if self._stop.wait(self.every_s):
                return

    def _held(self) -> tuple[int, ...]:
        """The integers the probe file holds now (empty without a probe or while it is being written)."""
        try:
            return tuple(int(n) for n in self.probe.read_text().split()) if self.probe else ()
        except (OSError, ValueError):
            return ()


def cpu_percent(samples: list[Sample]) -> tuple[float, float]:
    """(mean, peak over ~5 s windows) CPU use in percent of one core."""
    if len(samples) < 2:
        return 0.0, 0.0
    mean = 100 * (samples[-1].cpu_s - samples[0].cpu_s) / max(samples[-1].t - samples[0].t, 1e-9)
    windows = [
        100 * (b.cpu_s - a.cpu_s) / max(b.t - a.t, 1e-9) for a, b in zip(samples, samples[5:], strict=False)
    ]
    return mean, max(windows, default=mean)


@dataclass(frozen=True)
class SharedWork:
    """One new sentence typed in two sessions in turn: server CPU seconds and response of each."""

    first_cpu_s: float
    first_s: float
    second_cpu_s: float
    second_s: float
