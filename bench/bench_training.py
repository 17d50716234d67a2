"""Training throughput: visformer against torch.nn.Transformer of the same sizes, alternating runs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from visformer.config import ModelConfig
from visformer.model import Transformer, positional_encoding
from visformer.utils import autocast_dtype

from .common import SHIPPED, Section, Stat, alternate, ratio_stat, time_call

LABEL_SMOOTHING = 0.1


@dataclass
class TrainBatch:
    """A padded translation batch: source (B, S), target input and output (B, T)."""

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    n_tgt_tokens: int  # real (non-pad) target tokens


def make_batch(
    config: ModelConfig, batch_size: int, mean_len: int, seed: int = 0, padded: bool = True
) -> TrainBatch:
    """Random sentences of mean_len ± 25% tokens (ids ≥ 4), padded to the longest like a real batch."""
    gen = torch.Generator().manual_seed(seed)
    spread = max(1, mean_len // 4) if padded else 0

    def lengths() -> Tensor:
        return mean_len + torch.randint(-spread, spread + 1, (batch_size,), generator=gen)

    def sentences(lens: Tensor, vocab: int, extra: int) -> Tensor:
        out = torch.full((batch_size, int(lens.max()) + extra), config.pad_id, dtype=torch.long)
        for i, n in enumerate(lens.tolist()):
            out[i, : n + extra] = torch.randint(4, vocab, (n + extra,), generator=gen)
        return out

    src = sentences(lengths(), config.src_vocab_size, 1)  # tokens + eos
    tgt = sentences(lengths(), config.tgt_vocab_size, 1)  # bos + tokens + eos, one column dropped below
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return TrainBatch(src, tgt_in, tgt_out, int((tgt_out != config.pad_id).sum()))


class PeerModel(nn.Module):
    """torch.nn.Transformer with visformer's embeddings (shared, √d-scaled, sinusoidal PE) and tied output."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.token = nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_id)
        nn.init.normal_(self.token.weight, 0.0, d**-0.5)
        self.register_buffer("pe", positional_encoding(torch.arange(config.max_len), d), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.transformer = nn.Transformer(
            d_model=d,
            nhead=config.n_heads,
            num_encoder_layers=config.n_encoder_layers,
            num_decoder_layers=config.n_decoder_layers,
            dim_feedforward=config.d_ff,
            dropout=config.dropout,
            batch_first=True,
            norm_first=config.norm_first,
        )
        self.generator = nn.Linear(d, config.tgt_vocab_size, bias=False)
        self.generator.weight = self.token.weight

    def embed(self, tokens: Tensor) -> Tensor:
        """(B, L) -> (B, L, d)."""
        return self.dropout(self.token(tokens) * math.sqrt(self.config.d_model) + self.pe[: tokens.shape[1]])

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V)."""
        pad = self.config.pad_id
        tgt_len = tgt.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_len, device=tgt.device)
        y = self.transformer(
            self.embed(src),
            self.embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src == pad,
            memory_key_padding_mask=src == pad,
            tgt_is_causal=True,
        )
        return self.generator(y)


def visformer_logits(model: Transformer) -> Callable[[Tensor, Tensor], Tensor]:
    """Adapter: visformer's forward returning just the logits."""
    return lambda src, tgt: model(src, tgt).logits


def train_step_fn(
    model: nn.Module,
    logits_fn: Callable[[Tensor, Tensor], Tensor],
    batch: TrainBatch,
    pad_id: int,
    autocast: torch.dtype | None = None,
) -> Callable[[], float]:
    """One closure = forward (under autocast to `autocast`, None = fp32) + label-smoothed cross-entropy +
    backward + Adam step on fp32 weights; returns the loss."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step() -> float:
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            logits = logits_fn(batch.src, batch.tgt_in)  # (B, T, V)
        loss = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            batch.tgt_out.reshape(-1),
            ignore_index=pad_id,
            label_smoothing=LABEL_SMOOTHING,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def training_flops(config: ModelConfig, batch: TrainBatch) -> float:
    """Matmul FLOPs of one training step on the padded shapes (forward ×3 for backward)."""
    b, s = batch.src.shape
    t = batch.tgt_in.shape[1]
    d, f, v = config.d_model, config.d_ff, config.tgt_vocab_size
    enc = config.n_encoder_layers * b * (2 * s * (4 * d * d + 2 * d * f) + 4 * s * s * d)
    dec_per_layer = (
        2 * t * (4 * d * d + 2 * d * d + 2 * d * f) + 2 * s * 2 * d * d + 4 * t * t * d + 4 * t * s * d
    )
    dec = config.n_decoder_layers * b * dec_per_layer
    generator = 2 * b * t * d * v
    return 3.0 * (enc + dec + generator)


def matmul_peak(size: int = 2048, repeats: int = 5) -> Stat:
    """The machine's fp32 matmul throughput in GFLOP/s: a large torch.mm, median of `repeats`."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    times = time_call(lambda: torch.mm(a, b), repeats, warmup=1)
    return Stat.of(times).inverse(2 * size**3 / 1e9)


