"""Checkpoint archives: an uploaded .zip cannot write outside its target, is size-limited, and must load."""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from tests.test_bad_checkpoints import tiny_checkpoint
from visformer.checkpoint import CheckpointError, list_checkpoints, load_checkpoint
from visformer.classroom.archive import ArchiveError, export_checkpoint_zip, import_checkpoint_zip
from visformer.classroom.hosting import HostedLimits
from visformer.classroom.inputs import InputError

HOSTED = HostedLimits.hosted()


@pytest.fixture(scope="module")
def good_zip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return export_checkpoint_zip(tiny_checkpoint(tmp_path_factory.mktemp("src") / "tiny-copy"))


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _zip(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name in links:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, data)
    return buffer.getvalue()


def _only_target_written(root: Path, expected: set[str]) -> None:
    assert {p.name for p in root.iterdir()} == expected  # no temp folders left behind either


def test_round_trip(good_zip: bytes, tmp_path: Path) -> None:
    names = set(_members(good_zip))
    assert "tiny-copy/config.json" in names and "tiny-copy/weights.safetensors" in names
    target = import_checkpoint_zip(good_zip, tmp_path, "imported", HOSTED)
    assert target == (tmp_path / "imported").resolve() and list_checkpoints(tmp_path) == [target]
    assert load_checkpoint(target).task == "copy"
    assert export_checkpoint_zip(target) == export_checkpoint_zip(target)  # deterministic bytes


def test_macos_metadata_is_ignored(good_zip: bytes, tmp_path: Path) -> None:
    extra = {"__MACOSX/tiny-copy/._config.json": b"x", "tiny-copy/.DS_Store": b"x"}
    target = import_checkpoint_zip(_zip(_members(good_zip) | extra), tmp_path, "mac", HOSTED)
    assert not (target / ".DS_Store").exists() and not (tmp_path / "__MACOSX").exists()
    with pytest.raises(ArchiveError, match="path"):  # ignorable names still get the path checks
        import_checkpoint_zip(_zip(_members(good_zip) | {"__MACOSX/../../x": b"x"}), tmp_path, "m2", HOSTED)


def test_flat_archive_is_accepted(good_zip: bytes, tmp_path: Path) -> None:
    flat = {name.split("/", 1)[1]: data for name, data in _members(good_zip).items()}
    assert load_checkpoint(import_checkpoint_zip(_zip(flat), tmp_path, "flat")).model_config.d_model == 16


