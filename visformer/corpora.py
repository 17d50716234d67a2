"""The corpora visformer knows (licence, credit, where they live) and the mixes behind the shipped models.

`CORPORA` is the one registry of corpora: their folders and languages, licence, credit and URL; the app's
credits, the model cards, `prepare`'s manifest and the README's credits all read it. The mixes
(`python -m visformer prepare --mix ko-en --data ../shared/data --out runs/ko-en-data`) write train/valid/test
files (line-aligned) and a manifest. Held-out pairs share no source, no target and no paraphrase group with
training, so a test score is never a memory of a training sentence.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .data import Pair, augment_typing, drop_overlapping, read_parallel, split_disjoint, word_count

REPO_CORPORA = (
    Path(__file__).resolve().parents[1] / "corpora"
)  # the project's own corpora (corpora/*/README.md)
DATA_ENV = "VISFORMER_DATA"  # a folder of corpora, searched before ../shared/data
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def data_roots() -> list[Path]:
    """Folders that hold corpora (one folder per corpus): $VISFORMER_DATA, then ../shared/data."""
    roots = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    return [*roots, SHARED_DATA]


# ---------------------------------------------------------------------------------------------
# The registry: every corpus, its licence and credit
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus: its folders (in a data root, or corpora/ for the project's own) and languages, licence, credit."""

    key: str
    name: str
    folders: dict[str, tuple[str, str]]  # folder -> its two languages
    license: str
    credit: str  # who made it, as the README cites it
    url: str


CORPORA: dict[str, CorpusInfo] = {
    c.key: c
    for c in (
        CorpusInfo(
            "multi30k", "Multi30k", {"multi30k": ("en", "de")}, "research/education",
            "Elliott, Frank, Sima'an, Specia (2016), Multi30K, Proc. 5th Workshop on Vision and Language, "
            "doi:10.18653/v1/W16-3210 (from Flickr30K)", "https://github.com/multi30k/dataset",
        ),
        CorpusInfo(
            "tatoeba", "Tatoeba",
            {"tatoeba-deu-eng": ("en", "de"), "tatoeba-kor-eng": ("ko", "en"), "tatoeba-fra-eng": ("fr", "en")},
            "CC BY 2.0 FR", "tatoeba.org and its contributors, via manythings.org/anki", "https://tatoeba.org",
        ),
        CorpusInfo(
            "kss", "KSS", {"kss-ko-en": ("ko", "en")}, "CC BY-NC-SA 4.0",
            "Kyubyong Park (2018), KSS Dataset, with the author's English translations",
            "https://www.kaggle.com/datasets/bryanpark/korean-single-speaker-speech-dataset",
        ),
        CorpusInfo(
            "stylekqc", "StyleKQC", {"stylekqc-ko-en": ("ko", "en")}, "CC BY-SA 4.0",
            "Won Ik Cho et al. (2021); English from kosp2e (Cho et al., Interspeech 2021)",
            "https://github.com/cynthia/stylekqc",
        ),
        CorpusInfo(
            "korean_eval", "Korean–English evaluation sets", {"korean-parallel-corpora": ("ko", "en")},
            "CC BY-SA 3.0", "Park, Hong, Cha (2016), Korean Language Resources for Everyone, PACLIC 30",
            "https://github.com/jungyeul/korean-parallel-corpora",
        ),
        CorpusInfo(
            "students", "students-ko-en", {"students-ko-en": ("ko", "en")}, "MIT",
            "written for visformer by the project", "corpora/students-ko-en/README.md",
        ),
    )
}  # fmt: skip


def corpus_of(folder: str) -> CorpusInfo:
    """The registry entry of a corpus folder (a path inside it, such as "kss-ko-en/kss.ko", works too)."""
    top = Path(folder).parts[0]
    for info in CORPORA.values():
        if top in info.folders:
            return info
    raise ValueError(f"no corpus in the registry has the folder {top!r}")


def terms(files: Sequence[str]) -> str:
    """The corpora these data files come from, each with its licence ("Tatoeba: CC BY 2.0 FR; Multi30k: ...")."""
    keys = dict.fromkeys(corpus_of(f).key for f in files)
    return "; ".join(f"{CORPORA[k].name}: {CORPORA[k].license}" for k in keys)


