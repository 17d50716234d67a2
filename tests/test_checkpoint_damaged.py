"""Damaged, foreign and malicious checkpoints are refused with one clear CheckpointError.

Loading reads JSON and safetensors only: a pickle payload that would create a marker file when
unpickled is planted under every file name a checkpoint has, and the marker must never appear.
"""

from __future__ import annotations

import json
import pickle
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.helpers.checkpoints import tiny_checkpoint
from visformer.checkpoint import CONFIG_FILE, WEIGHTS_FILE, CheckpointError, load_checkpoint, save_checkpoint


class _Payload:
    """Unpickling this calls Path.touch(marker): proof that something was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("good") / "good")


@pytest.fixture
def ck(good: Path, tmp_path: Path) -> Path:
    """A fresh copy of the good checkpoint to damage."""
    return Path(shutil.copytree(good, tmp_path / "victim"))


def _edit_config(folder: Path, change: Callable[[dict], None]) -> None:
    config = json.loads((folder / CONFIG_FILE).read_text())
    change(config)
    (folder / CONFIG_FILE).write_text(json.dumps(config))


def test_good_checkpoint_loads(good: Path) -> None:
    loaded = load_checkpoint(good)
    assert loaded.model_config.d_model == 16 and loaded.task == "copy" and not loaded.model.training


def test_truncated_weights(ck: Path) -> None:
    data = (ck / WEIGHTS_FILE).read_bytes()
    (ck / WEIGHTS_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="weights.safetensors is damaged or truncated"):
        load_checkpoint(ck)


@pytest.mark.parametrize("where", ["header_length", "header_json", "empty"])
def test_corrupted_weight_bytes(ck: Path, where: str) -> None:
    data = bytearray((ck / WEIGHTS_FILE).read_bytes())
    if where == "header_length":
        data[:8] = struct.pack("<Q", 2**40)
    elif where == "header_json":
        data[8:20] = b"\xff" * 12
    else:
        data = bytearray()
    (ck / WEIGHTS_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="weights.safetensors is damaged or truncated"):
        load_checkpoint(ck)


def test_nan_weights_are_refused(ck: Path) -> None:
    from safetensors.torch import load_file

    tensors = load_file(ck / WEIGHTS_FILE)
    name = next(iter(tensors))
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(ck / WEIGHTS_FILE))
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        load_checkpoint(ck)


@pytest.mark.parametrize(
    "target", [WEIGHTS_FILE, CONFIG_FILE, "tokenizer/tokenizer.json", "snapshots.safetensors", "metrics.json"]
)
@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_pickle_is_never_unpickled(ck: Path, tmp_path: Path, target: str, kind: str) -> None:
    marker = tmp_path / "PWNED"
    if kind == "pickle":
        payload = pickle.dumps(_Payload(marker))
    else:
        torch.save({"w": _Payload(marker)}, tmp_path / "p.pt")
        payload = (tmp_path / "p.pt").read_bytes()
    pickle.loads(pickle.dumps(_Payload(tmp_path / "control")))  # the payload really works
    assert (tmp_path / "control").exists()
    (ck / target).write_bytes(payload)
    if target == "metrics.json" or target == "snapshots.safetensors":
        with pytest.raises(CheckpointError):
            load_checkpoint(ck)
    else:
        with pytest.raises(CheckpointError, match=r"damaged|not valid JSON|not a valid|cannot be loaded"):
            load_checkpoint(ck)
    assert not marker.exists()


def test_foreign_safetensors(ck: Path) -> None:
    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(30, 16)}, str(ck / WEIGHTS_FILE))
    with pytest.raises(CheckpointError, match="unexpected tensors: bert.embeddings"):
        load_checkpoint(ck)


def test_missing_tensors(ck: Path) -> None:
    from safetensors.torch import load_file

    tensors = load_file(ck / WEIGHTS_FILE)
    dropped = sorted(tensors)[-1]
    del tensors[dropped]
    save_file(tensors, str(ck / WEIGHTS_FILE))
    with pytest.raises(CheckpointError, match="lacks tensors"):
        load_checkpoint(ck)


def test_mismatched_shapes(ck: Path) -> None:
    _edit_config(ck, lambda c: c["model"].update(d_model=32, d_ff=64))
    with pytest.raises(CheckpointError, match=r"has shape \(.*16.*\), the config expects"):
        load_checkpoint(ck)


@pytest.mark.parametrize("order", [sorted, lambda names: sorted(names, reverse=True)])
def test_mismatched_shapes_names_the_models_first_tensor_whatever_the_file_order(
    ck: Path, order: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    from visformer import checkpoint

    read = checkpoint.load_safetensors_file

    def reordered(path: str) -> dict:
        tensors = read(path)
        return {name: tensors[name] for name in order(tensors)}

    monkeypatch.setattr(checkpoint, "load_safetensors_file", reordered)
    _edit_config(ck, lambda c: c["model"].update(d_model=32, d_ff=64))
    with pytest.raises(CheckpointError, match=r"src_embed\.token\.weight has shape \(12, 16\)"):
        load_checkpoint(ck)


def test_mismatched_vocabulary(ck: Path) -> None:
    _edit_config(ck, lambda c: c["model"].update(src_vocab_size=99, tgt_vocab_size=99))
    with pytest.raises(CheckpointError, match="vocabularies"):
        load_checkpoint(ck)


def test_missing_tokenizer(ck: Path) -> None:
    shutil.rmtree(ck / "tokenizer")
    with pytest.raises(CheckpointError, match="missing tokenizer folder"):
        load_checkpoint(ck)


def test_empty_tokenizer_folder(ck: Path) -> None:
    (ck / "tokenizer" / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="cannot be loaded"):
        load_checkpoint(ck)


@pytest.mark.parametrize("text", ["{not json", "", "[1, 2, 3]", "null", '"a string"', "\xff\xfe"])
def test_garbage_config_json(ck: Path, text: str) -> None:
    (ck / CONFIG_FILE).write_bytes(text.encode("latin-1"))
    with pytest.raises(CheckpointError, match="config.json"):
        load_checkpoint(ck)


def test_missing_config_and_weights(ck: Path) -> None:
    (ck / WEIGHTS_FILE).unlink()
    with pytest.raises(CheckpointError, match="missing weights.safetensors"):
        load_checkpoint(ck)
    (ck / CONFIG_FILE).unlink()
    with pytest.raises(CheckpointError, match="missing config.json"):
        load_checkpoint(ck)
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_checkpoint(ck / "nowhere")


@pytest.mark.parametrize(
    "change, fragment",
    [
        (lambda c: c.update(evil="x"), "unknown keys: evil"),
        (lambda c: c["model"].update(flash_attention=True), "unknown ModelConfig keys"),
        (lambda c: c.update(train={"steps": 10, "optimizer": "sgd"}), "unknown TrainConfig keys"),
        (lambda c: c.update(version=99), "version 99"),
        (lambda c: c.update(format="pytorch"), "not a visformer checkpoint"),
        (lambda c: c["model"].update(n_heads=3), "divisible"),
        (lambda c: c["model"].update(d_model="16"), "model.d_model must be a whole number, got '16'"),
        (lambda c: c.update(model=[1, 2]), "model must be an object, got list"),
        (lambda c: c.update(model=None), "model must be an object, got None"),
        (lambda c: c["model"].update(d_model=16.0), "model.d_model must be a whole number"),
        (lambda c: c["model"].update(n_encoder_layers=1.5), "n_encoder_layers must be a whole number"),
        (lambda c: c["model"].update(n_heads=True), "n_heads must be a whole number, got True"),
        (lambda c: c["model"].update(norm_first=1), "norm_first must be true or false"),
        (lambda c: c["model"].update(dropout="0.1"), "dropout must be a number"),
        (lambda c: c["model"].update(architecture=7), "architecture must be text"),
        (lambda c: c.update(task="bogus"), "task must be one of null, copy"),
        (lambda c: c.update(task=123), "task must be one of null, copy.*got 123"),
        (lambda c: c.update(info="a string"), "info must be an object or null, got 'a string'"),
        (lambda c: c.update(info=[1]), "info must be an object or null, got list"),
        (lambda c: c.update(train=[1]), "train must be an object or null"),
        (lambda c: c.update(tokenizer="both"), "tokenizer must be one of shared, separate"),
    ],
)
def test_bad_config_values(ck: Path, change: Callable[[dict], None], fragment: str) -> None:
    _edit_config(ck, change)
    with pytest.raises(CheckpointError, match=fragment):
        load_checkpoint(ck)


def test_garbage_metrics_and_snapshots(ck: Path) -> None:
    (ck / "metrics.json").write_text("{oops")
    with pytest.raises(CheckpointError, match="metrics.json is not valid JSON"):
        load_checkpoint(ck)


def test_snapshot_index_without_tensors(ck: Path) -> None:
    (ck / "snapshots.json").write_text(json.dumps([{"step": 1, "loss": 1.0, "probes": ["a"]}]))
    with pytest.raises(CheckpointError, match="snapshots do not match"):
        load_checkpoint(ck)


def test_crash_mid_save_keeps_the_previous_checkpoint(good: Path, tmp_path: Path, monkeypatch) -> None:
    import visformer.checkpoint as checkpoint_module

    target = Path(shutil.copytree(good, tmp_path / "run"))
    before = (target / WEIGHTS_FILE).read_bytes()
    original = checkpoint_module._write_json

    def crash(path: Path, data) -> None:
        if path.name == "metrics.json":
            raise OSError("disk full")
        original(path, data)

    monkeypatch.setattr(checkpoint_module, "_write_json", crash)
    loaded = load_checkpoint(target)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(target, loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, task="copy")
    assert (target / WEIGHTS_FILE).read_bytes() == before and load_checkpoint(target).task == "copy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no half-written or temp folder left
    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "fresh", loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_deeply_nested_config_is_refused(ck: Path) -> None:
    (ck / CONFIG_FILE).write_text("[" * 100_000 + "]" * 100_000)  # json.loads: RecursionError
    with pytest.raises(CheckpointError, match="config.json is not valid JSON .nested too deeply"):
        load_checkpoint(ck)


def test_metrics_must_be_an_object(ck: Path) -> None:
    (ck / "metrics.json").write_text("[1, 2, 3]")
    with pytest.raises(CheckpointError, match="metrics.json must be an object, got list"):
        load_checkpoint(ck)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.bool, torch.complex64, torch.float64,
                                   torch.float8_e4m3fn, torch.float8_e5m2])  # fmt: skip
def test_weights_of_other_dtypes_are_refused(ck: Path, dtype: torch.dtype) -> None:
    tensors = load_file(str(ck / WEIGHTS_FILE))
    save_file({k: t.to(dtype) for k, t in tensors.items()}, str(ck / WEIGHTS_FILE))
    with pytest.raises(
        CheckpointError, match=f"is stored as {str(dtype).replace('torch.', '')}; checkpoints hold"
    ):
        load_checkpoint(ck)


def _snapshot(ck: Path, tensors: dict[str, torch.Tensor], probes: list[str]) -> None:
    (ck / "snapshots.json").write_text(json.dumps([{"step": 1, "loss": 1.0, "probes": probes}]))
    save_file(tensors, str(ck / "snapshots.safetensors"))


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((1, 4, 3, 3), torch.int64),
        ((4, 3, 3), torch.float16),
        ((2, 4, 3, 3), torch.float16),
        ((1, 3, 3, 3), torch.float16),
    ],
)
def test_snapshot_tensors_of_the_wrong_shape_are_refused(ck: Path, shape: tuple, dtype: torch.dtype) -> None:
    good = {
        f"0.{kind}.0": torch.zeros(1, 4, 3, 3, dtype=torch.float16)
        for kind in ("encoder", "decoder", "cross")
    }
    _snapshot(ck, good, ["abc"])
    assert load_checkpoint(ck).snapshots[0].attention.cross[0].shape == (1, 4, 3, 3)  # the right shape loads
    _snapshot(ck, {**good, "0.cross.0": torch.zeros(shape, dtype=dtype)}, ["abc"])
    with pytest.raises(CheckpointError, match="snapshots do not match"):
        load_checkpoint(ck)


def test_snapshot_index_must_be_a_list(ck: Path) -> None:
    (ck / "snapshots.json").write_text(json.dumps({"step": 1}))
    with pytest.raises(CheckpointError, match="snapshots do not match.*not a list"):
        load_checkpoint(ck)


@pytest.mark.parametrize("entry", [{"step": 1, "loss": 1.0, "probes": [1, 2]}, {"step": 1, "loss": 1.0, "probes": "abc"},
                                   {"step": 1, "loss": 1.0, "probes": ["a"], "targets": [None]}, ["not", "a", "dict"]])  # fmt: skip
def test_snapshot_entries_must_hold_text(ck: Path, entry: object) -> None:
    (ck / "snapshots.json").write_text(json.dumps([entry]))
    with pytest.raises(CheckpointError, match="snapshots do not match"):
        load_checkpoint(ck)
