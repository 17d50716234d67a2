"""Command line: `python -m visformer train | translate | evaluate` (also under torchrun for DDP)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from . import recipes
from .checkpoint import (
    CONFIG_FILE,
    FORMAT,
    CheckpointError,
    average_checkpoints,
    load_checkpoint,
    load_optimizer_state,
    save_trainer,
)
from .config import PRECISIONS, ModelConfig, TrainConfig
from .evaluation import corpus_scores, translate_all, translate_batch
from .models import SEQ2SEQ_ARCHITECTURES, build_model
from .models.length_buckets import bleu_by_source_length
from .records import EvalMetrics, StepMetrics
from .training import Trainer, TrainingDiverged
from .utils import idle_cores, torch_threads


class UsageError(Exception):
    """A problem with the command line or its files, reported without a traceback."""


# ---------------------------------------------------------------------------------------------
# Argument parsing
# ---------------------------------------------------------------------------------------------


def _train_parser(sub: argparse._SubParsersAction) -> None:
    """Arguments of `train`."""
    p = sub.add_parser("train", help="train a model on a toy task or a parallel corpus")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--task", help="built-in toy task (copy, reverse, sort, date)")
    src.add_argument(
        "--corpus", nargs=2, metavar=("SRC_FILE", "TGT_FILE"), help="line-aligned parallel files"
    )
    src.add_argument("--tsv", metavar="FILE", help="tab-separated pairs (Tatoeba format)")
    p.add_argument(
        "--tsv-columns",
        nargs=2,
        type=int,
        default=(1, 0),
        metavar=("SRC", "TGT"),
        help="0-based source and target columns of --tsv (default 1 0: other language -> English)",
    )
    p.add_argument(
        "--valid", nargs=2, metavar=("SRC", "TGT"), help="validation files (default: split by source)"
    )
    p.add_argument("--test", nargs=2, metavar=("SRC", "TGT"), help="test files scored after training")
    p.add_argument("--out", required=True, help="checkpoint folder to write")
    overwrite_option(p)
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="continue training this checkpoint (same data arguments; its model, tokenizer and recipe)",
    )
    p.add_argument(
        "--init",
        metavar="DIR",
        help="corpus: start from this checkpoint's layers with a new vocabulary (warm start; its model size)",
    )
    p.add_argument(
        "--resumable", action="store_true", help="also save Adam's state so that --resume continues exactly"
    )
    p.add_argument("--half", action="store_true", help="store weights in float16 (smaller; loads as float32)")
    p.add_argument("--beam-size", type=int, default=4, help="beam size of the final test evaluation")
    p.add_argument("--n-train", type=int, default=None, help="toy task: training examples (recipe: 20000)")
    p.add_argument("--n-valid", type=int, default=None, help="toy task: held-out examples (recipe: 200)")
    p.add_argument("--max-words", type=int, default=64, help="corpus: drop pairs with more words than this")
    # model
    p.add_argument("--arch", choices=SEQ2SEQ_ARCHITECTURES, default="transformer",
                   help="transformer, or a GRU seq2seq: rnn-none (no attention), rnn-bahdanau, rnn-luong, rnn-dot")  # fmt: skip
    p.add_argument("--d-model", type=int, default=None)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--layers", type=int, default=None, help="encoder and decoder layers")
    p.add_argument("--encoder-layers", type=int, default=None)
    p.add_argument("--decoder-layers", type=int, default=None)
    p.add_argument("--d-ff", type=int, default=None)
    p.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="also with --resume: fine-tune with more (or less) dropout",
    )
    p.add_argument("--max-len", type=int, default=None, help="longest sequence in tokens")
    p.add_argument(
        "--norm-first", action=argparse.BooleanOptionalAction, default=None,
        help="pre-LN instead of the paper's post-LN (recipe: on for toy tasks)",
    )  # fmt: skip
    p.add_argument("--vocab-size", type=int, default=8000, help="corpus: SentencePiece vocabulary size")
    p.add_argument("--model-type", choices=("bpe", "unigram"), default="bpe")
    p.add_argument("--separate-vocab", action="store_true", help="corpus: one vocabulary per language")
    # training
    d = TrainConfig()
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=None, help="padded tokens per batch")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--lr-factor", type=float, default=None)
    p.add_argument("--label-smoothing", type=float, default=None)
    p.add_argument("--clip-norm", type=float, default=None)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device)
    p.add_argument("--eval-every", type=int, default=None)
    p.add_argument("--eval-examples", type=int, default=None)
    p.add_argument("--log-every", type=int, default=None)
    p.add_argument("--snapshots", type=int, default=None, help="attention snapshots (log-spaced)")
    p.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument(
        "--stop-at-exact-match",
        type=float,
        default=None,
        help="toy task: stop once held-out exact match reaches this share (e.g. 1.0)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=d.precision,
        help="autocast: auto = bf16 where the device runs it natively (CUDA, avx512_bf16 CPUs)",
    )
    p.add_argument("--save-every", type=float, default=600.0, help="seconds between checkpoint saves")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")


def _threads(raw: str) -> int | None:
    """--threads: a positive number, or "auto" (None: chosen when the command runs, utils.idle_cores)."""
    if raw == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'auto', got {raw!r}")
    return value


THREADS_HELP = (
    "torch CPU threads: a number, or auto (default): the cores not busy with other work (cores minus the "
    "1-minute load average, at least 1). More threads than free cores collapse on a shared machine: "
    "1,000 sentences took 40 s with 1 thread and 130 s with 2 on a busy 2-core machine"
)


def _inference_options(p: argparse.ArgumentParser) -> None:
    """--threads and --precision, shared by translate and evaluate."""
    p.add_argument("--threads", type=_threads, default=None, metavar="N|auto", help=THREADS_HELP)
    p.add_argument(
        "--precision", choices=PRECISIONS, default="auto",
        help="auto (default): bf16 autocast where the CPU/GPU runs it natively and d_model >= 256, as in training",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The `visformer` argument parser."""
    parser = argparse.ArgumentParser(prog="python -m visformer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    t = sub.add_parser("translate", help="translate sentences with a checkpoint")
    t.add_argument("--checkpoint", required=True)
    t.add_argument("sentences", nargs="+", help="sentences to translate")
    t.add_argument("--beam-size", type=int, default=1, help="1 = greedy")
    _inference_options(t)
    e = sub.add_parser("evaluate", help="sacreBLEU and chrF of a checkpoint on a test set")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--src", required=True)
    e.add_argument("--ref", required=True)
    e.add_argument("--beam-size", type=int, default=4)
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--json", action="store_true", help="last line: one JSON object with bleu and chrf")
    e.add_argument(
        "--by-length",
        action="store_true",
        help="also BLEU per source length in words (<=8, 9-11, 12-14, 15-17, >17)",
    )
    e.add_argument(
        "--typed", action="store_true",
        help="also score the sources as students type them: without final punctuation; with one space fewer",
    )  # fmt: skip
    e.add_argument("--no-progress", action="store_true")
    _inference_options(e)
    a = sub.add_parser("average", help="average the weights of checkpoints of one run (as the paper does)")
    a.add_argument("checkpoints", nargs="+", help="checkpoint folders, oldest first")
    a.add_argument("--out", required=True, help="checkpoint folder to write")
    overwrite_option(a)
    a.add_argument("--float32", action="store_true", help="store float32 weights (default float16)")
    m = sub.add_parser(
        "import-marian", help="convert an OPUS-MT (Marian) model into a visformer checkpoint folder",
        description="SOURCE: a folder written by transformers' save_pretrained, or a Hub model id such as "
        "Helsinki-NLP/opus-mt-ko-en (downloaded with huggingface_hub: pip install transformers sentencepiece)",
    )  # fmt: skip
    m.add_argument("source", help="a save_pretrained folder or a Hugging Face model id")
    m.add_argument("--out", required=True, help="checkpoint folder to write (e.g. checkpoints/opus-mt-ko-en)")
    overwrite_option(m)
    r = sub.add_parser("prepare", help="write a shipped model's corpus mix with clean held-out splits")
    r.add_argument(
        "--mix",
        required=True,
        help="en-de, ko-en or ko-en-bt (ko-en + the project's own sentences + back-translation)",
    )
    r.add_argument("--data", required=True, help="folder holding the corpora (e.g. ../shared/data)")
    r.add_argument("--out", required=True, help="folder for train/valid/test files and manifest.json")
    overwrite_option(r, "a non-empty folder that prepare did not write (one without manifest.json)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument(
        "--back-translator", metavar="DIR",
        help="mixes with back-translation: a checkpoint translating target into source (e.g. en→ko); "
        "its outputs are kept in OUT/bt.* and a second run continues where the first stopped",
    )  # fmt: skip
    r.add_argument("--batch-size", type=int, default=256, help="sentences per back-translation batch")
    r.add_argument("--threads", type=_threads, default=None, metavar="N|auto", help=THREADS_HELP)
    r.add_argument("--no-progress", action="store_true")
    return parser


# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------


def _task_data(args: argparse.Namespace) -> tuple[list, list, list, Any, Any]:
    """Train/valid examples and tokenizers of a toy task, split as every toy-task run splits it."""
    from .tasks import task_tokenizer

    try:
        tok = task_tokenizer(args.task)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    n_train = recipes.TOY_N_TRAIN if args.n_train is None else args.n_train
    n_valid = recipes.TOY_N_VALID if args.n_valid is None else args.n_valid
    train, valid = recipes.split_task(args.task, n_train, n_valid, args.seed)
    return train, valid, [], tok, tok


def _corpus_pairs(args: argparse.Namespace) -> tuple[list, list, list]:
    """Train/valid/test pairs from --corpus or --tsv, split by unique source when --valid is absent."""
    from .data import filter_by_length, read_parallel, read_tsv, split_by_source

    if args.corpus:
        pairs = read_parallel(*args.corpus)
    else:
        pairs = read_tsv(args.tsv, *args.tsv_columns)
    pairs = filter_by_length([p for p in pairs if p.src and p.tgt], args.max_words)
    test = read_parallel(*args.test) if args.test else []
    if args.valid:
        return pairs, read_parallel(*args.valid), test
    train, valid, held_out = split_by_source(
        pairs, valid=0.05, test=0.0 if args.test else 0.05, seed=args.seed
    )
    return train, valid, test or held_out


def _corpus_data(args: argparse.Namespace) -> tuple[list, list, list, Any, Any]:
    """Pairs and SentencePiece tokenizers (joint unless --separate-vocab), trained on the train split."""
    from .tokenizer import SentencePieceTokenizer

    train, valid, test = _corpus_pairs(args)
    if not train:
        raise UsageError("the corpus has no usable training pairs")
    rank = int(os.environ.get("RANK", "0"))
    t0 = time.perf_counter()
    if args.separate_vocab:
        src_tok = SentencePieceTokenizer.train([p.src for p in train], args.vocab_size, args.model_type)
        tgt_tok = SentencePieceTokenizer.train([p.tgt for p in train], args.vocab_size, args.model_type)
    else:
        texts = [p.src for p in train] + [p.tgt for p in train]
        src_tok = tgt_tok = SentencePieceTokenizer.train(texts, args.vocab_size, args.model_type)
    if rank == 0:
        print(
            f"tokenizer: vocab {src_tok.vocab_size}/{tgt_tok.vocab_size} in {time.perf_counter() - t0:.1f}s; "
            f"{len(train)} train, {len(valid)} valid, {len(test)} test pairs",
            file=sys.stderr,
        )
    return train, valid, test, src_tok, tgt_tok


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
    "stop_at_exact_match": "stop_at_exact_match", "precision": "precision",
}  # fmt: skip


