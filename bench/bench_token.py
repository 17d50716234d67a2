"""Where a decoded token's time goes (issue 30): the machine's bounds, the step by path and precision, a profile.

Run: python -m bench --only token  (or python -m bench.bench_token)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from visformer.config import ModelConfig
from visformer.decoding.fast import FastDecoder, StepDtypes, decoding_dtype, fast_weights
from visformer.model import Encoded, Transformer

from .common import SHIPPED, TINY, Section, Stat, alternate

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
TITLE = "Decoding: where a token's time goes"
# opus-mt-ko-en's size (visformer.marian.OPUS_MT_KO_EN), random weights
OPUS = ModelConfig(
    src_vocab_size=65001, tgt_vocab_size=65001, d_model=512, n_heads=8, n_encoder_layers=6,
    n_decoder_layers=6, d_ff=2048, dropout=0.0, max_len=512, share_embeddings=True, activation="swish",
    output_bias=True,
)  # fmt: skip
F32, BF16 = torch.float32, torch.bfloat16
CATEGORIES = {  # profiler op name -> what it is, first match wins
    "mm": "matmul (linear)",
    "addmm": "matmul (linear)",
    "linear": None,  # a wrapper around addmm / mm
    "scaled_dot_product": "attention",
    "flash_attention": "attention",
    "cat": "cache: torch.cat / index_select",
    "index_select": "cache: torch.cat / index_select",
    "copy": "copies and casts (cache writes, autocast)",
    "_to_copy": "copies and casts (cache writes, autocast)",
    "to": None,
    "layer_norm": "layer norm",
    "relu": "activation, residual adds, embedding",
    "silu": "activation, residual adds, embedding",
    "add": "activation, residual adds, embedding",
    "mul": "activation, residual adds, embedding",
    "embedding": "activation, residual adds, embedding",
    "index_select_backward": None,
    "view": "views, shapes and allocation",
    "transpose": "views, shapes and allocation",
    "as_strided": "views, shapes and allocation",
    "select": "views, shapes and allocation",
    "slice": "views, shapes and allocation",
    "unsqueeze": "views, shapes and allocation",
    "expand": "views, shapes and allocation",
    "reshape": "views, shapes and allocation",
    "t": "views, shapes and allocation",
    "empty": "views, shapes and allocation",
    "empty_strided": "views, shapes and allocation",
    "unbind": "views, shapes and allocation",
    "squeeze": "views, shapes and allocation",
    "where": "masks (causal, padding)",
    "arange": "masks (causal, padding)",
    "masked_fill": "masks (causal, padding)",
    "le": "masks (causal, padding)",
    "logical_not": "masks (causal, padding)",
    "bitwise_not": "masks (causal, padding)",
    "dropout": "dropout calls (eval: no-ops)",
    "topk": "trace and choice (topk, gather, argmax, log-softmax)",
    "gather": "trace and choice (topk, gather, argmax, log-softmax)",
    "argmax": "trace and choice (topk, gather, argmax, log-softmax)",
    "log_softmax": "trace and choice (topk, gather, argmax, log-softmax)",
}


def shipped_model(quick: bool) -> tuple[Transformer, str]:
    """The shipped en-de checkpoint (d_model 256), or a random model of that size when it is missing."""
    from visformer.checkpoint import load_checkpoint

    if quick:
        torch.manual_seed(0)
        return Transformer(TINY).eval(), "tiny random model (quick)"
    path = CHECKPOINTS / "en-de"
    if (path / "config.json").exists():
        return load_checkpoint(path).model.eval(), "`checkpoints/en-de`"
    torch.manual_seed(0)
    return Transformer(SHIPPED).eval(), "random, shipped size"


def opus_model(quick: bool) -> tuple[Transformer, str]:
    """A random model of opus-mt-ko-en's size (77.5 M parameters)."""
    torch.manual_seed(0)
    return Transformer(TINY if quick else OPUS).eval(), "random, opus-mt-ko-en size"


