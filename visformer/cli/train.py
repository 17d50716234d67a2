"""`visformer train`: a run of the recipes (visformer.recipes) from the command line, resumed or warm-started."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from .. import recipes
from ..checkpoint import load_checkpoint, load_optimizer_state, save_trainer
from ..data import read_parallel, read_tsv
from ..evaluation import corpus_scores, translate_all
from ..models import build_model
from ..records import EvalMetrics, StepMetrics
from ..training import Trainer, TrainingDiverged
from .common import UsageError, check_out

HELD_OUT_SHARE = 0.05  # `train --corpus` without --valid / --test: the share of pairs held out for each


def data_source(args: argparse.Namespace) -> recipes.DataSource:
    """What `train` learns from: a toy task, or --corpus / --tsv pairs (held-out splits unless --valid / --test)."""
    if args.task:
        n_train = recipes.TOY_N_TRAIN if args.n_train is None else args.n_train
        n_valid = recipes.TOY_N_VALID if args.n_valid is None else args.n_valid
        return recipes.TaskSource(args.task, n_train, n_valid)
    pairs = read_parallel(*args.corpus) if args.corpus else read_tsv(args.tsv, *args.tsv_columns)
    return recipes.PairsSource(
        " ".join(args.corpus or [args.tsv]),
        tuple(pairs),
        vocab_size=args.vocab_size,
        max_words=args.max_words,
        valid=HELD_OUT_SHARE,
        test=0 if args.valid else HELD_OUT_SHARE,
        valid_pairs=tuple(read_parallel(*args.valid)) if args.valid else (),
        test_pairs=tuple(read_parallel(*args.test)) if args.test else (),
        separate_vocab=args.separate_vocab,
        model_type=args.model_type,
        tokenizer_threads=None,
    )


def _size(args: argparse.Namespace, size: recipes.ModelSize) -> recipes.ModelSize:
    """The recipe's model size with the sizes given on the command line."""
    return recipes.ModelSize(
        d_model=args.d_model or size.d_model,
        n_heads=args.heads or size.n_heads,
        n_layers=args.encoder_layers or args.layers or size.n_layers,
        d_ff=args.d_ff or size.d_ff,
        n_decoder_layers=args.decoder_layers or args.layers or size.decoder_layers,
        norm_first=size.norm_first if args.norm_first is None else args.norm_first,
    )


TRAIN_OPTIONS = {  # train arguments -> TrainConfig fields; None on the command line keeps the recipe's value
    "steps": "steps", "max_tokens": "max_tokens", "warmup": "warmup", "lr_factor": "lr_factor",
    "label_smoothing": "label_smoothing", "clip_norm": "clip_norm", "seed": "seed", "device": "device",
    "eval_every": "eval_every", "eval_examples": "eval_examples", "log_every": "log_every",
    "snapshots": "n_snapshots", "time_limit": "time_limit_s", "threads": "threads",
    "stop_at_exact_match": "stop_at_exact_match", "precision": "precision", "cooldown": "cooldown",
}  # fmt: skip


def run_spec(args: argparse.Namespace) -> recipes.RunSpec:
    """The run `train` asks for: the recipe of its kind (recipes.TOY or recipes.CORPUS), then the arguments."""
    recipe = recipes.TOY if args.task else recipes.CORPUS
    given = {
        field: getattr(args, arg) for arg, field in TRAIN_OPTIONS.items() if getattr(args, arg) is not None
    }
    return recipes.RunSpec(
        Path(args.out).name,
        data_source(args),
        _size(args, recipe.size),
        replace(recipe.train, **given),
        max_len=args.max_len or recipe.max_len,
        dropout=recipe.dropout if args.dropout is None else args.dropout,
        architecture=args.arch,
    )


def _prepare(spec: recipes.RunSpec) -> recipes.Prepared:
    """The run's data and tokenizers (recipes.prepare_data), reported on stderr for a corpus."""
    t0 = time.perf_counter()
    prepared = recipes.prepare_data(spec.source, spec.train.seed)
    if prepared.task is None and int(os.environ.get("RANK", "0")) == 0:
        src, tgt = prepared.src_tokenizer, prepared.tgt_tokenizer
        print(
            f"tokenizer: vocab {src.vocab_size}/{tgt.vocab_size} in {time.perf_counter() - t0:.1f}s; "
            f"{len(prepared.train)} train, {len(prepared.valid)} valid, {len(prepared.test)} test pairs",
            file=sys.stderr,
        )
    return prepared


