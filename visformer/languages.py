"""A checkpoint's languages: its (source, target) pair from its info or its name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PAIR = re.compile(r"(?:^|[-_])([a-z]{2})-([a-z]{2})(?:$|[-_])")


def language_pair(name: str, info: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
    """(source, target) language codes from the checkpoint's info, else from a name like 'multi30k-en-de'."""
    info = info or {}
    src, tgt = info.get("src_lang"), info.get("tgt_lang")
    if src or tgt:
        return src, tgt
    match = _PAIR.search(name.split("/")[-1].lower())
    return (match.group(1), match.group(2)) if match else (None, None)