# ---------------------------------------------------------------------------------------------
# The machine's bounds
# ---------------------------------------------------------------------------------------------


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> dict[str, Stat]:
    """Read bandwidth in GB/s over a buffer far larger than the caches: summing it, and as the weight matrix of
    an fp32 matrix-vector product (the kernel a batch-1 decoding step streams its weights through)."""
    buf = torch.ones(megabytes * 2**20 // 4)
    matrix, vector = buf.view(-1, 1024), torch.ones(1024)
    runs = {"sum": buf.sum, "gemv": lambda: torch.mv(matrix, vector)}
    times = alternate(runs, repeats)
    return {name: Stat.of(seconds).inverse(buf.numel() * 4 / 1e9) for name, seconds in times.items()}


def matmul_peak(dtype: torch.dtype, n: int = 1024, repeats: int = 5) -> Stat:
    """GFLOP/s of an n x n matmul in `dtype`, median of `repeats`."""
    a = torch.randn(n, n).to(dtype)
    a @ a
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - start)
    return Stat.of(times).inverse(2 * n**3 / 1e9)


def bytes_per_token(model: Transformer, dtypes: StepDtypes) -> int:
    """Bytes of decoder weights one step reads (cross-attention K/V weights are used once, not per token)."""
    w = fast_weights(model, dtypes)
    linears = [
        lin for lw in w.layers for lin in (lw.qkv, lw.self_out, lw.cross_q, lw.cross_out, lw.ff1, lw.ff2)
    ]
    tensors = [t for weight, bias, _ in (*linears, w.output) for t in (weight, bias) if t is not None]
    return sum(t.numel() * t.element_size() for t in tensors)


# ---------------------------------------------------------------------------------------------
# The decoder step alone: reference path vs fast path, by precision
# ---------------------------------------------------------------------------------------------


def source(model: Transformer, batch: int, n_tokens: int = 20) -> Tensor:
    """(batch, n_tokens + 1) random ordinary ids and eos."""
    gen = torch.Generator().manual_seed(0)
    body = torch.randint(4, min(model.config.src_vocab_size, 8000), (batch, n_tokens), generator=gen)
    return torch.cat([body, torch.full((batch, 1), 3)], dim=1)


@torch.no_grad()
def reference_steps(model: Transformer, encoded: Encoded, steps: int, bf16: bool) -> None:
    """`steps` greedy steps through Transformer.decode and its torch.cat cache (bf16: under autocast)."""
    with torch.autocast("cpu", dtype=BF16, enabled=bf16):
        cache = model.new_cache()
        token = torch.full((encoded.memory.shape[0], 1), 2)
        for _ in range(steps):
            logits = model.decode(token, encoded, cache=cache).logits[:, -1].float()
            token = logits.argmax(-1, keepdim=True)


@torch.no_grad()
def fast_steps(model: Transformer, encoded: Encoded, steps: int, dtypes: StepDtypes) -> None:
    """`steps` greedy steps of the fast path in `dtypes`."""
    dec = FastDecoder(fast_weights(model, dtypes), encoded, steps)
    token = torch.full((encoded.memory.shape[0],), 2)
    for _ in range(steps):
        token = dec.step(token).argmax(-1)


STEP_VARIANTS = {  # name -> (fast path?, weight dtypes)
    "reference fp32": (False, StepDtypes(F32, F32)),
    "reference bf16 autocast": (False, StepDtypes(BF16, BF16)),
    "fast fp32": (True, StepDtypes(F32, F32)),
    "fast bf16": (True, StepDtypes(BF16, BF16)),
    "fast fp32 layers, bf16 output": (True, StepDtypes(F32, BF16)),
}


def time_steps(
    section: Section, label: str, model: Transformer, batches: tuple[int, ...], rounds: int, bandwidth: float
) -> None:
    """Rows: ms per token of each step variant at each batch (CPU seconds of this thread, alternating)."""
    steps = 20
    for batch in batches:
        with torch.no_grad():
            encoded = model.encode(source(model, batch))
        variants = {
            name: (
                (lambda d=dtypes, e=encoded: fast_steps(model, e, steps, d))
                if fast
                else (lambda d=dtypes, e=encoded: reference_steps(model, e, steps, d.layers == BF16))
            )
            for name, (fast, dtypes) in STEP_VARIANTS.items()
        }
        times = alternate(variants, rounds, clock=time.thread_time)
        chosen = decoding_dtype(model.config, batch, torch.device("cpu"))
        base = Stat.of(times["reference fp32"]).median
        for name, seconds in times.items():
            fast, dtypes = STEP_VARIANTS[name]
            per_token = Stat.of(seconds).scaled(1e3 / steps)
            bound = bytes_per_token(model, dtypes) / (bandwidth * 1e9) * 1e3
            mark = " (auto)" if fast and dtypes == chosen else ""
            section.rows.append([
                label, str(batch), name + mark, per_token.fmt(2), f"{base / Stat.of(seconds).median:.2f}×",
                f"{bound:.2f}", f"{per_token.median / bound:.1f}×" if batch == 1 else "",
            ])  # fmt: skip
            print(" | ".join(section.rows[-1]), flush=True)


