"""Warm start: a new model whose layers come from a trained checkpoint, with a new vocabulary.

Training a broader model from scratch on a CPU takes many hours; starting from a model that already
translates (e.g. Multi30k English→German) and only changing its vocabulary to one trained on the broader
corpus keeps what the layers learned. Each new piece's embedding row is the old row of the same piece, or
the mean of the old rows of the pieces the old tokenizer splits it into.

Growing: a resumed run may also continue in a model with wider feed-forward layers (Net2Net-style, Chen et
al. 2016). The new hidden units start silent (their columns of W2 are zero), so the wider model computes exactly
what the trained one did and training fills the new capacity in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import nn

from .models import build_model

EMBEDDINGS = ("src_embed.token.weight", "tgt_embed.token.weight", "generator.weight")


def _surface(piece: str) -> str:
    """The text a SentencePiece piece stands for ("▁" is a space)."""
    return piece.replace("▁", " ")


def transplant_rows(old: torch.Tensor, old_tok: Any, new_tok: Any) -> torch.Tensor:
    """Embedding rows for new_tok's vocabulary built from old_tok's rows `old` (vocab_old, d) -> (vocab_new, d)."""
    old_index = {p: i for i, p in enumerate(old_tok.pieces(range(old_tok.vocab_size)))}
    rows = old.new_empty(new_tok.vocab_size, old.shape[1])  # (vocab_new, d)
    for i, piece in enumerate(new_tok.pieces(range(new_tok.vocab_size))):
        if piece in old_index:
            rows[i] = old[old_index[piece]]
            continue
        ids = old_tok.encode(_surface(piece))
        rows[i] = old[ids].mean(0) if ids else old.mean(0)
    return rows


def warm_start(checkpoint: Any, src_tok: Any, tgt_tok: Any) -> nn.Module:
    """A model of checkpoint's architecture for the new tokenizers, its layers copied and embeddings transplanted."""
    config = replace(
        checkpoint.model.config,
        src_vocab_size=src_tok.vocab_size,
        tgt_vocab_size=tgt_tok.vocab_size,
        share_embeddings=src_tok is tgt_tok and checkpoint.model.config.share_embeddings,
        pad_id=tgt_tok.pad_id,
    )
    model = build_model(config)
    old_state = checkpoint.model.state_dict()
    new_state = model.state_dict()
    toks = {"src_embed": (checkpoint.src_tokenizer, src_tok)}
    for name in new_state:
        if name in EMBEDDINGS:
            old_tok, new_tok = toks.get(name.split(".")[0], (checkpoint.tgt_tokenizer, tgt_tok))
            new_state[name] = transplant_rows(old_state[name], old_tok, new_tok)
        elif old_state[name].shape == new_state[name].shape:
            new_state[name] = old_state[name]
        else:
            raise ValueError(
                f"{name}: {tuple(old_state[name].shape)} in the checkpoint, {tuple(new_state[name].shape)} here"
            )
    model.load_state_dict(new_state)
    return model


FEED_FORWARD_PARTS = (
    "feed_forward.linear1.weight",
    "feed_forward.linear1.bias",
    "feed_forward.linear2.weight",
)


def _grown(old: torch.Tensor, fresh: torch.Tensor, silent: bool) -> torch.Tensor:
    """`fresh` with `old` in its leading corner; the rest zero when `silent`, else fresh's own initialisation."""
    grown = torch.zeros_like(fresh) if silent else fresh.clone()
    grown[tuple(slice(0, n) for n in old.shape)] = old
    return grown


def widen_feed_forward(model: nn.Module, d_ff: int) -> nn.Module:
    """The same function in a model whose feed-forward layers have `d_ff` hidden units (new units silent)."""
    old_ff = model.config.d_ff
    if d_ff < old_ff:
        raise ValueError(f"--d-ff {d_ff} is smaller than the model's {old_ff}: a model can grow, not shrink")
    wide = build_model(replace(model.config, d_ff=d_ff))
    state = wide.state_dict()
    for name, value in model.state_dict().items():
        if value.shape == state[name].shape:
            state[name] = value
        elif name.endswith(FEED_FORWARD_PARTS):
            # W1's new rows keep their random init (so the units can learn); W2's new columns and b1's new
            # entries are zero, so every new unit adds nothing until training moves W2
            state[name] = _grown(value, state[name], silent=not name.endswith("linear1.weight"))
        else:
            raise ValueError(f"{name}: {tuple(value.shape)} cannot grow to {tuple(state[name].shape)}")
    wide.load_state_dict(state)
    return wide


def widen_optimizer_state(tensors: dict[str, torch.Tensor], wide: nn.Module) -> dict[str, torch.Tensor]:
    """Adam's saved state ("{index}.{name}") zero-padded to the shapes of `wide`'s parameters."""
    shapes = [p.shape for p in wide.parameters()]
    padded = {}
    for key, value in tensors.items():
        index, _, name = key.partition(".")
        target = shapes[int(index)] if index.isdigit() and int(index) < len(shapes) else None
        if name in ("exp_avg", "exp_avg_sq") and target is not None and value.shape != target:
            value = _grown(value, value.new_empty(target), silent=True)
        padded[key] = value
    return padded
