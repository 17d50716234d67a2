"""System programs some tests drive (Debian's chromium and nginx): skipped locally without them, failed in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deploy.launch import NGINX

CHROMIUM = "/usr/bin/chromium"


def program(name: str, path: str) -> str:
    """`name` on PATH, else at `path`; skip the test when it is missing, fail in CI (env CI set)."""
    found = shutil.which(name) or (path if Path(path).exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed in CI: .ci/run installs Debian's {name}")
        pytest.skip(f"{name} is not installed")
    return found


def chromium() -> str:
    """Debian's chromium binary (the playwright package drives it; no downloaded browser)."""
    return program("chromium", CHROMIUM)


def nginx() -> str:
    """Debian's nginx binary."""
    return program("nginx", NGINX)
