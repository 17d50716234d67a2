"""The fast decoder step against the reference path (Transformer.decode with its torch.cat cache)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from visformer.decoding import beam_search, decoding_dtype, greedy, reference_decoding, sample
from visformer.decoding.fast import FastDecoder, StepDtypes, fast_weights
from visformer.model import HeadMask, Transformer

PAD, BOS, EOS = 0, 2, 3
FP32 = StepDtypes(torch.float32, torch.float32)
VARIANTS = [
    {},  # the paper: post-LN, ReLU, shared embeddings
    {"norm_first": True},  # pre-LN with a final norm
    {"activation": "swish", "output_bias": True, "share_embeddings": False, "src_vocab_size": 24},  # Marian
]


def model_for(seed: int, **overrides) -> Transformer:
    torch.manual_seed(seed)
    cfg = tiny_config(n_encoder_layers=2, n_decoder_layers=2, max_len=40, **overrides)
    return Transformer(cfg).eval()


def padded_sources(batch: int, vocab: int = 20, seed: int = 0) -> torch.Tensor:
    """(batch, 7) sources of different lengths, each ending in eos, padded."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.full((batch, 7), PAD)
    for b in range(batch):
        n = 6 - b % 4
        src[b, :n] = torch.randint(4, vocab, (n,), generator=gen)
        src[b, n] = EOS
    return src


@pytest.mark.parametrize("overrides", VARIANTS)
def test_the_preallocated_cache_gives_the_logits_of_the_torch_cat_cache(overrides) -> None:
    model = model_for(0, **overrides)
    src = padded_sources(3)
    encoded = model.encode(src)
    fast, cache = FastDecoder(fast_weights(model, FP32), encoded, max_steps=8), model.new_cache()
    gen = torch.Generator().manual_seed(1)
    tokens = torch.full((3,), BOS)
    with torch.no_grad():
        for t in range(8):
            ours = fast.step(tokens)  # (A, V)
            theirs = model.decode(tokens[:, None], encoded, cache=cache).logits[:, -1]
            torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
            if t == 3:  # beams reorder, a sentence leaves: both caches keep the same rows
                rows = torch.tensor([2, 0, 0])
                fast.keep(rows)
                cache.reorder(rows)
                encoded.memory, encoded.src_mask = encoded.memory[rows], encoded.src_mask[rows]
            tokens = torch.randint(4, 20, (len(tokens),), generator=gen)
    assert fast.length == 8


@pytest.mark.parametrize("overrides", VARIANTS)
@pytest.mark.parametrize("batch", [1, 4])
def test_fast_decoding_equals_the_reference_token_for_token(overrides, batch: int) -> None:
    for seed in range(3):
        model = model_for(seed, **overrides)
        src = padded_sources(batch, seed=seed)
        runs = {
            "greedy": (greedy, {}),
            "beam": (beam_search, {"beam_size": 3}),
            "sample": (sample, {"seed": 5, "top_k": 5}),
        }
        for name, (strategy, params) in runs.items():
            fast = strategy(model, src, max_len=12, precision="fp32", **params)
            with reference_decoding():
                reference = strategy(model, src, max_len=12, precision="fp32", **params)
            for ours, theirs in zip(fast.outputs, reference.outputs, strict=True):
                assert [h.tokens for h in ours.nbest] == [h.tokens for h in theirs.nbest], name
                assert ours.best.logprob == pytest.approx(theirs.best.logprob, abs=1e-4)
                assert [s.candidates for s in ours.steps] == [s.candidates for s in theirs.steps]


def test_new_weights_are_laid_out_again() -> None:
    """After a training step changed the weights in place, decoding uses the new ones."""
    model = model_for(0)
    src = padded_sources(2)
    before = greedy(model, src, max_len=10, precision="fp32")
    with torch.no_grad():
        for p in model.decoder.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    after = greedy(model, src, max_len=10, precision="fp32")
    with reference_decoding():
        reference = greedy(model, src, max_len=10, precision="fp32")
    assert [o.tokens for o in after.outputs] == [o.tokens for o in reference.outputs]
    assert [o.best.logprob for o in after.outputs] != [o.best.logprob for o in before.outputs]


def test_head_masks_and_training_mode_take_the_reference_path() -> None:
    model = model_for(0)
    src = padded_sources(2)
    mask = HeadMask.ones(model.config)
    mask.decoder[0, 1] = 0.0
    masked = greedy(model, src, max_len=10, head_mask=mask, precision="fp32")
    with reference_decoding():
        reference = greedy(model, src, max_len=10, head_mask=mask, precision="fp32")
    assert [o.best.logprob for o in masked.outputs] == [o.best.logprob for o in reference.outputs]


def test_precision_choices(monkeypatch) -> None:
    from visformer import utils

    cfg = tiny_config(d_model=256, n_heads=4)
    cpu = torch.device("cpu")
    assert decoding_dtype(cfg, 1, cpu, "fp32") == FP32
    assert decoding_dtype(cfg, 64, cpu, "bf16") == StepDtypes(torch.bfloat16, torch.bfloat16)
    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: False)
    assert decoding_dtype(cfg, 64, cpu, "auto") == FP32  # no native bf16: fp32
    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: True)
    assert decoding_dtype(tiny_config(), 64, cpu, "auto") == FP32  # too narrow to gain
    assert decoding_dtype(cfg, 64, cpu, "auto").layers == torch.bfloat16  # a batch: bf16 matmuls pay
    assert decoding_dtype(cfg, 1, cpu, "auto") == FP32  # one row of a small model: fp32 GEMV is faster
    big = tiny_config(d_model=512, n_heads=8, tgt_vocab_size=65001, src_vocab_size=65001)
    int8 = StepDtypes(torch.int8, torch.int8)
    one = decoding_dtype(big, 1, cpu, "auto")  # one sentence of a big model: int8 weights stream faster
    assert one == int8
    assert decoding_dtype(big, 16, cpu, "auto") == int8  # beams and the decoding comparison too
    batch = decoding_dtype(big, 32, cpu, "auto")  # a batch of a big model: bf16 matmuls
    assert batch == StepDtypes(torch.bfloat16, torch.bfloat16)
    assert decoding_dtype(cfg, 64, cpu, "int8") == int8
    with pytest.raises(ValueError, match="int8 decoding runs on the CPU"):
        decoding_dtype(cfg, 1, torch.device("meta"), "int8")
