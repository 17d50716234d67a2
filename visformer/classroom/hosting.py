"""Hosted mode: the limits a shared classroom deployment runs under, and private per-session folders.

Locally the app is generous; `VISFORMER_HOSTED=1` (or `hosted = true` in the `[visformer]` section
of Streamlit secrets) switches on `HostedLimits.hosted()`. Any field can be overridden by an
environment variable `VISFORMER_<FIELD>` (e.g. `VISFORMER_MAX_CONCURRENT_RUNS=3`) or by the same
key in the secrets section; environment variables win. The package never imports streamlit: the app
passes `st.secrets` in as a plain mapping.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..i18n import Localized
from ..text import MAX_SENTENCE_CHARS, MAX_WORD_CHARS

ENV_SWITCH = "VISFORMER_HOSTED"
ENV_PREFIX = "VISFORMER_"
SECRETS_SECTION = "visformer"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # whole id: re.fullmatch

MB = 1024 * 1024
UPLOAD_MB = 50  # Streamlit's server.maxUploadSize (.streamlit/config.toml): no upload can be larger
OPTIONAL = (
    "max_sentence_tokens",
    "max_wall_time_s",
    "train_threads",
    "max_session_checkpoints",
    "max_session_bytes",
)


@dataclass(frozen=True)
class HostedLimits:
    """Every bound the app enforces on input, uploads, decoding and training (None = no bound)."""

    is_hosted: bool = False
    # text typed into the app
    max_sentence_chars: int = MAX_SENTENCE_CHARS  # longer sentences are cut (and the page says so)
    max_sentence_tokens: int | None = None  # on top of the model's own max_len
    max_word_chars: int = MAX_WORD_CHARS  # a "word" longer than this is refused (usually a missing space)
    # decoding
    max_beam_size: int = 16
    max_samples: int = 50
    # uploads (corpora and checkpoint archives)
    max_upload_bytes: int = 200 * MB
    max_upload_lines: int = 2_000_000
    max_archive_bytes: int = 2048 * MB  # an uploaded checkpoint .zip: its size and its unpacked size
    max_archive_files: int = 16
    max_checkpoint_params: int = 500_000_000  # largest model a checkpoint (uploaded or listed) may hold
    max_checkpoint_layers: int = 48  # per side: an imported config is bounded before anything is built
    max_checkpoint_len: int = 4096  # max_len: the positional table is max_len x d_model
    max_checkpoint_vocab: int = 256_000  # per side
    max_session_checkpoints: int | None = None  # models one session may keep (trained and imported)
    max_session_bytes: int | None = None  # disk one session's models may take
    # training from the UI
    max_d_model: int = 1024
    max_layers: int = 12  # per side (encoder, decoder)
    max_heads: int = 16
    max_d_ff: int = 8192
    max_vocab_size: int = 64_000
    max_len: int = 512
    max_params: int = 200_000_000
    max_steps: int = 1_000_000
    max_wall_time_s: float | None = None
    max_concurrent_runs: int = 4  # across all users of this server process
    train_threads: int | None = None  # torch threads per training run; None = torch's default
    session_folders: bool = False  # each session trains into (and sees) only its own folder

    def __post_init__(self) -> None:
        """Refuse limits that make no sense (zero or negative bounds)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or value is None:
                continue
            if value <= 0:
                raise ValueError(f"hosted limit {f.name} must be positive, got {value}")

    @classmethod
    def local(cls) -> HostedLimits:
        """Generous limits for one person on their own machine."""
        return cls()

    @classmethod
    def hosted(cls) -> HostedLimits:
        """Tight limits for a class of students sharing one small server."""
        return cls(
            is_hosted=True,
            max_sentence_chars=300,
            max_sentence_tokens=64,
            max_word_chars=60,
            max_beam_size=8,
            max_samples=10,
            max_upload_bytes=2 * MB,
            max_upload_lines=20_000,
            max_archive_bytes=UPLOAD_MB * MB,
            max_archive_files=12,
            max_checkpoint_params=20_000_000,
            max_checkpoint_layers=12,
            max_checkpoint_len=1024,
            max_checkpoint_vocab=64_000,
            max_session_checkpoints=10,
            max_session_bytes=200 * MB,
            max_d_model=128,
            max_layers=2,
            max_heads=8,
            max_d_ff=512,
            max_vocab_size=8000,
            max_len=128,
            max_params=2_000_000,
            max_steps=2000,
            max_wall_time_s=300.0,
            max_concurrent_runs=2,
            train_threads=1,
            session_folders=True,
        )


