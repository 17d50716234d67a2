"""Public corpora: where to get them, a cache folder, checksums, and the local copies in ../shared/data.

Multi30k comes from the multi30k/dataset GitHub repository (gzipped raw text, checksums pinned on
the unpacked files). Tatoeba pairs come from manythings.org/anki (a zip with one TSV), split here
into line-aligned files like the copies in ../shared/data. manythings republishes its files from
time to time, so their checksums are not pinned: the sha256 of what was fetched is recorded in
MANIFEST.json instead.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from visformer.data import Pair, read_parallel

CACHE_ENV = "VISFORMER_CACHE"
DATA_ENV = "VISFORMER_DATA"
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{split}.{lang}.gz"
MANYTHINGS_URL = "https://www.manythings.org/anki/{code}-eng.zip"
USER_AGENT = "visformer/0.1 (educational Transformer viewer; python urllib)"

Fetch = Callable[[str, Path], None]


class DownloadError(RuntimeError):
    """A corpus could not be downloaded, unpacked or verified."""


@dataclass(frozen=True)
class Download:
    """One remote file and how it unpacks: "gz" -> one file, "tatoeba" -> zip with a TSV inside."""

    url: str
    format: str
    target: str  # gz: output file name; tatoeba: file prefix such as "kor-eng"
    lang: str = ""  # tatoeba: extension of the non-English column, e.g. "ko"
    member: str = ""  # tatoeba: TSV name inside the zip, e.g. "kor.txt"


@dataclass(frozen=True)
class Corpus:
    """A downloadable parallel corpus and its line-aligned files per split."""

    name: str
    description: str
    license: str
    langs: tuple[str, str]
    splits: dict[str, tuple[str, str]]  # split -> (file in langs[0], file in langs[1])
    downloads: tuple[Download, ...]
    sha256: dict[str, str] = field(default_factory=dict)  # pinned checksums of unpacked files

    @property
    def files(self) -> list[str]:
        """Every line-aligned file the corpus provides."""
        return [f for pair in self.splits.values() for f in pair]


def _multi30k() -> Corpus:
    """Multi30k task 1, English–German raw captions."""
    splits = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    return Corpus(
        name="multi30k",
        description="Multi30k task 1: 29k English–German image captions (train / val / test_2016_flickr).",
        license="Research and educational use (Flickr30K terms); cite Elliott et al. 2016.",
        langs=("en", "de"),
        splits={k: (f"{v}.en", f"{v}.de") for k, v in splits.items()},
        downloads=tuple(
            Download(MULTI30K_URL.format(split=v, lang=lang), "gz", f"{v}.{lang}")
            for v in splits.values()
            for lang in ("en", "de")
        ),
        sha256={
            "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
            "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
            "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
            "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
            "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
            "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
        },
    )


def tatoeba(code: str, lang: str, language: str) -> Corpus:
    """A manythings.org Tatoeba pair file, e.g. tatoeba("kor", "ko", "Korean"); no splits upstream."""
    prefix = f"{code}-eng"
    return Corpus(
        name=f"tatoeba-{prefix}",
        description=f"Tatoeba English–{language} sentence pairs via manythings.org/anki (no splits: "
        "use data.split_disjoint).",
        license="CC BY 2.0 FR; credit Tatoeba (tatoeba.org) via manythings.org/anki.",
        langs=("en", lang),
        splits={"all": (f"{prefix}.en", f"{prefix}.{lang}")},
        downloads=(Download(MANYTHINGS_URL.format(code=code), "tatoeba", prefix, lang, f"{code}.txt"),),
    )


CORPORA: dict[str, Corpus] = {
    c.name: c for c in (_multi30k(), tatoeba("kor", "ko", "Korean"), tatoeba("fra", "fr", "French"))
}


def get_corpus_info(name: str | Corpus) -> Corpus:
    """The Corpus entry for a name (or the entry itself)."""
    if isinstance(name, Corpus):
        return name
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {sorted(CORPORA)}")
    return CORPORA[name]


def default_cache_dir() -> Path:
    """$VISFORMER_CACHE, else ~/.cache/visformer."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "visformer")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_url(url: str, dest: Path) -> None:
    """Download url to dest with urllib (http(s) or file://)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=60) as response, open(dest, "wb") as out:
            shutil.copyfileobj(response, out)
    except (urllib.error.URLError, OSError) as exc:
        raise DownloadError(
            f"could not download {url}: {exc}. Are you online? Without internet, put the files in "
            f"{default_cache_dir()} or use the copies in ../shared/data."
        ) from exc


def _unpack(download: Download, archive: Path, folder: Path) -> None:
    """Turn one downloaded archive into line-aligned text files in folder."""
    try:
        if download.format == "gz":
            with gzip.open(archive, "rb") as f, open(folder / download.target, "wb") as out:
                shutil.copyfileobj(f, out)
        elif download.format == "tatoeba":
            with zipfile.ZipFile(archive) as z:
                text = z.read(download.member).decode("utf-8")
            _split_tsv(text, folder, download.target, download.lang)
        else:
            raise DownloadError(f"unknown download format {download.format!r}")
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise DownloadError(f"could not unpack {download.url}: {exc!r}") from exc


def _split_tsv(text: str, folder: Path, prefix: str, lang: str) -> None:
    """English<TAB>other[<TAB>attribution] lines -> prefix.en, prefix.<lang>, prefix.attribution.txt."""
    lines = [line.rstrip("\r") for line in text.split("\n") if line.strip()]
    rows = [line.split("\t") for line in lines]
    if not rows or any(len(r) < 2 for r in rows):
        raise DownloadError(f"{prefix}: expected tab-separated English<TAB>translation lines")
    columns = {f"{prefix}.en": 0, f"{prefix}.{lang}": 1}
    if all(len(r) >= 3 for r in rows):
        columns[f"{prefix}.attribution.txt"] = 2
    for name, col in columns.items():
        (folder / name).write_text("".join(r[col] + "\n" for r in rows), encoding="utf-8")


def _verify(corpus: Corpus, folder: Path) -> dict[str, str]:
    """sha256 of every corpus file in folder; DownloadError on a missing file or a pinned mismatch."""
    sums = {}
    for name in corpus.files:
        path = folder / name
        if not path.is_file():
            raise DownloadError(f"{corpus.name}: {name} is missing from {folder}")
        sums[name] = sha256_file(path)
        expected = corpus.sha256.get(name)
        if expected and sums[name] != expected:
            raise DownloadError(
                f"{corpus.name}: checksum mismatch for {name} (expected sha256 {expected}, got {sums[name]}); "
                "the download is corrupt or the upstream file changed, so it was not used"
            )
    return sums


def is_complete(corpus: str | Corpus, folder: Path) -> bool:
    """True when folder holds every file of the corpus with matching pinned checksums."""
    try:
        _verify(get_corpus_info(corpus), Path(folder))
    except DownloadError:
        return False
    return True


def download_corpus(
    name: str | Corpus,
    cache_dir: str | os.PathLike | None = None,
    *,
    fetch: Fetch = fetch_url,
    force: bool = False,
) -> Path:
    """Download, unpack and verify a corpus into cache_dir/<name>; reuse a verified copy already there."""
    corpus = get_corpus_info(name)
    folder = Path(cache_dir or default_cache_dir()) / corpus.name
    if not force and is_complete(corpus, folder):
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for i, download in enumerate(corpus.downloads):
            archive = partial / f".download-{i}"
            fetch(download.url, archive)
            _unpack(download, archive, partial)
            archive.unlink()
        sums = _verify(corpus, partial)
        manifest = {"corpus": corpus.name, "urls": [d.url for d in corpus.downloads], "sha256": sums}
        (partial / "MANIFEST.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def find_local_corpus(name: str | Corpus) -> Path | None:
    """The complete local copy ($VISFORMER_DATA/<name> or ../shared/data/<name>), or None."""
    corpus = get_corpus_info(name)
    roots = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    for root in [*roots, SHARED_DATA]:
        folder = root / corpus.name
        if all((folder / f).is_file() for f in corpus.files):
            return folder
    return None


def corpus_dir(
    name: str | Corpus,
    cache_dir: str | os.PathLike | None = None,
    *,
    download: bool = True,
    fetch: Fetch = fetch_url,
) -> Path:
    """Where the corpus files are: the local copy, else the cache, else a fresh download."""
    corpus = get_corpus_info(name)
    local = find_local_corpus(corpus)
    if local is not None:
        return local
    cached = Path(cache_dir or default_cache_dir()) / corpus.name
    if is_complete(corpus, cached):
        return cached
    if not download:
        raise ValueError(f"corpus {corpus.name!r} is not available locally and downloading is off")
    return download_corpus(corpus, cache_dir, fetch=fetch)


def read_corpus(
    name: str | Corpus,
    split: str,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    *,
    download: bool = True,
) -> list[Pair]:
    """Pairs of one split in the chosen direction, e.g. read_corpus("tatoeba-kor-eng", "all", "ko", "en")."""
    corpus = get_corpus_info(name)
    if split not in corpus.splits:
        raise ValueError(f"{corpus.name} has splits {sorted(corpus.splits)}, not {split!r}")
    src_lang, tgt_lang = src_lang or corpus.langs[0], tgt_lang or corpus.langs[1]
    if {src_lang, tgt_lang} != set(corpus.langs):
        raise ValueError(f"{corpus.name} has languages {corpus.langs}, not {src_lang}->{tgt_lang}")
    folder = corpus_dir(corpus, cache_dir, download=download)
    files = dict(zip(corpus.langs, corpus.splits[split], strict=True))
    return read_parallel(folder / files[src_lang], folder / files[tgt_lang])
