"""Cleaning a typed sentence before it reaches a tokenizer: the one rule the core and the app share.

Control, surrogate and bidi-override characters are removed, spaces collapsed, an overlong word refused
and an overlong sentence cut at a word boundary. Refusals are `InputError`s (a ValueError whose message
a student can act on, in either interface language); repairs are described in `Cleaned.notes`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from .i18n import TextError

# bidirectional overrides/isolates can make text display differently from what it is ("Trojan source")
_BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SPACE = re.compile(r"\s+")
MAX_WORD_CHARS = 200  # a "word" longer than this is refused (usually a missing space)
MAX_SENTENCE_CHARS = 2000  # longer sentences are cut


class InputError(TextError):
    """Input the app refuses; the message says what is wrong and what to do instead (in either language)."""


@dataclass(frozen=True)
class Cleaned:
    """Text after cleaning, and what was changed (empty notes = nothing)."""

    text: str
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether anything was removed or cut."""
        return bool(self.notes)


def strip_controls(text: str) -> tuple[str, int]:
    """Text without control, surrogate and bidi-override characters (tabs/newlines become spaces)."""
    out, removed = [], 0
    for ch in text:
        category = unicodedata.category(ch)
        if ch in "\t\n\r\v\f\x85\u2028\u2029":
            out.append(" ")
        elif category in ("Cc", "Cs") or ch in _BIDI_CONTROLS:
            removed += 1
        else:
            out.append(ch)  # letters of any script, emoji (with their joiners) and marks stay
    return "".join(out), removed


def _cut_at_word(text: str, limit: int) -> str:
    """The longest prefix of at most `limit` characters that ends at a word boundary when possible."""
    cut = text[:limit]
    if len(text) > limit and " " in cut and not text[limit].isspace():
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip()


def clean_text(
    text: Any, *, max_word_chars: int = MAX_WORD_CHARS, max_sentence_chars: int = MAX_SENTENCE_CHARS
) -> Cleaned:
    """A sentence ready to translate: NFC, controls removed, spaces collapsed, cut to the length limit."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InputError("error.not_text", kind=type(text).__name__)
    notes = []
    text, removed = strip_controls(unicodedata.normalize("NFC", text))
    if removed:
        notes.append(f"removed {removed} invisible control character(s)")
    text = _SPACE.sub(" ", text).strip()
    if not text:
        raise InputError("error.nothing")
    long_words = [w for w in text.split(" ") if len(w) > max_word_chars]
    if long_words:
        word = long_words[0]
        raise InputError("error.long_word", word=word[:20], n=len(word), limit=max_word_chars)
    if len(text) > max_sentence_chars:
        notes.append(
            f"cut to the first {max_sentence_chars:,} of its {len(text):,} characters (the limit here)"
        )
        text = _cut_at_word(text, max_sentence_chars)
    return Cleaned(text, tuple(notes))
