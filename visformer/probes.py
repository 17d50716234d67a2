"""Attention snapshots during training: fixed probe sentences, their attention at scheduled steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .architectures import architecture
from .config import TrainConfig
from .data import encode_example, make_batch
from .model import AttentionMaps
from .models import Model
from .records import Snapshot
from .tokenizer import Tokenizer


def snapshot_schedule(config: TrainConfig) -> list[int]:
    """Steps at which attention snapshots are taken: explicit, every N, or log-spaced."""
    if config.snapshot_steps:
        return sorted({s for s in config.snapshot_steps if 1 <= s <= config.steps})
    if config.snapshot_every > 0:
        return list(range(config.snapshot_every, config.steps + 1, config.snapshot_every))
    n = config.n_snapshots
    if n <= 0:
        return []
    if n == 1:
        return [config.steps]
    ratio = config.steps ** (1 / (n - 1))
    return sorted({min(config.steps, max(1, round(ratio**i))) for i in range(n)} | {config.steps})


class ProbeRecorder:
    """Takes the trainer's attention snapshots: the probes' teacher-forced attention at the scheduled steps."""

    def __init__(
        self,
        model: Model,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        valid_examples: Sequence[Any],
        config: TrainConfig,
        translate: Callable[[Sequence[str]], list[str]],
    ) -> None:
        self.model, self.src_tok, self.tgt_tok, self.translate = model, src_tok, tgt_tok, translate
        self.valid_examples = list(valid_examples)
        self.schedule = set(snapshot_schedule(config))
        self.probes = self._choose_probes(config)
        self.snapshots: list[Snapshot] = []
        self.overhead_s = 0.0

    def _choose_probes(self, config: TrainConfig) -> list[tuple[str, str]]:
        """Fixed probe (source, target) pairs: config.probes, else short validation pairs (none for a language model)."""
        n = config.n_probes
        if not architecture(self.model.config.architecture).translates:
            return []
        if config.probes:
            return [(p, "") for p in config.probes[:n]]
        short = [ex for ex in self.valid_examples if 3 <= len(self.src_tok.encode(ex.src)) <= 16]
        pool = short or list(self.valid_examples)
        return [(ex.src, ex.tgt) for ex in pool[:n]]

    @torch.no_grad()
    def probe_attention(self) -> tuple[AttentionMaps, list[str]]:
        """Teacher-forced attention (float16, on CPU) of the probes, and the targets used."""
        s, t = self.src_tok, self.tgt_tok
        sources = [p for p, _ in self.probes]
        targets = [ref for _, ref in self.probes]
        if not all(targets):
            targets = self.translate(sources)
        n = self.model.config.max_len
        pairs = [encode_example(s, t, a, b, n) for a, b in zip(sources, targets, strict=True)]
        batch = make_batch(pairs, t.pad_id, t.bos_id, t.eos_id)
        device = next(self.model.parameters()).device
        self.model.eval()
        out = self.model(batch.src.to(device), batch.tgt_in.to(device), need_weights=True)
        maps = out.attention
        half = AttentionMaps(
            [m.detach().to("cpu", torch.float16) for m in maps.encoder],
            [m.detach().to("cpu", torch.float16) for m in maps.decoder],
            [m.detach().to("cpu", torch.float16) for m in maps.cross],
        )
        return half, targets

    def take(self, step: int, loss: float) -> None:
        """Record the probes' attention at `step`."""
        if not self.probes:
            return
        t0 = time.perf_counter()
        was_training = self.model.training
        maps, targets = self.probe_attention()
        self.model.train(was_training)
        self.snapshots.append(Snapshot(step, loss, [p for p, _ in self.probes], maps, targets))
        self.overhead_s += time.perf_counter() - t0