RESUME_OVERRIDES = {  # train arguments that may change when a run is resumed -> TrainConfig fields
    "steps": "steps",
    "time_limit": "time_limit_s",
    "threads": "threads",
    "eval_every": "eval_every",
    "log_every": "log_every",
    "max_tokens": "max_tokens",
    "precision": "precision",
    "lr_factor": "lr_factor",
    "cooldown": "cooldown",
}


def _with_dropout(model: torch.nn.Module, dropout: float | None) -> torch.nn.Module:
    """The same weights in a model whose dropout is `dropout` (None: unchanged)."""
    if dropout is None or dropout == model.config.dropout:
        return model
    rebuilt = build_model(replace(model.config, dropout=dropout))
    rebuilt.load_state_dict(model.state_dict())
    return rebuilt


def _widened(
    model: torch.nn.Module, optimizer: dict | None, d_ff: int
) -> tuple[torch.nn.Module, dict | None]:
    """The resumed model grown to --d-ff hidden units (visformer.warmstart), with Adam's state padded to fit."""
    from ..warmstart import widen_feed_forward, widen_optimizer_state

    try:
        wide = widen_feed_forward(model, d_ff)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(f"growing the feed-forward layers from {model.config.d_ff} to {d_ff} hidden units", file=sys.stderr)
    return wide.train(), None if optimizer is None else widen_optimizer_state(optimizer, wide)


def _resumed_trainer(args: argparse.Namespace, spec: recipes.RunSpec) -> tuple[Trainer, list]:
    """A Trainer that continues --resume: its weights, tokenizers, recipe, history and Adam state."""
    ckpt = load_checkpoint(args.resume)
    if ckpt.train_config is None:
        raise UsageError(f"{ckpt.name} has no training recipe to continue")
    if (ckpt.task or None) != (args.task or None):
        raise UsageError(
            f"{ckpt.name} was trained on {ckpt.task or 'a corpus'}, not {args.task or 'a corpus'}"
        )
    seed = ckpt.train_config.seed
    if args.seed is not None and args.seed != seed:
        raise UsageError(
            f"{ckpt.name} was trained with --seed {seed}; a resumed run keeps it (its held-out split depends on "
            "it): drop --seed"
        )
    train, valid, test = recipes.split_data(spec.source, seed)
    prepared = recipes.Prepared(train, valid, ckpt.src_tokenizer, ckpt.tgt_tokenizer, ckpt.task, test=test)
    overrides = {
        field: getattr(args, arg) for arg, field in RESUME_OVERRIDES.items() if getattr(args, arg) is not None
    }
    config = replace(ckpt.train_config, device=args.device, **overrides)
    model = _with_dropout(ckpt.model, args.dropout).train()
    optimizer = load_optimizer_state(args.resume)
    if args.d_ff is not None and args.d_ff != model.config.d_ff:
        model, optimizer = _widened(model, optimizer, args.d_ff)
    trainer = recipes.build_trainer(replace(spec, train=config), prepared, model)
    try:
        trainer.restore(ckpt.metrics, ckpt.snapshots, optimizer)
    except ValueError as exc:
        raise UsageError(f"{ckpt.name}: {exc}") from exc
    if trainer.rank == 0:
        how = "with Adam's state" if optimizer else "without Adam's state: the learning rate ramps up again"
        print(f"resuming {ckpt.name} at step {trainer.step} {how}", file=sys.stderr)
    return trainer, test


def _warm_model(args: argparse.Namespace, prepared: recipes.Prepared) -> torch.nn.Module:
    """The --init checkpoint's model moved onto the new tokenizers (visformer.warmstart)."""
    from ..warmstart import warm_start

    try:
        return warm_start(load_checkpoint(args.init), prepared.src_tokenizer, prepared.tgt_tokenizer)
    except ValueError as exc:
        raise UsageError(f"--init {args.init}: {exc}") from exc


def build_trainer(args: argparse.Namespace) -> tuple[Trainer, list]:
    """The Trainer `train` runs (recipes.build_trainer: a resumed, warm-started or new one) and its test pairs."""
    if args.init and (args.task or args.resume):
        raise UsageError("--init starts a corpus run; it cannot be combined with --task or --resume")
    spec = run_spec(args)
    if args.resume:
        return _resumed_trainer(args, spec)
    prepared = _prepare(spec)
    model = _warm_model(args, prepared) if args.init else None
    return recipes.build_trainer(spec, prepared, model), prepared.test