@pytest.mark.parametrize(
    "evil",
    [
        "../evil.txt",
        "tiny-copy/../../evil.txt",
        "/tmp/evil.txt",
        "C:/evil.txt",
        "..\\evil.txt",
        "tokenizer/../../x",
    ],
)
def test_path_traversal_is_refused(good_zip: bytes, tmp_path: Path, evil: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    members = _members(good_zip) | {evil: b"owned"}
    with pytest.raises(ArchiveError, match="path|unexpected"):
        import_checkpoint_zip(_zip(members), root, "x", HOSTED)
    _only_target_written(root, set())
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_links_are_refused(good_zip: bytes, tmp_path: Path) -> None:
    members = _members(good_zip) | {"tiny-copy/metrics.json": b"/etc/passwd"}
    with pytest.raises(ArchiveError, match="link"):
        import_checkpoint_zip(_zip(members, links=("tiny-copy/metrics.json",)), tmp_path, "x", HOSTED)
    _only_target_written(tmp_path, set())


def test_unexpected_files_are_refused(good_zip: bytes, tmp_path: Path) -> None:
    for extra in ("tiny-copy/model.pkl", "tiny-copy/pytorch_model.bin", "tiny-copy/tokenizer/evil.py"):
        with pytest.raises(ArchiveError, match="unexpected file"):
            import_checkpoint_zip(_zip(_members(good_zip) | {extra: b"x"}), tmp_path, "x", HOSTED)
    _only_target_written(tmp_path, set())


def test_zip_bomb_is_refused_before_extraction(tmp_path: Path) -> None:
    bomb = _zip({"config.json": b"{}", "weights.safetensors": b"\0" * (HOSTED.max_archive_bytes + 1)})
    assert len(bomb) < 200_000  # tiny upload, huge content
    with pytest.raises(ArchiveError, match="unpacks to"):
        import_checkpoint_zip(bomb, tmp_path, "bomb", HOSTED)
    _only_target_written(tmp_path, set())


def test_lying_size_header_is_caught_while_extracting(good_zip: bytes, tmp_path: Path) -> None:
    data = bytearray(_zip({"config.json": b"{}", "weights.safetensors": b"\0" * 5000}))
    # shrink the declared uncompressed size in both headers: 5000 -> 10
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (at := data.find(sig, start)) >= 0:
            if int.from_bytes(data[at + offset : at + offset + 4], "little") == 5000:
                data[at + offset : at + offset + 4] = (10).to_bytes(4, "little")
            start = at + 4
    with pytest.raises(ArchiveError):
        import_checkpoint_zip(bytes(data), tmp_path, "liar", HOSTED)
    _only_target_written(tmp_path, set())


def test_too_many_files_and_oversized_upload(good_zip: bytes, tmp_path: Path) -> None:
    many = {f"f{i}.txt": b"x" for i in range(HOSTED.max_archive_files + 1)}
    with pytest.raises(ArchiveError, match="files; at most"):
        import_checkpoint_zip(_zip(many), tmp_path, "many", HOSTED)
    with pytest.raises(ArchiveError, match="checkpoint archives may be at most 100"):
        import_checkpoint_zip(good_zip, tmp_path, "big", HostedLimits(max_archive_bytes=100))


@pytest.mark.parametrize("data", [b"", b"not a zip at all", b"PK\x03\x04garbage"])
def test_not_a_zip(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ArchiveError, match="not a readable .zip|empty"):
        import_checkpoint_zip(data, tmp_path, "x", HOSTED)


def test_damaged_checkpoint_inside_is_refused_and_nothing_kept(good_zip: bytes, tmp_path: Path) -> None:
    members = _members(good_zip)
    members["tiny-copy/weights.safetensors"] = members["tiny-copy/weights.safetensors"][:100]
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        import_checkpoint_zip(_zip(members), tmp_path, "broken", HOSTED)
    _only_target_written(tmp_path, set())


def test_huge_model_config_is_refused_without_allocating(good_zip: bytes, tmp_path: Path) -> None:
    members = _members(good_zip)
    config = json.loads(members["tiny-copy/config.json"])
    config["model"].update(d_model=65536, d_ff=1 << 20, src_vocab_size=1 << 20, tgt_vocab_size=1 << 20)
    members["tiny-copy/config.json"] = json.dumps(config).encode()
    with pytest.raises(ArchiveError, match="parameters; checkpoints here may have at most"):
        import_checkpoint_zip(_zip(members), tmp_path, "huge", HOSTED)
    _only_target_written(tmp_path, set())


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/b", "..", ".hidden", ""])
def test_target_name_cannot_escape(good_zip: bytes, tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(InputError, match="invalid checkpoint name"):
        import_checkpoint_zip(good_zip, root, name, HOSTED)
    assert list(tmp_path.iterdir()) == [root] and list(root.iterdir()) == []


def test_existing_checkpoint_is_not_overwritten_unless_asked(good_zip: bytes, tmp_path: Path) -> None:
    first = import_checkpoint_zip(good_zip, tmp_path, "mine", HOSTED)
    stamp = (first / "config.json").stat().st_mtime_ns
    with pytest.raises(InputError, match="exists already"):
        import_checkpoint_zip(good_zip, tmp_path, "mine", HOSTED)
    assert (first / "config.json").stat().st_mtime_ns == stamp
    members = _members(good_zip)
    members["tiny-copy/weights.safetensors"] = b"junk"
    with pytest.raises(CheckpointError):
        import_checkpoint_zip(_zip(members), tmp_path, "mine", HOSTED, overwrite=True)
    assert load_checkpoint(first).task == "copy"  # a failed overwrite keeps the old checkpoint
    import_checkpoint_zip(good_zip, tmp_path, "mine", HOSTED, overwrite=True)
    _only_target_written(tmp_path, {"mine"})


def test_export_skips_links_and_unknown_files(tmp_path: Path) -> None:
    folder = tiny_checkpoint(tmp_path / "ck")
    (folder / "notes.txt").write_text("private")
    os.symlink("/etc/passwd", folder / "metrics.json.lnk")
    names = set(_members(export_checkpoint_zip(folder)))
    assert all(n.startswith("ck/") for n in names) and not any("notes" in n or "lnk" in n for n in names)
    with pytest.raises(CheckpointError):
        export_checkpoint_zip(tmp_path / "missing")
