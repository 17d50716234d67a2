"""Checkpoints as .zip files: a safe import of an uploaded archive, and an export for download.

Import never trusts the archive: member names are checked (no '..', absolute paths, backslashes,
links or unexpected files), the number of files, each file's size and the total uncompressed size are
capped (zip bombs, padded files), bytes are counted while extracting, config.json is read with the schema
every reader uses and the model's layers, max_len, vocabularies and parameters are bounded before any
tokenizer is parsed or weights are allocated, and the extracted folder must load with `load_checkpoint` (JSON and
safetensors only: nothing is unpickled) before `checkpoint.atomic_folder` renames it into place.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path, PurePosixPath

from ..checkpoint import (
    CONFIG_FILE,
    METRICS_FILE,
    SHARED_TOKENIZER,
    SNAPSHOTS_FILE,
    SNAPSHOTS_INDEX,
    SRC_TOKENIZER,
    TGT_TOKENIZER,
    WEIGHTS_FILE,
    CheckpointError,
    atomic_folder,
    load_checkpoint,
    read_config,
    safe_checkpoint_dir,
)
from ..config import ModelConfig
from ..i18n import Localized
from ..tokenizer import SENTENCEPIECE_FILE, SYMBOL_FILE
from .hosting import MB, HostedLimits
from .inputs import InputError, check_session_space, count_parameters, refuse_above

TOKENIZER_FILES = (SENTENCEPIECE_FILE, SYMBOL_FILE)
ALLOWED_FILES = frozenset(
    {CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE, SNAPSHOTS_FILE, SNAPSHOTS_INDEX}
    | {
        f"{folder}/{name}"
        for folder in (SHARED_TOKENIZER, SRC_TOKENIZER, TGT_TOKENIZER)
        for name in TOKENIZER_FILES
    }
)
_CHUNK = 1 << 16
# The most each file may hold, in either mode, checked before it is unpacked or parsed (a shipped checkpoint's
# are far smaller: config.json 3 KB, metrics.json 13 KB, snapshots.json 3 KB, a SentencePiece model 370 KB,
# snapshots 1.1 MB): a config padded to 60 MB, or a symbol tokenizer of millions of symbols, is refused unread.
FILE_BYTES = {
    CONFIG_FILE: 256 * 1024,
    METRICS_FILE: 8 * MB,
    SNAPSHOTS_INDEX: 4 * MB,
    SNAPSHOTS_FILE: 64 * MB,
    SYMBOL_FILE: 2 * MB,
    SENTENCEPIECE_FILE: 8 * MB,
}


class ArchiveError(InputError):
    """An uploaded archive is refused; the message says why."""


def _member_path(info: zipfile.ZipInfo) -> PurePosixPath:
    """The member's relative path, or ArchiveError for absolute, parent-escaping or link members."""
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ArchiveError("error.zip_link", name=name)
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":") or "\x00" in name:
        raise ArchiveError("error.zip_odd_path", name=repr(name))
    path = PurePosixPath(name)
    if any(part in ("..", "") for part in path.parts) or path.is_absolute():
        raise ArchiveError("error.zip_escapes", name=repr(name))
    if info.flag_bits & 0x1:
        raise ArchiveError("error.zip_encrypted", name=name)
    return path


def _ignorable(path: PurePosixPath) -> bool:
    """Files that archivers add on their own (macOS resource forks, Finder and Windows metadata)."""
    return path.parts[0] == "__MACOSX" or path.name in (".DS_Store", "Thumbs.db", "desktop.ini")


def _plan(archive: zipfile.ZipFile, limits: HostedLimits) -> dict[str, zipfile.ZipInfo]:
    """Checkpoint-relative name -> member for every file, after all the safety checks."""
    if len(archive.infolist()) > limits.max_archive_files * 2:
        raise ArchiveError("error.zip_entries", n=len(archive.infolist()))
    paths = {info.filename: _member_path(info) for info in archive.infolist()}
    files = [
        info for info in archive.infolist() if not info.is_dir() and not _ignorable(paths[info.filename])
    ]
    if not files:
        raise ArchiveError("error.zip_empty")
    if len(files) > limits.max_archive_files:
        raise ArchiveError("error.zip_files", n=len(files), limit=limits.max_archive_files)
    tops = {p.parts[0] for info, p in ((i, paths[i.filename]) for i in files) if len(p.parts) > 1}
    prefix = 0
    if CONFIG_FILE not in {str(paths[i.filename]) for i in files} and len(tops) == 1:
        prefix = 1  # everything sits in one top folder, e.g. my-run/config.json
    plan: dict[str, zipfile.ZipInfo] = {}
    for info in files:
        rel = "/".join(paths[info.filename].parts[prefix:])
        if rel not in ALLOWED_FILES:
            allowed = ", ".join(sorted(ALLOWED_FILES))
            raise ArchiveError("error.zip_unexpected", name=info.filename, allowed=allowed)
        if rel in plan:
            raise ArchiveError("error.zip_twice", name=rel)
        plan[rel] = info
    if CONFIG_FILE not in plan or WEIGHTS_FILE not in plan:
        raise ArchiveError("error.zip_not_checkpoint", config=CONFIG_FILE, weights=WEIGHTS_FILE)
    for rel, info in plan.items():
        cap = FILE_BYTES.get(PurePosixPath(rel).name)
        if cap is not None and info.file_size > cap:
            raise ArchiveError("error.zip_file_too_big", name=rel, n=info.file_size, limit=cap)
    total = sum(info.file_size for info in plan.values())
    if total > limits.max_archive_bytes:
        raise ArchiveError("error.zip_unpacks", n=total, limit=limits.max_archive_bytes)
    return plan


