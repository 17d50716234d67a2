"""Encoder-only masked LM and decoder-only causal LM: the mask difference, the MLM loss, the KV cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.checkpoints import tiny_config
from visformer.checkpoint import load_checkpoint, save_checkpoint
from visformer.data import Pair, make_batch
from visformer.models import CausalLM, MaskedLM, attention_layers, build_model, lm_objective, mask_pieces
from visformer.models.lm import IGNORE, SPECIAL_IDS, generate, lm_loss
from visformer.tasks import task_tokenizer
from visformer.training import StepMetrics, TrainConfig, Trainer

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def make_lm(architecture: str, seed: int = 0, **overrides) -> MaskedLM | CausalLM:
    """A tiny two-layer language model in eval mode."""
    torch.manual_seed(seed)
    settings = dict(architecture=architecture, n_encoder_layers=2, n_decoder_layers=2) | overrides
    return build_model(tiny_config(**settings)).eval()


TOKENS = torch.tensor([[BOS, 5, 6, 7, 8, 9, 10, EOS], [BOS, 11, 12, 13, EOS, PAD, PAD, PAD]])


def test_encoder_only_attends_both_ways_so_a_later_token_changes_earlier_outputs() -> None:
    model = make_lm("encoder-lm")
    out = model(TOKENS, need_weights=True)
    changed = TOKENS.clone()
    changed[0, 6] = 15
    later = model(changed).logits
    assert all(
        not torch.allclose(later[0, i], out.logits[0, i]) for i in range(6)
    )  # every earlier one sees it
    assert len(out.attention) == attention_layers(model.config)["encoder"] == 2
    upper = torch.triu(torch.ones(8, 8, dtype=torch.bool), diagonal=1)
    assert (out.attention[0][0][:, upper] > 0).all()  # weight above the diagonal: no causal mask
    assert (out.attention[0][1, :, :, 5:] == 0).all()  # but padding is never attended to


def test_encoder_only_predicts_the_vocabulary_never_mask() -> None:
    model = make_lm("encoder-lm")
    assert model.mask_id == model.config.tgt_vocab_size
    masked = TOKENS.masked_fill(TOKENS == 6, model.mask_id)
    assert model(masked).logits.shape == (2, 8, model.config.tgt_vocab_size)


def test_mask_pieces_masks_about_15_percent_of_real_pieces_and_never_specials() -> None:
    tokens = torch.randint(4, 20, (200, 30))
    tokens[:, 0], tokens[:, -1], tokens[:5, 10:] = BOS, EOS, PAD
    inputs, labels = mask_pieces(tokens, 20, SPECIAL_IDS, generator=torch.Generator().manual_seed(0))
    chosen = labels != IGNORE
    assert (inputs[chosen] == 20).all() and (inputs[~chosen] == tokens[~chosen]).all()
    assert (labels[chosen] == tokens[chosen]).all()
    assert not chosen[torch.isin(tokens, torch.tensor(SPECIAL_IDS))].any()
    real = ~torch.isin(tokens, torch.tensor(SPECIAL_IDS))
    assert 0.12 < chosen.sum() / real.sum() < 0.18
    assert chosen.any(dim=1).all()  # at least one piece of every sentence


def test_mlm_loss_counts_only_masked_positions() -> None:
    model = make_lm("encoder-lm")
    batch = make_batch([([5, 6, 7, 8, 9, 10], []), ([11, 12, 13], [])], PAD, BOS, EOS)
    loss, n = model.loss(batch, torch.Generator().manual_seed(3))
    inputs, labels = mask_pieces(
        batch.src, model.mask_id, SPECIAL_IDS, generator=torch.Generator().manual_seed(3)
    )
    logits = model(inputs).logits
    where = labels != IGNORE
    assert n == int(where.sum()) < int((batch.src != PAD).sum())
    reference = F.cross_entropy(logits[where], labels[where], reduction="sum")
    torch.testing.assert_close(loss, reference)
    # changing the predictions at unmasked positions leaves the loss as it was
    noisy = logits + (~where)[..., None] * torch.randn_like(logits) * 5
    loss_noisy = F.cross_entropy(
        noisy.reshape(-1, noisy.shape[-1]), labels.reshape(-1), ignore_index=IGNORE, reduction="sum"
    )
    torch.testing.assert_close(loss_noisy, reference)


def test_decoder_only_causal_mask_leaks_nothing() -> None:
    model = make_lm("decoder-lm")
    out = model(TOKENS, need_weights=True)
    for j in range(1, 8):
        changed = TOKENS.clone()
        changed[:, j] = 17
        other = model(changed, need_weights=True)
        torch.testing.assert_close(other.logits[:, :j], out.logits[:, :j], rtol=0, atol=0)
        for a, b in zip(other.attention, out.attention, strict=True):
            torch.testing.assert_close(a[:, :, :j], b[:, :, :j], rtol=0, atol=0)
        assert not torch.allclose(other.logits[:, j], out.logits[:, j])
    upper = torch.triu(torch.ones(8, 8, dtype=torch.bool), diagonal=1)
    assert all((w[:, :, upper] == 0).all() for w in out.attention)
    assert len(out.attention) == attention_layers(model.config)["decoder"] == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cached_generation_equals_full_recomputation(seed: int) -> None:
    model = make_lm("decoder-lm", seed)
    prompt = TOKENS[:, :4]
    cached, cached_logits = generate(model, prompt, 12, eos_id=-1)
    full, full_logits = generate(model, prompt, 12, eos_id=-1, use_cache=False)
    assert cached.tolist() == full.tolist() and cached.shape == (2, 12)
    torch.testing.assert_close(cached_logits, full_logits, rtol=1e-5, atol=1e-5)


def test_generation_refuses_to_run_past_max_len() -> None:
    with pytest.raises(ValueError, match="exceeds max_len"):
        generate(make_lm("decoder-lm"), TOKENS, 60)


def test_architectures_are_checked() -> None:
    with pytest.raises(ValueError, match="encoder-lm"):
        MaskedLM(tiny_config())
    with pytest.raises(ValueError, match="decoder-lm"):
        CausalLM(tiny_config(architecture="encoder-lm"))


@pytest.mark.parametrize("architecture", ["encoder-lm", "decoder-lm"])
def test_training_lowers_the_loss_and_checkpoints_round_trip(tmp_path: Path, architecture: str) -> None:
    tok = task_tokenizer("copy")
    texts = [" ".join("abcdefgh"[(i + j) % 8] for j in range(6)) for i in range(64)]  # a cyclic pattern
    model = make_lm(architecture, src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=32)
    before = lm_loss(model, texts, tok)
    config = TrainConfig(
        steps=120, max_tokens=256, warmup=20, log_every=40, eval_every=60, device="cpu", n_snapshots=0
    )
    pairs = [Pair(t, t) for t in texts]
    history = list(Trainer(model, pairs, pairs[:8], tok, tok, config, loss=lm_objective).run())
    steps = [m for m in history if isinstance(m, StepMetrics)]
    assert [m.step for m in steps] == [40, 80, 120]
    evals = [
        m for m in history if not isinstance(m, StepMetrics)
    ]  # the held-out loss only: nothing to translate
    assert [m.step for m in evals] == [60, 120] and all(
        0 < m.valid_loss < 10 and not m.samples for m in evals
    )
    assert lm_loss(model, texts, tok) < 0.5 * before
    save_checkpoint(tmp_path / "lm", model, tok, tok, train_config=config)
    loaded = load_checkpoint(tmp_path / "lm")
    assert type(loaded.model) is type(model)
    torch.testing.assert_close(
        loaded.model(TOKENS[:, :6]).logits, model(TOKENS[:, :6]).logits, rtol=0, atol=0
    )


def test_lm_recipe_texts_are_deduplicated_and_hold_out_validation(tmp_path: Path) -> None:
    from visformer import lm_recipe

    for name, lines in (
        ("tatoeba-deu-eng/tatoeba-deu-eng.en", ["I run.", "I run.", "A dog sits."]),
        ("multi30k/train.en", ["A dog sits.", "Two men talk."]),
        ("multi30k/val.en", ["Two men talk.", "A cat sleeps."]),
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    train, valid = lm_recipe.english_texts(tmp_path)
    assert train == ["I run.", "A dog sits."] and valid == ["Two men talk.", "A cat sleeps."]
    for arch in ("encoder-lm", "decoder-lm"):
        assert build_model(lm_recipe.lm_config(arch, lm_recipe.VOCAB_SIZE)).num_parameters() < 1_000_000