def _configs(args: argparse.Namespace, src_tok: Any, tgt_tok: Any) -> tuple[ModelConfig, TrainConfig]:
    """Model and training configs: the recipe of this kind of run (recipes.TOY or recipes.CORPUS), then the arguments."""
    from dataclasses import replace

    recipe = recipes.TOY if args.task else recipes.CORPUS
    recipe = replace(
        recipe,
        size=_size(args, recipe.size),
        max_len=args.max_len or recipe.max_len,
        dropout=recipe.dropout if args.dropout is None else args.dropout,
    )
    model_config = replace(
        recipe.config(src_tok.vocab_size, tgt_tok.vocab_size),
        share_embeddings=src_tok is tgt_tok,
        pad_id=tgt_tok.pad_id,
        architecture=args.arch,
    )
    given = {
        field: getattr(args, arg) for arg, field in TRAIN_OPTIONS.items() if getattr(args, arg) is not None
    }
    return model_config, replace(recipe.train, **given)


RESUME_OVERRIDES = {  # train arguments that may change when a run is resumed -> TrainConfig fields
    "steps": "steps",
    "time_limit": "time_limit_s",
    "threads": "threads",
    "eval_every": "eval_every",
    "log_every": "log_every",
    "max_tokens": "max_tokens",
    "precision": "precision",
    "lr_factor": "lr_factor",
}


