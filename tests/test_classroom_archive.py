"""Checkpoint archives: an uploaded .zip cannot write outside its target, is size-limited, and must load."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from tests.helpers.checkpoints import tiny_checkpoint
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
    with pytest.raises(
        ArchiveError, match="source vocabulary is 1,048,576; checkpoints here may have at most"
    ):
        import_checkpoint_zip(_zip(members), tmp_path, "huge", HOSTED)
    config["model"].update(src_vocab_size=8, tgt_vocab_size=8)
    members["tiny-copy/config.json"] = json.dumps(config).encode()
    with pytest.raises(ArchiveError, match="parameters; checkpoints here may have at most"):
        import_checkpoint_zip(_zip(members), tmp_path, "huge", HOSTED)
    _only_target_written(tmp_path, set())


def _with_model(good_zip: bytes, **model: object) -> bytes:
    """The good archive with config.json's model changed."""
    members = _members(good_zip)
    config = json.loads(members["tiny-copy/config.json"])
    config["model"].update(model)
    return _zip(members | {"tiny-copy/config.json": json.dumps(config).encode()})


@pytest.mark.parametrize(
    "model, fragment",
    [
        ({"max_len": 1_000_000}, "max_len is 1,000,000; checkpoints here may have at most 1,024"),
        ({"max_len": 30_000_000}, "max_len is 30,000,000"),
        ({"d_model": 2, "n_heads": 1, "d_ff": 2, "n_encoder_layers": 100_000}, "encoder layers is 100,000"),
        ({"n_decoder_layers": 20_000}, "decoder layers is 20,000"),
        ({"tgt_vocab_size": 7_300_000, "share_embeddings": False}, "target vocabulary is 7,300,000"),
    ],
)
def test_model_bounds_under_the_parameter_cap_are_refused(
    good_zip: bytes, tmp_path: Path, model: dict, fragment: str
) -> None:
    with pytest.raises(ArchiveError, match=fragment):
        import_checkpoint_zip(_with_model(good_zip, **model), tmp_path, "bounded", HOSTED)
    _only_target_written(tmp_path, set())


def test_local_mode_bounds_models_too(good_zip: bytes, tmp_path: Path) -> None:
    local = HostedLimits.local()
    with pytest.raises(ArchiveError, match="max_len is 30,000,000; checkpoints here may have at most 4,096"):
        import_checkpoint_zip(_with_model(good_zip, max_len=30_000_000), tmp_path, "x", local)
    with pytest.raises(ArchiveError, match="encoder layers is 100,000"):
        import_checkpoint_zip(_with_model(good_zip, n_encoder_layers=100_000), tmp_path, "x", local)


@pytest.mark.parametrize("limits", [HOSTED, HostedLimits.local()], ids=["hosted", "local"])
def test_padded_config_and_huge_tokenizer_are_refused_unread(good_zip: bytes, tmp_path: Path, limits) -> None:
    members = _members(good_zip)
    config = json.loads(members["tiny-copy/config.json"])
    config["info"]["padding"] = " " * 60_000_000  # 60 MB of padding: a zip of well under 1 MB
    padded = _zip(members | {"tiny-copy/config.json": json.dumps(config).encode()})
    assert len(padded) < 1_000_000
    with pytest.raises(ArchiveError, match="config.json in the archive is 60,00.,... bytes; at most 262,144"):
        import_checkpoint_zip(padded, tmp_path, "padded", limits)
    symbols = json.dumps({"symbols": [f"s{i}" for i in range(400_000)]}).encode()  # 4 MB
    with pytest.raises(ArchiveError, match="tokenizer/tokenizer.json in the archive is"):
        import_checkpoint_zip(
            _zip(members | {"tiny-copy/tokenizer/tokenizer.json": symbols}), tmp_path, "t", limits
        )
    _only_target_written(tmp_path, set())


def test_messages_name_the_checkpoint_never_a_path(good_zip: bytes, tmp_path: Path) -> None:
    root = tmp_path / "user_checkpoints" / "s-0123456789abcdef"
    members = _members(good_zip) | {"tiny-copy/tokenizer/tokenizer.json": b"garbage \xff"}
    weights = _members(good_zip) | {"tiny-copy/weights.safetensors": b"junk"}
    for data in (_zip(members), _zip(weights)):
        with pytest.raises(CheckpointError) as caught:
            import_checkpoint_zip(data, root, "my-model", HOSTED)
        for lang in ("en", "ko"):
            text = caught.value.in_language(lang)
            assert text.startswith("my-model:"), text
            assert ".tmp-" not in text and str(tmp_path) not in text and "s-0123" not in text, text


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


# ---------------------------------------------------------------------------------------------
# Memory: hostile archives imported in a child process that a watchdog kills above RSS_LIMIT
# ---------------------------------------------------------------------------------------------

