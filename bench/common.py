"""Shared benchmark helpers: timing with spread, alternating peers, machine facts, table formatting."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import torch

from visformer.config import ModelConfig

# The shipped model size (issue 7): d_model 256, 4 heads, 3+3 layers, d_ff 1024, joint vocabulary 8000.
SHIPPED = ModelConfig(
    src_vocab_size=8000,
    tgt_vocab_size=8000,
    d_model=256,
    n_heads=4,
    n_encoder_layers=3,
    n_decoder_layers=3,
    d_ff=1024,
    dropout=0.1,
    max_len=512,
    share_embeddings=True,
)

# A model small enough for the test of the quick mode.
TINY = ModelConfig(
    src_vocab_size=40,
    tgt_vocab_size=40,
    d_model=16,
    n_heads=2,
    n_encoder_layers=1,
    n_decoder_layers=1,
    d_ff=32,
    dropout=0.1,
    max_len=300,
)


@dataclass
class Stat:
    """Median and spread (min, max) of repeated measurements."""

    median: float
    low: float
    high: float
    n: int

    @staticmethod
    def of(values: list[float]) -> Stat:
        """Summarise a list of measurements."""
        return Stat(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Stat:
        """The same statistic multiplied by `factor` (e.g. seconds → milliseconds)."""
        return Stat(self.median * factor, self.low * factor, self.high * factor, self.n)

    def inverse(self, numerator: float) -> Stat:
        """numerator / value (e.g. seconds per step → tokens per second); low and high swap."""
        return Stat(numerator / self.median, numerator / self.high, numerator / self.low, self.n)

    def fmt(self, digits: int = 1) -> str:
        """'median (min–max)' for tables."""
        return f"{self.median:,.{digits}f} ({self.low:,.{digits}f}–{self.high:,.{digits}f})"


@dataclass
class Section:
    """One section of RESULTS.md: a title, an explanation and a markdown table."""

    title: str
    intro: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        """The section as markdown (title, intro, table, notes)."""
        lines = [f"## {self.title}", "", self.intro, ""]
        if self.rows:
            lines.append("| " + " | ".join(self.header) + " |")
            lines.append("|" + "|".join("---" for _ in self.header) + "|")
            lines += ["| " + " | ".join(row) + " |" for row in self.rows]
            lines.append("")
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"


def time_call(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of `repeats` calls of fn after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def alternate(
    fns: dict[str, Callable[[], object]],
    rounds: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Time each fn once per round, in turn (A B A B ...), so machine noise hits all alike.

    clock=time.process_time measures this process's CPU seconds instead of wall-clock seconds.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times


def ratio_stat(numerators: list[float], denominators: list[float]) -> Stat:
    """Per-round ratios numerator/denominator of paired alternating measurements."""
    return Stat.of([a / b for a, b in zip(numerators, denominators, strict=True)])


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or platform as a fallback)."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    """Facts about the machine the figures were measured on."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "logical cpus": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "gpu": gpu,
        "load average (1/5/15 min)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "unset (OpenMP threads spin while waiting)"),
    }


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table for the terminal."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])
