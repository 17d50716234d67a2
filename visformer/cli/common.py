"""What every command shares: the one-line usage error, --out checks, --overwrite and --threads."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..checkpoint import CheckpointError, read_config, safe_checkpoint_dir
from ..utils import idle_cores


class UsageError(Exception):
    """A problem with the command line or its files, reported without a traceback."""


def threads_value(raw: str) -> int | None:
    """--threads: a positive number, or "auto" (None: chosen when the command runs, utils.idle_cores)."""
    if raw == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'auto', got {raw!r}")
    return value


THREADS_HELP = (
    "torch CPU threads: a number, or auto (default): the cores not busy with other work (cores minus the "
    "1-minute load average, at least 1). More threads than free cores collapse on a shared machine: "
    "1,000 sentences took 40 s with 1 thread and 130 s with 2 on a busy 2-core machine"
)


def inference_threads(args: argparse.Namespace) -> int:
    """The torch threads of translate / evaluate / prepare: --threads, or the cores free of other work."""
    return args.threads or idle_cores()


def _is_checkpoint(path: Path) -> bool:
    """Whether a folder holds a visformer checkpoint's config.json (damaged or not otherwise)."""
    try:
        read_config(path, schema=False)
    except (CheckpointError, OSError):
        return False
    return True


def check_out(out: str, overwrite: bool = False, kind: str = "checkpoint") -> Path:
    """--out of a command that writes a folder: never replaces anything it was not asked to.

    kind "checkpoint": the name must be a safe checkpoint name; an existing checkpoint is replaced only with
    --overwrite; any other file, or a folder with files in it, is refused. kind "data" (prepare): a folder
    with files but no manifest.json is replaced only with --overwrite. Every command that writes a folder calls this.
    """
    path = Path(out)
    if kind == "checkpoint":
        path = safe_checkpoint_dir(path.parent, path.name)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UsageError(f"--out {out} exists and is not a folder: choose another --out")
    if not path.is_dir() or not any(path.iterdir()):
        return path
    if kind == "data":
        if not (path / "manifest.json").is_file() and not overwrite:
            raise UsageError(
                f"--out {out} holds files that prepare did not write; add --overwrite to write into it"
            )
        return path
    if not _is_checkpoint(path):
        raise UsageError(f"--out {out} is a folder that is not a visformer checkpoint: choose another --out")
    if not overwrite:
        raise UsageError(f"--out {out} is a checkpoint already; add --overwrite to replace it")
    return path


def overwrite_option(p: argparse.ArgumentParser, what: str = "an existing checkpoint") -> None:
    """--overwrite, for every command that writes a folder (see check_out)."""
    p.add_argument("--overwrite", action="store_true", help=f"replace {what} at --out")
