"""The architecture registry: each entry builds its model, counts its attention layers as the model returns them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from visformer.architectures import ARCHITECTURES, DEFAULT, REGISTRY, SEQ2SEQ, Family, architecture, of_family
from visformer.config import ModelConfig
from visformer.models import build_model
from visformer.tasks import task_tokenizer

REPO = Path(__file__).resolve().parents[1]


def tiny(name: str) -> ModelConfig:
    """A tiny config of this architecture: 2 encoder layers, 3 decoder layers (so the two counts differ)."""
    vocab = task_tokenizer("copy").vocab_size
    return ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=16, n_heads=2, n_encoder_layers=2,
                       n_decoder_layers=3, d_ff=32, dropout=0.0, max_len=16, architecture=name)  # fmt: skip


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_attention_layers_are_what_a_forward_pass_returns(name: str) -> None:
    torch.manual_seed(0)
    config = tiny(name)
    model = build_model(config).eval()
    tokens = torch.tensor([[2, 5, 6, 7, 3]])  # (B, L)
    counts = architecture(name).attention_layers(config)
    if architecture(name).translates:
        maps = model(tokens, tokens, need_weights=True).attention
        returned = {kind: len(getattr(maps, kind)) for kind in counts}
    else:
        (kind,) = architecture(name).layers
        returned = {k: len(model(tokens, need_weights=True).attention) if k == kind else 0 for k in counts}
    assert returned == counts


def test_the_families_and_their_properties() -> None:
    assert DEFAULT == ARCHITECTURES[0] and architecture(DEFAULT).family is Family.TRANSFORMER
    assert of_family(Family.LM) == ("encoder-lm", "decoder-lm")
    assert set(SEQ2SEQ) == set(ARCHITECTURES) - set(of_family(Family.LM))
    assert [a for a in ARCHITECTURES if architecture(a).switchable_heads] == [DEFAULT]
    assert not architecture("rnn-none").has_attention and architecture("rnn-luong").attention_layers(
        tiny("rnn-luong")
    )
    assert "rnn-dot" not in [
        a for a in ARCHITECTURES if architecture(a).trainable_in_app
    ]  # the CLI trains it
    assert architecture("rnn-bahdanau").score == "additive" and architecture(DEFAULT).score is None


def test_every_page_an_architecture_opens_on_exists() -> None:
    for entry in REGISTRY.values():
        assert entry.pages, entry.name
        for page in entry.pages:
            assert (REPO / "pages" / f"{page}.py").is_file(), (entry.name, page)


def test_an_unknown_name_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="rnn-bahdanau"):
        architecture("lstm")
    with pytest.raises(ValueError, match="unknown architecture"):
        tiny("lstm")
