"""The corpora the mixes read: ../shared/data when it is here, else a small generated stand-in with its layout."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.paths import SHARED_DATA
from visformer.corpora import MIXES

GENERATED_PAIRS = 3000  # per corpus: enough for the largest held-out split (en-de: 1,200 test + 600 valid)
GROUP_SIZE = 5  # paraphrases per group in a generated grouped corpus (they share one target)


def _files() -> dict[tuple[str, str], str | None]:
    """Every (source file, target file) a mix reads, with its paraphrase-group file (or None)."""
    pairs: dict[tuple[str, str], str | None] = {}
    for mix in MIXES.values():
        for s in mix.sources:
            pairs[(s.src, s.tgt)] = s.groups
        for a, b in mix.exclude:
            pairs.setdefault((a, b), None)
        for _, a, b in mix.evals:
            pairs.setdefault((a, b), None)
    return pairs


def is_real() -> bool:
    """Whether ../shared/data holds every file the mixes read."""
    files = {f for pair in _files() for f in pair}
    files |= {f for mix in MIXES.values() if mix.back_translation for f in mix.back_translation.files}
    return all((SHARED_DATA / f).is_file() for f in files)


def generate(root: Path) -> Path:
    """Write a stand-in data folder: distinct line-aligned sentences per corpus, paraphrase groups share targets."""
    for k, ((src, tgt), groups) in enumerate(_files().items()):
        n = GENERATED_PAIRS if groups is None else GENERATED_PAIRS // 2
        sources = [f"source {k} sentence {i} says {i % 7}" for i in range(n)]
        targets = [f"target {k} line {i if groups is None else i // GROUP_SIZE}" for i in range(n)]
        for name, lines in ((src, sources), (tgt, targets)):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        if groups is not None:
            rows = [f"{i // GROUP_SIZE}_{i % GROUP_SIZE}\ttrain" for i in range(n)]
            (root / groups).write_text("id\tsplit\n" + "".join(r + "\n" for r in rows), encoding="utf-8")
    for mix in MIXES.values():
        for name in mix.back_translation.files if mix.back_translation else ():
            if not (root / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(
                    "".join(f"english {i} of {name}\n" for i in range(500)), encoding="utf-8"
                )
    return root
