"""Checkpoint folders: round trip, atomic writes, clear errors for damage, no pickle on load."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import visformer.checkpoint as checkpoint_module
from tests.helpers.checkpoints import tiny_config
from visformer.checkpoint import (
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
    safe_checkpoint_dir,
    save_checkpoint,
    save_trainer,
)
from visformer.config import TrainConfig
from visformer.model import AttentionMaps, Transformer
from visformer.records import Snapshot
from visformer.tasks import make_examples, task_tokenizer
from visformer.tokenizer import SymbolTokenizer
from visformer.training import Trainer


def tiny_model(vocab: int, **overrides) -> Transformer:
    torch.manual_seed(1)
    return Transformer(tiny_config(src_vocab_size=vocab, tgt_vocab_size=vocab, **overrides)).eval()


def logits(model: Transformer) -> torch.Tensor:
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 9, 8]])
    with torch.no_grad():
        return model(src, tgt).logits


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, Transformer]:
    """A small checkpoint with a trainer's config, metrics and snapshots."""
    tok = task_tokenizer("reverse")
    model = tiny_model(tok.vocab_size)
    train = make_examples("reverse", 50, seed=0, max_len=5)
    cfg = TrainConfig(steps=3, max_tokens=128, log_every=1, n_snapshots=2, device="cpu")
    trainer = Trainer(model, train, train[:4], tok, tok, cfg, task="reverse")
    list(trainer.run())
    path = save_trainer(tmp_path / "ckpt", trainer, info={"note": "test"})
    return path, trainer.model


def test_round_trip_gives_identical_logits(saved: tuple[Path, Transformer]) -> None:
    path, model = saved
    ckpt = load_checkpoint(path)
    assert torch.equal(logits(ckpt.model), logits(model.eval()))
    assert not ckpt.model.training and ckpt.model_config == model.config
    assert ckpt.train_config is not None and ckpt.train_config.steps == 3
    assert ckpt.task == "reverse" and ckpt.name == "ckpt"
    assert ckpt.info["steps"] == 3 and ckpt.info["note"] == "test" and "torch" in ckpt.info["hardware"]
    assert ckpt.metrics["steps"] == 3 and len(ckpt.metrics["history"]) == 3
    assert ckpt.src_tokenizer is ckpt.tgt_tokenizer  # one shared folder for a joint vocabulary
    assert (path / "tokenizer" / "tokenizer.json").is_file()
    # tied weights stay tied after loading
    assert ckpt.model.generator.weight is ckpt.model.tgt_embed.token.weight


def test_snapshots_round_trip(saved: tuple[Path, Transformer]) -> None:
    path, _ = saved
    snaps = load_checkpoint(path).snapshots
    assert [s.step for s in snaps] == [1, 3]
    assert snaps[0].attention.encoder[0].dtype == torch.float16
    assert snaps[0].attention.cross[0].shape[0] == len(snaps[0].probes) == len(snaps[0].targets)


def test_half_precision_weights_load_as_float32(tmp_path: Path) -> None:
    tok = task_tokenizer("copy")
    model = tiny_model(tok.vocab_size)
    save_checkpoint(tmp_path / "half", model, tok, tok, half=True)
    ckpt = load_checkpoint(tmp_path / "half")
    assert all(p.dtype == torch.float32 for p in ckpt.model.parameters())
    assert torch.allclose(logits(ckpt.model), logits(model), atol=2e-2)
    assert ckpt.info["weights_dtype"] == "float16"


def test_separate_tokenizers_round_trip(tmp_path: Path) -> None:
    src_tok = SymbolTokenizer.from_symbols(list("abcdefgh"))
    tgt_tok = SymbolTokenizer.from_symbols(list("ABCDEFGHIJ"))
    torch.manual_seed(0)
    model = Transformer(
        tiny_config(
            src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, share_embeddings=False
        )
    )
    save_checkpoint(tmp_path / "sep", model, src_tok, tgt_tok)
    ckpt = load_checkpoint(tmp_path / "sep")
    assert ckpt.src_tokenizer.symbols == list("abcdefgh") and ckpt.tgt_tokenizer.symbols == list("ABCDEFGHIJ")
    assert (tmp_path / "sep" / "src").is_dir() and (tmp_path / "sep" / "tgt").is_dir()
    src, tgt = torch.tensor([[4, 5, 3]]), torch.tensor([[2, 7]])
    with torch.no_grad():
        assert torch.equal(ckpt.model(src, tgt).logits, model.eval()(src, tgt).logits)


def test_crash_mid_save_leaves_previous_checkpoint_intact(tmp_path: Path, monkeypatch) -> None:
    tok = task_tokenizer("copy")
    old_model, new_model = tiny_model(tok.vocab_size), tiny_model(tok.vocab_size)
    with torch.no_grad():
        new_model.generator.weight.add_(1.0)
    save_checkpoint(tmp_path / "ckpt", old_model, tok, tok)
    real = checkpoint_module.save_file

    def crash_on_snapshots(tensors, filename, metadata=None):
        if filename.endswith("snapshots.safetensors"):
            raise OSError("disk full (simulated)")
        return real(tensors, filename, metadata=metadata)

    monkeypatch.setattr(checkpoint_module, "save_file", crash_on_snapshots)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(tmp_path / "ckpt", new_model, tok, tok)
    assert torch.equal(logits(load_checkpoint(tmp_path / "ckpt").model), logits(old_model))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no temp folders left behind
    monkeypatch.setattr(checkpoint_module, "save_file", real)
    save_checkpoint(tmp_path / "ckpt", new_model, tok, tok)  # a later save replaces it
    assert torch.equal(logits(load_checkpoint(tmp_path / "ckpt").model), logits(new_model))


