"""Example sentences to offer for a checkpoint: in its source language, or its toy task's own."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

EXAMPLES: dict[str, list[str]] = {
    "en": [
        "A man in a blue shirt is riding a bike down the street.",
        "Two dogs are playing in the snow.",
        "A little girl is climbing into a wooden playhouse.",
        "A group of people are standing in front of a building.",
    ],
    "de": [
        "Ein Mann in einem blauen Hemd fährt mit dem Fahrrad die Straße entlang.",
        "Zwei Hunde spielen im Schnee.",
        "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    ],
    "fr": ["Je ne sais pas.", "Il fait beau aujourd'hui.", "Où est la gare ?"],
    "ko": ["나는 학생입니다.", "오늘 날씨가 좋아요.", "이 책은 정말 재미있어요.", "고양이가 집에 있어요."],
}
_PAIR = re.compile(r"(?:^|[-_])([a-z]{2})-([a-z]{2})(?:$|[-_])")


def language_pair(name: str, info: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
    """(source, target) language codes from the checkpoint's info, else from a name like 'multi30k-en-de'."""
    info = info or {}
    src, tgt = info.get("src_lang"), info.get("tgt_lang")
    if src or tgt:
        return src, tgt
    match = _PAIR.search(name.split("/")[-1].lower())
    return (match.group(1), match.group(2)) if match else (None, None)


def example_sentences(name: str, info: Mapping[str, Any] | None = None, task: str | None = None) -> list[str]:
    """Sentences to offer for a checkpoint: task examples for toy tasks, else examples in its source language."""
    if task:
        from ..tasks import make_examples

        try:
            return [ex.src for ex in make_examples(task, 4, seed=2024)]
        except ValueError:
            return []
    listed = (info or {}).get("examples")
    if isinstance(listed, list) and all(isinstance(s, str) for s in listed) and listed:
        return listed
    src, _ = language_pair(name, info)
    return EXAMPLES.get(src or "en", EXAMPLES["en"])
