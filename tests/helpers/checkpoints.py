"""Small checkpoints the tests build: untrained tiny models and toy runs trained for a few dozen steps."""

from __future__ import annotations

from pathlib import Path

import torch

from visformer import recipes
from visformer.checkpoint import save_checkpoint
from visformer.classroom import jobs
from visformer.classroom.hosting import HostedLimits
from visformer.config import ModelConfig, TrainConfig
from visformer.model import Transformer
from visformer.tasks import task_tokenizer
from visformer.tokenizer import SymbolTokenizer


def tiny_config(**overrides) -> ModelConfig:
    """A model small enough for unit tests (d_model=16, one layer each side)."""
    base = dict(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=16,
        n_heads=4,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=64,
        pad_id=0,
    )
    base.update(overrides)
    return ModelConfig(**base)


def make_checkpoint(folder: Path, name: str = "tiny-reverse") -> Path:
    """An untrained reverse-task model (2 layers, 2 heads) small enough to translate in milliseconds."""
    torch.manual_seed(0)
    tok = task_tokenizer("reverse")
    cfg = tiny_config(
        src_vocab_size=tok.vocab_size,
        tgt_vocab_size=tok.vocab_size,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=2,
        max_len=24,
    )
    return save_checkpoint(folder / name, Transformer(cfg).eval(), tok, tok, task="reverse")


def untrained_checkpoint(root: Path, name: str = "no-snapshots") -> Path:
    """A one-layer reverse-task model saved without any snapshot."""
    tok = task_tokenizer("reverse")
    cfg = tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, n_heads=2, max_len=24)
    return save_checkpoint(root / name, Transformer(cfg).eval(), tok, tok, task="reverse")


def tiny_checkpoint(path: Path) -> Path:
    """A valid one-layer d_model=16 checkpoint with a shared symbol vocabulary."""
    tok = SymbolTokenizer.from_symbols(list("abcdefgh"))
    cfg = tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, max_len=32)
    torch.manual_seed(0)
    return save_checkpoint(path, Transformer(cfg), tok, tok, task="copy")


def trained_checkpoint(root: Path, name: str = "toy-copy", architecture: str = "transformer") -> Path:
    """A copy-task model trained for 40 steps with 4 attention snapshots (about a second on one thread).

    The Transformer has 2 heads and one layer each side; an RNN (`architecture` rnn-*) one head.
    """
    config = TrainConfig(
        steps=40,
        warmup=10,
        max_tokens=512,
        log_every=5,
        eval_every=20,
        eval_examples=10,
        n_snapshots=4,
        threads=1,
    )
    heads = 2 if architecture == "transformer" else 1
    spec = recipes.RunSpec(
        name,
        recipes.TaskSource("copy", 300, 20),
        recipes.ModelSize(16, heads, 1, 32),
        config,
        max_len=24,
        architecture=architecture,
    )
    job = jobs.JobRegistry().start(f"fixture-{root}-{name}", spec, HostedLimits(), root)
    assert job.join(timeout=600)
    assert job.progress().state == jobs.DONE, job.progress().message
    return job.progress().checkpoint
