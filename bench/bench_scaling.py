"""Scaling: inference time and memory against sentence length, training time against model size."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch
from torch.profiler import ProfilerActivity, profile

from visformer.config import ModelConfig
from visformer.model import Transformer

from .bench_training import make_batch, train_step_fn, visformer_logits
from .common import Section, Stat, time_call

SIZES = [  # (name, d_model, heads, layers per side, d_ff)
    ("small", 128, 4, 2, 512),
    ("shipped", 256, 4, 3, 1024),
    ("base-width", 512, 8, 3, 2048),
    ("paper base", 512, 8, 6, 2048),
]


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's C++ start/stop lines) for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_tensor_mib(fn: Callable[[], object]) -> float:
    """Peak bytes of tensors alive at once while fn runs (MiB), beyond what existed before it.

    torch.profiler(profile_memory=True) records every CPU allocation and free with its size and time;
    the running sum over them in time order is the memory held by tensors created inside fn (activations,
    attention maps, logits; not the weights), and its maximum is the peak that fn needs.
    """
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    held = peak = 0
    for _, nbytes in events:
        held += nbytes
        peak = max(peak, held)
    return peak / 2**20


def forward_fn(model: Transformer, length: int, need_weights: bool):
    """A no-grad teacher-forced forward pass over a source and target of `length` tokens (batch 1)."""
    src = torch.randint(4, model.config.src_vocab_size, (1, length))
    tgt = torch.randint(4, model.config.tgt_vocab_size, (1, length))

    @torch.no_grad()
    def run() -> None:
        model(src, tgt, need_weights=need_weights)

    return run


def length_scaling(config: ModelConfig, lengths: list[int], repeats: int) -> Section:
    """Forward time and peak memory for sentence lengths, with and without returning attention maps."""
    torch.manual_seed(0)
    model = Transformer(replace(config, max_len=max(config.max_len, max(lengths)))).eval()
    section = Section(
        title="Scaling: sentence length",
        intro=(
            f"One no-grad forward pass (encode + teacher-forced decode, batch 1, source and target of L "
            f"tokens) of the shipped-size model; fast path (SDPA) and with every attention map returned "
            f"(`need_weights=True`, what the app draws). Time in ms, median (min–max) of {repeats}; "
            "memory is the peak of tensor bytes alive at once during the pass beyond the weights (activations, "
            "attention maps, logits over the vocabulary), from the allocation and free events that "
            "`torch.profiler` records with `profile_memory=True`: exact and independent of how the C allocator "
            "reuses freed pages (the resident-set high-water mark of a process does not move for these sizes)."
        ),
        header=[
            "L",
            "fast path ms",
            "with attention maps ms",
            "ms / token",
            "peak MiB (fast)",
            "peak MiB (maps)",
        ],
    )
    for length in lengths:
        fast, maps = forward_fn(model, length, False), forward_fn(model, length, True)
        mem_fast, mem_maps = peak_tensor_mib(fast), peak_tensor_mib(maps)
        t_fast = Stat.of(time_call(fast, repeats)).scaled(1e3)
        t_maps = Stat.of(time_call(maps, repeats)).scaled(1e3)
        section.rows.append(
            [
                str(length),
                t_fast.fmt(2),
                t_maps.fmt(2),
                f"{t_fast.median / length:.3f}",
                f"{mem_fast:.3g}",
                f"{mem_maps:.3g}",
            ]
        )
    return section


def size_scaling(
    base: ModelConfig,
    sizes: list[tuple[str, int, int, int, int]],
    batch_size: int,
    mean_len: int,
    repeats: int,
) -> Section:
    """Training-step time (forward, backward, Adam) for growing model sizes on the same batch."""
    section = Section(
        title="Scaling: model size",
        intro=(
            f"One training step (forward, label-smoothed cross-entropy, backward, Adam) on a padded batch "
            f"of {batch_size} sentences of ~{mean_len} tokens, vocabulary {base.tgt_vocab_size}. "
            f"Median (min–max) of {repeats}. Peak MiB: tensor bytes alive at once during one step beyond the "
            "weights and Adam's state (activations kept for backward, gradients), measured like the length "
            "table's memory."
        ),
        header=[
            "model",
            "d_model / heads / layers / d_ff",
            "parameters",
            "step ms",
            "target tok/s",
            "peak MiB",
        ],
    )
    for name, d, h, n, f in sizes:
        config = replace(base, d_model=d, n_heads=h, n_encoder_layers=n, n_decoder_layers=n, d_ff=f)
        torch.manual_seed(0)
        model = Transformer(config).train()
        batch = make_batch(config, batch_size, mean_len)
        step = train_step_fn(model, visformer_logits(model), batch, config.pad_id)
        t = Stat.of(time_call(step, repeats, warmup=1))
        peak = peak_tensor_mib(step)  # after the warm-up: Adam's state exists already
        section.rows.append(
            [
                name,
                f"{d} / {h} / {n}+{n} / {f}",
                f"{model.num_parameters() / 1e6:.1f} M",
                t.scaled(1e3).fmt(0),
                t.inverse(batch.n_tgt_tokens).fmt(0),
                f"{peak:.0f}",
            ]
        )
    return section


def run(config: ModelConfig, quick: bool = False) -> list[Section]:
    """Both scaling sections; quick mode uses two short lengths and tiny sizes."""
    if quick:
        tiny_sizes = [("tiny", config.d_model, config.n_heads, 1, config.d_ff)]
        return [length_scaling(config, [8, 16], 2), size_scaling(config, tiny_sizes, 4, 6, 2)]
    return [
        length_scaling(config, [8, 16, 32, 64, 128, 256], 5),
        size_scaling(config, SIZES, 32, 20, 3),
    ]
