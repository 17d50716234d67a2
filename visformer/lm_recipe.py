"""How the shipped tiny language models were made: English text, a SentencePiece vocabulary, the Trainer, a checkpoint.

    python -m visformer.lm_recipe --arch encoder-lm --data ../shared/data --out runs/lm-encoder
    python -m visformer.lm_recipe --arch decoder-lm --data ../shared/data --out runs/lm-decoder

(The shipped checkpoints were made by this recipe when it lived at visformer.models.lm_recipe and trained
through its own loop, train_lm: the same Adam, Noam schedule, batches and objective as the Trainer's.)

The English side of Tatoeba German–English (CC BY 2.0 FR) and of Multi30k train (research and education
use), deduplicated; Multi30k's val.en is the held-out text whose loss the checkpoint records.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from .architectures import Family, of_family
from .checkpoint import save_checkpoint
from .config import ModelConfig, TrainConfig
from .corpora import terms
from .data import Pair, read_lines
from .models import build_model, lm_objective
from .models.lm import lm_loss
from .records import StepMetrics
from .tokenizer import SentencePieceTokenizer
from .training import Trainer

TRAIN_FILES = ("tatoeba-deu-eng/tatoeba-deu-eng.en", "multi30k/train.en")
VALID_FILE = "multi30k/val.en"
VOCAB_SIZE = 4000
MAX_LEN = 64


def english_texts(data: Path) -> tuple[list[str], list[str]]:
    """Deduplicated English training sentences and the held-out ones (none of which is in training)."""
    valid = list(dict.fromkeys(read_lines(data / VALID_FILE)))
    held = set(valid)
    train = [t for f in TRAIN_FILES for t in read_lines(data / f)]
    return [t for t in dict.fromkeys(train) if t not in held], valid


def lm_config(architecture: str, vocab_size: int) -> ModelConfig:
    """The tiny LM: d_model 128, 4 heads, 2 layers, d_ff 512, no dropout (under 1 M parameters, 4000 pieces)."""
    return ModelConfig(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=128, n_heads=4, n_encoder_layers=2,
        n_decoder_layers=2, d_ff=512, dropout=0.0, max_len=MAX_LEN, architecture=architecture,
    )  # fmt: skip


def run(
    architecture: str,
    data: Path,
    out: Path,
    steps: int,
    threads: int = 1,
    device: str = "cpu",
    max_tokens: int = 2048,
) -> Path:
    """Train one tiny LM on the English texts and save it as a float16 checkpoint; prints progress."""
    torch.set_num_threads(threads)
    train, valid = english_texts(data)
    tok = SentencePieceTokenizer.train(train, VOCAB_SIZE, num_threads=threads)
    model = build_model(lm_config(architecture, tok.vocab_size))
    config = TrainConfig(
        steps=steps, max_tokens=max_tokens, warmup=400, log_every=50, device=device, threads=threads,
        label_smoothing=0.0, eval_every=steps, n_snapshots=0,
    )  # fmt: skip
    started = time.perf_counter()
    history = []
    pairs = {name: [Pair(t, t) for t in texts] for name, texts in (("train", train), ("valid", valid))}
    trainer = Trainer(model, pairs["train"], pairs["valid"], tok, tok, config, loss=lm_objective)
    for m in trainer.run():
        if isinstance(m, StepMetrics):
            history.append({"step": m.step, "loss": round(m.loss, 4), "elapsed_s": round(m.elapsed_s, 1)})
            print(f"step {m.step} loss {m.loss:.3f} {m.elapsed_s:.0f}s", flush=True)
        else:
            print(f"step {m.step} held-out loss {m.valid_loss:.3f}", flush=True)
    train_time = time.perf_counter() - started
    valid_loss = lm_loss(model, valid, tok)  # a seeded masking: the number the checkpoint records
    info = {
        "data": f"English side of {', '.join(TRAIN_FILES)} ({len(train)} distinct sentences); held out: {VALID_FILE}",
        "terms": terms(TRAIN_FILES),
        "objective": model.objective,
        "steps": steps,
        "train_time_s": round(train_time, 1),
        "valid_loss": round(valid_loss, 4),
        "valid_perplexity": round(math.exp(valid_loss), 2),
        "command": f"python -m visformer.lm_recipe --arch {architecture} --steps {steps} "
        f"--max-tokens {max_tokens} --device {device}",
    }
    metrics = {"history": history, "valid": {"loss": valid_loss, "texts": VALID_FILE}}
    return save_checkpoint(out, model, tok, tok, train_config=config, metrics=metrics, info=info, half=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: --arch encoder-lm|decoder-lm --data FOLDER --out FOLDER [--steps N]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=of_family(Family.LM), required=True)
    parser.add_argument(
        "--data", type=Path, required=True, help="folder holding tatoeba-deu-eng/ and multi30k/"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--max-tokens", type=int, default=2048, help="tokens per batch")
    args = parser.parse_args(argv)
    print(run(args.arch, args.data, args.out, args.steps, args.threads, args.device, args.max_tokens))


if __name__ == "__main__":
    main()
