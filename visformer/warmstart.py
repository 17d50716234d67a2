"""Warm start: a new model whose layers come from a trained checkpoint, with a new vocabulary.

Training a broader model from scratch on a CPU takes many hours; starting from a model that already
translates (e.g. Multi30k English→German) and only changing its vocabulary to one trained on the broader
corpus keeps what the layers learned. Each new piece's embedding row is the old row of the same piece, or
the mean of the old rows of the pieces the old tokenizer splits it into.
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
