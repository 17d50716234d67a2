"""Training with the paper's recipe: Adam(0.9, 0.98, 1e-9), the Noam schedule, label smoothing.

`Trainer.run()` is the one metrics stream: it yields `StepMetrics` every `log_every` steps and
`EvalMetrics` every `eval_every` steps; the CLI prints it and the Train page draws it.
Shapes: B batch, S source length, T target length, V vocabulary, h heads.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .data import Batch, batch_by_tokens, encode_pairs, make_batch
from .decoding import beam_search, greedy
from .model import AttentionMaps, Transformer
from .tasks import alignment_score, exact_match
from .tokenizer import Tokenizer
from .utils import resolve_device, seed_everything

# ---------------------------------------------------------------------------------------------
# Configuration and schedule
# ---------------------------------------------------------------------------------------------


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

    def __post_init__(self) -> None:
        """Reject settings the trainer cannot run with."""
        for name in ("steps", "max_tokens", "warmup", "log_every", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lr_factor <= 0:
            raise ValueError(f"lr_factor must be positive, got {self.lr_factor}")
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
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown TrainConfig keys: {', '.join(unknown)}")
        return cls(**data)

    def to_json(self) -> str:
        """Serialise to JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        """Parse from JSON."""
        return cls.from_dict(json.loads(text))


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (section 5.3)."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


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


# ---------------------------------------------------------------------------------------------
# The metrics stream
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepMetrics:
    """Progress after a training step (loss averaged since the previous report)."""

    step: int
    loss: float
    lr: float
    tokens_per_s: float
    elapsed_s: float


@dataclass(frozen=True)
class EvalMetrics:
    """Validation after a step: loss always, BLEU/chrF for corpora, exact match/alignment for tasks."""

    step: int
    valid_loss: float
    bleu: float | None = None
    chrf: float | None = None
    exact_match: float | None = None
    alignment_score: float | None = None
    samples: list[tuple[str, str, str]] = field(default_factory=list)  # (source, reference, output)
    elapsed_s: float = 0.0


@dataclass
class Snapshot:
    """Attention maps of the fixed probe sentences at one training step (float16, B = probes)."""

    step: int
    loss: float
    probes: list[str]  # source texts
    attention: AttentionMaps
    targets: list[str] = field(default_factory=list)  # target texts fed with teacher forcing


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the model keeps the weights of the last good step."""


# ---------------------------------------------------------------------------------------------
# Data plumbing
# ---------------------------------------------------------------------------------------------


def batches(
    examples: Sequence[tuple[list[int], list[int]]],
    max_tokens: int,
    tok: Tokenizer,
    shuffle: bool,
    seed: int,
) -> Iterator[Batch]:
    """One epoch of token-budget batches with the tokenizer's special ids."""
    return batch_by_tokens(list(examples), max_tokens, tok.pad_id, tok.bos_id, tok.eos_id, shuffle, seed)


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------


