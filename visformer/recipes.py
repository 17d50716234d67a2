"""Recipes: named model sizes and the ways to train on a toy task or a corpus.

The one source of defaults for the command line (`visformer train`), the Train page
(`visformer.classroom.jobs`) and the benchmarks (`bench/`): each builds its run from here, so the same
task and seed give the same ModelConfig, TrainConfig and data split everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from . import architectures
from .config import ModelConfig, TrainConfig
from .data import Pair, filter_by_length, split_disjoint
from .models import build_model
from .training import Trainer

# ---------------------------------------------------------------------------------------------
# Model sizes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSize:
    """The dimensions a student chooses: d_model, heads, layers (each side unless told) and d_ff."""

    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    n_decoder_layers: int | None = None  # None: as many as the encoder's n_layers
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN

    @property
    def decoder_layers(self) -> int:
        """Layers of the decoder."""
        return self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers

    def config(self, src_vocab: int, tgt_vocab: int, max_len: int, dropout: float = 0.1) -> ModelConfig:
        """The full ModelConfig (shared embeddings when the vocabularies are one)."""
        return ModelConfig(
            src_vocab_size=src_vocab,
            tgt_vocab_size=tgt_vocab,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_encoder_layers=self.n_layers,
            n_decoder_layers=self.decoder_layers,
            d_ff=self.d_ff,
            dropout=dropout,
            max_len=max_len,
            norm_first=self.norm_first,
            share_embeddings=src_vocab == tgt_vocab,
        )


PRESETS: dict[str, ModelSize] = {
    "tiny": ModelSize(d_model=32, n_heads=2, n_layers=1, d_ff=64),
    "small": ModelSize(d_model=64, n_heads=4, n_layers=2, d_ff=256),
    "base": ModelSize(d_model=128, n_heads=4, n_layers=3, d_ff=512),
}


# ---------------------------------------------------------------------------------------------
# What to learn: a built-in task or sentence pairs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSource:
    """A built-in synthetic task (visformer.tasks)."""

    task: str
    n_train: int = 5000
    n_valid: int = 200

    @property
    def label(self) -> str:
        """Short description for the checkpoint's info."""
        return f"task {self.task}"

    @property
    def vocab_size(self) -> int:
        """Size of the task's symbol vocabulary (specials included)."""
        from .tasks import task_tokenizer

        return task_tokenizer(self.task).vocab_size


@dataclass(frozen=True)
class PairsSource:
    """Sentence pairs (an upload, a corpus on disk, `train --corpus`); SentencePiece is trained on the train split.

    Held-out pairs share no source and no target sentence with training (`data.split_disjoint`).
    """

    name: str
    pairs: tuple[Pair, ...]
    vocab_size: int = 1000
    max_words: int = 40  # longer pairs are dropped
    valid: int | float = 200  # validation pairs held out: a count (at most a tenth of the pairs) or a share
    test: int | float = 0  # test pairs held out, the same way
    valid_pairs: tuple[Pair, ...] = ()  # given validation pairs: then none are held out for validation
    test_pairs: tuple[Pair, ...] = ()  # given test pairs: then none are held out for testing
    separate_vocab: bool = False  # one vocabulary per language instead of a joint one
    model_type: str = "bpe"  # SentencePiece model: bpe or unigram
    tokenizer_threads: int | None = 1  # SentencePiece training threads (None: up to 4)

    @property
    def label(self) -> str:
        """Short description for the checkpoint's info."""
        return f"corpus {self.name} ({len(self.pairs):,} pairs)"


DataSource = TaskSource | PairsSource


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs: a name for the checkpoint, the data, the model size, the training config."""

    name: str
    source: DataSource
    size: ModelSize
    train: TrainConfig
    max_len: int = 128
    dropout: float = 0.1
    architecture: str = (
        architectures.DEFAULT
    )  # ModelConfig.architecture: or rnn-none, rnn-bahdanau, rnn-luong

    def config(self, src_vocab: int, tgt_vocab: int, shared: bool = True, pad_id: int = 0) -> ModelConfig:
        """The run's ModelConfig for these vocabularies (`shared`: one tokenizer, so shared embeddings)."""
        config = self.size.config(src_vocab, tgt_vocab, self.max_len, self.dropout)
        return replace(config, share_embeddings=shared, pad_id=pad_id, architecture=self.architecture)


@dataclass(frozen=True)
class Recipe:
    """A way to train: model size, longest sequence, dropout and the training config."""

    size: ModelSize
    train: TrainConfig
    max_len: int
    dropout: float

    def config(self, src_vocab: int, tgt_vocab: int) -> ModelConfig:
        """The recipe's ModelConfig for these vocabularies."""
        return self.size.config(src_vocab, tgt_vocab, self.max_len, self.dropout)


# The fastest recipe found for the reverse task (bench/bench_time_to_learn.py, BEST): 100% exact match on the
# held-out sequences after 440-820 steps (7 seeds), median 8.7 s with one thread on a quiet 2-core machine.
# 20,000 examples, 1 encoder + 1 decoder layer, no dropout or label smoothing, Noam warm-up 100 × 0.7,
# 1024-token batches; evaluations and the saved model use a moving average of the weights (decay 0.97 per step),
# which reaches 100% hundreds of steps before the trained weights do. The 200 held-out examples are checked every
# 10 steps by one teacher-forced pass (a 100% confirmed by greedy decoding) and the run ends at the first 100%;
# one torch thread (two are slower at this size), as in every Train-page run.
TOY_SIZE = ModelSize(d_model=64, n_heads=4, n_layers=1, d_ff=128, n_decoder_layers=1, norm_first=True)
TOY = Recipe(
    TOY_SIZE,
    TrainConfig(
        steps=3000,
        max_tokens=1024,
        warmup=100,
        lr_factor=0.7,
        label_smoothing=0.0,
        eval_every=10,
        eval_examples=200,
        log_every=10,
        stop_at_exact_match=1.0,
        threads=1,
        weight_average=0.97,
    ),
    max_len=64,
    dropout=0.0,
)
TOY_N_TRAIN, TOY_N_VALID = 20_000, 200
# A corpus (`visformer train --corpus`): the paper's recipe at a size one CPU trains in hours.
CORPUS = Recipe(
    ModelSize(d_model=256, n_heads=4, n_layers=3, d_ff=1024),
    TrainConfig(steps=20000, max_tokens=4096, warmup=4000, lr_factor=1.0, eval_every=1000, log_every=50),
    max_len=128,
    dropout=0.1,
)


