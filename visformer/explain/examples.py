"""Example sentences to offer for a checkpoint: in its source language, or its toy task's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..languages import language_pair

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
# The lecture's own examples, offered for every model whose source language they are written in. In German, "es"
# refers back to "das Tier" and "sie" to "die Straße": the pair tests whether the model resolved "it".
LECTURE_EXAMPLES: dict[str, list[str]] = {
    "en": [
        "The animal didn't cross the street because it was too tired.",
        "The animal didn't cross the street because it was too wide.",
    ],
    "ko": [
        "드디어 금요일이다",
        "강아지가 책상 위에 있는 음식을 먹었는데 그가 그것을 먹은 이유는 배고팠기 때문이다.",
    ],
}
SCRIPTS = {
    "ko": "hangul",
    "en": "latin",
    "de": "latin",
    "fr": "latin",
}  # the script each language is written in
SCRIPT_LANGS = {"hangul": ("ko",), "latin": ("en", "de", "fr")}  # languages to offer for a script, best first


def example_sentences(
    name: str, info: Mapping[str, Any] | None = None, task: str | None = None, suited: Sequence[str] = ()
) -> list[str]:
    """Sentences to offer: task examples for toy tasks, else ones suited to the model, then the lecture's."""
    if task:
        from ..tasks import make_examples

        try:
            return [ex.src for ex in make_examples(task, 4, seed=2024)]
        except ValueError:
            return []
    src, _ = language_pair(name, info)
    listed = (info or {}).get("examples")
    if suited:
        own = list(suited)
    elif isinstance(listed, list) and all(isinstance(s, str) for s in listed) and listed:
        own = listed
    else:
        own = EXAMPLES.get(src or "en", EXAMPLES["en"])
    return list(dict.fromkeys([*own, *LECTURE_EXAMPLES.get(src or "en", [])]))


def script_of(text: str) -> str | None:
    """ "hangul" or "latin": the script most of the text's letters are written in (None without letters)."""
    counts = {"hangul": 0, "latin": 0}
    for ch in text:
        if "\uac00" <= ch <= "\ud7a3" or "\u1100" <= ch <= "\u11ff" or "\u3130" <= ch <= "\u318f":
            counts["hangul"] += 1
        elif ch.isalpha() and ch.isascii() or "\u00c0" <= ch <= "\u024f":
            counts["latin"] += 1
    script = max(counts, key=counts.get)
    return script if counts[script] else None


def script_mismatch(text: str, src_lang: str | None) -> str | None:
    """The text's script when the model's source language is written in another one (else None)."""
    expected, found = SCRIPTS.get(src_lang or ""), script_of(text)
    return found if expected and found and found != expected else None