def _with_dropout(model: torch.nn.Module, dropout: float | None) -> torch.nn.Module:
    """The same weights in a model whose dropout is `dropout` (None: unchanged)."""
    from dataclasses import replace

    if dropout is None or dropout == model.config.dropout:
        return model
    rebuilt = build_model(replace(model.config, dropout=dropout))
    rebuilt.load_state_dict(model.state_dict())
    return rebuilt


def _resumed_trainer(args: argparse.Namespace) -> tuple[Trainer, list]:
    """A Trainer that continues --resume: its weights, tokenizers, recipe, history and Adam state."""
    from dataclasses import replace

    ckpt = load_checkpoint(args.resume)
    if ckpt.train_config is None:
        raise UsageError(f"{ckpt.name} has no training recipe to continue")
    if (ckpt.task or None) != (args.task or None):
        raise UsageError(
            f"{ckpt.name} was trained on {ckpt.task or 'a corpus'}, not {args.task or 'a corpus'}"
        )
    if args.task:
        train, valid, test, _, _ = _task_data(args)
    else:
        train, valid, test = _corpus_pairs(args)
    overrides = {
        field: getattr(args, arg) for arg, field in RESUME_OVERRIDES.items() if getattr(args, arg) is not None
    }
    config = replace(ckpt.train_config, device=args.device, **overrides)
    model = _with_dropout(ckpt.model, args.dropout).train()
    trainer = Trainer(model, train, valid, ckpt.src_tokenizer, ckpt.tgt_tokenizer, config, task=ckpt.task)
    optimizer = load_optimizer_state(args.resume)
    try:
        trainer.restore(ckpt.metrics, ckpt.snapshots, optimizer)
    except ValueError as exc:
        raise UsageError(f"{ckpt.name}: {exc}") from exc
    if trainer.rank == 0:
        how = "with Adam's state" if optimizer else "without Adam's state: the learning rate ramps up again"
        print(f"resuming {ckpt.name} at step {trainer.step} {how}", file=sys.stderr)
    return trainer, test


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