def _extract(
    archive: zipfile.ZipFile, plan: dict[str, zipfile.ZipInfo], folder: Path, limits: HostedLimits
) -> None:
    """Write the planned members below folder, counting real bytes (sizes in the header may lie)."""
    budget = limits.max_archive_bytes
    for rel, info in plan.items():
        target = folder.joinpath(*rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        with archive.open(info) as src, open(target, "xb") as dst:
            while chunk := src.read(_CHUNK):
                written += len(chunk)
                budget -= len(chunk)
                if written > info.file_size or budget < 0:
                    raise ArchiveError("error.zip_lies", name=info.filename)
                dst.write(chunk)


def check_model_bounds(folder: Path, limits: HostedLimits) -> None:
    """Refuse a config whose model is over any bound (layers, max_len, vocabulary, parameters) before it is built."""
    config = read_config(folder)  # the schema every checkpoint reader uses: kinds of values, task, layout
    try:
        model = ModelConfig.from_dict(dict(config["model"]))
    except (ValueError, TypeError) as exc:
        raise CheckpointError("error.zip_bad_config", config=CONFIG_FILE, detail=exc) from exc
    bounds = {
        "encoder_layers": (model.n_encoder_layers, limits.max_checkpoint_layers),
        "decoder_layers": (model.n_decoder_layers, limits.max_checkpoint_layers),
        "max_len": (model.max_len, limits.max_checkpoint_len),
        "src_vocab": (model.src_vocab_size, limits.max_checkpoint_vocab),
        "tgt_vocab": (model.tgt_vocab_size, limits.max_checkpoint_vocab),
    }
    refuse_above(bounds, "error.zip_bound", ArchiveError)
    n = count_parameters(model)
    if n > limits.max_checkpoint_params:
        raise ArchiveError("error.zip_params", n=n, limit=limits.max_checkpoint_params)


def _named(exc: Localized, folder: Path, name: str) -> Localized:
    """The same error with the temporary folder's path and name replaced by the checkpoint's name."""
    return type(exc).passing(exc, {str(folder): name, folder.name: name})


def import_checkpoint_zip(
    data: bytes,
    root: str | os.PathLike,
    name: str,
    limits: HostedLimits | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Unpack an uploaded checkpoint .zip into root/name after checking and loading it; returns the folder."""
    limits = limits or HostedLimits.local()
    if len(data) > limits.max_archive_bytes:
        raise ArchiveError("error.zip_too_big", n=len(data), limit=limits.max_archive_bytes)
    try:
        target = safe_checkpoint_dir(root, name)
    except ValueError as exc:
        raise InputError.passing(exc) from exc
    if target.exists() and not overwrite:
        raise InputError("error.name_taken", name=repr(name))
    check_session_space(root, limits, adding=len(data))
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise ArchiveError("error.zip_unreadable", detail=exc) from exc
    with archive, atomic_folder(target) as tmp:  # on any error below, target stays as it was
        plan = _plan(archive, limits)
        try:
            _extract(archive, plan, tmp, limits)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise ArchiveError("error.zip_damaged", detail=exc) from exc
        try:
            check_model_bounds(tmp, limits)
            load_checkpoint(tmp)  # raises CheckpointError for anything damaged, foreign or mismatched
        except Localized as exc:  # messages name the checkpoint, never the temporary folder
            raise _named(exc, tmp, name) from exc
    return target


def export_checkpoint_zip(folder: str | os.PathLike) -> bytes:
    """A .zip of a checkpoint folder (its known files only, under a top folder named like it)."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError("error.ckpt_no_folder", folder=folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel in sorted(ALLOWED_FILES):
            path = folder.joinpath(*rel.split("/"))
            if path.is_file() and not path.is_symlink():
                info = zipfile.ZipInfo(f"{folder.name}/{rel}", date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()