@dataclass
class TrainingResult:
    """Alternating visformer vs nn.Transformer training-step timings on one batch."""

    label: str
    batch_shape: str
    n_tgt_tokens: int
    ours: Stat  # target tokens / s (wall clock, torch's default threads)
    peer: Stat  # target tokens / s (wall clock)
    speedup: Stat  # per-round ratio peer_time / our_time (wall clock)
    cpu_speedup: Stat  # the same ratio in CPU seconds of one thread (robust to a shared machine)
    gflops: Stat  # visformer's achieved GFLOP/s (wall clock)


def compare_training(
    config: ModelConfig,
    batch: TrainBatch,
    rounds: int,
    label: str,
    cpu_rounds: int = 0,
    seed: int = 0,
    precisions: tuple[torch.dtype | None, torch.dtype | None] = (None, None),
) -> TrainingResult:
    """Train both models on the same batch in alternating rounds; tokens/s and the speed-up.

    The wall-clock rounds use torch's default threads; `cpu_rounds` more rounds count CPU seconds
    with one thread, which other processes on a shared machine barely disturb.
    """
    torch.manual_seed(seed)
    ours = Transformer(config).train()
    torch.manual_seed(seed)
    peer = PeerModel(config).train()
    ours_dtype, peer_dtype = precisions
    fns = {
        "visformer": train_step_fn(ours, visformer_logits(ours), batch, config.pad_id, ours_dtype),
        "peer": train_step_fn(peer, peer, batch, config.pad_id, peer_dtype),
    }
    times = alternate(fns, rounds, warmup=2)
    cpu_speedup = ratio_stat(times["peer"], times["visformer"])
    if cpu_rounds:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            cpu = alternate(fns, cpu_rounds, warmup=1, clock=time.process_time)
        finally:
            torch.set_num_threads(threads)
        cpu_speedup = ratio_stat(cpu["peer"], cpu["visformer"])
    flops = training_flops(config, batch)
    return TrainingResult(
        label=label,
        batch_shape=f"{tuple(batch.src.shape)} → {tuple(batch.tgt_in.shape)}",
        n_tgt_tokens=batch.n_tgt_tokens,
        ours=Stat.of(times["visformer"]).inverse(batch.n_tgt_tokens),
        peer=Stat.of(times["peer"]).inverse(batch.n_tgt_tokens),
        speedup=ratio_stat(times["peer"], times["visformer"]),
        cpu_speedup=cpu_speedup,
        gflops=Stat.of(times["visformer"]).inverse(flops / 1e9),
    )


def precision_runs() -> list[tuple[str, tuple[torch.dtype | None, torch.dtype | None]]]:
    """(label, (visformer dtype, peer dtype)) compared: the trainer's default against the peer's, then like
    for like. visformer's default is bf16 autocast where the CPU runs bf16 natively (TrainConfig.precision)."""
    ours = autocast_dtype("auto", torch.device("cpu"), SHIPPED.d_model)
    name = "bf16" if ours is not None else "fp32"
    runs = [(f"visformer default ({name}) vs nn.Transformer fp32", (ours, None))]
    if ours is not None:
        runs.append(("both bf16 autocast", (torch.bfloat16, torch.bfloat16)))
    runs.append(("both fp32", (None, None)))
    return runs


def loss_agreement(config: ModelConfig, batch: TrainBatch, steps: int) -> tuple[list[float], list[float]]:
    """Losses of `steps` visformer training steps on one batch in fp32 and in bf16 autocast (same start)."""
    curves = []
    for dtype in (None, torch.bfloat16):
        torch.manual_seed(0)
        model = Transformer(config).train()
        step = train_step_fn(model, visformer_logits(model), batch, config.pad_id, dtype)
        torch.manual_seed(1)  # the same dropout masks in both runs
        curves.append([step() for _ in range(steps)])
    return curves[0], curves[1]


