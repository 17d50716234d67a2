"""Every page of the app in Korean and English (AppTest): no exception, and no raw text key on screen.

The pages come from app.py's PAGES list (read with ast, so a page added there is tested here without
editing this file). A "raw key" is a string on the page that is a key of the interface dictionaries
(e.g. "lesson.title"): what a page shows when it prints a key instead of looking it up.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from tests.helpers.app import APP, TIMEOUT
from visformer import i18n

REPO = Path(APP).parent
KEY_LIKE = re.compile(r"(?<![\w./-])[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+(?![\w/-])")  # lesson.title, page.x.y
HANGUL = re.compile("[가-힣]")
ENGLISH_WORDS = re.compile(r"[A-Za-z]{3,}(?:[ ,']+[A-Za-z]{2,}){3,}")  # four or more English words in a row
pytestmark = pytest.mark.usefixtures("env")


def app_pages() -> list[str]:
    """The page files listed in app.py's PAGES (first argument or file= of each entry) that exist."""
    tree = ast.parse((REPO / "app.py").read_text(encoding="utf-8"))
    files = []
    for node in ast.walk(tree):
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if (
            isinstance(node, ast.Assign)
            and "PAGES" in targets
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            for entry in node.value.elts:
                args = [*entry.args, *(k.value for k in entry.keywords if k.arg == "file")]
                files += [
                    a.value for a in args if isinstance(a, ast.Constant) and str(a.value).endswith(".py")
                ]
    return [f for f in dict.fromkeys(files) if (REPO / f).is_file()]


def every_key() -> set[str]:
    """Every key of both dictionaries."""
    return set().union(*(i18n.catalog(lang) for lang in i18n.LANGS))


def _strings(value: object) -> Iterator[str]:
    """Every string inside a nested dict / list (a proto as a dict, a plotly spec)."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            try:
                yield from _strings(json.loads(value))
            except ValueError:
                pass
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _nodes(node) -> Iterator[object]:
    """A node of AppTest's element tree and everything below it."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)


def rendered_texts(at: AppTest) -> list[str]:
    """Every string the page sent to the browser: element and block protos (labels, options, help, bodies,
    chart specs) plus dataframe headers and cells, in the main area and the sidebar."""
    out: list[str] = []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "DESCRIPTOR"):
            out += _strings(MessageToDict(proto))
        if getattr(node, "type", "") in ("arrow_data_frame", "dataframe", "table"):
            try:
                frame = node.value
                out += [str(c) for c in frame.columns]
                out += [str(v) for v in frame.to_numpy().ravel() if isinstance(v, str)]
            except Exception:  # noqa: BLE001 (a widget with no frame value)
                pass
    return out


def raw_keys(texts: list[str], keys: set[str]) -> list[str]:
    """Strings on the page that are interface keys."""
    return sorted({m for text in texts for m in KEY_LIKE.findall(text) if m in keys})


def english_in_korean(texts: list[str]) -> list[str]:
    """Texts with a run of English words and no Hangul (untranslated, or a proper English sentence example)."""
    found = []
    for text in texts:
        if len(text) > 400 or text.lstrip()[:1] in "{[<$" or "sans-serif" in text:  # specs, ids, fonts
            continue
        if ENGLISH_WORDS.search(text) and not HANGUL.search(text):
            found.append(text.strip()[:80])
    return sorted(set(found))


def page_texts(page: str, lang: str) -> list[str]:
    """Everything `page` shows with ?lang=LANG, over its first two runs; fails on any exception.

    Both runs count: AppTest sends the previous page's widget values on the first run after a switch, and
    its tree keeps the sidebar of the first run only.
    """
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, (page, lang, [e.value for e in at.exception])
    at.switch_page(page).run()
    assert not at.exception, (page, lang, [e.value for e in at.exception])
    texts = rendered_texts(at)
    at.run()
    assert not at.exception, (page, lang, [e.value for e in at.exception])
    return texts + rendered_texts(at)


def test_the_page_list_is_read_from_app_py() -> None:
    pages = app_pages()
    assert "pages/lesson.py" in pages and "pages/attention.py" in pages
    assert len(pages) >= 6


def test_the_raw_key_check_finds_a_key_and_ignores_file_names() -> None:
    keys = {"lesson.title", "page.attention"}
    texts = ["see lesson.title here", "checkpoints/model.py", "x=1.5", "page.attention", "lesson.titles"]
    assert raw_keys(texts, keys) == ["lesson.title", "page.attention"]
    assert english_in_korean(["레이어 1", "Where each word looks at", '{"a": 1}']) == [
        "Where each word looks at"
    ]


@pytest.mark.parametrize("lang", i18n.LANGS)
@pytest.mark.parametrize("page", app_pages())
def test_every_page_renders_in_both_languages_without_a_raw_key(page: str, lang: str) -> None:
    texts = page_texts(page, lang)
    assert texts, f"{page} rendered nothing"
    assert raw_keys(texts, every_key()) == [], f"{page} ({lang}) shows raw interface keys"
    if lang == "ko":
        leftovers = english_in_korean(texts)  # reported, not failed: pages are translated area by area
        if not any(HANGUL.search(t) for t in texts):
            print(f"\n[english-in-korean] {page}: no Korean text at all")
        if leftovers:
            print(f"\n[english-in-korean] {page}: {len(leftovers)} texts, e.g. {leftovers[:5]}")
