"""Time to learn: seconds until the reverse task is solved on held-out sequences, and the training time of
one Multi30k epoch at the shipped model size.

Both go through visformer.training's public API (Trainer, TrainConfig); the task keeps its defaults
(3-10 random letters, 20,000 training and 200 held-out sequences whose sources never occur in training).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from visformer.config import ModelConfig
from visformer.model import Transformer
from visformer.utils import seed_everything

from .common import SHIPPED, Section, Stat

if TYPE_CHECKING:
    from visformer.config import TrainConfig
    from visformer.training import Trainer

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "multi30k"
TARGET_S = 15.0  # issue 14 (was 60 s)
MEASURED = dict(steps=100_000, n_snapshots=0)  # a measured run ends at 100% exact match or its time limit


@dataclass(frozen=True)
class LearnSettings:
    """Model and training settings of a time-to-learn run (the task itself is never changed)."""

    d_model: int = 64
    n_heads: int = 4
    encoder_layers: int = 2
    decoder_layers: int = 2
    d_ff: int = 256
    norm_first: bool = True
    max_tokens: int = 2048
    warmup: int = 100
    lr_factor: float = 0.5
    threads: int = 2
    eval_every: int = 50
    weight_average: float = 0.0

    def model_config(self, vocab_size: int) -> ModelConfig:
        """The model of the toy recipe (recipes.TOY: no dropout, max_len 64) at these sizes, shared embeddings."""
        from visformer import recipes

        size = recipes.ModelSize(self.d_model, self.n_heads, self.encoder_layers, self.d_ff,
                                 n_decoder_layers=self.decoder_layers, norm_first=self.norm_first)  # fmt: skip
        return replace(recipes.TOY, size=size).config(vocab_size, vocab_size)

    def train_config(self, seed: int, limit_s: float) -> TrainConfig:
        """The toy recipe (recipes.TOY) with these settings; measured runs add a time limit and no snapshots."""
        from visformer import recipes

        return replace(
            recipes.TOY.train,
            max_tokens=self.max_tokens,
            warmup=self.warmup,
            lr_factor=self.lr_factor,
            eval_every=self.eval_every,
            log_every=self.eval_every,
            threads=self.threads,
            weight_average=self.weight_average,
            seed=seed,
            **MEASURED,
            time_limit_s=limit_s,
        )

    def describe(self) -> str:
        """One line for the results."""
        return (
            f"d_model {self.d_model}, {self.n_heads} heads, {self.encoder_layers} encoder + "
            f"{self.decoder_layers} decoder layers, d_ff {self.d_ff}, "
            f"{'pre' if self.norm_first else 'post'}-LN, no dropout; batches of {self.max_tokens} tokens, "
            f"Noam warmup {self.warmup} × lr factor {self.lr_factor}, no label smoothing, gradient clip 1.0, "
            f"{self.threads} torch threads; greedy exact match on the 200 held-out sequences every "
            f"{self.eval_every} steps"
        )


def _best() -> LearnSettings:
    """The settings of the toy recipe (recipes.TOY), which came out of the search below."""
    from visformer.recipes import TOY

    size, train = TOY.size, TOY.train
    return LearnSettings(
        size.d_model, size.n_heads, size.n_layers, size.decoder_layers, size.d_ff, size.norm_first,
        train.max_tokens, train.warmup, train.lr_factor, train.threads or 1, train.eval_every, train.weight_average,
    )  # fmt: skip


# Chosen from the searches below: a moving average of the weights (decay 0.97) scored and saved, lr factor 0.7,
# one encoder and one decoder layer, checked every 10 steps by a teacher-forced pass.
BEST = _best()


@dataclass(frozen=True)
class Tried:
    """Settings tried in the search: steps each seed needed to reach 100%, what it cost, and when."""

    settings: str
    steps: dict[int, int | str]  # seed -> first evaluation at 100% (or what happened instead)
    cost: str
    conditions: str

    def describe(self) -> str:
        """One line for the results: settings, steps by seed, cost, conditions."""
        found = [v for v in self.steps.values() if isinstance(v, int)]
        steps = "/".join(f"{v:,}" if isinstance(v, int) else v for v in self.steps.values())
        seeds = "/".join(str(seed) for seed in self.steps)
        what = f"{steps} steps" if len(found) == len(self.steps) else steps
        return f"{self.settings}: {what} (seed {seeds}; {self.cost}; {self.conditions})"


_EARLY = "01:30-02:45 UTC, 1 thread unless noted, load 5-30 (an earlier search)"
_BENCH = "03:33-03:45 UTC, this bench in a child, 1 thread, load 3-5"
_DENSE = (
    "03:43-04:40 UTC, 1 thread, load 2-5, teacher-forced check every 5 steps confirmed by greedy decoding"
)
_COST = "CPU ms per training step / per evaluation, 1 thread, measured side by side in rounds at 04:30 UTC"
_AVERAGE = (
    "2026-11-24 14:00-14:45 UTC, each run in a fresh process, 1 thread; two runs at once on the 2 cores"
)
_PREVIOUS = (
    "d_model 64, 4 heads, 2+2 layers, d_ff 128, pre-LN, 1024-token batches, warmup 100, lr factor 0.25"
)
# The search (2026-11-22, the shared 2-core machine with a background training job). Steps to 100% do not
# depend on the load, nor on how often a run is evaluated (evaluation draws no random numbers), but they do on
# the number of torch threads (1 thread here; the coordinator's runs use 2). "Steps" is the first evaluation
# every 25 steps at 100% greedy exact match: what this bench finds (checked for the previous and new best).
SEARCH = [
    Tried("d_model 64, 2+2 layers, d_ff 256, 2048-token batches, lr factor 0.5 (training helper)", {0: 1400},
          "121 CPU s (2 threads)", _EARLY),
    Tried("d_ff 256, 2048-token batches, lr factor 0.25", {0: 900}, "76.5 CPU s", _EARLY),
    Tried("d_ff 256, 1024-token batches, lr factor 0.35", {0: "96.5% best in 700 steps (stopped at 300 s)"},
          "37.2 CPU s", _EARLY),
    Tried("d_ff 256, 1024-token batches, lr factor 0.25", {0: 1125, 1: 1850}, "57.5, 89.9 CPU s", _EARLY),
    Tried(f"{_PREVIOUS} (previous best)", {0: 975, 1: 1200, 2: 1100, 3: 1600, 4: 1050}, "35.8 / 172 ms",
          f"{_DENSE}; seed 0 also in this bench: 975 steps, 37.6 CPU s"),
    Tried("previous best with 1+1 layers", {0: 1625}, "18.5 / 99 ms; 36.5 CPU s", _BENCH),
    Tried("previous best with d_model 128, 1+1 layers, d_ff 256", {0: 1700}, "79.5 CPU s", _BENCH),
    Tried("previous best with 2 heads", {0: 1350}, "45.2 CPU s", _BENCH),
    Tried("previous best with 8 heads", {0: 1125, 1: 1350}, "about 45 ms per step", _DENSE),
    Tried("previous best with d_model 96, d_ff 192", {0: 1050}, "about 51 ms per step", _DENSE),
    Tried("previous best with post-LN", {0: 1800}, "71.4 CPU s", _BENCH),
    Tried("previous best with 512-token batches", {0: 2175}, "59.0 CPU s", _BENCH),
    Tried("previous best with 1536-token batches", {0: 1575}, "about 48 ms per step", _DENSE),
    Tried("previous best with 2048-token batches", {0: 1300}, "about 64 ms per step", _DENSE),
    Tried("previous best with lr factor 0.15", {0: 1175}, "about 35 ms per step", _DENSE),
    Tried("previous best with warmup 50", {0: 1125}, "about 35 ms per step", _DENSE),
    Tried("previous best with warmup 200, lr factor 0.3", {0: 1600}, "about 33 ms per step", _DENSE),
    Tried("previous best with d_ff 64", {0: 1325, 1: 1100, 2: 950}, "30.9 / 180 ms", _DENSE),
    Tried("previous best with 1 encoder + 2 decoder layers", {0: 1125}, "about 28 ms per step", _DENSE),
    Tried("previous best with 3 encoder + 1 decoder layers", {0: 1350, 1: 1475}, "30.6 / 139 ms", _DENSE),
    Tried("previous best with 2 encoder + 1 decoder layers, d_ff 64", {0: 1225, 1: 1250, 2: 1000},
          "22.2 / 115 ms", _DENSE),
    Tried("previous best with 2 encoder + 1 decoder layers (new best)",
          {0: 1125, 1: 1150, 2: 1325, 3: 900, 4: 900},
          "24.5 / 115 ms; in this bench, seeds 0-2: 31.6, 31.0, 36.5 CPU s and 42.5, 41.1, 47.5 s wall "
          "(1 thread, load 2.7, 04:39 UTC)", _DENSE),
    # 2026-11-24 search: fused Adam, evaluations by one teacher-forced pass (see visformer.evaluation), and a
    # moving average of the weights (TrainConfig.weight_average) scored and saved; steps are the first check at
    # 100%, wall seconds on a quiet machine (1 thread) unless noted.
    Tried("previous best (2+1 layers, lr factor 0.25, no average), checked every 10 steps",
          {0: 1410, 1: 950, 2: 1020}, "31.8, 21.6, 23.1 s (with a training job on the other core)", _AVERAGE),
    Tried("previous best with a weight average (decay 0.95), checked every 10 steps", {0: 780, 1: 800, 2: 720},
          "18.7, 18.7, 16.8 s (with a training job on the other core)", _AVERAGE),
    Tried("the same with lr factor 0.5", {0: 710, 1: 750, 2: 680}, "16.2, 17.2, 15.4 s", _AVERAGE),
    Tried("the same with lr factor 0.7", {0: 660, 1: 740, 2: 590}, "14.8, 16.8, 13.4 s", _AVERAGE),
    Tried("lr factor 0.7, decay 0.95, checked every 25 steps", {0: 1050, 1: 1000, 2: 675, 3: 700},
          "the average touches 100% between checks", _AVERAGE),
    Tried("lr factor 0.7, decay 0.9", {0: 1005, 1: 990, 2: 990, 3: 685}, "checked every 5 steps", _AVERAGE),
    Tried("lr factor 1.0, decay 0.95", {0: 710, 1: 780, 2: 930}, "16.6, 18.9, 23.3 s (loaded)", _AVERAGE),
    Tried("lr factor 0.7, decay 0.95, 8 heads", {0: 620, 1: 850, 2: 650}, "18.3, 24.0, 18.4 s", _AVERAGE),
    Tried("lr factor 0.7, decay 0.95, 768-token batches", {0: 710, 1: 960, 2: 550}, "12.6, 17.9, 10.8 s",
          _AVERAGE),
    Tried("lr factor 0.7, decay 0.95, d_ff 64", {0: 820, 1: 1040, 2: 510, 3: 950}, "loaded", _AVERAGE),
    Tried("lr factor 0.7, decay 0.95, 1+1 layers", {0: 740, 1: 680, 2: 530, 3: 440, 4: 650, 5: 700},
          "12.9, 12.0, 8.9, 7.6, 10.5, 10.9 s", _AVERAGE),
    Tried("1+1 layers, lr factor 0.5, decay 0.95", {0: 710, 1: 890, 2: 590}, "12.6, 15.6, 9.9 s", _AVERAGE),
    Tried("1+1 layers, lr factor 1.0, decay 0.95", {0: 740, 1: 700, 2: 690}, "11.8, 12.0, 12.5 s", _AVERAGE),
    Tried("1+1 layers, lr factor 0.7, decay 0.97 (new best)",
          {0: 680, 1: 680, 2: 480, 3: 440, 4: 820, 5: 570, 6: 510}, "11.0, 11.2, 7.6, 8.1, 12.2, 8.7, 8.4 s",
          _AVERAGE),
]  # fmt: skip


@dataclass
class LearnResult:
    """When (if ever) a run reached 100% held-out exact match."""

    solved: bool
    wall_s: float  # model creation, data encoding, training and every evaluation
    train_s: float  # the same without evaluations
    cpu_s: float  # process CPU seconds over the run (all threads)
    step: int
    exact_match: float
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, exact match) of each evaluation


def build_trainer(settings: LearnSettings, task: str, seed: int, limit_s: float) -> Trainer:
    """The measured run: the toy recipe's data split (recipes.split_task) and these settings."""
    from visformer import recipes
    from visformer.tasks import task_tokenizer
    from visformer.training import Trainer

    tok = task_tokenizer(task)
    train, valid = recipes.split_task(task, recipes.TOY_N_TRAIN, recipes.TOY_N_VALID, seed)
    seed_everything(seed)
    model = Transformer(settings.model_config(tok.vocab_size))
    return Trainer(model, train, valid, tok, tok, settings.train_config(seed, limit_s), task=task)


