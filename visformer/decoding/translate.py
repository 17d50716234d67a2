"""One call for the app: clean, tokenise, decode with a strategy, and the attention of the output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..data import encode_source
from ..model import AttentionMaps, HeadMask, Transformer
from ..text import clean_text
from ..tokenizer import BOS_ID, EOS_ID, Tokenizer
from .registry import get_strategy
from .trace import DecodeResult, Output


@dataclass
class Translation:
    """A translated sentence with its pieces, the strategy's trace and the attention of the output."""

    src_ids: list[int]  # source tokens + [eos]
    src_pieces: list[str]
    tgt_ids: list[int]  # output without bos, ending in eos if produced
    tgt_pieces: list[str]
    text: str  # detokenised output
    attention: AttentionMaps  # B=1, queries = decoder inputs [bos] + tgt_ids[:-1] (query t produced token t)
    result: DecodeResult
    truncated: bool = False  # the source was cut to fit the model's max_len
    bos_id: int = BOS_ID

    @property
    def output(self) -> Output:
        """The strategy's output for this sentence (best, n-best, steps, tree)."""
        return self.result.outputs[0]

    @property
    def decoder_input_ids(self) -> list[int]:
        """[bos] + tgt_ids[:-1]: the tokens the decoder read (keys of decoder self-attention)."""
        return [self.bos_id, *self.tgt_ids[:-1]]


def _special(tokenizer: object, name: str, default: int) -> int:
    """A special id from the tokenizer when it has one."""
    value = getattr(tokenizer, name, None)
    return default if value is None else int(value)


@torch.no_grad()
def output_attention(
    model: Transformer,
    src: Tensor,
    tgt_ids: list[int],
    bos_id: int = BOS_ID,
    head_mask: HeadMask | None = None,
) -> AttentionMaps:
    """All attention maps of one teacher-forced pass over the output, decoder input [bos] + tgt_ids[:-1]."""
    tgt_in = torch.tensor([[bos_id, *tgt_ids[:-1]]], dtype=torch.long, device=src.device)  # (1, T)
    if not isinstance(model, Transformer):
        return model(src, tgt_in, need_weights=True, head_mask=head_mask).attention.cpu()
    encoded = model.encode(src, need_weights=True, head_mask=head_mask)
    decoded = model.decode(tgt_in, encoded, need_weights=True, head_mask=head_mask, logits=False)
    return AttentionMaps(encoded.attention, decoded.self_attention, decoded.cross_attention).cpu()


def translate(
    model: Transformer,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    text: str,
    strategy: str = "greedy",
    *,
    head_mask: HeadMask | None = None,
    **params: Any,
) -> Translation:
    """Clean the text as the app does, tokenise, decode with `strategy` (and its params), attention once.

    Cleaning (visformer.text.clean_text, local limits): control, surrogate and bidi-override
    characters removed, spaces collapsed; empty text or an overlong word is a ValueError.
    """
    text = clean_text(text).text
    chosen = get_strategy(strategy)
    bos_id, eos_id = _special(tgt_tokenizer, "bos_id", BOS_ID), _special(tgt_tokenizer, "eos_id", EOS_ID)
    src_ids, truncated = encode_source(src_tokenizer, text, model.config.max_len)
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], dtype=torch.long, device=device)  # (1, S)
    result = chosen(model, src, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask, **params)
    tgt_ids = result.outputs[0].tokens
    return Translation(
        src_ids=src_ids,
        src_pieces=src_tokenizer.pieces(src_ids),
        tgt_ids=tgt_ids,
        tgt_pieces=tgt_tokenizer.pieces(tgt_ids),
        text=tgt_tokenizer.decode(tgt_ids),
        attention=output_attention(model, src, tgt_ids, bos_id, head_mask),
        result=result,
        truncated=truncated,
        bos_id=bos_id,
    )
