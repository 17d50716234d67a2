"""Generation against a peer: Hugging Face `transformers` generate() on a random Marian model of the same size."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

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


def library_strategies(model: Transformer, src: Tensor, new_tokens: int) -> dict[str, tuple[Callable, str]]:
    """visformer.decoding's greedy and beam 4 (with their traces) at each precision, and greedy through the
    reference path (Transformer.decode with the torch.cat cache, as before issue 30): name -> (fn, the peer's
    precision). eos_id=-1 never matches, so they generate exactly `new_tokens` tokens like the forced peer.
    """
    from visformer.decoding import beam_search, greedy, reference_decoding

    def on_reference_path() -> object:
        with reference_decoding():
            return greedy(model, src, max_len=new_tokens, eos_id=-1)

    runs: dict[str, tuple[Callable, str]] = {}
    for name, fn, extra in (("greedy", greedy, {}), ("beam_search (4)", beam_search, {"beam_size": 4})):
        for precision, peer in (("auto", "fp32"), ("fp32", "fp32"), ("bf16", "bf16")):
            label = f"decoding.{name}" + ("" if precision == "auto" else f", precision='{precision}'")
            runs[label] = (
                lambda fn=fn, extra=extra, p=precision: fn(
                    model, src, max_len=new_tokens, eos_id=-1, precision=p, **extra
                ),
                peer,
            )
    runs["decoding.greedy, reference path (before issue 30)"] = (on_reference_path, "fp32")
    return runs


def run(config: ModelConfig, quick: bool = False) -> Section:
    """Greedy (and beam-4 when visformer.decoding has it) generation of 20 tokens, both libraries."""
    section = Section(
        title="Generation vs Hugging Face Marian",
        intro=(
            "Generating exactly 20 target tokens for a 20-token source with the KV cache: `visformer.decoding` "
            "greedy and beam 4 (with the traces the app draws) of a model of the shipped size (d_model 256, 4 "
            "heads, 3+3 layers, d_ff 1024, 8,000 pieces) against `transformers` `MarianMTModel.generate()` on a "
            "randomly initialised Marian of the same size (no download; both untrained, so the output length is "
            "forced). The Marian column names its precision. Alternating runs; time in ms, median (min–max); "
            "speed-up = per-round Marian time / ours."
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
    new_tokens, rounds = (5, 2) if quick else (20, 7)
    for batch in (1,) if quick else (1, 64):
        src = torch.randint(4, config.src_vocab_size, (batch, 6 if quick else 20))
        src[:, -1] = EOS
        peers = {beams: marian_generate(peer, src, new_tokens, beams=beams) for beams in (1, 4)}
        for name, (fn, precision) in library_strategies(ours, src, new_tokens).items():
            peer_fn = peers[4 if "beam" in name else 1]
            peer_fn = in_bf16(peer_fn) if precision == "bf16" else peer_fn
            _add_row(section, name, batch, alternate({"ours": fn, "peer": peer_fn}, rounds), precision)
    import transformers

    from visformer.decoding import decoding_dtype

    cpu = torch.device("cpu")
    picks = {rows: decoding_dtype(config, rows, cpu) for rows in (1, 4, 64, 256)}
    picked = "; ".join(f"{rows} rows: layers {d.layers}, output {d.output}" for rows, d in picks.items())
    section.notes.append(
        f"transformers {transformers.__version__}; both models in eval mode on the CPU, one process. Marian runs "
        "in fp32 (its default) or, in the bf16 rows, under torch.autocast(bfloat16); `visformer.decoding` at "
        "precision='auto' (no suffix) picks weight dtypes by rows decoded together (batch × beams), as measured "
        f"in 'Decoding: where a token's time goes' ({picked}); 'bf16' is a bf16 copy of the weights made once, "
        "log-probabilities in fp32."
    )
    return section


def _add_row(
    section: Section, strategy: str, batch: int, times: dict[str, list[float]], peer_precision: str
) -> None:
    """Append one comparison row from alternating timings."""
    ours, peer = Stat.of(times["ours"]).scaled(1e3), Stat.of(times["peer"]).scaled(1e3)
    speedup = ratio_stat(times["peer"], times["ours"])
    row = [strategy, str(batch), ours.fmt(1), f"{peer.fmt(1)} ({peer_precision})", f"{speedup.fmt(2)}×"]
    section.rows.append(row)
    print(" | ".join(row), flush=True)


# ---------------------------------------------------------------------------------------------
# An imported OPUS-MT model: opus-mt-ko-en's configuration, random weights (no download)
# ---------------------------------------------------------------------------------------------

OPUS_TITLE = "Imported OPUS-MT (opus-mt-ko-en size)"
KOREAN = [  # fresh 20-token-ish sentences (none is an example the app offers)
    "트랜스포머는 어텐션만으로 문장을 번역하고 인코더와 디코더가 서로 정보를 주고받습니다.",
    "오늘 수업에서는 멀티 헤드 어텐션이 각 단어를 어떻게 바라보는지 직접 확인해 봅시다.",
    "디코더는 이미 만든 단어만 볼 수 있어서 다음 단어를 하나씩 차례대로 만들어 냅니다.",
    "위치 인코딩이 없으면 모델은 단어의 순서를 전혀 알 수 없다는 점을 기억하세요.",
]


def opus_folder(folder: Path) -> Path:
    """A save_pretrained folder of a random MarianMTModel with opus-mt-ko-en's config and a 65,001-entry vocab."""
    import io
    import json

    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel

    from visformer.marian import OPUS_MT_KO_EN

    folder.mkdir(parents=True, exist_ok=True)
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(KOREAN * 20), model_writer=proto, vocab_size=200, hard_vocab_limit=False,
        minloglevel=2, num_threads=1,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab.pop("<s>")
    vocab = {p: i for i, p in enumerate(vocab)}
    pad = OPUS_MT_KO_EN["pad_token_id"]
    vocab |= {f"▁filler{i}": i for i in range(len(vocab), pad)} | {"<pad>": pad}  # the real vocab's size
    for name in ("source.spm", "target.spm"):
        (folder / name).write_bytes(proto.getvalue())
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    settings = {k: v for k, v in OPUS_MT_KO_EN.items() if k != "model_type"}
    torch.manual_seed(0)
    MarianMTModel(MarianConfig(**settings, forced_eos_token_id=None)).eval().save_pretrained(folder)
    return folder


