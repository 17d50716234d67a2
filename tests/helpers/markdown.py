"""What a CommonMark renderer makes of a message: to check that user text stays text."""

from __future__ import annotations

from markdown_it import MarkdownIt


def rendered(markdown: str) -> tuple[set[str], str]:
    """(token types, visible text) of `markdown` as a CommonMark renderer shows it."""
    kinds, text = set(), []
    for block in MarkdownIt("commonmark").parse(markdown):
        kinds.add(block.type)
        for child in block.children or []:
            kinds.add(child.type)
            text.append(child.content if child.type in ("text", "code_inline") else " ")
    return kinds, "".join(text)