def corpus_scores(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    """sacreBLEU (cased, 13a) and chrF of detokenised hypotheses against one reference each."""
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    return float(bleu), float(chrf)


def best_head_alignment(cross: list[Tensor], alignments: list[list[int]]) -> float:
    """Alignment score of the best cross-attention head; cross: per layer (B, h, T, S), teacher-forced."""
    scores = [
        alignment_score(layer[:, h : h + 1], alignments) for layer in cross for h in range(layer.shape[1])
    ]
    scores = [x for x in scores if not math.isnan(x)]
    return max(scores) if scores else 0.0


@torch.no_grad()
def translate_batch(
    model: Transformer,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    texts: Sequence[str],
    beam_size: int = 1,
) -> list[str]:
    """Translate one batch of texts: greedy (beam_size 1) or beam search from visformer.decoding."""
    room = model.config.max_len - 1  # one position for eos
    pairs = [(src_tok.encode(text)[:room], []) for text in texts]
    src = make_batch(pairs, src_tok.pad_id, tgt_tok.bos_id, src_tok.eos_id).src  # (B, S)
    src = src.to(next(model.parameters()).device)
    ids = dict(max_len=2 * src.shape[1] + 10, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id, n_candidates=0)
    if beam_size <= 1:
        result = greedy(model, src, **ids)
    else:
        result = beam_search(model, src, beam_size=beam_size, n_best=1, **ids)
    return [tgt_tok.decode(o.tokens) for o in result.outputs]


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------


def _distributed() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside torch.distributed."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Trainer:
    """Trains a Transformer on text pairs; `run()` yields the metrics stream."""

    def __init__(
        self,
        model: Transformer,
        train_examples: Sequence[Any],
        valid_examples: Sequence[Any],
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        config: TrainConfig,
        task: str | None = None,
    ) -> None:
        if config.threads:
            torch.set_num_threads(config.threads)
        self.config = config
        self.task = task
        self.src_tok, self.tgt_tok = src_tok, tgt_tok
        self.device = resolve_device(config.device)
        self.model = model.to(self.device)
        self.rank, self.world_size = _distributed()
        max_len = model.config.max_len
        self.train_pairs = encode_pairs(train_examples, src_tok, tgt_tok, max_len)
        if not self.train_pairs:
            raise ValueError("no training pairs left: check the data and max_len")
        self.valid_examples = [ex for ex in valid_examples if ex.src]
        self.valid_pairs = encode_pairs(self.valid_examples, src_tok, tgt_tok, max_len)
        self.step = 0
        self.elapsed_s = 0.0
        self.history: list[StepMetrics] = []
        self.evals: list[EvalMetrics] = []
        self.snapshots: list[Snapshot] = []
        self.snapshot_overhead_s = 0.0
        self.eval_overhead_s = 0.0
        self._stop = threading.Event()
        self._schedule = set(snapshot_schedule(config))
        self.probes = self._choose_probes()
        self._optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=noam_lr(1, model.config.d_model, config.warmup, config.lr_factor),
            betas=config.betas,
            eps=config.eps,
        )
        self._rewarm: tuple[int, int] | None = None  # (resumed step, ramp length) without Adam moments

    # -- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the run to end after the current step (safe to call from another thread)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Whether stop() was called."""
        return self._stop.is_set()

    def lr(self, step: int) -> float:
        """Learning rate of `step` under the Noam schedule (ramped up again after a resume without Adam state)."""
        c = self.config
        lr = noam_lr(step, self.model.config.d_model, c.warmup, c.lr_factor)
        if self._rewarm is not None:
            start, length = self._rewarm
            lr *= min(1.0, max(step - start, 1) / length)
        return lr

    # -- resuming -----------------------------------------------------------------------------

    def optimizer_tensors(self) -> dict[str, Tensor]:
        """Adam's per-parameter state as flat tensors ("{index}.{name}"), for safetensors."""
        state = self._optimizer.state_dict()["state"]
        return {
            f"{i}.{name}": value.detach().cpu().reshape(value.shape).contiguous().clone()
            for i, entry in state.items()
            for name, value in entry.items()
            if isinstance(value, Tensor)
        }

    def load_optimizer_tensors(self, tensors: dict[str, Tensor]) -> None:
        """Restore Adam's state from optimizer_tensors(); ValueError if it does not fit the model."""
        current = self._optimizer.state_dict()
        n_params = len(current["param_groups"][0]["params"])
        state: dict[int, dict[str, Tensor]] = {}
        for key, value in tensors.items():
            index, _, name = key.partition(".")
            if not index.isdigit() or int(index) >= n_params or name not in ("step", "exp_avg", "exp_avg_sq"):
                raise ValueError(f"optimizer state has an unexpected tensor {key!r}")
            state.setdefault(int(index), {})[name] = value
        params = list(self.model.parameters())
        for index, entry in state.items():
            if entry.get("exp_avg") is not None and entry["exp_avg"].shape != params[index].shape:
                raise ValueError(f"optimizer state {index} has shape {tuple(entry['exp_avg'].shape)}")
        self._optimizer.load_state_dict({"state": state, "param_groups": current["param_groups"]})

    def restore(
        self,
        metrics: dict[str, Any],
        snapshots: Sequence[Snapshot] = (),
        optimizer: dict[str, Tensor] | None = None,
        rewarm_steps: int = 200,
    ) -> None:
        """Continue a saved run: its step, clock, history, evaluations, snapshots and Adam state.

        Without Adam's moments the first updates would be sign-sized jumps, so the learning rate is
        ramped up linearly again over `rewarm_steps` steps.
        """
        self.step = int(metrics.get("steps", 0))
        self.elapsed_s = float(metrics.get("train_time_s", 0.0))
        self.history = [StepMetrics(**m) for m in metrics.get("history", [])]
        self.evals = [EvalMetrics(**{**m, "samples": [tuple(s) for s in m.get("samples", [])]})
                      for m in metrics.get("evals", [])]  # fmt: skip
        self.snapshots = list(snapshots)
        self.snapshot_overhead_s = float(metrics.get("snapshot_overhead_s", 0.0))
        self.eval_overhead_s = float(metrics.get("eval_overhead_s", 0.0))
        if optimizer:
            self.load_optimizer_tensors(optimizer)
            self._rewarm = None
        else:
            self._rewarm = (self.step, max(1, rewarm_steps))

    # -- the loop -----------------------------------------------------------------------------

    def _batch_stream(self) -> Iterator[Any]:
        """Endless batches, reshuffled every epoch; under DDP each rank takes every world-th batch.

        A resumed run skips the batches its first `step` steps used, so it sees what an uninterrupted run would.
        """
        epoch, skip = 0, self.step
        tok = self.tgt_tok
        while True:
            seed = self.config.seed + epoch
            for i, batch in enumerate(batches(self.train_pairs, self.config.max_tokens, tok, True, seed)):
                if i % self.world_size == self.rank:
                    if skip:
                        skip -= 1
                        continue
                    yield batch
            epoch += 1

    def _loss(self, model: nn.Module, batch: Any, smoothing: float) -> tuple[Tensor, int]:
        """Summed cross-entropy of a batch and its number of target tokens."""
        src, tgt_in, tgt_out = (t.to(self.device) for t in (batch.src, batch.tgt_in, batch.tgt_out))
        use_bf16 = self.device.type == "cuda"
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(src, tgt_in).logits  # (B, T, V)
        loss = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]),
            tgt_out.reshape(-1),
            ignore_index=self.tgt_tok.pad_id,
            label_smoothing=smoothing,
            reduction="sum",
        )
        return loss, int(batch.n_tgt_tokens)

    def _wrapped(self) -> nn.Module:
        """The model, wrapped in DistributedDataParallel when running under torchrun."""
        if self.world_size == 1:
            return self.model
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(self.model, device_ids=ids)

    def _should_stop(self, started: float) -> bool:
        """Stop flag or time limit (counted from `started`, this call of run()); agreed across DDP ranks."""
        limit = self.config.time_limit_s
        stop = self.stopped or (limit is not None and time.perf_counter() - started >= limit)
        if self.world_size > 1:
            import torch.distributed as dist

            flag = torch.tensor([float(stop)], device=self.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            stop = bool(flag.item())
        return stop

    def run(self) -> Iterator[StepMetrics | EvalMetrics]:
        """Train for config.steps steps (or until stop()/time limit), yielding metrics as it goes."""
        c = self.config
        seed_everything(c.seed + self.rank)
        model = self._wrapped()
        run_started = time.perf_counter()
        started = run_started - self.elapsed_s  # a resumed run's clock continues
        stream = self._batch_stream()
        window_loss, window_tokens, window_seen, window_start = 0.0, 0, 0, time.perf_counter()
        while self.step < c.steps and not self._should_stop(run_started):
            self.model.train()
            batch = next(stream)
            step = self.step + 1
            for group in self._optimizer.param_groups:
                group["lr"] = self.lr(step)
            loss_sum, n_tokens = self._loss(model, batch, c.label_smoothing)
            loss = loss_sum / max(n_tokens, 1)
            self._optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(
                self.model.parameters(), c.clip_norm if c.clip_norm > 0 else math.inf
            )
            if not (math.isfinite(loss.item()) and math.isfinite(float(norm))):
                self._optimizer.zero_grad(set_to_none=True)
                raise TrainingDiverged(
                    f"the loss became {loss.item()} at step {step}; the model keeps the weights of step "
                    f"{self.step}. Try a smaller lr_factor or a longer warmup."
                )
            self._optimizer.step()
            self.step = step
            window_loss += loss.item() * n_tokens
            window_tokens += n_tokens
            window_seen += int((batch.src != self.src_tok.pad_id).sum()) + n_tokens
            if step in self._schedule:
                self._take_snapshot(loss.item())
            if step % c.log_every == 0 or step == c.steps:
                now = time.perf_counter()
                self.elapsed_s = now - started
                metrics = StepMetrics(
                    step,
                    window_loss / max(window_tokens, 1),
                    self.lr(step),
                    window_seen / max(now - window_start, 1e-9),
                    self.elapsed_s,
                )
                self.history.append(metrics)
                yield metrics
                window_loss, window_tokens, window_seen, window_start = 0.0, 0, 0, time.perf_counter()
            if step % c.eval_every == 0 and self.rank == 0:
                metrics = self.evaluate()
                yield metrics
                target = c.stop_at_exact_match
                if target is not None and metrics.exact_match is not None and metrics.exact_match >= target:
                    self.stop()
                window_start = time.perf_counter()
        if self.step and self._schedule and (not self.snapshots or self.snapshots[-1].step != self.step):
            self._take_snapshot(self.history[-1].loss if self.history else float("nan"))  # the final state
        self.elapsed_s = time.perf_counter() - started
        self.model.eval()

    # -- evaluation ---------------------------------------------------------------------------

    @torch.no_grad()
    def valid_loss(self) -> float:
        """Per-token cross-entropy (no smoothing) on the validation pairs."""
        if not self.valid_pairs:
            return float("nan")
        self.model.eval()
        tok = self.tgt_tok
        total, count = 0.0, 0
        for batch in batches(self.valid_pairs, self.config.max_tokens, tok, False, 0):
            loss, n = self._loss(self.model, batch, 0.0)
            total, count = total + loss.item(), count + n
        return total / max(count, 1)

    def translate_texts(self, texts: Sequence[str], batch_size: int = 64) -> list[str]:
        """Greedy translations of source texts (for evaluation and samples)."""
        self.model.eval()
        out: list[str] = []
        for i in range(0, len(texts), batch_size):
            out += translate_batch(self.model, self.src_tok, self.tgt_tok, texts[i : i + batch_size])
        return out

    def evaluate(self) -> EvalMetrics:
        """Valid loss plus BLEU/chrF (corpora) or exact match/alignment score (tasks)."""
        t0 = time.perf_counter()
        examples = self.valid_examples[: self.config.eval_examples]
        loss = self.valid_loss()
        hyps = self.translate_texts([ex.src for ex in examples]) if examples else []
        refs = [ex.tgt for ex in examples]
        bleu = chrf = exact = align = None
        if examples and hasattr(examples[0], "alignment"):
            exact = exact_match(hyps, refs)
            align = self._alignment_score(examples)
        elif examples:
            bleu, chrf = corpus_scores(hyps, refs)
        samples = [(ex.src, ex.tgt, h) for ex, h in zip(examples[:3], hyps[:3], strict=False)]
        self.eval_overhead_s += time.perf_counter() - t0
        metrics = EvalMetrics(self.step, loss, bleu, chrf, exact, align, samples, self.elapsed_s)
        self.evals.append(metrics)
        return metrics

    @torch.no_grad()
    def _alignment_score(self, examples: Sequence[Any]) -> float:
        """Alignment accuracy of the best cross-attention head on up to 200 task examples."""
        examples = examples[:200]
        pairs = encode_pairs(examples, self.src_tok, self.tgt_tok, self.model.config.max_len)
        if len(pairs) != len(examples):
            return 0.0
        tok = self.tgt_tok
        batch = make_batch(pairs, tok.pad_id, tok.bos_id, tok.eos_id)
        out = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device), need_weights=True)
        cross = [c.float().cpu() for c in out.attention.cross]
        # decoder query j (input [bos] + tokens) is the one that predicts target token j
        return best_head_alignment(cross, [ex.alignment for ex in examples])

    # -- attention snapshots ------------------------------------------------------------------

    def _choose_probes(self) -> list[tuple[str, str]]:
        """Fixed probe (source, target) pairs: config.probes, else short validation pairs."""
        n = self.config.n_probes
        if self.config.probes:
            return [(p, "") for p in self.config.probes[:n]]
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
            targets = self.translate_texts(sources)
        max_len = self.model.config.max_len - 1
        pairs = [
            (s.encode(a)[:max_len], t.encode(b)[:max_len]) for a, b in zip(sources, targets, strict=True)
        ]
        batch = make_batch(pairs, t.pad_id, t.bos_id, t.eos_id)
        self.model.eval()
        out = self.model(batch.src.to(self.device), batch.tgt_in.to(self.device), need_weights=True)
        maps = out.attention
        half = AttentionMaps(
            [m.detach().to("cpu", torch.float16) for m in maps.encoder],
            [m.detach().to("cpu", torch.float16) for m in maps.decoder],
            [m.detach().to("cpu", torch.float16) for m in maps.cross],
        )
        return half, targets

    def _take_snapshot(self, loss: float) -> None:
        """Record the probes' attention at the current step (rank 0 only)."""
        if self.rank != 0 or not self.probes:
            return
        t0 = time.perf_counter()
        was_training = self.model.training
        maps, targets = self.probe_attention()
        self.model.train(was_training)
        self.snapshots.append(Snapshot(self.step, loss, [p for p, _ in self.probes], maps, targets))
        self.snapshot_overhead_s += time.perf_counter() - t0

    # -- summary ------------------------------------------------------------------------------

    def metrics_dict(self) -> dict[str, Any]:
        """Everything a checkpoint's metrics.json records about this run."""
        return {
            "steps": self.step,
            "train_time_s": round(self.elapsed_s, 2),
            "snapshot_overhead_s": round(self.snapshot_overhead_s, 3),
            "eval_overhead_s": round(self.eval_overhead_s, 2),
            "history": [asdict(m) for m in self.history],
            "evals": [asdict(m) for m in self.evals],
            "final": asdict(self.evals[-1]) if self.evals else None,
        }