def _opus_strategies(model: Transformer, src: Tensor, new_tokens: int, precision: str) -> dict:
    """visformer.decoding greedy and beam 4 from <pad> (Marian's start), exactly `new_tokens` tokens."""
    from visformer.decoding import beam_search, greedy

    start = model.config.decoder_start_id
    common = dict(max_len=new_tokens, bos_id=start, eos_id=-1, precision=precision)
    return {
        "greedy": lambda: greedy(model, src, **common),
        "beam 4": lambda: beam_search(model, src, beam_size=4, **common),
    }


def run_opus(quick: bool = False) -> Section:
    """Import a random opus-mt-ko-en-sized Marian, then decode against generate() and time the app on it."""
    import tempfile
    import time

    section = Section(
        title=OPUS_TITLE,
        intro=(
            "A `MarianMTModel` with opus-mt-ko-en's configuration (d_model 512, 6+6 layers, 8 heads, d_ff 2048, "
            "swish, 65,001-piece shared vocabulary, 77.5 M parameters) and random weights (no download), imported "
            "with `python -m visformer import-marian`. Decoding: exactly 20 target tokens for a 20-token source "
            "(random weights never say eos), visformer.decoding from the imported checkpoint against "
            "`generate()` of the same model at the same precision (precision 'auto', visformer's default, against "
            "generate() in fp32, its default), alternating rounds; ms, median (min–max); "
            "speed-up = per-round generate() time / ours."
        ),
        header=["strategy", "precision", "batch", "visformer ms", "Marian generate() ms", "speed-up"],
    )
    if not transformers_available():
        section.notes.append(
            "skipped: `transformers` is not installed (`pip install -r bench/requirements.txt`)."
        )
        return section
    from visformer.checkpoint import load_checkpoint
    from visformer.marian import import_marian

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        hf_folder = opus_folder(Path(tmp) / "opus-mt-ko-en-random")
        built = time.perf_counter() - start
        start = time.perf_counter()
        out = import_marian(str(hf_folder), Path(tmp) / "checkpoints" / "opus-mt-ko-en")
        imported = time.perf_counter() - start
        size_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
        ckpt = load_checkpoint(out)
        _opus_decoding(section, ckpt.model, hf_folder, quick)
        _opus_interactions(section, ckpt, 2 if quick else 5)
        del ckpt
        _opus_app(section, Path(tmp) / "checkpoints", quick)
    section.notes.append(
        f"Building and saving the random Marian took {built:.1f} s; `import-marian` {imported:.1f} s; the "
        f"checkpoint folder is {size_mb:.0f} MiB (float32 safetensors + tokenizer files)."
    )
    return section