def test_crash_while_swapping_puts_the_old_folder_back(tmp_path: Path, monkeypatch) -> None:
    tok = task_tokenizer("copy")
    model = tiny_model(tok.vocab_size)
    save_checkpoint(tmp_path / "ckpt", model, tok, tok)
    real_replace = checkpoint_module.os.replace
    calls = []

    def failing_second_replace(a, b):
        calls.append((a, b))
        if len(calls) == 2:
            raise OSError("power cut (simulated)")
        return real_replace(a, b)

    monkeypatch.setattr(checkpoint_module.os, "replace", failing_second_replace)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(tmp_path / "ckpt", tiny_model(tok.vocab_size, d_ff=64), tok, tok)
    monkeypatch.setattr(checkpoint_module.os, "replace", real_replace)
    assert load_checkpoint(tmp_path / "ckpt").model_config.d_ff == 32


def _damage_truncated_weights(path: Path) -> None:
    data = (path / "weights.safetensors").read_bytes()
    (path / "weights.safetensors").write_bytes(data[: len(data) // 2])


def _damage_wrong_shapes(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["model"]["d_ff"] = 48
    (path / "config.json").write_text(json.dumps(config))


def _damage_unknown_key(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["model"]["colour"] = "red"
    (path / "config.json").write_text(json.dumps(config))


def _damage_unknown_top_key(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["extra"] = 1
    (path / "config.json").write_text(json.dumps(config))


def _damage_nan_weights(path: Path) -> None:
    tensors = load_file(str(path / "weights.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(path / "weights.safetensors"))


def _damage_float_layers(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["model"]["n_encoder_layers"] = 1.5
    (path / "config.json").write_text(json.dumps(config))


def _damage_vocab(path: Path) -> None:
    config = json.loads((path / "config.json").read_text())
    config["model"]["src_vocab_size"] = config["model"]["tgt_vocab_size"] = 99
    (path / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: (p / "weights.safetensors").unlink(), "missing weights.safetensors"),
        (_damage_truncated_weights, "weights.safetensors is damaged or truncated"),
        (
            lambda p: (p / "weights.safetensors").write_bytes(b"\x80\x04garbage"),
            "weights.safetensors is damaged",
        ),
        (_damage_wrong_shapes, r"weight .* has shape"),
        (lambda p: shutil.rmtree(p / "tokenizer"), "missing tokenizer folder tokenizer/"),
        (
            lambda p: (p / "tokenizer" / "tokenizer.json").write_text("{oops"),
            "tokenizer in tokenizer/ cannot be loaded",
        ),
        (lambda p: (p / "config.json").write_text("{not json"), "config.json is not valid JSON"),
        (lambda p: (p / "config.json").unlink(), "missing config.json"),
        (_damage_unknown_key, "unknown ModelConfig keys: colour"),
        (_damage_unknown_top_key, "unknown keys: extra"),
        (_damage_vocab, "do not match the model"),
        (_damage_nan_weights, "contains NaN or infinite values"),
        (_damage_float_layers, "model.n_encoder_layers must be a whole number, got 1.5"),
        (lambda p: (p / "snapshots.safetensors").write_bytes(b"xx"), "snapshots.safetensors is damaged"),
    ],
)
def test_damaged_checkpoint_gives_one_clear_error(
    saved: tuple[Path, Transformer], damage, message: str
) -> None:
    path, _ = saved
    damage(path)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_missing_folder_is_a_checkpoint_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_checkpoint(tmp_path / "nothing")


def test_loading_never_unpickles(saved: tuple[Path, Transformer], monkeypatch) -> None:
    path, model = saved

    def forbidden(*args, **kwargs):
        raise AssertionError("loading a checkpoint must not unpickle")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    ckpt = load_checkpoint(path)
    assert torch.equal(logits(ckpt.model), logits(model.eval()))
    for name in ("weights.safetensors", "snapshots.safetensors"):
        data = (path / name).read_bytes()
        header_len = int.from_bytes(data[:8], "little")  # safetensors: u64 header length + JSON header
        assert data[8:9] == b"{" and json.loads(data[8 : 8 + header_len])
        assert b"\x80\x04" not in data[:2] and not data.startswith(b"PK")  # no pickle, no torch zip


def test_list_checkpoints_and_safe_names(tmp_path: Path) -> None:
    tok = task_tokenizer("copy")
    model = tiny_model(tok.vocab_size)
    for name in ("b-model", "a_model"):
        save_checkpoint(safe_checkpoint_dir(tmp_path, name), model, tok, tok)
    (tmp_path / "not-a-checkpoint").mkdir()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["a_model", "b-model"]
    assert list_checkpoints(tmp_path / "missing") == []
    for bad in ("../escape", "a/b", ".hidden", "", "..", "x" * 101, "name with space"):
        with pytest.raises(ValueError, match="checkpoint name"):
            safe_checkpoint_dir(tmp_path, bad)


def test_snapshot_dataclass_is_shared_with_the_trainer() -> None:
    maps = AttentionMaps([torch.zeros(1, 2, 3, 3)], [torch.zeros(1, 2, 2, 2)], [torch.zeros(1, 2, 2, 3)])
    snap = Snapshot(step=1, loss=2.0, probes=["a"], attention=maps)
    assert checkpoint_module.Snapshot is Snapshot and snap.targets == []


@pytest.mark.parametrize("name", ["abc\n", "abc\r\n", "a\nb", "\nabc"])
def test_checkpoint_names_match_the_character_set_exactly(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid checkpoint name"):
        safe_checkpoint_dir(tmp_path, name)
    assert safe_checkpoint_dir(tmp_path, "abc") == tmp_path.resolve() / "abc"