def _init_distributed() -> bool:
    """Join the torchrun process group (gloo on CPU, nccl on GPU) when launched by torchrun."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch.distributed as dist

    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo")
    return True


def _describe(m: StepMetrics | EvalMetrics) -> str:
    """One log line for a metrics record."""
    if isinstance(m, StepMetrics):
        return f"step {m.step} loss {m.loss:.4f} lr {m.lr:.2e} {m.tokens_per_s:.0f} tok/s {m.elapsed_s:.0f}s"
    parts = [f"eval step {m.step}: valid loss {m.valid_loss:.4f}"]
    for name in ("bleu", "chrf", "exact_match", "alignment_score"):
        value = getattr(m, name)
        if value is not None:
            parts.append(
                f"{name} {value:.4f}" if name in ("exact_match", "alignment_score") else f"{name} {value:.2f}"
            )
    sample = f"\n  {m.samples[0][0]!r} -> {m.samples[0][2]!r} (ref {m.samples[0][1]!r})" if m.samples else ""
    return ", ".join(parts) + sample


def _run_training(trainer: Trainer, args: argparse.Namespace, info: dict[str, Any]) -> None:
    """Drive trainer.run() with a progress bar, saving the checkpoint every --save-every seconds."""
    from tqdm import tqdm

    rank0 = trainer.rank == 0
    last_save = time.perf_counter()
    bar = tqdm(
        total=trainer.config.steps, desc="training", unit="step", disable=not rank0 or args.no_progress
    )
    try:
        for m in trainer.run():
            if isinstance(m, StepMetrics):
                bar.update(m.step - bar.n)
                bar.set_postfix(loss=f"{m.loss:.3f}", lr=f"{m.lr:.1e}", tok_s=f"{m.tokens_per_s:.0f}")
                if args.no_progress and rank0:
                    print(_describe(m), flush=True)
            elif rank0:
                tqdm.write(_describe(m)) if not args.no_progress else print(_describe(m), flush=True)
            if rank0 and time.perf_counter() - last_save >= args.save_every:
                save_trainer(args.out, trainer, info=info, half=args.half, resumable=args.resumable)
                last_save = time.perf_counter()
    except KeyboardInterrupt:
        trainer.stop()
        print("interrupted: saving the last completed step", file=sys.stderr)
    except TrainingDiverged as exc:
        print(f"training stopped: {exc}", file=sys.stderr)
    finally:
        bar.close()


def _final_test(trainer: Trainer, test: list, args: argparse.Namespace) -> dict[str, Any]:
    """sacreBLEU/chrF (corpora) or exact match (tasks) on the test pairs with --beam-size."""
    model = trainer.model.eval()
    hyps = translate_all(
        model,
        trainer.src_tok,
        trainer.tgt_tok,
        [p.src for p in test],
        args.beam_size,
        progress=not args.no_progress,
    )
    bleu, chrf = corpus_scores(hyps, [p.tgt for p in test])
    return {
        "bleu": round(bleu, 2),
        "chrf": round(chrf, 2),
        "beam_size": args.beam_size,
        "sentences": len(test),
        "samples": [(p.src, p.tgt, h) for p, h in zip(test[:5], hyps[:5], strict=False)],
    }


def cmd_train(args: argparse.Namespace) -> int:
    """`train`: build data, tokenizers and model, train, save the checkpoint (rank 0)."""
    check_out(args.out, args.overwrite)
    distributed = _init_distributed()
    if args.threads:
        torch.set_num_threads(args.threads)
    trainer, test = build_trainer(args)
    model = trainer.model
    if trainer.rank == 0:
        print(
            f"model: {model.num_parameters():,} parameters; {len(trainer.train_pairs)} training pairs; "
            f"device {trainer.device}; world size {trainer.world_size}",
            file=sys.stderr,
        )
    source = args.task or " ".join(args.corpus or [args.tsv])
    info = {"data": source, "world_size": trainer.world_size}
    if args.resume:
        info["resumed_from"] = {"checkpoint": Path(args.resume).name, "steps": trainer.step}
    _run_training(trainer, args, info)
    if trainer.rank == 0:
        if trainer.step and (not trainer.evals or trainer.evals[-1].step != trainer.step):
            print(_describe(trainer.evaluate()), file=sys.stderr)
        if test:
            info["test"] = _final_test(trainer, test, args)
            print(
                f"test: BLEU {info['test']['bleu']:.2f} chrF {info['test']['chrf']:.2f} "
                f"(beam {args.beam_size}, {len(test)} sentences)",
                file=sys.stderr,
            )
        save_trainer(args.out, trainer, info=info, half=args.half, resumable=args.resumable)
        print(
            f"saved {args.out} after {trainer.step} steps in {trainer.elapsed_s:.1f}s "
            f"(snapshots {trainer.snapshot_overhead_s:.2f}s, eval {trainer.eval_overhead_s:.1f}s)",
            file=sys.stderr,
        )
    if distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return 0