# ---------------------------------------------------------------------------------------------
# Profile: the share of a step's time by kind of operation
# ---------------------------------------------------------------------------------------------


def categorize(name: str) -> str | None:
    """The category of an aten op (None: a wrapper whose time its children already count)."""
    op = name.removeprefix("aten::").rstrip("_")  # in-place ops count with their kind
    for key, category in CATEGORIES.items():
        if op == key or (len(key) > 4 and key in op):
            return category
    return "other ops"


def profile_shares(fn: Callable[[], None], wall_s: float) -> dict[str, float]:
    """Share of one run's wall time per op category, and what runs outside ops (Python, dispatch)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    totals: dict[str, float] = {}
    others: dict[str, float] = {}
    n_ops = 0
    for event in prof.key_averages():
        category = categorize(event.key)
        if category is None or not event.key.startswith("aten::"):
            continue
        totals[category] = totals.get(category, 0.0) + event.self_cpu_time_total / 1e6
        n_ops += event.count
        if category == "other ops":
            others[event.key.removeprefix("aten::")] = event.self_cpu_time_total / 1e6
    if "other ops" in totals:  # name the largest of them
        top = sorted(others, key=others.get, reverse=True)[:3]
        totals[f"other ops ({', '.join(top)})"] = totals.pop("other ops")
    op_time = sum(totals.values())
    shares = {k: v / max(op_time, wall_s) for k, v in totals.items()}
    shares["Python, dispatch and launch (wall time outside ops)"] = max(0.0, 1 - op_time / wall_s)
    shares["ops per token"] = n_ops
    return shares


def profile_rows(section: Section, label: str, model: Transformer, rounds: int) -> None:
    """A notes table: how the reference and fast greedy step at batch 1 spend a token."""
    from visformer.decoding import greedy, reference_decoding

    src = source(model, 1)
    steps = 20

    def reference() -> None:
        with reference_decoding():
            greedy(model, src, max_len=steps, eos_id=-1, precision="fp32")

    def fast() -> None:
        greedy(model, src, max_len=steps, eos_id=-1, precision="fp32")

    times = alternate({"reference": reference, "fast": fast}, rounds)
    for name, fn in (("reference", reference), ("fast", fast)):
        wall = Stat.of(times[name]).median
        shares = profile_shares(fn, wall)
        ops = shares.pop("ops per token") / steps
        parts = ", ".join(
            f"{k} {v:.0%}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1]) if v >= 0.01
        )
        section.notes.append(
            f"profile, {label}, greedy fp32 batch 1, {name} path: {wall * 1e3 / steps:.2f} ms/token, "
            f"{ops:.0f} aten calls per token (nested calls counted); {parts}"
        )
        print(section.notes[-1], flush=True)


# ---------------------------------------------------------------------------------------------
# torch.compile of the fast step: does it pay back its compile time?
# ---------------------------------------------------------------------------------------------


def compile_timings(model: Transformer) -> dict[str, float]:
    """Compile time and ms/token of the fp32 fast step compiled (dynamic shapes) against eager, batch 1."""
    with torch.no_grad():
        encoded = model.encode(source(model, 1))
    steps, dtypes = 20, StepDtypes(F32, F32)
    eager, compiled = FastDecoder.step, torch.compile(FastDecoder.step, dynamic=True)

    def run(step) -> None:
        dec = FastDecoder(fast_weights(model, dtypes), encoded, steps)
        token = torch.full((1,), 2)
        with torch.no_grad():
            for _ in range(steps):
                token = step(dec, token).argmax(-1)

    start = time.perf_counter()
    run(compiled)  # compiles (and recompiles as the cache grows, if it must)
    compile_s = time.perf_counter() - start
    times = alternate(
        {"eager": lambda: run(eager), "compiled": lambda: run(compiled)}, 5, clock=time.thread_time
    )
    ms = {name: Stat.of(seconds).median * 1e3 / steps for name, seconds in times.items()}
    return {"compile_s": compile_s, **ms}


def compile_rows(section: Section, label: str, limit_s: int) -> None:
    """torch.compile's payback, measured in a child process that may take at most `limit_s` seconds."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "bench.bench_token", "--compile-child"]
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=limit_s, check=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        section.notes.append(
            f"torch.compile of the fast step ({label}, fp32, batch 1): not finished compiling after {limit_s} s "
            "on this machine, so it cannot pay back in a class session; the step runs eagerly."
        )
        return
    except (subprocess.CalledProcessError, ValueError, IndexError) as exc:
        section.notes.append(f"torch.compile of the fast step ({label}): failed here: {str(exc)[:160]}")
        return
    saved = r["eager"] - r["compiled"]
    payback = (
        f"pays back after {r['compile_s'] * 1e3 / saved:,.0f} tokens" if saved > 0 else "never pays back"
    )
    section.notes.append(
        f"torch.compile of the fast step ({label}, fp32, batch 1, dynamic shapes): first run with compilation "
        f"{r['compile_s']:.1f} s; then {r['compiled']:.2f} ms/token against {r['eager']:.2f} eager: {payback}."
    )
    print(section.notes[-1], flush=True)