def run(config: ModelConfig, quick: bool = False) -> Section:
    """Training throughput section: each precision pairing, padded and unpadded batches, matmul peak."""
    batch_size, mean_len, rounds, cpu_rounds = (4, 6, 2, 2) if quick else (64, 20, 6, 6)
    results = [
        compare_training(
            config, make_batch(config, batch_size, mean_len, padded=padded), rounds,
            f"{label}, {'padded batch' if padded else 'no padding'}", cpu_rounds, precisions=dtypes,
        )
        for label, dtypes in precision_runs()
        for padded in (True, False)
    ]  # fmt: skip
    peak = matmul_peak(size=256 if quick else 2048)
    section = Section(
        title="Training throughput",
        intro=(
            f"Target tokens per second of one training step (forward, label-smoothed cross-entropy "
            f"({LABEL_SMOOTHING}), backward, Adam) for visformer and `torch.nn.Transformer` with the same "
            f"sizes (d_model {config.d_model}, {config.n_heads} heads, {config.n_encoder_layers}+"
            f"{config.n_decoder_layers} layers, d_ff {config.d_ff}, vocabulary {config.tgt_vocab_size}, "
            f"shared embeddings, dropout {config.dropout}), the same batch, in {rounds} alternating rounds "
            f"(wall clock, torch's default threads) and {cpu_rounds} more counting CPU seconds with one thread "
            "(robust to other jobs on the machine). Speed-up = median of per-round time ratios nn.Transformer / "
            "visformer. Median (min–max)."
        ),
        header=[
            "batch",
            "shape (src → tgt)",
            "visformer tok/s",
            "nn.Transformer tok/s",
            "speed-up (wall)",
            "speed-up (CPU s, 1 thread)",
            "visformer GFLOP/s",
        ],
    )
    for r in results:
        section.rows.append(
            [
                r.label,
                r.batch_shape,
                r.ours.fmt(0),
                r.peer.fmt(0),
                f"{r.speedup.fmt(2)}×",
                f"{r.cpu_speedup.fmt(2)}×",
                r.gflops.fmt(1),
            ]
        )
    share = results[-2].gflops.median / peak.median
    section.notes.append(
        f"fp32 matmul peak ({256 if quick else 2048}² `torch.mm`): {peak.fmt(1)} GFLOP/s; fp32 training reaches "
        f"{share:.0%} of it (matmul FLOPs of the padded shapes, backward counted as 2× forward)."
    )
    fp32, bf16 = loss_agreement(config, make_batch(config, batch_size, mean_len), 3 if quick else 30)
    gap = max(abs(a - b) for a, b in zip(fp32, bf16, strict=True))
    section.notes.append(
        f"Loss of {len(fp32)} visformer steps on one batch, fp32 vs bf16 autocast from the same weights and "
        f"dropout seed: {fp32[0]:.3f} → {fp32[-1]:.3f} vs {bf16[0]:.3f} → {bf16[-1]:.3f}; largest gap at any "
        f"step {gap:.3f}."
    )
    return section


CATEGORIES = {  # profiler op name -> category of the training-step breakdown
    "aten::mm": "matmul",
    "aten::addmm": "matmul",
    "aten::bmm": "matmul",
    "aten::baddbmm": "matmul",
    "aten::bernoulli_": "dropout masks",
    "aten::_log_softmax": "log-softmax over the vocabulary",
    "aten::_log_softmax_backward_data": "log-softmax over the vocabulary",
}


def profile_breakdown(step: Callable[[], float], steps: int = 3) -> dict[str, float]:
    """Share of CPU self time per category over `steps` training steps (one thread)."""
    from torch.profiler import ProfilerActivity, profile

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                step()
    finally:
        torch.set_num_threads(threads)
    shares: dict[str, float] = {}
    for event in prof.key_averages():
        category = CATEGORIES.get(event.key, "everything else")
        shares[category] = shares.get(category, 0.0) + event.self_cpu_time_total
    total = sum(shares.values())
    return {k: v / total for k, v in sorted(shares.items(), key=lambda kv: -kv[1])}


def run_profile(config: ModelConfig, quick: bool = False) -> Section:
    """Where a training step's time goes, for visformer and the peer (torch profiler, one thread)."""
    batch = make_batch(config, 4, 6) if quick else make_batch(config, 64, 20)
    torch.manual_seed(0)
    ours, peer = Transformer(config).train(), PeerModel(config).train()
    breakdown = {
        "visformer": profile_breakdown(train_step_fn(ours, visformer_logits(ours), batch, config.pad_id)),
        "nn.Transformer": profile_breakdown(train_step_fn(peer, peer, batch, config.pad_id)),
    }
    categories = list(dict.fromkeys(c for shares in breakdown.values() for c in shares))
    section = Section(
        title="Training profile",
        intro=(
            "Share of CPU self time per kind of operation in 3 training steps (torch.profiler, one thread, "
            "same batch as the throughput table). What both models spend most of their time on bounds "
            "any speed-up one can have over the other."
        ),
        header=["operation", *breakdown],
        rows=[[c, *(f"{shares.get(c, 0.0):.0%}" for shares in breakdown.values())] for c in categories],
    )
    matmul = breakdown["nn.Transformer"].get("matmul", 0.0)
    section.notes.append(
        f"Both models run the same matmuls (same sizes, same FLOPs). With matmul at {matmul:.0%} of the peer's "
        f"step, even a visformer with zero other overhead would be at most {1 / max(matmul, 1e-9):.2f}× faster."
    )
    return section
