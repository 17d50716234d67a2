"""Model cards offer only sentences their model translates right, as the app decodes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from visformer.checkpoint import load_checkpoint
from visformer.evaluation import translate_batch

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
CARDS = sorted(
    p.parent.name for p in CHECKPOINTS.glob("*/card.json") if "examples" in json.loads(p.read_text())
)


def _normal(text: str) -> str:
    """Case and spacing aside."""
    return " ".join(text.split()).casefold()


@pytest.mark.parametrize("name", CARDS)
def test_card_examples_come_out_as_their_references(name: str) -> None:
    card = json.loads((CHECKPOINTS / name / "card.json").read_text(encoding="utf-8"))
    references = card.get("references", {})
    assert set(card["examples"]) <= set(references), "every offered example has stored references"
    ckpt = load_checkpoint(CHECKPOINTS / name)
    torch.set_num_threads(1)
    outputs = translate_batch(ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, card["examples"])  # greedy
    limits = set(card.get("shows_limits", []))  # offered to show where the model fails (RNN bottleneck)
    wrong = [
        (ex, out)
        for ex, out in zip(card["examples"], outputs, strict=True)
        if ex not in limits and _normal(out) not in {_normal(r) for r in references[ex]}
    ]
    assert len(limits) < len(card["examples"]), "most examples show the model at its best"
    assert not wrong, f"{name} translates card examples differently from their references: {wrong}"