def _warm_model(args: argparse.Namespace, src_tok: Any, tgt_tok: Any) -> torch.nn.Module:
    """The --init checkpoint's model moved onto the new tokenizers (visformer.warmstart)."""
    from .warmstart import warm_start

    if args.task or args.resume:
        raise UsageError("--init starts a corpus run; it cannot be combined with --task or --resume")
    try:
        return warm_start(load_checkpoint(args.init), src_tok, tgt_tok)
    except ValueError as exc:
        raise UsageError(f"--init {args.init}: {exc}") from exc


def build_trainer(args: argparse.Namespace) -> tuple[Trainer, list]:
    """The Trainer `train` runs (a resumed or a new one) and the test pairs scored after it."""
    if args.resume:
        return _resumed_trainer(args)
    train, valid, test, src_tok, tgt_tok = _task_data(args) if args.task else _corpus_data(args)
    model_config, train_config = _configs(args, src_tok, tgt_tok)
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = _warm_model(args, src_tok, tgt_tok) if args.init else build_model(model_config)
    return Trainer(model, train, valid, src_tok, tgt_tok, train_config, task=args.task), test


def _is_checkpoint(path: Path) -> bool:
    """Whether a folder holds a visformer checkpoint's config.json (damaged or not otherwise)."""
    try:
        return json.loads((path / CONFIG_FILE).read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, RecursionError, AttributeError):
        return False


