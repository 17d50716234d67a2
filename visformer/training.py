"""Training with the paper's recipe: Adam(0.9, 0.98, 1e-9), the Noam schedule, label smoothing.

`Trainer.run()` is the one metrics stream: it yields `StepMetrics` every `log_every` steps and
`EvalMetrics` every `eval_every` steps; the CLI prints it and the Train page draws it.
Shapes: B batch, S source length, T target length, V vocabulary, h heads.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from .config import TrainConfig
from .data import batches, encode_pairs
from .decoding import forget_weights
from .evaluation import Evaluator, LossFn
from .models import Model
from .probes import ProbeRecorder
from .records import EvalMetrics, Snapshot, StepMetrics
from .tokenizer import Tokenizer
from .utils import autocast_dtype, resolve_device, seed_everything, torch_threads

# ---------------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (section 5.3)."""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the model keeps the weights of the last good step."""


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------


def _distributed() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside torch.distributed."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _averaged(model: nn.Module, decay: float) -> AveragedModel | None:
    """An exponential moving average of the model's weights (and buffers) with this decay per step; None for 0."""
    if decay <= 0:
        return None
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)


class Trainer:
    """Trains a model on text pairs; `run()` yields the metrics stream.

    The objective is the translation's cross-entropy with label smoothing unless `loss` gives another (a
    language model's: `visformer.models.lm_objective`, trained on (text, text) pairs).
    """

    def __init__(
        self,
        model: Model,
        train_examples: Sequence[Any],
        valid_examples: Sequence[Any],
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        config: TrainConfig,
        task: str | None = None,
        loss: LossFn | None = None,
    ) -> None:
        self.config = config
        self.objective: LossFn = loss or self._loss
        self.task = task
        self.src_tok, self.tgt_tok = src_tok, tgt_tok
        self.device = resolve_device(config.device)
        self.model = model.to(self.device)
        # None = fp32; the weights stay fp32 either way
        self.autocast = autocast_dtype(config.precision, self.device, model.config.d_model)
        self.rank, self.world_size = _distributed()
        max_len = model.config.max_len
        self.train_pairs = encode_pairs(train_examples, src_tok, tgt_tok, max_len)
        if not self.train_pairs:
            raise ValueError("no training pairs left: check the data and max_len")
        self.average = _averaged(self.model, config.weight_average)
        scored = (
            self.average.module if self.average is not None else self.model
        )  # what is evaluated and saved
        self.evaluator = Evaluator(
            scored, src_tok, tgt_tok, valid_examples, self.objective, config.max_tokens, config.eval_examples
        )
        self.recorder = ProbeRecorder(
            scored,
            src_tok,
            tgt_tok,
            self.evaluator.valid_examples,
            config,
            self.evaluator.translate_texts,
        )
        self.step = 0
        self.elapsed_s = 0.0
        self.history: list[StepMetrics] = []
        self._stop = threading.Event()
        self._optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=noam_lr(1, model.config.d_model, config.warmup, config.lr_factor),
            betas=config.betas,
            eps=config.eps,
            fused=self.device.type
            in ("cpu", "cuda"),  # one kernel for all parameters: 5× faster on a toy model
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
        """Learning rate of `step`: Noam's, ramped up again after a resume without Adam state, annealed in a cooldown."""
        c = self.config
        lr = noam_lr(step, self.model.config.d_model, c.warmup, c.lr_factor)
        if self._rewarm is not None:
            start, length = self._rewarm
            lr *= min(1.0, max(step - start, 1) / length)
        if c.cooldown:
            lr *= min(1.0, max(c.steps - step, 0) / c.cooldown)  # 1 before the cooldown, 0 at the last step
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
        self.evaluator.evals = [
            EvalMetrics(**{**m, "samples": [tuple(s) for s in m.get("samples", [])]})
            for m in metrics.get("evals", [])
        ]
        self.recorder.snapshots = list(snapshots)
        self.recorder.overhead_s = float(metrics.get("snapshot_overhead_s", 0.0))
        self.evaluator.overhead_s = float(metrics.get("eval_overhead_s", 0.0))
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
        """The default objective: summed cross-entropy of a translation batch and its number of target tokens."""
        src, tgt_in, tgt_out = (t.to(self.device) for t in (batch.src, batch.tgt_in, batch.tgt_out))
        dtype = self.autocast or torch.bfloat16
        with torch.autocast(self.device.type, dtype=dtype, enabled=self.autocast is not None):
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
        """Train for config.steps steps (or until stop()/time limit), yielding metrics as it goes.

        config.threads holds only while the run goes on: the caller's torch thread count is restored after.
        """
        with torch_threads(self.config.threads):
            yield from self._steps()

    def _steps(self) -> Iterator[StepMetrics | EvalMetrics]:
        """The training loop behind run()."""
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
            loss_sum, n_tokens = self.objective(model, batch, c.label_smoothing)
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
            forget_weights(self.model)  # the fused step does not bump version counters: decode afresh
            if self.average is not None:
                self.average.update_parameters(self.model)
            self.step = step
            window_loss += loss.item() * n_tokens
            window_tokens += n_tokens
            window_seen += int((batch.src != self.src_tok.pad_id).sum()) + n_tokens
            if step in self.recorder.schedule:
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
        if (
            self.step
            and self.recorder.schedule
            and (not self.snapshots or self.snapshots[-1].step != self.step)
        ):
            self._take_snapshot(self.history[-1].loss if self.history else float("nan"))  # the final state
        if self.average is not None and self.average.n_averaged > 0:
            self.model.load_state_dict(
                self.average.module.state_dict()
            )  # the averaged weights are the result
        self.elapsed_s = time.perf_counter() - started
        self.model.eval()

    # -- evaluation ---------------------------------------------------------------------------

    # -- evaluation and snapshots (collaborators: evaluation.Evaluator, probes.ProbeRecorder) ---

    def evaluate(self) -> EvalMetrics:
        """Valid loss plus BLEU/chrF (corpora) or exact match/alignment score (tasks) at the current step."""
        return self.evaluator.evaluate(self.step, self.elapsed_s)

    def _take_snapshot(self, loss: float) -> None:
        """Record the probes' attention at the current step (rank 0 only)."""
        if self.rank == 0:
            self.recorder.take(self.step, loss)

    @property
    def valid_examples(self) -> list[Any]:
        """Held-out examples (those with a source)."""
        return self.evaluator.valid_examples

    @property
    def evals(self) -> list[EvalMetrics]:
        """Every evaluation so far."""
        return self.evaluator.evals

    @property
    def snapshots(self) -> list[Snapshot]:
        """Every attention snapshot so far."""
        return self.recorder.snapshots

    @property
    def eval_overhead_s(self) -> float:
        """Seconds spent evaluating."""
        return self.evaluator.overhead_s

    @property
    def snapshot_overhead_s(self) -> float:
        """Seconds spent taking snapshots."""
        return self.recorder.overhead_s

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
