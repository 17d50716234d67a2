"""explain.language_models: encoder-only vs decoder-only views, the LM sampler built from decoding's filters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from visformer.explain import language_models as lms
from visformer.models import build_model
from visformer.models.lm import generate
from visformer.tasks import task_tokenizer

TOK = task_tokenizer("copy")  # letters a-z, one symbol per piece


def make(architecture: str):
    """A tiny two-layer LM over the letter vocabulary, in eval mode."""
    torch.manual_seed(0)
    config = tiny_config(architecture=architecture, n_encoder_layers=2, n_decoder_layers=2,
                         src_vocab_size=TOK.vocab_size, tgt_vocab_size=TOK.vocab_size)  # fmt: skip
    return build_model(config).eval()


def test_hide_word_and_encode_with_masks_put_one_mask_piece_per_hidden_word() -> None:
    text = "a dog runs, fast."
    assert [w for _, _, w in lms.mask_words(text)] == ["a", "dog", "runs", "fast"]
    assert lms.hide_word(text, 2) == "a dog [MASK], fast."
    with pytest.raises(ValueError, match="no word 4"):
        lms.hide_word(text, 4)
    ids = lms.encode_with_masks(TOK, "a b [MASK] d [MASK]", mask_id=99)
    assert ids == [*TOK.encode("a b"), 99, *TOK.encode("d"), 99]
    assert lms.mask_words("a [MASK] b") == [(0, 1, "a"), (9, 10, "b")]  # the written [MASK] is not a word


def test_encoder_view_sees_both_ways_and_guesses_every_mask() -> None:
    model = make("encoder-lm")
    view, guesses = lms.encoder_view(model, TOK, "a b [MASK] d [MASK]")
    n = len(view.ids)
    assert view.ids[-1] == TOK.eos_id and view.pieces[2] == view.pieces[4] == "[MASK]"
    assert view.stack.shape == (2, 4, n, n) and view.hidden is None
    np.testing.assert_allclose(view.stack.sum(-1), 1.0, atol=1e-5)
    assert lms.future_weight(view) > 0.1  # bidirectional: weight on later pieces
    assert [g.position for g in guesses] == [2, 4]
    assert all(len(g.pieces) == lms.N_TOP and g.probs == sorted(g.probs, reverse=True) for g in guesses)
    assert all("[MASK]" not in g.pieces for g in guesses)  # [MASK] is never predicted


def test_decoder_view_is_causal_and_hides_the_future() -> None:
    view = lms.decoder_view(make("decoder-lm"), TOK, "a b c d")
    n = len(view.ids)
    assert view.ids[0] == TOK.bos_id and view.stack.shape == (2, 4, n, n)
    assert (
        view.hidden is not None
        and view.hidden.shape == (n, n)
        and view.hidden[0, 1]
        and not view.hidden[1, 0]
    )
    assert (view.stack[:, :, view.hidden] == 0).all()
    assert lms.future_weight(view) == 0.0


def test_sampler_from_the_filters_top_k_1_is_greedy_and_a_seed_repeats() -> None:
    model = make("decoder-lm")
    prompt = torch.tensor([[TOK.bos_id, *TOK.encode("a b")]])
    greedy, _ = generate(model, prompt, 8, eos_id=-1)
    top1, _ = generate(model, prompt, 8, eos_id=-1, choose=lms.chooser("sampling", 1.5, top_k=1, seed=3))
    assert top1.tolist() == greedy.tolist()
    runs = [
        generate(model, prompt, 8, eos_id=-1, choose=lms.chooser("sampling", 2.0, seed=s))[0] for s in (5, 5)
    ]
    assert runs[0].tolist() == runs[1].tolist()
    with pytest.raises(ValueError, match="unknown strategy"):
        lms.chooser("beam")


def test_continuation_never_writes_specials_and_reports_its_steps() -> None:
    model = make("decoder-lm")
    for strategy, params in (("greedy", {}), ("sampling", {"temperature": 2.0, "top_p": 0.9, "seed": 1})):
        out = lms.continue_text(model, TOK, "a b", 10, strategy, **params)
        assert 1 <= len(out.steps) <= 10 and out.strategy == strategy
        assert not {"<pad>", "<s>", "<unk>"} & {s.piece for s in out.steps}
        assert all(0 < s.prob <= 1 and len(s.candidates) == lms.N_TOP for s in out.steps)
        assert all(s.piece != "</s>" for s in out.steps[:-1])  # it stops at the first </s>


def test_a_left_to_right_model_gets_only_the_words_before_the_gap() -> None:
    assert lms.prompt_before_mask("A girl is [MASK] in the park.") == "A girl is"
    assert lms.prompt_before_mask("[MASK] runs  fast.") == "runs fast."  # nothing on the left: the rest
    assert lms.without_masks("a [MASK] b [MASK]") == "a b"