def check_out(out: str, overwrite: bool = False, kind: str = "checkpoint") -> Path:
    """--out of a command that writes a folder: never replaces anything it was not asked to.

    kind "checkpoint": the name must be a safe checkpoint name; an existing checkpoint is replaced only with
    --overwrite; any other file, or a folder with files in it, is refused. kind "data" (prepare): a folder
    with files but no manifest.json is replaced only with --overwrite. Every command that writes a folder calls this.
    """
    from .checkpoint import safe_checkpoint_dir

    path = Path(out)
    if kind == "checkpoint":
        path = safe_checkpoint_dir(path.parent, path.name)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UsageError(f"--out {out} exists and is not a folder: choose another --out")
    if not path.is_dir() or not any(path.iterdir()):
        return path
    if kind == "data":
        if not (path / "manifest.json").is_file() and not overwrite:
            raise UsageError(
                f"--out {out} holds files that prepare did not write; add --overwrite to write into it"
            )
        return path
    if not _is_checkpoint(path):
        raise UsageError(f"--out {out} is a folder that is not a visformer checkpoint: choose another --out")
    if not overwrite:
        raise UsageError(f"--out {out} is a checkpoint already; add --overwrite to replace it")
    return path


def overwrite_option(p: argparse.ArgumentParser, what: str = "an existing checkpoint") -> None:
    """--overwrite, for every command that writes a folder (see check_out)."""
    p.add_argument("--overwrite", action="store_true", help=f"replace {what} at --out")


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


# ---------------------------------------------------------------------------------------------
# translate / evaluate
# ---------------------------------------------------------------------------------------------


def inference_threads(args: argparse.Namespace) -> int:
    """The torch threads of translate / evaluate: --threads, or the cores free of other work."""
    return args.threads or idle_cores()


def cmd_translate(args: argparse.Namespace) -> int:
    """`translate`: print one translation per sentence."""
    empty = [i for i, text in enumerate(args.sentences, 1) if not text.strip()]
    if empty:
        raise UsageError(f"sentence {empty[0]} is empty: there is nothing to translate")
    ckpt = load_checkpoint(args.checkpoint)
    with torch_threads(inference_threads(args)):
        hyps = translate_all(
            ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, args.sentences, args.beam_size, progress=False,
            precision=args.precision,
        )  # fmt: skip
    for hyp in hyps:
        print(hyp)
    return 0


def _read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file, or a UsageError naming it."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"file not found: {path}")
    data = p.read_bytes()
    try:
        return data.decode("utf-8").rstrip("\n").split("\n")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{path} is not UTF-8 text (bad byte at line {line}); re-save it as UTF-8") from exc


def cmd_evaluate(args: argparse.Namespace) -> int:
    """`evaluate`: sacreBLEU (cased, 13a) and chrF on --src/--ref."""
    src, ref = _read_lines(args.src), _read_lines(args.ref)
    if len(src) != len(ref):
        raise UsageError(f"{args.src} has {len(src)} lines but {args.ref} has {len(ref)}")
    ckpt = load_checkpoint(args.checkpoint)
    threads = inference_threads(args)
    t0 = time.perf_counter()
    with torch_threads(threads):
        hyps = translate_all(
            ckpt.model,
            ckpt.src_tokenizer,
            ckpt.tgt_tokenizer,
            src,
            args.beam_size,
            args.batch_size,
            progress=not args.no_progress,
            precision=args.precision,
        )
    bleu, chrf = corpus_scores(hyps, ref)
    seconds = time.perf_counter() - t0
    print(f"BLEU = {bleu:.2f}  (sacreBLEU, cased, 13a, beam {args.beam_size}, {len(src)} sentences)")
    print(f"chrF = {chrf:.2f}")
    result = {
        "bleu": round(bleu, 2),
        "chrf": round(chrf, 2),
        "beam_size": args.beam_size,
        "sentences": len(src),
        "seconds": round(seconds, 1),
        "threads": threads,
        "precision": args.precision,
    }
    if args.by_length:
        buckets = bleu_by_source_length(src, hyps, ref)
        for b in buckets:
            print(f"  {b.label:>6} source words: BLEU {b.bleu:6.2f}  chrF {b.chrf:6.2f}  ({b.n} sentences)")
        result["by_length"] = [
            {"words": b.label, "n": b.n, "bleu": round(b.bleu, 2), "chrf": round(b.chrf, 2)} for b in buckets
        ]
    if args.typed:
        result["typed"] = _typed_scores(ckpt, src, ref, args)
    if args.json:
        print(json.dumps(result))
    return 0


