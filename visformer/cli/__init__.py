"""Command line: `python -m visformer train | translate | evaluate | average | prepare | import-marian`.

Also under torchrun for DDP. The parser is in parser.py, `train` in train.py, what the commands share in
common.py; the shorter commands are here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from ..checkpoint import CheckpointError, average_checkpoints, load_checkpoint
from ..data import as_typed, read_lines
from ..evaluation import bleu_by_source_length, corpus_scores, translate_all, translate_batch
from ..utils import torch_threads
from .common import UsageError, check_out, inference_threads, overwrite_option
from .parser import build_parser
from .train import build_trainer, cmd_train

# ---------------------------------------------------------------------------------------------
# translate / evaluate
# ---------------------------------------------------------------------------------------------


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


def cmd_evaluate(args: argparse.Namespace) -> int:
    """`evaluate`: sacreBLEU (cased, 13a) and chrF on --src/--ref."""
    src, ref = read_lines(args.src), read_lines(args.ref)
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
    n = len(args.checkpoints)
    print(
        f"saved {out}: "
        + (f"the average of {n} checkpoints" if n > 1 else "one checkpoint, its weights stored again")
    )
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """`prepare`: build a corpus mix's split files (back-translating with --back-translator where it asks)."""
    from ..corpora import prepare

    check_out(args.out, args.overwrite, kind="data")
    translator = load_checkpoint(args.back_translator) if args.back_translator else None
    with torch_threads(inference_threads(args)):
        manifest = prepare(args.mix, args.data, args.out, seed=args.seed, back_translator=translator,
                           batch_size=args.batch_size, progress=not args.no_progress)  # fmt: skip
    print(f"wrote {args.out}: {manifest['pairs']}")
    return 0


def cmd_import_marian(args: argparse.Namespace) -> int:
    """`import-marian`: an OPUS-MT model (folder or Hub id) as a visformer checkpoint folder."""
    from ..marian import import_marian

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


__all__ = [
    "UsageError",
    "build_parser",
    "build_trainer",
    "check_out",
    "main",
    "overwrite_option",
    "translate_all",
    "translate_batch",
]
