"""Interface text in Korean and English: per-language dictionaries looked up by key.

Texts live in `locales/LANG.json` and `locales/AREA/LANG.json` (one folder per part of the app).
`t("lesson.title", "ko")` returns the Korean text; a key missing in Korean falls back to English, a key
missing in English raises MissingTextError (tests check that both dictionaries have every key, so a page
never shows a raw key). Placeholders use str.format: `t("lesson.step_of", lang, i=3, n=12)`.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePath

LANGS = ("en", "ko")
DEFAULT_LANG = "en"
LANG_NAMES = {"en": "English", "ko": "한국어"}
LOCALES = Path(__file__).resolve().parent / "locales"


class MissingTextError(KeyError):
    """A text key that the English dictionary does not have."""

    def __str__(self) -> str:
        return f"no interface text with key {self.args[0]!r} in visformer/locales/en.json"


def catalog_files(lang: str) -> list[Path]:
    """The files of one language: visformer/locales/LANG.json and one LANG.json per area folder (locales/AREA/)."""
    return [LOCALES / f"{lang}.json", *sorted(LOCALES.glob(f"*/{lang}.json"))]


@cache
def catalog(lang: str) -> dict[str, str]:
    """The dictionary of one language, read once from its files; a key defined in two files is an error."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGS)}")
    merged: dict[str, str] = {}
    for path in catalog_files(lang):
        texts = json.loads(path.read_text(encoding="utf-8"))
        twice = sorted(set(texts) & set(merged))
        if twice:
            raise ValueError(f"{path}: keys already defined in another locale file: {', '.join(twice)}")
        merged.update(texts)
    return merged


def normalize_lang(lang: str | None) -> str:
    """A supported language code; anything else becomes English."""
    return lang if lang in LANGS else DEFAULT_LANG


def t(key: str, lang: str | None = DEFAULT_LANG, /, **fmt: object) -> str:
    """The text for `key` in `lang` (English where the language lacks it), formatted with `fmt`.

    A field that is itself a `Text` is put into the same language first.
    """
    text = catalog(normalize_lang(lang)).get(key)
    if text is None:
        text = catalog(DEFAULT_LANG).get(key)
    if text is None:
        raise MissingTextError(key)
    return text.format(**{name: v.render(lang) if isinstance(v, Text) else v for name, v in fmt.items()})


@dataclass(frozen=True)
class Text:
    """Words from the locale files not yet put into a language: a key and its fields."""

    key: str
    fmt: Mapping[str, object] = field(default_factory=dict)

    def render(self, lang: str | None = DEFAULT_LANG) -> str:
        """The text in `lang`."""
        return t(self.key, lang, **self.fmt)


class Localized(Exception):
    """An error whose words live in the locale files: str() is English, `in_language()` any language.

    Raised with a key (`InputError("error.nothing")`, fields as keywords) the text is looked up; raised
    with any other message (one passed on from a library) that message stands in every language.
    """

    def __init__(self, key_or_message: str, /, **fmt: object) -> None:
        keyed = isinstance(key_or_message, str) and has(key_or_message)
        if fmt and not keyed:
            raise MissingTextError(key_or_message)
        self.text = Text(key_or_message, fmt) if keyed else None
        super().__init__(self.text.render(DEFAULT_LANG) if self.text else key_or_message)

    @classmethod
    def passing(cls, exc: BaseException, rename: Mapping[str, str] | None = None) -> Localized:
        """`exc` as this class, keeping its key; `rename` replaces field values (e.g. temporary paths by names)."""
        rename = rename or {}
        if isinstance(exc, Localized) and exc.text:
            fmt = {k: _renamed(v, rename) for k, v in exc.text.fmt.items()}
            return cls(exc.text.key, **fmt)
        return cls(_renamed(str(exc), rename))

    def in_language(self, lang: str | None) -> str:
        """The message in `lang`."""
        return self.text.render(lang) if self.text else str(self)


def _renamed(value: object, rename: Mapping[str, str]) -> object:
    """A field with every `rename` key inside it replaced (text, paths, exceptions); numbers stay numbers."""
    if not isinstance(value, str | PurePath | BaseException):
        return value
    text = str(value)
    for old, new in sorted(
        rename.items(), key=lambda item: -len(item[0])
    ):  # longest first: a path before its name
        text = text.replace(old, new)
    return value if text == str(value) else text


class TextError(Localized, ValueError):
    """A ValueError with words from the locale files (see Localized)."""


def error_text(exc: BaseException, lang: str | None) -> str:
    """What to show for an error in `lang`: its localized text, or its message when it has none."""
    return exc.in_language(lang) if isinstance(exc, Localized) else str(exc)


def has(key: str) -> bool:
    """Whether the English dictionary has `key`."""
    return key in catalog(DEFAULT_LANG)


def language_from_locale(locale: str | None) -> str:
    """'ko' for a Korean browser locale ('ko', 'ko-KR', 'ko_KR'), else 'en'."""
    if not locale:
        return DEFAULT_LANG
    primary = str(locale).replace("_", "-").split("-")[0].strip().lower()
    return primary if primary in LANGS else DEFAULT_LANG


def placeholders(text: str) -> set[str]:
    """Names of the str.format fields in `text` ('{n} of {total}' -> {'n', 'total'})."""
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text) if name}


def catalog_problems() -> list[str]:
    """Everything wrong with the dictionaries: missing keys, empty texts, placeholders that differ."""
    problems = []
    cats = {lang: catalog(lang) for lang in LANGS}
    every = set().union(*cats.values())
    for key in sorted(every):
        texts = {lang: cats[lang].get(key) for lang in LANGS}
        for lang, text in texts.items():
            if text is None:
                problems.append(f"{key}: missing in {lang}")
            elif not isinstance(text, str) or not text.strip():
                problems.append(f"{key}: empty in {lang}")
        present = [text for text in texts.values() if isinstance(text, str)]
        try:
            fields = {frozenset(placeholders(text)) for text in present}
        except ValueError as exc:
            problems.append(f"{key}: bad braces ({exc})")
            continue
        if len(fields) > 1:
            problems.append(f"{key}: placeholders differ between languages: {[sorted(f) for f in fields]}")
    return problems
