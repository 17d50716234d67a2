"""The corpus mixes behind the shipped translation models, built from a data folder with held-out splits.

`python -m visformer prepare --mix ko-en --data ../shared/data --out runs/ko-en-data` writes
train/valid/test files (line-aligned) and a manifest. Held-out pairs share no source, no target and no
paraphrase group with training, so a test score is never a memory of a training sentence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .data import Pair, drop_overlapping, read_parallel, split_disjoint


@dataclass(frozen=True)
class Source:
    """One corpus of a mix: line-aligned files (relative to the data folder) and how it is used."""

    name: str
    src: str
    tgt: str
    license: str
    repeat: int = 1  # times the training pairs are repeated (upsampling a small in-domain corpus)
    groups: str | None = None  # meta TSV whose first column names a paraphrase group as GROUP_K


@dataclass(frozen=True)
class Mix:
    """A named training mix: its corpora, which one supplies the test split, and extra eval sets."""

    name: str
    src_lang: str
    tgt_lang: str
    sources: tuple[Source, ...]
    test_from: str  # the corpus whose pairs form the clean held-out test split
    n_test: int
    n_valid: int
    exclude: tuple[tuple[str, str], ...] = ()  # eval sets whose sentences must not be trained on
    evals: tuple[tuple[str, str, str], ...] = ()  # (name, src file, tgt file) scored besides the test split


MIXES: dict[str, Mix] = {
    "en-de": Mix(
        name="en-de",
        src_lang="en",
        tgt_lang="de",
        sources=(
            Source("multi30k", "multi30k/train.en", "multi30k/train.de", "research/education", repeat=2),
            Source(
                "tatoeba-deu-eng",
                "tatoeba-deu-eng/tatoeba-deu-eng.en",
                "tatoeba-deu-eng/tatoeba-deu-eng.de",
                "CC BY 2.0 FR",
            ),
        ),
        test_from="tatoeba-deu-eng",
        n_test=1200,
        n_valid=600,
        exclude=(
            ("multi30k/val.en", "multi30k/val.de"),
            ("multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de"),
        ),
        evals=(
            ("multi30k test_2016_flickr", "multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de"),
        ),
    ),
    "ko-en": Mix(
        name="ko-en",
        src_lang="ko",
        tgt_lang="en",
        sources=(
            Source("kss-ko-en", "kss-ko-en/kss.ko", "kss-ko-en/kss.en", "CC BY-NC-SA 4.0"),
            Source(
                "stylekqc-ko-en",
                "stylekqc-ko-en/stylekqc.ko",
                "stylekqc-ko-en/stylekqc.en",
                "CC BY-SA 4.0",
                groups="stylekqc-ko-en/stylekqc.meta.tsv",
            ),
            Source(
                "tatoeba-kor-eng", "tatoeba-kor-eng/kor-eng.ko", "tatoeba-kor-eng/kor-eng.en", "CC BY 2.0 FR"
            ),
        ),
        test_from="kss-ko-en",
        n_test=1000,
        n_valid=600,
        exclude=(("korean-parallel-corpora/jhe-koen-eval.ko", "korean-parallel-corpora/jhe-koen-eval.en"),),
        evals=(
            (
                "JHE eval",
                "korean-parallel-corpora/jhe-koen-eval.ko",
                "korean-parallel-corpora/jhe-koen-eval.en",
            ),
        ),
    ),
}


def _groups(data: Path, source: Source, n: int) -> list[str | None]:
    """Paraphrase group of each line ("GROUP_K" ids in the meta file's first column), or None."""
    if source.groups is None:
        return [None] * n
    rows = (data / source.groups).read_text(encoding="utf-8").splitlines()[1:]
    if len(rows) != n:
        raise ValueError(f"{source.groups} has {len(rows)} rows for {n} pairs")
    return [f"{source.name}:{row.split(chr(9))[0].split('_')[0]}" for row in rows]


def _clean(pairs: list[Pair]) -> list[Pair]:
    """Drop pairs with an empty side."""
    return [p for p in pairs if p.src and p.tgt]


def _sha256(path: Path) -> str:
    """Hex digest of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write(out: Path, split: str, mix: Mix, pairs: list[Pair]) -> None:
    """Write one split as two line-aligned files."""
    for lang, side in ((mix.src_lang, "src"), (mix.tgt_lang, "tgt")):
        text = "".join(getattr(p, side).replace("\n", " ") + "\n" for p in pairs)
        (out / f"{split}.{lang}").write_text(text, encoding="utf-8")


def prepare(mix_name: str, data: str | Path, out: str | Path, seed: int = 0) -> dict:
    """Build the mix's train/valid/test files in `out` and return (and write) its manifest."""
    if mix_name not in MIXES:
        raise ValueError(f"unknown mix {mix_name!r}; choose one of {', '.join(MIXES)}")
    mix, data, out = MIXES[mix_name], Path(data), Path(out)
    pairs: list[Pair] = []
    origin: list[str] = []
    groups: list[str | None] = []
    for source in mix.sources:
        raw = read_parallel(data / source.src, data / source.tgt)
        keep = [i for i, p in enumerate(raw) if p.src and p.tgt]
        source_groups = _groups(data, source, len(raw))
        pairs += [raw[i] for i in keep]
        groups += [source_groups[i] for i in keep]
        origin += [source.name] * len(keep)
    excluded = [p for a, b in mix.exclude for p in read_parallel(data / a, data / b)]
    allowed: Callable[[int], bool] = lambda i: origin[i] == mix.test_from  # noqa: E731
    train, valid, test = split_disjoint(pairs, mix.n_valid, mix.n_test, seed, groups, allowed)
    train_set = set(map(id, train))
    by_source = {s.name: [p for p, o in zip(pairs, origin, strict=True) if o == s.name and id(p) in train_set]
                 for s in mix.sources}  # fmt: skip
    repeated = [p for s in mix.sources for _ in range(s.repeat) for p in by_source[s.name]]
    train = drop_overlapping(repeated, excluded)
    out.mkdir(parents=True, exist_ok=True)
    for split, split_pairs in (("train", train), ("valid", valid), ("test", test)):
        _write(out, split, mix, split_pairs)
    manifest = {
        "mix": mix.name,
        "seed": seed,
        "pairs": {"train": len(train), "valid": len(valid), "test": len(test)},
        "test_from": mix.test_from,
        "sources": [
            {
                "name": s.name,
                "license": s.license,
                "repeat": s.repeat,
                "train_pairs": len(by_source[s.name]),
                "sha256": {s.src: _sha256(data / s.src), s.tgt: _sha256(data / s.tgt)},
            }
            for s in mix.sources
        ],
        "evals": [{"name": n, "src": a, "tgt": b} for n, a, b in mix.evals],
    }
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return manifest
