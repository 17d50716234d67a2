"""Training in the background for the Train page: one worker thread per run, a registry that caps them.

The page never trains inside its own script run. It asks `REGISTRY.start(owner, spec, limits, root)`
for a `Job`; the job's thread builds the data, tokenizer and model, iterates `Trainer.run()`, keeps
the metrics in a lock-protected buffer and finally saves a checkpoint into `root`. The page polls
`job.progress()` (an immutable copy) from a fragment and calls `job.stop()` for a clean early end:
the run finishes its current step and the checkpoint keeps what was learned. What a run is (data,
model size, training config) is described by `visformer.recipes`.

Everything a deployment bounds (model size, steps, wall time, runs at once, torch threads) arrives
as one `visformer.classroom.hosting.HostedLimits` argument and is enforced with `visformer.classroom.inputs`;
the cap on concurrent runs is `hosting.run_slots(limits)`, shared by every session of the process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from .. import recipes
from ..architectures import Family, architecture
from ..checkpoint import safe_checkpoint_dir, save_trainer
from ..config import ModelConfig
from ..data import Pair, read_parallel, read_tsv
from ..models import build_model
from ..recipes import Prepared, RunSpec, model_config, prepare_data
from ..records import EvalMetrics, StepMetrics
from ..training import Trainer, TrainingDiverged
from .hosting import HostedLimits, run_slots
from .inputs import InputError, bounded_train_config, check_model_config, check_session_space

log = logging.getLogger(__name__)


def check_spec(spec: RunSpec, limits: HostedLimits, vocab_size: int) -> int:
    """Refuse a run beyond the limits before anything heavy starts; returns the model's parameter count."""
    bounded_train_config(spec.train, limits)
    return check_config(spec.config(vocab_size, vocab_size), limits)


def check_config(config: ModelConfig, limits: HostedLimits) -> int:
    """check_model_config for any architecture: an RNN's parameters are counted on the meta device."""
    n = check_model_config(config, limits)
    if architecture(config.architecture).family is not Family.RNN:
        return n
    with torch.device("meta"):
        n = sum(p.numel() for p in build_model(config).parameters())
    if n > limits.max_params:
        raise InputError("error.too_many_params", n=n, limit=limits.max_params)
    return n


def build_trainer(spec: RunSpec, limits: HostedLimits, prepared: Prepared) -> Trainer:
    """recipes.build_trainer with the model size, steps, wall time and threads held to the limits."""
    check_config(model_config(spec, prepared), limits)
    return recipes.build_trainer(replace(spec, train=bounded_train_config(spec.train, limits)), prepared)


# ---------------------------------------------------------------------------------------------
# Corpora on disk (uploads are parsed by visformer.classroom.inputs)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiskCorpus:
    """A corpus found on disk: two aligned files (train.en + train.de) or one TSV."""

    name: str
    paths: tuple[Path, ...]