# ---------------------------------------------------------------------------------------------
# The mixes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One corpus of a mix: line-aligned files (relative to the data folder) and how it is used."""

    name: str
    src: str
    tgt: str
    repeat: int = 1  # times the training pairs are repeated (upsampling a small in-domain corpus)
    groups: str | None = None  # meta TSV whose first column names a paraphrase group as GROUP_K

    @property
    def license(self) -> str:
        """The corpus's licence (from the registry)."""
        return corpus_of(self.src).license


@dataclass(frozen=True)
class OwnCorpus:
    """A corpus of the project's own (`corpora/NAME/{train,test}.LANG`): train is upsampled, test held out."""

    name: str
    folder: str  # relative to the project's corpora folder
    repeat: int = 1

    @property
    def license(self) -> str:
        """The corpus's licence (from the registry)."""
        return corpus_of(self.folder).license


@dataclass(frozen=True)
class BackTranslation:
    """Target-language sentences given synthetic sources by a reverse model (Sennrich et al. 2016).

    Each synthetic source starts with `tag`, so the model can tell made-up input from real input (tagged
    back-translation, Caswell et al. 2019); students never type the tag, so it translates real input as real.
    """

    name: str
    files: tuple[str, ...]  # target-language text files in the data folder (one sentence a line)
    tag: str = "<bt>"
    max_words: int = 30

    @property
    def license(self) -> str:
        """The licence of the target-language files (from the registry); the synthetic sources add none."""
        names = dict.fromkeys(corpus_of(f).license for f in self.files)
        return f"{'; '.join(names)} (target side); sources made by the back-translator"


@dataclass(frozen=True)
class Typing:
    """Training sources as students type them: a share without final punctuation, a share with a space fewer."""

    drop_final: float = 0.3
    drop_space: float = 0.1


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
    own: tuple[
        OwnCorpus, ...
    ] = ()  # the project's own corpora: their test sets are scored and never trained on
    back_translation: BackTranslation | None = None  # needs a reverse model: prepare(back_translator=...)
    typing: Typing | None = None  # augment the real training sources (not the synthetic ones)
    real_repeat: int = 1  # every real training pair (after each source's own repeat) this many times


