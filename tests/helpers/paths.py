"""Where the tests find the repository and the shared corpora."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"  # corpora downloaded once for every checkout
