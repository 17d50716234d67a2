"""Generation against a peer: Hugging Face `transformers` generate() on a random Marian model of the same size."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import torch
from torch import Tensor

from visformer.config import ModelConfig
from visformer.model import Transformer

from .common import Section, Stat, alternate, ratio_stat

BOS, EOS = 2, 3


def transformers_available() -> bool:
    """Whether the bench-only dependency `transformers` is installed (bench/requirements.txt)."""
    return importlib.util.find_spec("transformers") is not None


def marian_model(config: ModelConfig):
    """A randomly initialised MarianMTModel with visformer's sizes (no download)."""
    from transformers import MarianConfig, MarianMTModel

    hf_config = MarianConfig(
        vocab_size=config.tgt_vocab_size,
        d_model=config.d_model,
        encoder_layers=config.n_encoder_layers,
        decoder_layers=config.n_decoder_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function="relu",
        max_position_embeddings=config.max_len,
        scale_embedding=True,
        pad_token_id=config.pad_id,
        eos_token_id=EOS,
        forced_eos_token_id=None,
        decoder_start_token_id=BOS,
        dropout=config.dropout,
    )
    return MarianMTModel(hf_config).eval()


@torch.no_grad()
def visformer_greedy(model: Transformer, src: Tensor, new_tokens: int) -> Tensor:
    """Greedy decoding of exactly `new_tokens` tokens with the KV cache (no early stop), (B, new_tokens)."""
    encoded = model.encode(src)
    cache = model.new_cache()
    token = torch.full((src.shape[0], 1), BOS, dtype=torch.long)  # (B, 1)
    out = []
    for _ in range(new_tokens):
        logits = model.decode(token, encoded, cache=cache).logits[:, -1]  # (B, V)
        token = logits.argmax(-1, keepdim=True)
        out.append(token)
    return torch.cat(out, 1)


def marian_generate(model, src: Tensor, new_tokens: int, beams: int) -> Callable[[], object]:
    """generate() forced to produce exactly `new_tokens` tokens (a random model rarely says eos)."""
    mask = torch.ones_like(src)

    @torch.no_grad()
    def run() -> object:
        return model.generate(
            input_ids=src,
            attention_mask=mask,
            num_beams=beams,
            do_sample=False,
            min_new_tokens=new_tokens,
            max_new_tokens=new_tokens,
        )

    return run


def in_bf16(fn: Callable[[], object]) -> Callable[[], object]:
    """fn under torch.autocast("cpu", bfloat16)."""

    def run() -> object:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn()

    return run


def library_strategies(model: Transformer, src: Tensor, new_tokens: int) -> dict[str, Callable[[], object]]:
    """visformer.decoding's greedy and beam-4 (with their traces; greedy also without, as bulk translation runs)
    when that module exists.

    eos_id=-1 never matches, so they generate exactly `new_tokens` tokens like the forced peer.
    """
    try:
        from visformer.decoding import beam_search, greedy
    except ImportError:
        return {}
    return {
        "decoding.greedy": lambda: greedy(model, src, max_len=new_tokens, eos_id=-1),
        "decoding.greedy, precision='fp32'": lambda: greedy(
            model, src, max_len=new_tokens, eos_id=-1, precision="fp32"
        ),
        "decoding.greedy, no trace": lambda: greedy(
            model, src, max_len=new_tokens, eos_id=-1, n_candidates=0
        ),
        "decoding.beam_search (4)": lambda: beam_search(
            model, src, beam_size=4, max_len=new_tokens, eos_id=-1
        ),
    }


def run(config: ModelConfig, quick: bool = False) -> Section:
    """Greedy (and beam-4 when visformer.decoding has it) generation of 20 tokens, both libraries."""
    section = Section(
        title="Generation vs Hugging Face Marian",
        intro=(
            "Generating exactly 20 target tokens for a 20-token source with the KV cache: visformer's "
            "`encode` + cached `decode` loop against `transformers` `MarianMTModel.generate()` on a randomly "
            "initialised Marian of the same size (no download; both untrained, so the output length is forced). "
            "The bare loop is `encode` + cached `decode` + argmax; `visformer.decoding` strategies also record "
            "their trace for the app and run at their default precision (see the notes). Marian runs greedy or "
            "beam 4 to match. "
            "Alternating runs; time in ms, median (min–max); speed-up = per-round Marian time / ours."
        ),
        header=["strategy", "batch", "visformer ms", "Marian generate() ms", "speed-up"],
    )
    if not transformers_available():
        section.notes.append(
            "skipped: `transformers` is not installed (`pip install -r bench/requirements.txt`)."
        )
        return section
    torch.manual_seed(0)
    ours = Transformer(config).eval()
    peer = marian_model(config)
    new_tokens, rounds = (5, 2) if quick else (20, 10)
    for batch in (1,) if quick else (1, 64):
        src = torch.randint(4, config.src_vocab_size, (batch, 6 if quick else 20))
        src[:, -1] = EOS
        greedy_peer = marian_generate(peer, src, new_tokens, beams=1)
        fns = {"ours": lambda src=src: visformer_greedy(ours, src, new_tokens), "peer": greedy_peer}
        _add_row(section, "greedy, bare cached loop", batch, alternate(fns, rounds))
        strategies = library_strategies(ours, src, new_tokens)
        for name, fn in strategies.items():
            beams = 4 if "beam" in name else 1
            peer_fn = greedy_peer if beams == 1 else marian_generate(peer, src, new_tokens, beams=4)
            _add_row(section, name, batch, alternate({"ours": fn, "peer": peer_fn}, rounds))
        if "decoding.greedy" in strategies:  # the peer under the same bf16 autocast as visformer's default
            same = {"ours": strategies["decoding.greedy"], "peer": in_bf16(greedy_peer)}
            _add_row(section, "decoding.greedy vs Marian under bf16 autocast", batch, alternate(same, rounds))
    import transformers

    from visformer.utils import autocast_dtype

    dtype = autocast_dtype("auto", torch.device("cpu"), config.d_model)
    section.notes.append(
        f"transformers {transformers.__version__}; both models in eval mode on the CPU; Marian and the bare loop "
        "in fp32 (their default); `visformer.decoding` strategies at their default precision='auto', which here "
        f"is {'bf16 autocast (a CPU with native bf16, d_model ≥ 256, as in training)' if dtype else 'fp32'}; "
        "the last row runs Marian under the same autocast."
    )
    return section


def _add_row(section: Section, strategy: str, batch: int, times: dict[str, list[float]]) -> None:
    """Append one comparison row from alternating timings."""
    ours, peer = Stat.of(times["ours"]).scaled(1e3), Stat.of(times["peer"]).scaled(1e3)
    speedup = ratio_stat(times["peer"], times["ours"])
    section.rows.append([strategy, str(batch), ours.fmt(1), peer.fmt(1), f"{speedup.fmt(2)}×"])
