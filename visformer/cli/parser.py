"""The `visformer` argument parser: one sub-parser per command."""

from __future__ import annotations

import argparse

from .. import architectures
from ..config import DECODING_PRECISIONS, PRECISIONS, TrainConfig
from ..models import SEQ2SEQ_ARCHITECTURES
from .common import THREADS_HELP, overwrite_option, threads_value

DESCRIPTION = (
    "Command line: `python -m visformer train | translate | evaluate` (also under torchrun for DDP)."
)


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
        "--valid",
        nargs=2,
        metavar=("SRC", "TGT"),
        help="validation files (default: held out, sharing no sentence with training)",
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
    p.add_argument("--arch", choices=SEQ2SEQ_ARCHITECTURES, default=architectures.DEFAULT,
                   help="transformer, or a GRU seq2seq: rnn-none (no attention), rnn-bahdanau, rnn-luong, rnn-dot")  # fmt: skip
    p.add_argument("--d-model", type=int, default=None)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--layers", type=int, default=None, help="encoder and decoder layers")
    p.add_argument("--encoder-layers", type=int, default=None)
    p.add_argument("--decoder-layers", type=int, default=None)
    p.add_argument(
        "--d-ff",
        type=int,
        default=None,
        help="feed-forward hidden units; also with --resume: grow them (the new units start silent)",
    )
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
    p.add_argument(
        "--cooldown", type=int, default=None,
        help="the last N steps before --steps scale the learning rate down linearly to zero (default 0: none)",
    )  # fmt: skip
    p.add_argument("--label-smoothing", type=float, default=None)
    p.add_argument("--clip-norm", type=float, default=None)
    p.add_argument(
        "--seed", type=int, default=None,
        help=f"default {d.seed}; --resume keeps the run's own seed (its held-out split depends on it)",
    )  # fmt: skip
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


def _inference_options(p: argparse.ArgumentParser) -> None:
    """--threads and --precision, shared by translate and evaluate."""
    p.add_argument("--threads", type=threads_value, default=None, metavar="N|auto", help=THREADS_HELP)
    p.add_argument(
        "--precision", choices=DECODING_PRECISIONS, default="auto",
        help="auto (default): by model size and batch as measured on CPUs (bf16 where it runs natively, int8 weights "
        "for up to 16 rows of an opus-mt-sized model); int8: int8 weight matmuls in decoding (CPU)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The `visformer` argument parser."""
    parser = argparse.ArgumentParser(prog="python -m visformer", description=DESCRIPTION)
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
    r.add_argument("--threads", type=threads_value, default=None, metavar="N|auto", help=THREADS_HELP)
    r.add_argument("--no-progress", action="store_true")
    return parser
