"""Decoding speed: the key/value cache against full recomputation, and greedy / beam-4 latency.

Run: python -m bench.bench_decoding [--checkpoint PATH] [--rounds N] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from visformer.data import encode_source
from visformer.decoding import beam_search, greedy
from visformer.model import Transformer

from .common import SHIPPED, TINY, Section, Stat, alternate, format_table, machine_info, ratio_stat, time_call

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
TITLE = "Decoding"


DEFAULT_CHECKPOINT = "multi30k-en-de"  # the app's default model
# An English sentence of about 20 pieces for the latency rows of a real checkpoint.
SENTENCE = (
    "A man in a blue shirt and a black hat is riding his old bicycle down a busy street next to the park."
)


def load_model(checkpoint: str | Path | None = None) -> tuple[Transformer, str, Tensor | None]:
    """(model, label, source ids (1, S) of a real sentence or None): the shipped English→German checkpoint
    (or `checkpoint`) when there is one, else a randomly initialised model of the shipped size."""
    from visformer.checkpoint import load_checkpoint

    path = Path(checkpoint) if checkpoint else CHECKPOINTS / DEFAULT_CHECKPOINT
    if checkpoint or (path / "config.json").exists():
        ck = load_checkpoint(path)
        ids = encode_source(ck.src_tokenizer, SENTENCE, 21)[0]  # at most 20 tokens + </s>
        return ck.model.eval(), f"checkpoint `checkpoints/{path.name}`", torch.tensor([ids])  # (1, S)
    torch.manual_seed(0)
    return (
        Transformer(SHIPPED).eval(),
        "random init of the shipped size (no multi30k-en-de checkpoint yet)",
        None,
    )


def random_source(model: Transformer, batch: int, n_tokens: int, seed: int = 0) -> Tensor:
    """Sentences (B, n_tokens + 1) of random ordinary ids followed by eos."""
    gen = torch.Generator().manual_seed(seed)
    body = torch.randint(4, model.config.src_vocab_size, (batch, n_tokens), generator=gen)
    return torch.cat([body, torch.full((batch, 1), 3)], dim=1)


@torch.no_grad()
def decode_steps(model: Transformer, src: Tensor, steps: int, cached: bool) -> Tensor:
    """Greedy for exactly `steps` tokens (no early stop) with the cache or recomputing the prefix each step."""
    encoded = model.encode(src)
    tgt = torch.full((src.shape[0], 1), 2, dtype=torch.long)  # (B, 1) bos
    cache = model.new_cache() if cached else None
    for _ in range(steps):
        new = tgt[:, -1:] if cached else tgt  # the cache needs only the newest token
        logits = model.decode(new, encoded, cache=cache).logits[:, -1]  # (B, V)
        tgt = torch.cat([tgt, logits.argmax(-1, keepdim=True)], dim=1)
    return tgt[:, 1:]


def cache_speedup(
    model: Transformer, batch: int, n_tokens: int = 20, steps: int = 30, rounds: int = 5
) -> dict:
    """Seconds per run cached and uncached (alternating rounds) and the per-round speed-up."""
    src = random_source(model, batch, n_tokens)
    same = torch.equal(decode_steps(model, src, steps, True), decode_steps(model, src, steps, False))
    times = alternate(
        {
            "full": lambda: decode_steps(model, src, steps, cached=False),
            "cached": lambda: decode_steps(model, src, steps, cached=True),
        },
        rounds,
    )
    return {
        "full": Stat.of(times["full"]),
        "cached": Stat.of(times["cached"]),
        "speedup": ratio_stat(times["full"], times["cached"]),
        "same_tokens": same,
    }


def latency(
    model: Transformer,
    decode: Callable[[Transformer, Tensor], object],
    repeats: int = 5,
    src: Tensor | None = None,
) -> dict:
    """Seconds to translate one 20-token sentence (default length limit) and the tokens produced."""
    src = random_source(model, 1, 20, seed=1) if src is None else src
    n_tokens = len(decode(model, src).outputs[0].tokens)
    return {"seconds": Stat.of(time_call(lambda: decode(model, src), repeats)), "tokens": n_tokens}


def run(
    checkpoint: str | Path | None = None, rounds: int = 5, steps: int = 30, quick: bool = False
) -> Section:
    """Measure everything and return the RESULTS.md section (quick: a tiny random model, 2 rounds)."""
    if quick:
        torch.manual_seed(0)
        model, label, rounds, steps = Transformer(TINY).eval(), "tiny random model (quick mode)", 2, 8
        sentence = None
    else:
        model, label, sentence = load_model(checkpoint)
    section = Section(
        TITLE,
        f"Model: {label}; {model.num_parameters():,} parameters; CPU; source of 20 tokens + eos. "
        f"Cache rows: greedy for exactly {steps} target tokens, with the key/value cache (one new token "
        "per step) against recomputing the whole target prefix every step, alternating runs; speed-up is "
        f"the median of per-round ratios. Latency rows: `decoding.greedy` / `decoding.beam_search` with "
        f"the default length limit (source length + 50) and traces on. Median (min–max) of {rounds} runs.",
        ["measurement", "batch", "median ms (min–max)", "speed-up (min–max)", "notes"],
    )
    for batch in (1, 64):
        r = cache_speedup(model, batch, steps=steps, rounds=rounds)
        same = "same tokens" if r["same_tokens"] else "TOKENS DIFFER"
        section.rows.append(["full recomputation", str(batch), r["full"].scaled(1e3).fmt(), "", ""])
        section.rows.append(
            ["KV cache", str(batch), r["cached"].scaled(1e3).fmt(), r["speedup"].fmt(2), same]
        )
    strategies = {"greedy": greedy, "beam 4": lambda m, s: beam_search(m, s, beam_size=4)}
    for name, fn in strategies.items():
        r = latency(model, fn, repeats=rounds, src=sentence)
        per_token = r["seconds"].scaled(1e3 / r["tokens"]).median
        note = f"{r['tokens']} tokens out, {per_token:.1f} ms/token"
        section.rows.append([f"{name}, one 20-token sentence", "1", r["seconds"].scaled(1e3).fmt(), "", note])
    section.notes.append(
        "Full recomputation runs the decoder (and the output projection) over the whole prefix each step,"
        " as `Transformer.decode` without a cache does; the encoder runs once in both."
    )
    info = machine_info()
    section.notes.append(", ".join(f"{k}: {v}" for k, v in info.items()))
    if sentence is not None:
        section.notes.append(f"Latency rows translate “{SENTENCE}” ({sentence.shape[1] - 1} pieces + eos).")
    if "random" in label:
        section.notes.append(
            "A random model rarely emits eos, so outputs run to the length limit (source length + 50)."
        )
    return section


def write_section(section: Section, path: Path = RESULTS) -> None:
    """Replace (or append) this section in RESULTS.md, leaving every other section as it is."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    heading = f"## {section.title}\n"
    start = text.find(heading)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section.markdown()
    else:
        end = text.find("\n## ", start + len(heading))
        rest = "" if end < 0 else text[end:]
        text = text[:start] + section.markdown() + rest
    path.write_text(text, encoding="utf-8")


def main() -> None:
    """Run the decoding benchmark, print it and write it to RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--checkpoint", default=None, help="checkpoint folder (default: checkpoints/multi30k-en-de)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    section = run(args.checkpoint, args.rounds, args.steps)
    print(format_table(section.header, section.rows))
    write_section(section, args.out)
    print(f"wrote section '{section.title}' to {args.out}")


if __name__ == "__main__":
    main()
