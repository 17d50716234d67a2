"""A teacher's clean-up of a hosted server's disk: `python -m visformer.classroom clean [--days 7] [--dry-run]`.

Removes the private folders of browser sessions in which nothing changed for --days days (their models, which
the students could download as .zip files), and what killed saves and imports left behind.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Sequence

from .catalogue import checkpoint_roots
from .hosting import STALE_S, folder_bytes, old_sessions, sweep_leftovers


def build_parser() -> argparse.ArgumentParser:
    """The `python -m visformer.classroom` argument parser."""
    parser = argparse.ArgumentParser(prog="python -m visformer.classroom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    clean = sub.add_parser("clean", help="remove old session folders and leftovers of killed saves")
    clean.add_argument(
        "--root", default=None, help="trained checkpoints (default: VISFORMER_USER_CHECKPOINTS)"
    )
    clean.add_argument("--days", type=float, default=7.0, help="remove sessions untouched for this many days")
    clean.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    return parser


def clean(root: str | None, days: float, dry_run: bool = False) -> int:
    """Remove (or list) old session folders and stale temporary folders below root; bytes freed."""
    root = root or str(checkpoint_roots()[1])
    if days < 0:
        raise ValueError(f"--days must not be negative, got {days}")
    sessions = old_sessions(root, days * 86400.0)
    freed = 0
    for folder in sessions:
        size = folder_bytes(folder)
        print(f"{'would remove' if dry_run else 'removed'} {folder} ({size / 2**20:.1f} MB)")
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        freed += size
    if not dry_run:
        leftovers = sweep_leftovers(root, STALE_S, time.time())
        print(f"removed {len(leftovers)} leftover temporary folder(s)")
    print(f"{len(sessions)} session folder(s), {freed / 2**20:.1f} MB")
    return freed


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors, exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        clean(args.root, args.days, args.dry_run)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
