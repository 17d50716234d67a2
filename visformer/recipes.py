"""Recipes: named model sizes and the ways to train on a toy task or a corpus.

The one source of defaults for the command line (`visformer train`), the Train page
(`visformer.classroom.jobs`) and the benchmarks (`bench/`): each builds its run from here, so the same
task and seed give the same ModelConfig, TrainConfig and data split everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .config import ModelConfig, TrainConfig
from .data import Pair, filter_by_length, split_by_source

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
    """Sentence pairs from an uploaded or on-disk corpus; a joint SentencePiece vocabulary is trained."""

    name: str
    pairs: tuple[Pair, ...]
    vocab_size: int = 1000
    max_words: int = 40  # longer pairs are dropped
    valid: int = 200  # validation sentences held out

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
    architecture: str = "transformer"  # ModelConfig.architecture: or rnn-none, rnn-bahdanau, rnn-luong


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
    """Data, tokenizers and task of a run, ready for a Trainer."""

    train: list[Any]
    valid: list[Any]
    src_tokenizer: Any
    tgt_tokenizer: Any
    task: str | None
    info: dict[str, Any] = field(default_factory=dict)


def prepare_data(source: DataSource, seed: int = 0) -> Prepared:
    """Examples and tokenizers for a task (symbol vocabulary) or a corpus (joint SentencePiece)."""
    if isinstance(source, TaskSource):
        from .tasks import task_tokenizer

        train, valid = split_task(source.task, source.n_train, source.n_valid, seed)
        tok = task_tokenizer(source.task)
        return Prepared(train, valid, tok, tok, source.task, {"examples": [ex.src for ex in valid[:4]]})
    from .tokenizer import SentencePieceTokenizer

    pairs = filter_by_length([p for p in source.pairs if p.src and p.tgt], source.max_words)
    if len(pairs) < 2:
        raise ValueError(
            f"{source.name}: fewer than 2 usable sentence pairs (empty lines or over {source.max_words} words)"
        )
    n_valid = min(source.valid, max(1, len({p.src for p in pairs}) // 10))
    splits = split_by_source(pairs, valid=n_valid, test=0, seed=seed)
    texts = [t for p in splits.train for t in (p.src, p.tgt)]
    tok = SentencePieceTokenizer.train(texts, source.vocab_size, num_threads=1)
    return Prepared(
        splits.train, splits.valid, tok, tok, None, {"examples": [p.src for p in splits.valid[:4]]}
    )


def model_config(spec: RunSpec, prepared: Prepared) -> ModelConfig:
    """The ModelConfig of a run (vocabularies from the prepared tokenizers)."""
    src, tgt = prepared.src_tokenizer.vocab_size, prepared.tgt_tokenizer.vocab_size
    return replace(spec.size.config(src, tgt, spec.max_len, spec.dropout), architecture=spec.architecture)