def _opus_decoding(section: Section, ours: Transformer, hf_folder: Path, quick: bool) -> None:
    """Rows: greedy and beam 4 at batch 1 and 64, fp32 and bf16 autocast, against generate()."""
    from transformers import MarianMTModel

    peer = MarianMTModel.from_pretrained(hf_folder).eval()
    new_tokens, rounds = (5, 2) if quick else (20, 5)
    for batch in (1,) if quick else (1, 64):
        src = torch.randint(4, 200, (batch, 6 if quick else 20))
        src[:, -1] = 0  # Marian's </s>
        for precision in ("auto", "fp32", "bf16") if batch == 1 else ("fp32", "bf16"):
            mine = _opus_strategies(ours, src, new_tokens, precision)
            for name, fn in mine.items():
                theirs = marian_generate(peer, src, new_tokens, beams=4 if "beam" in name else 1)
                theirs = in_bf16(theirs) if precision == "bf16" else theirs  # auto: against fp32
                times = alternate({"ours": fn, "peer": theirs}, rounds if batch == 1 else 2)
                ours_ms, peer_ms = Stat.of(times["ours"]).scaled(1e3), Stat.of(times["peer"]).scaled(1e3)
                ratio = ratio_stat(times["peer"], times["ours"])
                row = [name, precision, str(batch), ours_ms.fmt(1), peer_ms.fmt(1), f"{ratio.fmt(2)}×"]
                section.rows.append(row)
                print(" | ".join(row), flush=True)  # a long run shows its rows as they come


def _twenty_tokens(tokenizer, text: str) -> str:
    """The longest start of text (whole words) that the tokenizer cuts into at most 19 pieces (+ </s> = 20)."""
    words = text.split()
    while len(tokenizer.encode(" ".join(words))) > 19:
        words.pop()
    return " ".join(words)


def _opus_interactions(section: Section, ckpt, repeats: int) -> None:
    """The app's three heavy interactions as the pages call the package, on a new 20-token sentence with a
    20-token output (a real model stops about there; a random one never says eos): translate, the all-heads grid
    of one kind (figure built and serialised), the decoding comparison of the five default strategies."""
    import time

    import plotly.io

    from visformer.decoding import run_strategies, translate
    from visformer.explain import attention as fg
    from visformer.explain import views as sup
    from visformer.explain.decoding import DEFAULT_STRATEGIES

    model, src_tok, tgt_tok = ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer
    times: dict[str, list[float]] = {}
    for i in range(repeats):
        text = _twenty_tokens(src_tok, KOREAN[i % len(KOREAN)]) + f" {i}"
        start = time.perf_counter()
        result = translate(model, src_tok, tgt_tok, text, "greedy", max_len=20)
        view = sup.translation_view(result, tgt_tok, text)
        times.setdefault("new sentence: greedy translation + attention of every head", []).append(
            time.perf_counter() - start
        )
        start = time.perf_counter()
        queries, keys = view.labels("cross")
        figure = fg.attention_grid(view.stack("cross"), queries, keys, average=True, compact=True)
        plotly.io.to_json(figure, validate=False)  # as st.plotly_chart serialises it
        times.setdefault("all-heads grid of one kind (6 x 8 heads + means), built and serialised", []).append(
            time.perf_counter() - start
        )
        src = torch.tensor([result.src_ids])
        runs = [(name, {"max_len": 20}) for name in DEFAULT_STRATEGIES]
        start = time.perf_counter()
        run_strategies(model, src, runs, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id)
        times.setdefault("decoding comparison (greedy, beam 4, 3 samplers)", []).append(
            time.perf_counter() - start
        )
    for name, seconds in times.items():
        stat = Stat.of(seconds).scaled(1e3)
        verdict = "met" if stat.median < 300 else "not met"
        section.notes.append(f"interaction, {name}: {stat.fmt(0)} ms (n={len(seconds)}; < 300 ms: {verdict})")
        print(section.notes[-1], flush=True)


def _opus_app(section: Section, checkpoints: Path, quick: bool) -> None:
    """The app's interactions (AppTest, server side, in a child process) with the imported model as default."""
    import os
    import tempfile

    from .bench_app import app_env, interactions_in_child

    with tempfile.TemporaryDirectory() as user:
        env = {**app_env(user), "VISFORMER_CHECKPOINTS": str(checkpoints)}
        result = interactions_in_child(
            KOREAN[:2], env
        )  # each interaction twice at most: minutes per run, loaded
    if "error" in result:
        section.notes.append(f"app interactions failed: {result['error']}")
        return
    for name, seconds in result["times"].items():
        stat = Stat.of(seconds).scaled(1e3)
        verdict = "met" if stat.median < 300 else "not met"
        section.notes.append(f"app, {name}: {stat.fmt(0)} ms (n={len(seconds)}; < 300 ms: {verdict})")
    section.notes.append(
        f"app process peak resident memory with the imported model: {result['peak_rss_mib']:.0f} MiB "
        f"(AppTest child, {os.cpu_count()} CPUs)"
    )