def run(quick: bool = False, rounds: int = 5) -> Section:
    """Bounds, step variants per model and batch, profiles and torch.compile: the section."""
    section = Section(
        TITLE,
        "The decoder step alone (the encoder runs once before), greedy, 20 steps from 20-token sources: "
        "ms per token in this thread's CPU seconds (robust to other jobs taking the cores), median (min–max) "
        "of alternating rounds; speed-up against the reference path in fp32 (`Transformer.decode` with the "
        "torch.cat cache, as decoding ran before issue 30). Bound: bytes of decoder weights one step reads "
        "÷ the memory bandwidth measured in the same run (a token cannot be faster at batch 1, where every "
        "weight is read once per token). `(auto)` marks what precision='auto' picks for that batch.",
        ["model", "batch", "step", "ms/token", "vs reference fp32", "bound ms/token", "× bound"],
    )
    rounds = 2 if quick else rounds
    bandwidths = memory_bandwidth(64 if quick else 512)
    bandwidth = max(bandwidths.values(), key=lambda stat: stat.median)  # what the best kernel streams
    peaks = {dt: matmul_peak(dt, 256 if quick else 1024) for dt in (F32, BF16)}
    section.notes.append(
        f"memory bandwidth over a 512 MiB buffer: sum {bandwidths['sum'].fmt(1)} GB/s, fp32 GEMV "
        f"{bandwidths['gemv'].fmt(1)} GB/s (the bound uses the larger); matmul peak (1024²): fp32 "
        f"{peaks[F32].fmt(0)} GFLOP/s, bf16 {peaks[BF16].fmt(0)} GFLOP/s"
    )
    for model, label in (shipped_model(quick), opus_model(quick)):
        big = model.config.d_model >= 512
        batches = (1,) if quick else ((1, 4, 64) if not big else (1, 4))
        time_steps(section, label, model, batches, 2 if big else rounds, bandwidth.median)
        profile_rows(section, label, model, 2 if big else rounds)
    end = memory_bandwidth(64 if quick else 512)
    section.notes.append(
        f"memory bandwidth again at the end: sum {end['sum'].fmt(1)} GB/s, GEMV {end['gemv'].fmt(1)} GB/s"
    )
    if not quick:
        compile_rows(section, shipped_model(quick)[1], limit_s=180)
    return section


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-child", action="store_true", help="time torch.compile of the step (JSON)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(json.dumps(compile_timings(shipped_model(False)[0])) if args.compile_child else run().markdown())