RSS_LIMIT_MB = 1024  # README: an import in hosted mode stays under about 1 GB
MAKE = """
import io, json, sys, zipfile
from pathlib import Path
from tests.helpers.checkpoints import tiny_checkpoint
from visformer.checkpoint import save_checkpoint
from visformer.classroom.archive import export_checkpoint_zip
from visformer.config import ModelConfig
from visformer.model import Transformer
from visformer.tokenizer import SymbolTokenizer

out = Path(sys.argv[1])
good = export_checkpoint_zip(tiny_checkpoint(out / "src" / "tiny"))
with zipfile.ZipFile(io.BytesIO(good)) as z:
    files = {i.filename: z.read(i) for i in z.infolist()}

def write(name, changes, model=None):
    config = json.loads(files["tiny/config.json"])
    config["model"].update(model or {})
    with zipfile.ZipFile(out / f"{name}.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in (files | {"tiny/config.json": json.dumps(config).encode()}).items():
            if member not in changes:
                z.writestr(member, data)
        for member, chunks in changes.items():
            with z.open(member, "w", force_zip64=True) as f:
                for chunk in chunks:
                    f.write(chunk)

def symbols(n):  # {"symbols": ["s0", ...]}: 7.3 M symbols are 61 MB, written in pieces
    yield b'{"symbols": ["s0"'
    for start in range(1, n, 100_000):
        yield "".join(f', "s{i}"' for i in range(start, min(n, start + 100_000))).encode()
    yield b"]}"

write("max_len-1e6", {}, {"max_len": 1_000_000})
write("max_len-3e7", {}, {"max_len": 30_000_000})
write("100k-layers-of-d_model-2", {}, {"d_model": 2, "n_heads": 1, "d_ff": 2, "n_encoder_layers": 100_000})
write("20k-layers", {}, {"n_encoder_layers": 20_000, "n_decoder_layers": 20_000})
write("7.3M-symbol-tokenizer", {"tiny/tokenizer/tokenizer.json": symbols(7_300_000)})
# the largest model hosted mode takes: float16 weights of just under 20 M parameters
tok = SymbolTokenizer.from_symbols([f"w{i}" for i in range(7900)])
cfg = ModelConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=512, n_heads=8,
                  n_encoder_layers=2, n_decoder_layers=2, d_ff=2048, max_len=1024)
(out / "largest.zip").write_bytes(export_checkpoint_zip(save_checkpoint(out / "src" / "big", Transformer(cfg), tok, tok, half=True)))
"""
IMPORT = """
import resource, sys, time
from pathlib import Path
from visformer.classroom.archive import import_checkpoint_zip
from visformer.classroom.hosting import HostedLimits

folder, mode = Path(sys.argv[1]), sys.argv[2]
limits = HostedLimits.hosted() if mode == "hosted" else HostedLimits.local()
for path in sorted(folder.glob("*.zip")):
    data = path.read_bytes()
    t0 = time.perf_counter()
    try:
        import_checkpoint_zip(data, folder / f"root-{mode}", path.stem, limits)
        verdict = "imported"
    except ValueError as exc:
        verdict = f"refused ({exc})"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{path.stem}: {verdict} in {time.perf_counter() - t0:.2f} s, peak RSS {peak} MB")
    del data
"""


def _rss_mb(pid: int) -> int:
    """Resident memory of a process in MB (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((ln for ln in text.splitlines() if ln.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) // 1024


def run_watched(code: str, args: list[str], limit_mb: int) -> tuple[int, str, int]:
    """Run Python `code` in a child killed once its RSS passes limit_mb; (exit code, output, highest RSS seen)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as child:
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.extend(child.stdout), daemon=True)
        reader.start()
        seen = 0
        while child.poll() is None:
            seen = max(seen, _rss_mb(child.pid))
            if seen > limit_mb:
                child.kill()  # the watchdog: a runaway import never takes the machine down
            time.sleep(0.02)
        reader.join()
    return child.returncode, "".join(output), seen


@pytest.fixture(scope="module")
def hostile_archives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Archives written by a watched child: bounds under the parameter cap, a 61 MB tokenizer, the largest model."""
    folder = tmp_path_factory.mktemp("hostile")
    code, output, seen = run_watched(MAKE, [str(folder)], 2048)
    assert code == 0, f"making the archives failed ({code}, highest RSS {seen} MB):\n{output}"
    return folder


@pytest.mark.slow  # a watched child writes a 61 MB tokenizer and a 20 M-parameter model, two more import them
@pytest.mark.parametrize("mode", ["hosted", "local"])
def test_hostile_archives_stay_within_memory(hostile_archives: Path, mode: str) -> None:
    code, output, seen = run_watched(IMPORT, [str(hostile_archives), mode], RSS_LIMIT_MB)
    assert code == 0, (
        f"child exited {code} (killed above {RSS_LIMIT_MB} MB?), highest RSS {seen} MB:\n{output}"
    )
    lines = dict(line.split(": ", 1) for line in output.strip().splitlines())
    assert len(lines) == 6, output
    for name, verdict in lines.items():
        assert verdict.startswith("imported" if name == "largest" else "refused"), output
        assert int(verdict.rsplit("peak RSS ", 1)[1].split()[0]) < RSS_LIMIT_MB, output
    print(output)  # times and peaks, for the record (-s)