def upload_megabytes(limit_bytes: int, server_mb: int = UPLOAD_MB) -> int:
    """An uploader's limit in MB: `limit_bytes`, never above the server's (above it Streamlit answers a bare 413)."""
    return max(1, min(limit_bytes // MB, server_mb))


def _parse_bool(raw: Any, where: str) -> bool:
    """A boolean from True/False or the strings 1/0, true/false, yes/no, on/off."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where} must be 1/0, true/false, yes/no or on/off, got {raw!r}")


def _parse_value(name: str, raw: Any, where: str) -> Any:
    """A limit value of the type the field `name` takes ('none' clears an optional bound)."""
    default = getattr(HostedLimits(), name)
    if name in ("is_hosted", "session_folders"):
        return _parse_bool(raw, where)
    if raw is None or str(raw).strip().lower() in ("none", ""):
        if name in OPTIONAL:
            return None
        raise ValueError(f"{where} needs a number")
    try:
        value = (
            float(raw) if isinstance(default, float) or name == "max_wall_time_s" else int(str(raw).strip())
        )
    except ValueError as exc:
        raise ValueError(f"{where} must be a number, got {raw!r}") from exc
    if value <= 0:
        raise ValueError(f"{where} must be positive, got {raw!r}")
    return value


def _secrets_section(secrets: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The [visformer] section of Streamlit secrets (empty when absent)."""
    if secrets is None:
        return {}
    try:
        section = secrets.get(SECRETS_SECTION) if hasattr(secrets, "get") else None
        return dict(section) if isinstance(section, Mapping) else {}
    except Exception:  # st.secrets raises when no secrets.toml exists
        return {}


def load_limits(
    environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None
) -> HostedLimits:
    """Limits from VISFORMER_HOSTED / VISFORMER_<FIELD> variables and a [visformer] secrets section."""
    environ = os.environ if environ is None else environ
    section = _secrets_section(secrets)
    names = {f.name for f in fields(HostedLimits)} - {"is_hosted"}
    unknown = sorted(set(section) - names - {"hosted"})
    if unknown:
        raise ValueError(f"unknown keys in the [visformer] secrets section: {', '.join(unknown)}")
    hosted = False
    if "hosted" in section:
        hosted = _parse_bool(section["hosted"], "secrets [visformer] hosted")
    if ENV_SWITCH in environ:
        hosted = _parse_bool(environ[ENV_SWITCH], ENV_SWITCH)
    base = HostedLimits.hosted() if hosted else HostedLimits.local()
    overrides: dict[str, Any] = {}
    for name in sorted(names):
        if name in section:
            overrides[name] = _parse_value(name, section[name], f"secrets [visformer] {name}")
        var = ENV_PREFIX + name.upper()
        if var in environ:
            overrides[name] = _parse_value(name, environ[var], var)
    return replace(base, **overrides)


# ---------------------------------------------------------------------------------------------
# Per-session private folders
# ---------------------------------------------------------------------------------------------


def session_folder_name(session_id: str) -> str:
    """A folder name for a session id: the id itself when plain, else a hash of it (never a path)."""
    text = str(session_id)
    if _SESSION_ID.fullmatch(text) and not text.startswith(("-", "_")):
        return SESSION_PREFIX + text
    return SESSION_PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_checkpoint_root(root: str | os.PathLike, session_id: str) -> Path:
    """root/s-<id>: the private checkpoint folder of one browser session (inside root, always)."""
    if not str(session_id).strip():
        raise ValueError("a session id is needed for a private checkpoint folder")
    root = Path(root).resolve()
    path = (root / session_folder_name(session_id)).resolve()
    if path.parent != root:
        raise ValueError(f"session folder for {session_id!r} escapes {root}")
    return path


def user_checkpoint_root(root: str | os.PathLike, session_id: str | None, limits: HostedLimits) -> Path:
    """Where this session's trained checkpoints live: its private folder in hosted mode, else root."""
    if limits.session_folders:
        if session_id is None:
            raise ValueError("hosted mode keeps each session's checkpoints private: a session id is needed")
        return session_checkpoint_root(root, session_id)
    return Path(root)


SESSION_PREFIX = "s-"
# what checkpoint.atomic_folder leaves behind when a save or an import is killed: .NAME.tmp-PID-HEX, .NAME.old-PID-HEX
_LEFTOVER = re.compile(r"\..+\.(tmp|old)-\d+-[0-9a-f]{8}")
STALE_S = 3600.0  # a save or an import takes seconds: a leftover this old belongs to no living one


def folder_bytes(path: str | os.PathLike) -> int:
    """Bytes of the files below a folder (links are not followed; 0 when it does not exist)."""
    total = 0
    for base, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def newest_mtime(path: str | os.PathLike) -> float:
    """The latest modification time of a folder or anything below it."""
    times = [os.lstat(path).st_mtime]
    for base, dirs, names in os.walk(path):
        for name in dirs + names:
            try:
                times.append(os.lstat(os.path.join(base, name)).st_mtime)
            except OSError:
                pass
    return max(times)


def sweep_leftovers(
    root: str | os.PathLike, older_than_s: float = STALE_S, now: float | None = None
) -> list[Path]:
    """Remove temporary folders of killed saves and imports in root and its session folders; the removed ones."""
    root, now = Path(root), time.time() if now is None else now
    if not root.is_dir():
        return []
    folders = [root, *(p for p in root.iterdir() if p.is_dir() and p.name.startswith(SESSION_PREFIX))]
    removed = []
    for folder in folders:
        for path in folder.iterdir():
            if _LEFTOVER.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
                if now - newest_mtime(path) > older_than_s:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
    return removed


def old_sessions(root: str | os.PathLike, older_than_s: float, now: float | None = None) -> list[Path]:
    """Session folders (root/s-*) in which nothing changed for `older_than_s` seconds, oldest first."""
    root, now = Path(root), time.time() if now is None else now
    if not root.is_dir():
        return []
    found = [
        (newest_mtime(p), p)
        for p in root.iterdir()
        if p.is_dir() and not p.is_symlink() and p.name.startswith(SESSION_PREFIX)
    ]
    return [p for mtime, p in sorted(found) if now - mtime > older_than_s]


# ---------------------------------------------------------------------------------------------
# Concurrent training runs across all sessions of one server process
# ---------------------------------------------------------------------------------------------


class BusyError(Localized, RuntimeError):
    """Every training slot is taken; the message says so in plain words."""


class RunSlots:
    """A counter of running training jobs with a cap; `acquire` fails fast with a 'busy' message."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._owners: dict[str, int] = {}

    @property
    def in_use(self) -> int:
        """How many runs hold a slot now."""
        with self._lock:
            return sum(self._owners.values())

    def acquire(self, owner: str, per_owner: int = 1) -> None:
        """Take a slot for `owner`, or raise BusyError (all slots taken, or owner already at its share)."""
        with self._lock:
            if self._owners.get(owner, 0) >= per_owner:
                raise BusyError("error.busy_own")
            if sum(self._owners.values()) >= self.capacity:
                raise BusyError("error.busy_full", n=self.capacity)
            self._owners[owner] = self._owners.get(owner, 0) + 1

    def release(self, owner: str) -> None:
        """Give back one slot of `owner` (a no-op when it holds none)."""
        with self._lock:
            left = self._owners.get(owner, 0) - 1
            if left > 0:
                self._owners[owner] = left
            else:
                self._owners.pop(owner, None)

    @contextmanager
    def slot(self, owner: str, per_owner: int = 1) -> Iterator[None]:
        """Hold a slot for the duration of a with-block."""
        self.acquire(owner, per_owner)
        try:
            yield
        finally:
            self.release(owner)


_SLOTS: dict[int, RunSlots] = {}
_SLOTS_LOCK = threading.Lock()


def run_slots(limits: HostedLimits) -> RunSlots:
    """The process-wide RunSlots for this cap (one per distinct max_concurrent_runs)."""
    with _SLOTS_LOCK:
        return _SLOTS.setdefault(limits.max_concurrent_runs, RunSlots(limits.max_concurrent_runs))