def split_task(task: str, n_train: int, n_valid: int, seed: int) -> tuple[list[Any], list[Any]]:
    """The one split of a toy task: training examples from `seed`, held-out ones (sources never trained on) from seed + 1."""
    from .tasks import make_examples

    train = make_examples(task, n_train, seed=seed)
    valid = make_examples(task, n_valid, seed=seed + 1, exclude={ex.src for ex in train})
    return train, valid


def toy_spec(name: str, task: str = "reverse", steps: int = 3000, seed: int = 0) -> RunSpec:
    """A toy-task run of the TOY recipe, ending at the first evaluation with 100% held-out exact match."""
    train = replace(TOY.train, steps=steps, seed=seed)
    source = TaskSource(task, n_train=TOY_N_TRAIN, n_valid=TOY_N_VALID)
    return RunSpec(name, source, TOY.size, train, max_len=TOY.max_len, dropout=TOY.dropout)


@dataclass
class Prepared:
    """Data, tokenizers and task of a run, ready for a Trainer (test: pairs scored after training)."""

    train: list[Any]
    valid: list[Any]
    src_tokenizer: Any
    tgt_tokenizer: Any
    task: str | None
    info: dict[str, Any] = field(default_factory=dict)
    test: list[Any] = field(default_factory=list)


def _held_out(size: int | float, n_sources: int) -> int:
    """Pairs to hold out: a share of the distinct sources, or a count capped at a tenth of them (at least 1)."""
    if isinstance(size, float):
        return round(size * n_sources)
    return min(size, max(1, n_sources // 10))


def split_data(source: DataSource, seed: int = 0) -> tuple[list[Any], list[Any], list[Any]]:
    """The one split of a run's data: (train, valid, test); held-out pairs share no sentence with training."""
    if isinstance(source, TaskSource):
        train, valid = split_task(source.task, source.n_train, source.n_valid, seed)
        return train, valid, []
    pairs = filter_by_length([p for p in source.pairs if p.src and p.tgt], source.max_words)
    if len(pairs) < 2:
        raise ValueError(
            f"{source.name}: fewer than 2 usable sentence pairs (empty lines or over {source.max_words} words)"
        )
    n_sources = len({p.src for p in pairs})
    n_valid = 0 if source.valid_pairs else _held_out(source.valid, n_sources)
    n_test = 0 if source.test_pairs else _held_out(source.test, n_sources)
    train, valid, test = (
        split_disjoint(pairs, n_valid, n_test, seed) if n_valid or n_test else (pairs, [], [])
    )
    if not train:
        raise ValueError(
            f"{source.name}: every pair shares a sentence with a held-out one: no pairs left to train on"
        )
    return train, list(source.valid_pairs) or valid, list(source.test_pairs) or test


def prepare_data(source: DataSource, seed: int = 0) -> Prepared:
    """Examples and tokenizers for a task (symbol vocabulary) or a corpus (SentencePiece on the train split)."""
    train, valid, test = split_data(source, seed)
    if isinstance(source, TaskSource):
        from .tasks import task_tokenizer

        tok = task_tokenizer(source.task)
        return Prepared(train, valid, tok, tok, source.task, {"examples": [ex.src for ex in valid[:4]]})
    from .tokenizer import SentencePieceTokenizer

    def tokenizer(texts: list[str]) -> SentencePieceTokenizer:
        return SentencePieceTokenizer.train(
            texts, source.vocab_size, source.model_type, num_threads=source.tokenizer_threads
        )

    if source.separate_vocab:
        src_tok, tgt_tok = tokenizer([p.src for p in train]), tokenizer([p.tgt for p in train])
    else:
        src_tok = tgt_tok = tokenizer([t for p in train for t in (p.src, p.tgt)])
    info = {"examples": [p.src for p in valid[:4]]}
    return Prepared(train, valid, src_tok, tgt_tok, None, info, test)


def model_config(spec: RunSpec, prepared: Prepared) -> ModelConfig:
    """The ModelConfig of a run on the prepared tokenizers."""
    src, tgt = prepared.src_tokenizer, prepared.tgt_tokenizer
    return spec.config(src.vocab_size, tgt.vocab_size, shared=src is tgt, pad_id=tgt.pad_id)


def build_trainer(spec: RunSpec, prepared: Prepared, model: torch.nn.Module | None = None) -> Trainer:
    """The one Trainer of a run: a fresh model of the spec (seeded: the same weights on every rank), or `model`
    (a warm start or a resumed run), on the prepared data with the spec's training config."""
    if model is None:
        torch.manual_seed(spec.train.seed)
        model = build_model(model_config(spec, prepared))
    return Trainer(
        model,
        prepared.train,
        prepared.valid,
        prepared.src_tokenizer,
        prepared.tgt_tokenizer,
        spec.train,
        task=prepared.task,
    )
