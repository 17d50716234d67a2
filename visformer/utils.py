"""Device selection, numeric precision, seeding, CPU threads and what hardware a run used."""

from __future__ import annotations

import os
import platform
import random
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .config import PRECISIONS


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Map "auto" to CUDA when present, else CPU; pass anything else through."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@cache
def _cpu_has_bf16() -> bool:
    """Whether the CPU flags (Linux /proc/cpuinfo) list native bf16 instructions."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) is not None


def bf16_fast(device: torch.device) -> bool:
    """Whether bf16 matmuls are native here: CUDA with bf16, or a CPU with avx512_bf16 / AMX."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and _cpu_has_bf16()


# Below this width autocast's casts cost more than bf16 matmuls save on a CPU (bench/RESULTS.md: a d_model 64
# toy model trained 1.3× slower in bf16, d_model 256 1.6× faster)
BF16_MIN_D_MODEL = 256


def autocast_dtype(
    precision: str, device: torch.device, d_model: int = BF16_MIN_D_MODEL
) -> torch.dtype | None:
    """The autocast dtype of a precision setting, None meaning fp32.

    "auto" is bf16 where the device runs it natively and, on a CPU, the model is wide enough to gain.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return None
    if precision == "auto":
        too_narrow = device.type == "cpu" and d_model < BF16_MIN_D_MODEL
        if too_narrow or not bf16_fast(device):
            return None
    return torch.bfloat16


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` torch CPU threads (None: unchanged), then restore the previous count."""
    previous = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n and torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def idle_cores(cores: int | None = None, load: float | None = None) -> int:
    """CPU cores free of other work: usable cores minus the 1-minute load average (rounded), at least 1.

    On a shared machine more torch threads than free cores collapse: evaluating 1,000 sentences took 40 s with
    one thread and 130 s with two on a 2-core machine where other training ran.
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average (Windows): assume an idle machine
            load = 0.0
    return max(1, cores - round(load))


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) for reproducible runs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def hardware_info() -> dict[str, Any]:
    """Where this process runs: CPU, threads, GPU, torch and Python versions."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info