def _typed_scores(ckpt: Any, src: list[str], ref: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """BLEU/chrF with every source as a student may type it: no final punctuation; one space fewer."""
    from .data import as_typed

    scores = {}
    for name, typed in (
        ("no final punctuation", [as_typed(s, drop_final=True, join_at=None) for s in src]),
        ("one space fewer", [as_typed(s, drop_final=False, join_at=0.5) for s in src]),
    ):
        with torch_threads(inference_threads(args)):
            hyps = translate_all(ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, typed, args.beam_size,
                                 args.batch_size, progress=False, precision=args.precision)  # fmt: skip
        bleu, chrf = corpus_scores(hyps, ref)
        print(f"  sources with {name}: BLEU {bleu:.2f}  chrF {chrf:.2f}")
        scores[name] = {"bleu": round(bleu, 2), "chrf": round(chrf, 2)}
    return scores


def cmd_average(args: argparse.Namespace) -> int:
    """`average`: one checkpoint whose weights are the mean of the given checkpoints'."""
    check_out(args.out, args.overwrite)
    out = average_checkpoints(args.checkpoints, args.out, half=not args.float32)
    print(f"saved {out}: the average of {len(args.checkpoints)} checkpoints")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """`prepare`: build a corpus mix's split files (back-translating with --back-translator where it asks)."""
    from .corpora import prepare

    check_out(args.out, args.overwrite, kind="data")
    translator = load_checkpoint(args.back_translator) if args.back_translator else None
    with torch_threads(inference_threads(args)):
        manifest = prepare(args.mix, args.data, args.out, seed=args.seed, back_translator=translator,
                           batch_size=args.batch_size, progress=not args.no_progress)  # fmt: skip
    print(f"wrote {args.out}: {manifest['pairs']}")
    return 0


def cmd_import_marian(args: argparse.Namespace) -> int:
    """`import-marian`: an OPUS-MT model (folder or Hub id) as a visformer checkpoint folder."""
    from .marian import import_marian

    check_out(args.out, args.overwrite)
    out = import_marian(args.source, args.out)
    ckpt = load_checkpoint(out)
    print(f"saved {out}: {ckpt.model.num_parameters():,} parameters, imported from {args.source}")
    return 0


COMMANDS = {
    "import-marian": cmd_import_marian,
    "prepare": cmd_prepare,
    "train": cmd_train,
    "translate": cmd_translate,
    "evaluate": cmd_evaluate,
    "average": cmd_average,
}


MAX_BEAM_SIZE = 64  # beam 100,000 took 22 GB before the kernel killed it
MAX_BATCH_SIZE = 1024
MAX_HYPOTHESES = 4096  # beam size x batch size: hypotheses decoded at once (their logits: 4096 x vocabulary)


def check_numbers(args: argparse.Namespace) -> str:
    """What is wrong with the numbers on the command line ("" when nothing)."""
    for name in ("steps", "beam_size", "batch_size", "max_tokens", "n_train", "n_valid", "threads"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {value}"
    beam, batch = getattr(args, "beam_size", None) or 1, getattr(args, "batch_size", None) or 1
    if beam > MAX_BEAM_SIZE:
        return f"--beam-size must be at most {MAX_BEAM_SIZE}, got {beam} (the paper used 4)"
    if batch > MAX_BATCH_SIZE:
        return f"--batch-size must be at most {MAX_BATCH_SIZE}, got {batch}"
    if beam * batch > MAX_HYPOTHESES:
        return f"--beam-size x --batch-size must be at most {MAX_HYPOTHESES}, got {beam} x {batch}: lower --batch-size"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, run, and turn expected failures into one-line errors (exit code 2)."""
    args = build_parser().parse_args(argv)
    problem = check_numbers(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](args)
    except (UsageError, CheckpointError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser", "translate_all", "translate_batch"]