def find_corpora(root: Path) -> list[DiskCorpus]:
    """Aligned file pairs (same stem, two language suffixes) and .tsv files one folder below root."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        files = sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith((".", "_")))
        by_stem: dict[str, list[Path]] = {}
        for f in files:
            if f.suffix == ".tsv":
                found.append(DiskCorpus(f"{folder.name}/{f.name}", (f,)))
            elif len(f.suffix) == 3 and f.suffix[1:].isalpha():  # a two-letter language code
                by_stem.setdefault(f.stem, []).append(f)
        for stem, group in sorted(by_stem.items()):
            if len(group) == 2:
                name = f"{folder.name}/{stem}{group[0].suffix}→{group[1].suffix[1:]}"
                found.append(DiskCorpus(name, (group[0], group[1])))
                found.append(
                    DiskCorpus(
                        f"{folder.name}/{stem}{group[1].suffix}→{group[0].suffix[1:]}", (group[1], group[0])
                    )
                )
    return found


def read_corpus(corpus: DiskCorpus, limits: HostedLimits) -> list[Pair]:
    """The pairs of a corpus on disk (at most limits.max_upload_lines of them)."""
    paths = corpus.paths
    pairs = read_tsv(paths[0]) if len(paths) == 1 else read_parallel(paths[0], paths[1])
    pairs = [p for p in pairs if p.src and p.tgt]
    if not pairs:
        raise ValueError(f"{corpus.name} holds no sentence pairs")
    return pairs[: limits.max_upload_lines]


# ---------------------------------------------------------------------------------------------
# A job: one run in its own thread
# ---------------------------------------------------------------------------------------------

PREPARING, RUNNING, STOPPING, SAVING = "preparing", "running", "stopping", "saving"
DONE, STOPPED, FAILED = "done", "stopped", "failed"
ACTIVE_STATES = (PREPARING, RUNNING, STOPPING, SAVING)
# why a run ended before its last step (Progress.reason): the page words each one
BY_USER, TARGET_REACHED, TIME_LIMIT = "by_user", "target_reached", "time_limit"


@dataclass(frozen=True)
class Progress:
    """An immutable picture of a job for the page to draw."""

    state: str
    step: int
    total_steps: int
    history: tuple[StepMetrics, ...]
    evals: tuple[EvalMetrics, ...]
    message: str = ""
    checkpoint: Path | None = None
    n_parameters: int = 0
    elapsed_s: float = 0.0
    reason: str = ""  # BY_USER, TARGET_REACHED or TIME_LIMIT when the run ended early, else ""

    @property
    def active(self) -> bool:
        """Whether the job is still working."""
        return self.state in ACTIVE_STATES

    @property
    def fraction(self) -> float:
        """Share of the planned steps done, in 0..1."""
        return min(1.0, self.step / max(self.total_steps, 1))


class Job:
    """One training run in a daemon thread; its metrics are read through `progress()`."""

    def __init__(
        self,
        owner: str,
        spec: RunSpec,
        limits: HostedLimits,
        root: Path,
        release: Callable[[], None] = lambda: None,
    ) -> None:
        self.owner, self.spec, self.limits, self.root = owner, spec, limits, Path(root)
        self._release = release  # gives the run's slot back when the thread ends
        self.created = time.time()
        self.finished: float | None = None  # time.time() when the worker thread ended
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._trainer: Trainer | None = None
        self._state = PREPARING
        self._step, self._n_parameters = 0, 0
        self._history: list[StepMetrics] = []
        self._evals: list[EvalMetrics] = []
        self._message = ""
        self._reason = ""
        self._checkpoint: Path | None = None
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._work, name=f"visformer-train-{spec.name}", daemon=True)

    def start(self) -> Job:
        """Start the worker thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask the run to end after its current step; what it learned is still saved."""
        self._stop.set()
        with self._lock:
            trainer = self._trainer
            if self._state == RUNNING:
                self._state = STOPPING
        if trainer is not None:
            trainer.stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def active(self) -> bool:
        """Whether the job is still preparing, training or saving."""
        with self._lock:
            return self._state in ACTIVE_STATES

    def progress(self) -> Progress:
        """A copy of the current state and metrics."""
        with self._lock:
            return Progress(
                self._state, self._step, self.spec.train.steps, tuple(self._history), tuple(self._evals),
                self._message, self._checkpoint, self._n_parameters, time.perf_counter() - self._started,
                self._reason,
            )  # fmt: skip

    # -- the worker ---------------------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        """Update private fields under the lock (keys without the leading underscore)."""
        with self._lock:
            for name, value in changes.items():
                setattr(self, f"_{name}", value)

    def _work(self) -> None:
        """Prepare, train, save; every outcome ends in done, stopped or failed with a message."""
        trainer = None
        try:
            prepared = prepare_data(self.spec.source, self.spec.train.seed)
            trainer = build_trainer(self.spec, self.limits, prepared)
            with self._lock:
                self._trainer = trainer
                self._n_parameters = trainer.model.num_parameters()
                self._state = STOPPING if self._stop.is_set() else RUNNING
            if self._stop.is_set():
                trainer.stop()
            for metrics in trainer.run():
                self._record(metrics)
            self._finish(trainer, prepared, "")
        except TrainingDiverged as exc:
            self._finish(trainer, prepared, str(exc))
        except Exception as exc:  # the page shows the message instead of a traceback
            if not isinstance(exc, ValueError):
                log.exception("training job %s failed", self.spec.name)
            self._set(state=FAILED, message=_message(exc), trainer=None)
        finally:
            self.finished = time.time()
            self._release()

    def _record(self, metrics: StepMetrics | EvalMetrics) -> None:
        """Append one report to the buffer."""
        with self._lock:
            if isinstance(metrics, StepMetrics):
                self._history.append(metrics)
                self._step = metrics.step
            else:
                self._evals.append(metrics)

    def _finish(self, trainer: Trainer, prepared: Prepared, problem: str) -> None:
        """Save what was learned (if any step ran) and settle on done, stopped or failed."""
        stopped = trainer.step < trainer.config.steps
        reason = "" if problem or not stopped else self._stop_reason(trainer)
        self._set(step=trainer.step, reason=reason)
        if trainer.step == 0:
            self._set(state=STOPPED if not problem else FAILED, trainer=None,
                      message=problem or "stopped before the first step: nothing to save")  # fmt: skip
            return
        self._set(state=SAVING)
        info = {"source": self.spec.source.label, "trained_in": "visformer app", **prepared.info}
        path = reserve_checkpoint_dir(self.root, self.spec.name)
        try:
            save_trainer(path, trainer, info=info)
        finally:
            release_checkpoint_dir(path)  # saved (the folder now exists) or failed: the name is free again
        why = {
            BY_USER: "stopped",
            TARGET_REACHED: "target exact match reached",
            TIME_LIMIT: "time limit reached",
        }
        note = problem or (
            f"{why[reason]} at step {trainer.step:,}; the checkpoint keeps what was learned"
            if stopped
            else ""
        )
        self._set(
            state=FAILED if problem else STOPPED if stopped else DONE,
            checkpoint=path,
            message=note,
            trainer=None,
        )

    def _stop_reason(self, trainer: Trainer) -> str:
        """Why a run ended before its last step: the target exact match, the Stop button, or the time limit."""
        target = trainer.config.stop_at_exact_match
        with self._lock:
            last = self._evals[-1].exact_match if self._evals else None
        if target is not None and last is not None and last >= target and not self._stop.is_set():
            return TARGET_REACHED
        return BY_USER if trainer.stopped else TIME_LIMIT


def _message(exc: BaseException) -> str:
    """A one-line message for the page."""
    text = str(exc).strip() or type(exc).__name__
    return text if isinstance(exc, ValueError) else f"{type(exc).__name__}: {text}"


_NAMES_LOCK = threading.Lock()
_RESERVED: set[Path] = set()


def reserve_checkpoint_dir(root: Path, name: str) -> Path:
    """A fresh folder path root/name (then name-2, name-3, …): never overwrites another checkpoint."""
    base = safe_checkpoint_dir(root, name)
    with _NAMES_LOCK:
        path, n = base, 1
        while path.exists() or path in _RESERVED:
            n += 1
            path = safe_checkpoint_dir(root, f"{name[:90]}-{n}")
        _RESERVED.add(path)
        return path


def release_checkpoint_dir(path: Path) -> None:
    """Forget a reservation once its folder is written (or its save failed), so the set stays small."""
    with _NAMES_LOCK:
        _RESERVED.discard(path)


# ---------------------------------------------------------------------------------------------
# The registry: one run per session, a cap on runs across sessions
# ---------------------------------------------------------------------------------------------


class JobRegistry:
    """Process-wide jobs, at most one running per owner (a browser session), capped across owners.

    A finished job stays for its session to show, until the session starts another one, it has been finished
    for `max_age_s`, or more than `max_finished` jobs have finished since: then it is dropped, so the registry
    (and what its jobs hold: metrics, data) stays bounded however many sessions come and go.
    """

    def __init__(self, max_finished: int = 64, max_age_s: float = 3600.0) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self.max_finished = max_finished
        self.max_age_s = max_age_s

    def start(self, owner: str, spec: RunSpec, limits: HostedLimits, root: Path) -> Job:
        """Start a run for `owner`; hosting.BusyError when the owner has one going or every slot is taken."""
        safe_checkpoint_dir(root, spec.name)  # refuse a bad name before a thread starts
        bounded_train_config(spec.train, limits)
        check_session_space(root, limits)  # hosted: a session keeps at most so many models, so many bytes
        slots = run_slots(limits)
        slots.acquire(owner)  # raises BusyError with a message for the page
        try:
            job = Job(owner, spec, limits, root, release=lambda: slots.release(owner))
            with self._lock:
                self._jobs[owner] = job
                self._drop_finished()
            return job.start()
        except BaseException:
            slots.release(owner)
            raise

    def get(self, owner: str) -> Job | None:
        """The owner's latest job, if any (finished jobs past their age are dropped first)."""
        self.sweep()
        with self._lock:
            return self._jobs.get(owner)

    def sweep(self, now: float | None = None) -> int:
        """Drop finished jobs past max_age_s (at `now`, default the current time); how many were dropped."""
        with self._lock:
            before = len(self._jobs)
            self._drop_finished(now, cap=False)
            return before - len(self._jobs)

    def __len__(self) -> int:
        """Jobs held: running ones and finished ones not dropped yet."""
        with self._lock:
            return len(self._jobs)

    def _drop_finished(self, now: float | None = None, cap: bool = True) -> None:
        """Drop finished jobs older than max_age_s, and (cap) all but the newest max_finished (lock held)."""
        now = time.time() if now is None else now
        finished = sorted((job for job in self._jobs.values() if not job.active), key=lambda job: job.created)
        expired = [
            job for job in finished if job.finished is not None and now - job.finished > self.max_age_s
        ]
        surplus = finished[: max(0, len(finished) - self.max_finished)] if cap else []
        for job in expired + surplus:
            self._jobs.pop(job.owner, None)

    def active_count(self) -> int:
        """Runs going across all owners."""
        with self._lock:
            return sum(job.active for job in self._jobs.values())


REGISTRY = JobRegistry()
