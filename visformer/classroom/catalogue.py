"""The checkpoint catalogue: shipped models and the user's own, as entries of the app's picker."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint import list_checkpoints
from ..models import architecture_of

REPO = Path(__file__).resolve().parents[2]
SHIPPED_ROOT = REPO / "checkpoints"
USER_ROOT = REPO / "user_checkpoints"  # gitignored: the Train page saves here
DEFAULT_CHECKPOINT = "multi30k-en-de"
USER_PREFIX = "yours/"


@dataclass(frozen=True)
class CheckpointChoice:
    """One entry of the checkpoint picker: a stable key for the URL, the folder and a label."""

    key: str  # "multi30k-en-de" (shipped) or "yours/my-run" (user)
    path: Path
    shipped: bool

    @property
    def label(self) -> str:
        """Text shown in the picker."""
        return self.key if self.shipped else f"{self.key[len(USER_PREFIX) :]} (yours)"


def checkpoint_roots() -> tuple[Path, Path]:
    """(shipped, user) folders; VISFORMER_CHECKPOINTS / VISFORMER_USER_CHECKPOINTS override them (tests, demos)."""
    shipped = os.environ.get("VISFORMER_CHECKPOINTS") or SHIPPED_ROOT
    user = os.environ.get("VISFORMER_USER_CHECKPOINTS") or USER_ROOT
    return Path(shipped), Path(user)


def discover_checkpoints(
    shipped_root: Path | None = None, user_root: Path | None = None
) -> list[CheckpointChoice]:
    """Shipped checkpoints (sorted, English→German first) followed by the user's own."""
    default_shipped, default_user = checkpoint_roots()
    shipped_root, user_root = shipped_root or default_shipped, user_root or default_user
    shipped = [CheckpointChoice(p.name, p, True) for p in _shown(shipped_root)]
    shipped.sort(key=lambda c: (c.key != DEFAULT_CHECKPOINT, c.key))
    user = [CheckpointChoice(USER_PREFIX + p.name, p, False) for p in _shown(user_root)]
    return shipped + user


def _shown(root: Path) -> list[Path]:
    """Checkpoints the pages can show: Transformers only, until they learn the RNN and LM ones (issue 16)."""
    return [p for p in list_checkpoints(root) if architecture_of(p) == "transformer"]


def default_choice(choices: list[CheckpointChoice]) -> CheckpointChoice | None:
    """The shipped English→German model when present, else the first shipped one, else the first."""
    by_key = {c.key: c for c in choices}
    if DEFAULT_CHECKPOINT in by_key:
        return by_key[DEFAULT_CHECKPOINT]
    shipped = [c for c in choices if c.shipped]
    return (shipped or choices or [None])[0]


def find_choice(choices: list[CheckpointChoice], key: str | None) -> CheckpointChoice | None:
    """The choice with this key, or the default when the key is unknown."""
    for choice in choices:
        if choice.key == key:
            return choice
    return default_choice(choices)


def checkpoint_stamp(path: Path) -> float:
    """Latest modification time of a checkpoint folder's files: part of every cache key."""
    path = Path(path)
    times = [f.stat().st_mtime for f in path.iterdir() if f.is_file()] if path.is_dir() else []
    return max(times, default=0.0)