MIXES: dict[str, Mix] = {
    "en-de": Mix(
        name="en-de",
        src_lang="en",
        tgt_lang="de",
        sources=(
            Source("multi30k", "multi30k/train.en", "multi30k/train.de", repeat=2),
            Source(
                "tatoeba-deu-eng", "tatoeba-deu-eng/tatoeba-deu-eng.en", "tatoeba-deu-eng/tatoeba-deu-eng.de"
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
            Source("kss-ko-en", "kss-ko-en/kss.ko", "kss-ko-en/kss.en"),
            Source(
                "stylekqc-ko-en",
                "stylekqc-ko-en/stylekqc.ko",
                "stylekqc-ko-en/stylekqc.en",
                groups="stylekqc-ko-en/stylekqc.meta.tsv",
            ),
            Source("tatoeba-kor-eng", "tatoeba-kor-eng/kor-eng.ko", "tatoeba-kor-eng/kor-eng.en"),
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
MIXES["ko-en-bt"] = Mix(
    name="ko-en-bt",
    src_lang="ko",
    tgt_lang="en",
    sources=tuple(replace(s, repeat=3 if s.name == "kss-ko-en" else 1) for s in MIXES["ko-en"].sources),
    test_from="kss-ko-en",
    n_test=1000,
    n_valid=600,
    exclude=MIXES["ko-en"].exclude,
    evals=MIXES["ko-en"].evals,
    own=(OwnCorpus("students-ko-en", "students-ko-en", repeat=10),),
    back_translation=BackTranslation(
        "tatoeba-eng-bt", ("tatoeba-deu-eng/tatoeba-deu-eng.en", "tatoeba-fra-eng/fra-eng.en")
    ),
    typing=Typing(),
    real_repeat=2,
)
# the same without back-translation: real pairs, the project's own sentences, sources as students type them
MIXES["ko-en-own"] = replace(MIXES["ko-en-bt"], name="ko-en-own", back_translation=None, real_repeat=1)
# the same with each real source three times as often: at 105k own sentences x10 they were 6% of the mix
MIXES["ko-en-own-real3"] = replace(
    MIXES["ko-en-own"],
    name="ko-en-own-real3",
    sources=tuple(replace(s, repeat=3 * s.repeat) for s in MIXES["ko-en-own"].sources),
)


def _groups(data: Path, source: Source, n: int) -> list[str | None]:
    """Paraphrase group of each line ("GROUP_K" ids in the meta file's first column), or None."""
    if source.groups is None:
        return [None] * n
    rows = (data / source.groups).read_text(encoding="utf-8").splitlines()[1:]
    if len(rows) != n:
        raise ValueError(f"{source.groups} has {len(rows)} rows for {n} pairs")
    return [f"{source.name}:{row.split(chr(9))[0].split('_')[0]}" for row in rows]


def _sha256(path: Path) -> str:
    """Hex digest of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write(out: Path, split: str, mix: Mix, pairs: list[Pair]) -> None:
    """Write one split as two line-aligned files."""
    for lang, side in ((mix.src_lang, "src"), (mix.tgt_lang, "tgt")):
        text = "".join(getattr(p, side).replace("\n", " ") + "\n" for p in pairs)
        (out / f"{split}.{lang}").write_text(text, encoding="utf-8")


def _own_pairs(corpora: Path, own: OwnCorpus, mix: Mix, split: str) -> list[Pair]:
    """One split of a project corpus (corpora/FOLDER/SPLIT.LANG)."""
    folder = corpora / own.folder
    return read_parallel(folder / f"{split}.{mix.src_lang}", folder / f"{split}.{mix.tgt_lang}")


def back_translation_inputs(data: Path, bt: BackTranslation, held_out: Sequence[str]) -> list[str]:
    """Distinct target-language sentences to back-translate: no held-out reference, none too long, in hash order."""
    held = set(held_out)
    lines: set[str] = set()
    for name in bt.files:
        text = (data / name).read_text(encoding="utf-8")
        lines.update(line.strip() for line in text.split("\n"))
    keep = [t for t in lines if t and t not in held and word_count(t) <= bt.max_words]
    return sorted(keep, key=lambda t: hashlib.sha256(t.encode()).digest())


def usable_back_translation(source: str) -> bool:
    """Whether a synthetic source is worth training on: not empty, no broken character (U+FFFD).

    A weak reverse model's byte pieces can spell invalid UTF-8 (5% of an en→ko model's outputs at valid
    chrF 10, 2026-11-26); such a source teaches nothing about Korean.
    """
    return bool(source.strip()) and "\ufffd" not in source


def back_translate(
    texts: Sequence[str],
    translator: Any,
    out: Path,
    src_lang: str,
    tgt_lang: str,
    batch_size: int = 256,
    chunk: int = 4096,
    progress: bool = True,
) -> list[Pair]:
    """Synthetic (source, text) pairs; resumes from out/bt.{src,tgt} written chunk by chunk (a killed run continues)."""
    from .evaluation import translate_all

    src_file, tgt_file = out / f"bt.{src_lang}", out / f"bt.{tgt_lang}"
    done_tgt = tgt_file.read_text(encoding="utf-8").split("\n")[:-1] if tgt_file.is_file() else []
    done_src = src_file.read_text(encoding="utf-8").split("\n")[:-1] if src_file.is_file() else []
    if done_tgt != list(texts[: len(done_tgt)]) or len(done_src) != len(done_tgt):
        done_src, done_tgt = [], []  # another input or a torn write: start again
        src_file.write_text("", encoding="utf-8")
        tgt_file.write_text("", encoding="utf-8")
    model = translator.model  # loaded checkpoints are in eval mode
    for start in range(len(done_tgt), len(texts), chunk):
        part = list(texts[start : start + chunk])
        hyps = translate_all(model, translator.src_tokenizer, translator.tgt_tokenizer, part,
                             batch_size=batch_size, progress=progress)  # fmt: skip
        hyps = [h.replace("\n", " ").strip() for h in hyps]
        with src_file.open("a", encoding="utf-8") as f:
            f.write("".join(h + "\n" for h in hyps))
        with tgt_file.open("a", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in part))
        done_src += hyps
        done_tgt += part
    return [Pair(a, b) for a, b in zip(done_src, done_tgt, strict=True)]


def prepare(
    mix_name: str,
    data: str | Path,
    out: str | Path,
    seed: int = 0,
    back_translator: Any = None,
    corpora: str | Path = REPO_CORPORA,
    batch_size: int = 256,
    progress: bool = True,
) -> dict:
    """Build the mix's train/valid/test files in `out` and return (and write) its manifest.

    `back_translator` (a loaded checkpoint translating the mix's target language into its source language)
    is needed by mixes with back-translation; its outputs are kept in out/bt.* and reused by a later call.
    """
    if mix_name not in MIXES:
        raise ValueError(f"unknown mix {mix_name!r}; choose one of {', '.join(MIXES)}")
    mix, data, out, corpora = MIXES[mix_name], Path(data), Path(out), Path(corpora)
    if mix.back_translation is not None and back_translator is None:
        raise ValueError(
            f"the mix {mix.name} back-translates {mix.tgt_lang} text: give a {mix.tgt_lang}→{mix.src_lang} "
            "checkpoint as back_translator (prepare --back-translator DIR)"
        )
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
    own_test = {o.name: _own_pairs(corpora, o, mix, "test") for o in mix.own}
    eval_pairs = {n: read_parallel(data / a, data / b) for n, a, b in mix.evals}
    excluded = [p for a, b in mix.exclude for p in read_parallel(data / a, data / b)]
    excluded += [p for test_pairs in own_test.values() for p in test_pairs]
    allowed: Callable[[int], bool] = lambda i: origin[i] == mix.test_from  # noqa: E731
    train, valid, test = split_disjoint(pairs, mix.n_valid, mix.n_test, seed, groups, allowed)
    train_set = set(map(id, train))
    by_source = {s.name: [p for p, o in zip(pairs, origin, strict=True) if o == s.name and id(p) in train_set]
                 for s in mix.sources}  # fmt: skip
    by_source |= {o.name: _own_pairs(corpora, o, mix, "train") for o in mix.own}
    repeats = {s.name: s.repeat for s in mix.sources} | {o.name: o.repeat for o in mix.own}
    copies = [
        (name, k) for name in by_source for k in range(repeats[name] * mix.real_repeat)
    ]  # each copy of a source may be typed differently
    real: list[Pair] = []
    for name, k in copies:
        chunk = by_source[name]
        if mix.typing is not None and k > 0:  # the first copy stays as written
            chunk = augment_typing(chunk, mix.typing.drop_final, mix.typing.drop_space, seed=seed * 1000 + k)
        real += chunk
    real = drop_overlapping(real, excluded + valid + test)
    synthetic: list[Pair] = []
    out.mkdir(parents=True, exist_ok=True)
    if mix.back_translation is not None:
        bt = mix.back_translation
        held = [p.tgt for p in excluded + valid + test] + [p.tgt for ps in eval_pairs.values() for p in ps]
        texts = back_translation_inputs(data, bt, held)
        made = back_translate(
            texts, back_translator, out, mix.src_lang, mix.tgt_lang, batch_size, progress=progress
        )
        synthetic = [Pair(f"{bt.tag} {p.src}", p.tgt) for p in made if usable_back_translation(p.src)]
    train = real + synthetic
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
                "repeat": s.repeat * mix.real_repeat,
                "train_pairs": len(by_source[s.name]),
                "sha256": {s.src: _sha256(data / s.src), s.tgt: _sha256(data / s.tgt)},
            }
            for s in mix.sources
        ]
        + [
            {
                "name": o.name,
                "license": o.license,
                "repeat": o.repeat * mix.real_repeat,
                "train_pairs": len(by_source[o.name]),
                "test_pairs": len(own_test[o.name]),
                "folder": f"corpora/{o.folder}",
            }
            for o in mix.own
        ],
        "evals": [{"name": n, "src": a, "tgt": b} for n, a, b in mix.evals]
        + [
            {
                "name": o.name,
                "src": f"corpora/{o.folder}/test.{mix.src_lang}",
                "tgt": f"corpora/{o.folder}/test.{mix.tgt_lang}",
            }
            for o in mix.own
        ],
    }
    if mix.typing is not None:
        manifest["typing"] = {"drop_final": mix.typing.drop_final, "drop_space": mix.typing.drop_space}
    if mix.back_translation is not None:
        manifest["back_translation"] = {
            "name": mix.back_translation.name,
            "files": list(mix.back_translation.files),
            "license": mix.back_translation.license,
            "tag": mix.back_translation.tag,
            "pairs": len(synthetic),
            "back_translator": str(getattr(back_translator, "name", back_translator)),
        }
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return manifest
