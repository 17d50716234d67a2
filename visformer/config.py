"""Typed configuration that travels through model, trainer, checkpoint and UI: ModelConfig and TrainConfig."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .architectures import ARCHITECTURES, DEFAULT  # the registry of model families (architectures.py)

PRECISIONS = ("auto", "bf16", "fp32")  # TrainConfig.precision: autocast dtype choices
# decoding also runs int8 weights (one scale per output row, fp32 activations): visformer.decoding.fast
DECODING_PRECISIONS = (*PRECISIONS, "int8")
ACTIVATIONS = ("relu", "swish", "gelu")  # ModelConfig.activation: the feed-forward non-linearity


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the encoder–decoder Transformer (paper names)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 256
    norm_first: bool = False  # False = post-LN as in the paper; True = pre-LN
    share_embeddings: bool = True  # tie source, target and output embeddings (joint vocabulary)
    pad_id: int = 0
    architecture: str = DEFAULT  # one of ARCHITECTURES; checkpoints without it are Transformers
    # Fields where imported models (OPUS-MT / Marian, visformer.marian) differ from the paper; the defaults
    # are the paper's, and checkpoints without them load unchanged.
    activation: str = "relu"  # feed-forward non-linearity, one of ACTIVATIONS (Marian: swish or gelu)
    output_bias: bool = False  # a bias on the output logits (Marian's final_logits_bias)
    decoder_start_id: int = 2  # the token the decoder reads first: <s> (Marian: <pad>, not masked as padding)
    tie_output: bool = False  # share_embeddings False: tie the output projection to the target embedding

    def __post_init__(self) -> None:
        """Reject configurations the model cannot be built from."""
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"unknown architecture {self.architecture!r}; choose one of {', '.join(ARCHITECTURES)}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {self.activation!r}; choose one of {', '.join(ACTIVATIONS)}"
            )
        if not 0 <= self.decoder_start_id < self.tgt_vocab_size:
            raise ValueError(f"decoder_start_id {self.decoder_start_id} is outside the target vocabulary")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.d_model % 2:
            raise ValueError(f"d_model ({self.d_model}) must be even for sinusoidal encoding")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs src_vocab_size == tgt_vocab_size")
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.n_encoder_layers < 1 or self.n_decoder_layers < 1:
            raise ValueError("the model needs at least one encoder and one decoder layer")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def d_head(self) -> int:
        """Size of one head's queries, keys and values (d_k = d_v = d_model / h)."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a dict, refusing unknown keys with a clear message."""
        return _from_dict(cls, data)


def _from_dict(cls: type, data: dict[str, Any]):
    """Construct dataclass `cls` from `data`, naming unknown or mistyped keys."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys: {', '.join(unknown)}")
    return cls(**data)


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run (the paper's recipe by default)."""

    steps: int = 1000
    max_tokens: int = 4096  # source + target tokens per batch (padding included)
    warmup: int = 4000
    lr_factor: float = 1.0
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 switches clipping off
    seed: int = 0
    device: str = "auto"
    eval_every: int = 500
    eval_examples: int = 500  # how many validation sentences are decoded for BLEU / exact match
    log_every: int = 10
    snapshot_steps: tuple[int, ...] = ()  # explicit steps; empty = a log-spaced schedule
    snapshot_every: int = 0  # > 0: every N steps instead of the log-spaced schedule
    n_snapshots: int = 12  # size of the log-spaced schedule (0 switches snapshots off)
    probes: tuple[str, ...] = ()  # probe source sentences; empty = the first short validation pairs
    n_probes: int = 4
    time_limit_s: float | None = None
    threads: int | None = None
    stop_at_exact_match: float | None = None  # tasks: end the run once an evaluation reaches this share
    precision: str = "auto"  # autocast: "auto" = bf16 where native (and d_model >= 256 on a CPU), else fp32
    # > 0: evaluations, snapshots and the saved model use an exponential moving average of the weights with
    # this decay per step (a running form of the paper's checkpoint averaging); 0: the trained weights
    weight_average: float = 0.0
    # > 0: the last `cooldown` steps before `steps` scale the learning rate down linearly to zero (an annealing
    # phase added to the paper's schedule for a run that ends, e.g. a resumed one); 0: the paper's schedule
    cooldown: int = 0

    def __post_init__(self) -> None:
        """Reject settings the trainer cannot run with."""
        for name in ("steps", "max_tokens", "warmup", "log_every", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lr_factor <= 0:
            raise ValueError(f"lr_factor must be positive, got {self.lr_factor}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if not 0.0 <= self.weight_average < 1.0:
            raise ValueError(f"weight_average must be in [0, 1), got {self.weight_average}")
        if not 0 <= self.cooldown <= self.steps:
            raise ValueError(f"cooldown must be between 0 and steps ({self.steps}), got {self.cooldown}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        object.__setattr__(self, "betas", tuple(self.betas))
        object.__setattr__(self, "snapshot_steps", tuple(int(s) for s in self.snapshot_steps))
        object.__setattr__(self, "probes", tuple(self.probes))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict, refusing unknown keys with a clear message."""
        return _from_dict(cls, data)
