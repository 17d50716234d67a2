"""Warm start (`train --init`): layers kept, embeddings moved onto a new vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from tests.helpers.training import TINY
from visformer.checkpoint import OPTIMIZER_FILE, load_checkpoint, load_optimizer_state
from visformer.cli import main
from visformer.models import build_model
from visformer.tokenizer import SentencePieceTokenizer
from visformer.warmstart import transplant_rows, warm_start, widen_feed_forward

OLD_TEXTS = ["a dog runs on the grass", "ein hund rennt auf dem gras", "two men play music"] * 20
NEW_TEXTS = OLD_TEXTS + ["where is the train station", "wo ist der bahnhof", "i love you"] * 20


def write_corpus(folder: Path, texts: list[str]) -> tuple[str, str]:
    """Line-aligned src/tgt files (the same sentence on both sides: a copy corpus)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "src").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (folder / "tgt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    return str(folder / "src"), str(folder / "tgt")


def test_shared_pieces_keep_their_rows_and_new_ones_average_their_old_pieces() -> None:
    old_tok = SentencePieceTokenizer.train(OLD_TEXTS, 300, num_threads=1)
    new_tok = SentencePieceTokenizer.train(NEW_TEXTS, 320, num_threads=1)
    old = torch.randn(old_tok.vocab_size, 8)  # (vocab_old, d)
    rows = transplant_rows(old, old_tok, new_tok)  # (vocab_new, d)
    assert rows.shape == (new_tok.vocab_size, 8)
    old_pieces = old_tok.pieces(range(old_tok.vocab_size))
    new_pieces = new_tok.pieces(range(new_tok.vocab_size))
    shared = [p for p in new_pieces if p in old_pieces]
    assert len(shared) > 260  # specials and the 256 byte pieces at least
    for piece in shared:
        assert torch.equal(rows[new_pieces.index(piece)], old[old_pieces.index(piece)])
    fresh = [p for p in new_pieces if p not in old_pieces]
    assert fresh
    ids = old_tok.encode(fresh[0].replace("▁", " "))
    assert torch.allclose(rows[new_pieces.index(fresh[0])], old[ids].mean(0))


def train_corpus(src: str, tgt: str, out: Path, steps: int, vocab: int, *extra: str) -> int:
    """`visformer train --corpus` on the tiny size (exit code)."""
    args = ["--out", str(out), "--steps", str(steps), "--vocab-size", str(vocab), "--eval-every", "3"]
    return main(["train", "--corpus", src, tgt, *args, *extra, *TINY])


def test_a_warm_start_with_the_same_tokenizer_is_the_same_model(tmp_path: Path) -> None:
    src, tgt = write_corpus(tmp_path / "data", OLD_TEXTS)
    assert train_corpus(src, tgt, tmp_path / "first", 3, 300) == 0
    ckpt = load_checkpoint(tmp_path / "first")
    model = warm_start(ckpt, ckpt.src_tokenizer, ckpt.tgt_tokenizer).eval()
    for name, value in ckpt.model.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name


def test_cli_init_trains_on_a_new_vocabulary_from_the_old_layers(tmp_path: Path, capsys) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert train_corpus(*write_corpus(tmp_path / "old", OLD_TEXTS), first, 3, 300) == 0
    assert train_corpus(*write_corpus(tmp_path / "new", NEW_TEXTS), second, 2, 320, "--init", str(first)) == 0
    old, new = load_checkpoint(first), load_checkpoint(second)
    assert new.model_config.d_model == old.model_config.d_model
    assert new.src_tokenizer.vocab_size != old.src_tokenizer.vocab_size
    code = main(["train", "--task", "reverse", "--out", str(tmp_path / "x"), "--init", str(first), *TINY])
    assert code == 2 and "--init starts a corpus run" in capsys.readouterr().err


def test_a_widened_model_computes_exactly_what_the_narrow_one_did_and_its_new_units_can_learn() -> None:
    torch.manual_seed(0)
    narrow = build_model(tiny_config(n_encoder_layers=2, n_decoder_layers=2)).eval()
    wide = widen_feed_forward(narrow, 80).eval()
    assert wide.config.d_ff == 80 and narrow.config.d_ff == 32
    src, tgt = torch.randint(4, 20, (3, 7)), torch.randint(4, 20, (3, 5))  # (B, S), (B, T)
    assert torch.allclose(wide(src, tgt).logits, narrow(src, tgt).logits, atol=1e-5)
    new_w1 = wide.encoder.layers[0].feed_forward.linear1.weight[32:]  # (48, d): random, so the units can fire
    assert new_w1.abs().sum() > 0
    wide.train()
    wide(src, tgt).logits.sum().backward()
    w2 = wide.encoder.layers[0].feed_forward.linear2.weight  # (d, 80)
    assert w2.grad[:, 32:].abs().sum() > 0  # the silent units get a gradient and start to speak
    with pytest.raises(ValueError, match="grow, not shrink"):
        widen_feed_forward(narrow, 16)


def test_cli_resume_with_a_wider_feed_forward_keeps_adams_state_padded(tmp_path: Path, capsys) -> None:
    common = ["--task", "reverse", "--n-train", "200", "--n-valid", "20", "--eval-every", "10", *TINY]
    first = tmp_path / "first"
    assert main(["train", "--out", str(first), "--steps", "10", "--resumable", *common]) == 0
    capsys.readouterr()
    second = tmp_path / "second"
    args = ["train", "--out", str(second), "--steps", "16", "--resume", str(first), "--resumable"]
    assert main([*args, *common, "--d-ff", "48"]) == 0
    err = capsys.readouterr().err
    assert "from 32 to 48 hidden units" in err and "with Adam's state" in err
    ckpt = load_checkpoint(second)
    assert ckpt.model_config.d_ff == 48 and ckpt.metrics["steps"] == 16
    assert (second / OPTIMIZER_FILE).is_file()
    shapes = {k: v.shape for k, v in load_optimizer_state(second).items()}
    assert any(tuple(s) == (48, 16) for s in shapes.values())  # W1's moments grew with it
    assert main([*args[:2], str(tmp_path / "x"), *args[3:], *common, "--d-ff", "24"]) == 2
    assert "grow, not shrink" in capsys.readouterr().err
