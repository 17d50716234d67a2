"""Scaling: inference time and memory against sentence length, training time against model size."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import torch

from visformer.config import ModelConfig
from visformer.model import Transformer

from .bench_training import make_batch, train_step_fn, visformer_logits
from .common import Section, Stat, time_call

ROOT = Path(__file__).resolve().parents[1]
SIZES = [  # (name, d_model, heads, layers per side, d_ff)
    ("small", 128, 4, 2, 512),
    ("shipped", 256, 4, 3, 1024),
    ("base-width", 512, 8, 3, 2048),
    ("paper base", 512, 8, 6, 2048),
]


def rss_growth_mib(config: ModelConfig, lengths: list[int], need_weights: bool) -> dict[int, float]:
    """Peak resident memory above the loaded model (MiB) of a forward pass at each length.

    Measured in a fresh process, lengths in increasing order: the process's RSS high-water mark
    after length L minus the mark after a tiny warm-up pass is the extra memory L needs.
    """
    cmd = [
        sys.executable,
        "-m",
        "bench.bench_scaling",
        config.to_json(),
        str(int(need_weights)),
        *map(str, lengths),
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=True)
    return {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def _max_rss_mib() -> float:
    """This process's resident-memory high-water mark in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measure_rss(config: ModelConfig, need_weights: bool, lengths: list[int]) -> dict[int, float]:
    """Child-process side of rss_growth_mib."""
    torch.manual_seed(0)
    model = Transformer(config).eval()
    forward_fn(model, 4, need_weights)()
    base = _max_rss_mib()
    growth = {}
    for length in sorted(lengths):
        forward_fn(model, length, need_weights)()
        growth[length] = _max_rss_mib() - base
    return growth


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
            "memory is the growth of the resident high-water mark over the loaded model, measured in a fresh process."
        ),
        header=["L", "fast path ms", "with attention maps ms", "ms / token", "+MiB (fast)", "+MiB (maps)"],
    )
    mem_fast, mem_maps = (rss_growth_mib(model.config, lengths, flag) for flag in (False, True))
    for length in lengths:
        fast, maps = forward_fn(model, length, False), forward_fn(model, length, True)
        t_fast = Stat.of(time_call(fast, repeats)).scaled(1e3)
        t_maps = Stat.of(time_call(maps, repeats)).scaled(1e3)
        section.rows.append(
            [
                str(length),
                t_fast.fmt(2),
                t_maps.fmt(2),
                f"{t_fast.median / length:.3f}",
                f"{mem_fast[length]:.1f}",
                f"{mem_maps[length]:.1f}",
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
            f"Median (min–max) of {repeats}."
        ),
        header=["model", "d_model / heads / layers / d_ff", "parameters", "step ms", "target tok/s"],
    )
    for name, d, h, n, f in sizes:
        config = replace(base, d_model=d, n_heads=h, n_encoder_layers=n, n_decoder_layers=n, d_ff=f)
        torch.manual_seed(0)
        model = Transformer(config).train()
        batch = make_batch(config, batch_size, mean_len)
        step = train_step_fn(model, visformer_logits(model), batch, config.pad_id)
        t = Stat.of(time_call(step, repeats, warmup=1))
        section.rows.append(
            [
                name,
                f"{d} / {h} / {n}+{n} / {f}",
                f"{model.num_parameters() / 1e6:.1f} M",
                t.scaled(1e3).fmt(0),
                t.inverse(batch.n_tgt_tokens).fmt(0),
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


if __name__ == "__main__":  # child process of rss_growth_mib: config json, need_weights 0/1, lengths...
    cfg, flag, *lens = sys.argv[1:]
    print(json.dumps(_measure_rss(ModelConfig.from_json(cfg), bool(int(flag)), [int(n) for n in lens])))