def time_to_learn(
    settings: LearnSettings = BEST,
    task: str = "reverse",
    limit_s: float = 300.0,
    seed: int = 0,
    progress: bool = False,
) -> LearnResult:
    """Train on `task` until 100% held-out exact match (or `limit_s` of training); wall and CPU seconds."""
    from visformer.records import EvalMetrics

    cpu0, start = time.process_time(), time.perf_counter()
    trainer = build_trainer(settings, task, seed, limit_s)
    curve = []
    for m in trainer.run():
        if isinstance(m, EvalMetrics):
            curve.append((m.step, m.exact_match or 0.0))
            if progress:
                print(f"step {m.step}: exact match {m.exact_match:.3f} at {time.perf_counter() - start:.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    best = max((e for _, e in curve), default=0.0)
    train_s = wall - trainer.eval_overhead_s - trainer.snapshot_overhead_s
    step = next((s for s, e in curve if e >= 1.0), trainer.step)
    return LearnResult(best >= 1.0, wall, train_s, cpu, step, best, curve)


def _child_json(cmd: list[str]) -> dict[str, Any]:
    """Run a command with OMP_WAIT_POLICY=PASSIVE and parse the JSON on its last output line."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def in_child(settings: LearnSettings, seed: int, limit_s: float) -> LearnResult:
    """time_to_learn in a fresh process with sleeping OpenMP waits (OMP_WAIT_POLICY=PASSIVE, which only
    takes effect before torch is imported): on a shared machine, spinning waits between 2 threads made a
    training step 10× slower."""
    settings_json = json.dumps({k: v for k, v in asdict(settings).items() if v != getattr(BEST, k)})
    cmd = [sys.executable, "-m", "bench.bench_time_to_learn", settings_json, str(seed), str(limit_s)]
    data = _child_json(cmd)
    data.pop("settings")
    data["curve"] = [tuple(point) for point in data["curve"]]
    return LearnResult(**data)


# ---------------------------------------------------------------------------------------------
# Multi30k epoch at the shipped size
# ---------------------------------------------------------------------------------------------


def shipped_checkpoint() -> Path | None:
    """The shipped English→German checkpoint, if it exists yet."""
    path = ROOT / "checkpoints" / "multi30k-en-de"
    return path if (path / "config.json").exists() else None


def multi30k_epoch(steps: int = 20, threads: int = 2) -> dict[str, Any]:
    """Seconds of one Multi30k training epoch: median step time × batches per epoch (real batches).

    Uses the shipped checkpoint's model config, tokenizer and batch size when it exists; otherwise the
    planned size (bench.common.SHIPPED) with a SentencePiece BPE vocabulary trained here.
    """
    from visformer.checkpoint import load_checkpoint
    from visformer.config import TrainConfig
    from visformer.data import batches, read_parallel
    from visformer.records import StepMetrics
    from visformer.tokenizer import SentencePieceTokenizer
    from visformer.training import Trainer

    pairs = read_parallel(DATA / "train.en", DATA / "train.de")
    found = shipped_checkpoint()
    if found is not None:
        ck = load_checkpoint(found)
        config, src_tok, tgt_tok = ck.model_config, ck.src_tokenizer, ck.tgt_tokenizer
        max_tokens = ck.train_config.max_tokens if ck.train_config else 4096
        source = f"`checkpoints/{found.name}`"
    else:
        tok = SentencePieceTokenizer.train([t for p in pairs for t in (p.src, p.tgt)], SHIPPED.src_vocab_size)
        config, src_tok, tgt_tok = replace(SHIPPED, max_len=128), tok, tok
        max_tokens, source = 4096, "the planned shipped size (no multi30k checkpoint yet)"
    seed_everything(0)
    model = Transformer(config)
    train_config = TrainConfig(
        steps=steps, max_tokens=max_tokens, warmup=400, eval_every=10**6, log_every=1, n_snapshots=0,
        threads=threads,
    )  # fmt: skip
    trainer = Trainer(model, pairs, pairs[:1], src_tok, tgt_tok, train_config)
    n_batches = sum(1 for _ in batches(trainer.train_pairs, max_tokens, tgt_tok, True, 0))
    elapsed = [m.elapsed_s for m in trainer.run() if isinstance(m, StepMetrics)]
    step_s = [b - a for a, b in zip(elapsed, elapsed[1:], strict=False)][2:]  # skip warm-up steps
    params = model.num_parameters()
    return {
        "source": source,
        "model": f"d_model {config.d_model}, {config.n_heads} heads, {config.n_encoder_layers}+"
        f"{config.n_decoder_layers} layers, d_ff {config.d_ff}, vocabulary {config.tgt_vocab_size}, "
        f"{params / 1e6:.1f} M parameters",
        "pairs": len(trainer.train_pairs),
        "max_tokens": max_tokens,
        "batches": n_batches,
        "step_s": step_s,
        "threads": threads,
    }


# ---------------------------------------------------------------------------------------------
# Section
# ---------------------------------------------------------------------------------------------


def run(quick: bool = False, settings: LearnSettings = BEST, seeds: tuple[int, ...] = (0, 1, 2)) -> Section:
    """The time-to-learn section; quick mode trains a few seconds and times 4 epoch steps."""
    section = Section(
        title="Time to learn",
        intro=(
            "Seconds until the reverse task (`visformer.tasks` defaults: 3-10 random letters, 20,000 training "
            "sequences) reaches 100% exact match (greedy) on 200 held-out sequences whose sources never occur "
            f"in training, through `visformer.training.Trainer` with `TrainConfig(stop_at_exact_match=1.0)`: "
            f"{settings.describe()}. Wall clock from building the model to the evaluation that reaches 100% "
            "(evaluations included; importing torch, and torch._dynamo which torch.optim imports at its first "
            "optimizer, is not); each run in a fresh process with `OMP_WAIT_POLICY=PASSIVE`. "
            f"Target: < {TARGET_S:g} s on 2 CPU cores."
        ),
        header=[
            "run",
            "solved",
            "wall s (with evals)",
            "training s",
            "CPU s",
            "steps",
            "exact match",
            "target",
        ],
    )
    if quick:  # a smoke run: a few seconds, evaluated often enough to show a curve
        settings, seeds = replace(settings, eval_every=5), seeds[:1]
    results = [in_child(settings, seed=s, limit_s=3.0 if quick else 300.0) for s in seeds]
    for seed, r in zip(seeds, results, strict=False):
        verdict = "met" if r.solved and r.wall_s < TARGET_S else f"missed ({r.wall_s / TARGET_S:.1f}×)"
        if not r.solved:
            verdict = "not solved"
        section.rows.append([
            f"reverse, seed {seed}", "yes" if r.solved else "no", f"{r.wall_s:.1f}", f"{r.train_s:.1f}",
            f"{r.cpu_s:.1f}", str(r.step), f"{r.exact_match:.1%}", f"< {TARGET_S:g} s: " + verdict,
        ])  # fmt: skip
    if len(results) > 1:
        wall = Stat.of([r.wall_s for r in results])
        section.notes.append(f"median over seeds: {wall.fmt(1)} s wall clock (target < {TARGET_S:g} s)")
    section.notes.append(
        "How the settings were chosen (steps to 100% by seed; cost): "
        + "; ".join(t.describe() for t in SEARCH)
        + f". Costs given as two figures are {_COST}. Steps to 100% vary with the seed by up to 1.9× in "
        "every setting tried: the trained weights sit at 95-99% for hundreds of steps, with single evaluations "
        "dipping lower, before one evaluation gets all 200 right. Scoring a moving average of the weights "
        "(the running form of the paper's checkpoint averaging) cut the steps by a third and allowed a higher "
        "learning rate; checking every 10 steps instead of 25 catches the first 100% of the average, which is "
        "cheap since a check is one teacher-forced pass (a sequence is exactly right under greedy decoding "
        "when every teacher-forced prediction is right), confirmed by decoding when it reads 100%. With the "
        "average, one encoder layer learns as fast as two at two thirds of the cost per step."
    )
    section.notes.append(
        "exact-match curve of the first run (step: share): "
        + ", ".join(f"{s}: {e:.1%}" for s, e in results[0].curve)
    )
    if DATA.exists():
        epoch = _child_json(
            [sys.executable, "-m", "bench.bench_time_to_learn", "--epoch", "6" if quick else "25"]
        )
        step = Stat.of(epoch["step_s"])
        section.rows.append([
            "Multi30k epoch (shipped size)", "", f"{step.median * epoch['batches']:.0f}", "", "", str(epoch["batches"]),
            "", "",
        ])  # fmt: skip
        section.notes.append(
            f"Multi30k epoch: {epoch['model']} from {epoch['source']}; {epoch['pairs']:,} training pairs in "
            f"{epoch['batches']} batches of ≤ {epoch['max_tokens']} tokens; one training step (forward, "
            f"label-smoothed loss, backward, clipping, Adam) takes {step.fmt(3)} s ({step.n} steps, "
            f"{epoch['threads']} threads), so an epoch takes {step.median * epoch['batches'] / 60:.1f} min "
            f"({step.low * epoch['batches'] / 60:.1f}–{step.high * epoch['batches'] / 60:.1f})."
        )
    else:
        section.notes.append(f"Multi30k epoch not measured: {DATA} is missing")
    return section


if __name__ == "__main__" and sys.argv[1:2] == ["--epoch"]:  # python -m bench.bench_time_to_learn --epoch 25
    print(json.dumps(multi30k_epoch(steps=int(sys.argv[2]))))
elif __name__ == "__main__":  # python -m bench.bench_time_to_learn '{"max_tokens": 4096}' [seed [limit_s]]
    overrides = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    chosen = replace(BEST, **overrides)
    seed, limit = (
        (int(sys.argv[2]) if len(sys.argv) > 2 else 0),
        (float(sys.argv[3]) if len(sys.argv) > 3 else 300.0),
    )
    import torch._dynamo  # noqa: F401  (torch.optim imports it at the first optimizer: import time, off the clock)

    result = time_to_learn(chosen, seed=seed, limit_s=limit, progress=True)
    print(json.dumps({"settings": asdict(chosen), **asdict(result)}))
