"""A toy MarianMTModel (OPUS-MT's layout at a tiny size) written as transformers saves it, to import."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

transformers = pytest.importorskip("transformers")

SOURCES = [
    "트랜스포머는 어텐션을 쓴다",
    "인코더와 디코더가 있다",
    "나는 학교에 간다",
    "고양이가 잔다",
    "오늘 날씨가 좋다",
]
TARGETS = [
    "the transformer uses attention",
    "there is an encoder and a decoder",
    "I go to school",
    "the cat sleeps",
]
README = """# opus-mt-toy
## Benchmarks

| testset               | BLEU  | chr-F |
|-----------------------|-------|-------|
| toy.ko.en 	| 12.5 	| 0.301 |
"""


def _spm(texts: list[str]) -> bytes:
    """A tiny SentencePiece model (Marian's .spm files are plain SentencePiece models)."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts * 10), model_writer=out, vocab_size=60, model_type="unigram",
        hard_vocab_limit=False, minloglevel=2, num_threads=1,
    )  # fmt: skip
    return out.getvalue()


def _vocab(*protos: bytes, pad_last: bool = True) -> dict[str, int]:
    """Marian's layout: </s> 0, <unk> 1, the pieces, <pad> last (or third, to vary it)."""
    vocab = {"</s>": 0, "<unk>": 1} if pad_last else {"</s>": 0, "<unk>": 1, "<pad>": 2}
    for proto in protos:
        sp = spm.SentencePieceProcessor(model_proto=proto)
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab.pop("<s>", None)
    vocab = {p: i for i, p in enumerate(vocab)}  # ids without a gap
    if pad_last:
        vocab["<pad>"] = len(vocab)
    return vocab


def build_marian(
    folder: Path,
    *,
    activation: str = "swish",
    separate: bool = False,
    seed: int = 0,
    steps: int = 60,
    **extra,
):
    """A MarianMTModel trained a few steps + tokenizer files written by save_pretrained into folder.

    `extra` overrides MarianConfig settings (sizes: d_model, encoder_layers, ...; or a variant to refuse).
    """
    folder.mkdir(parents=True, exist_ok=True)
    src_spm, tgt_spm = _spm(SOURCES), _spm(TARGETS)
    (folder / "source.spm").write_bytes(src_spm)
    (folder / "target.spm").write_bytes(tgt_spm)
    if separate:  # separate vocabularies of different sizes, <pad> at the same id in both
        src_vocab, tgt_vocab = _vocab(src_spm, pad_last=False), _vocab(tgt_spm, pad_last=False)
        (folder / "target_vocab.json").write_text(json.dumps(tgt_vocab), encoding="utf-8")
    else:
        src_vocab = tgt_vocab = _vocab(src_spm, tgt_spm)
    (folder / "vocab.json").write_text(json.dumps(src_vocab), encoding="utf-8")
    pad = src_vocab["<pad>"]
    sizes = dict(d_model=16, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32)  # fmt: skip
    config = transformers.MarianConfig(
        vocab_size=len(src_vocab), decoder_vocab_size=len(tgt_vocab), max_position_embeddings=64,
        activation_function=activation, scale_embedding=True, pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=0, forced_eos_token_id=0, share_encoder_decoder_embeddings=not separate, init_std=0.05,
        dropout=0.0, **{**sizes, **extra},
    )  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)
    tokenizer = transformers.MarianTokenizer(
        str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
        target_vocab_file=str(folder / "target_vocab.json") if separate else None, separate_vocabs=separate,
    )  # fmt: skip
    _train(model, tokenizer, steps)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "README.md").write_text(README, encoding="utf-8")
    return model, tokenizer


def _train(model, tokenizer, steps: int = 60) -> None:
    """A few dozen Adam steps on the toy pairs, so greedy outputs vary and end with eos (then eval mode)."""
    batch = tokenizer(SOURCES[: len(TARGETS)], text_target=TARGETS, padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == model.config.pad_token_id, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()
    model.eval()
