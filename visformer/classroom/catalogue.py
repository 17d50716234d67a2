"""The checkpoint catalogue: shipped models and the user's own, as entries of the app's picker."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import corpora
from ..checkpoint import CheckpointError, architecture_of, list_checkpoints, read_config
from ..languages import language_pair
from ..models import SEQ2SEQ_ARCHITECTURES

REPO = Path(__file__).resolve().parents[2]
SHIPPED_ROOT = REPO / "checkpoints"
USER_ROOT = REPO / "user_checkpoints"  # gitignored: the Train page saves here
DEFAULT_CHECKPOINT = "en-de"  # Multi30k + Tatoeba: everyday sentences and scenes
USER_PREFIX = "yours/"


@dataclass(frozen=True)
class CheckpointChoice:
    """One entry of the checkpoint picker: a stable key for the URL, the folder and a label."""

    key: str  # "multi30k-en-de" (shipped) or "yours/my-run" (user)
    path: Path
    shipped: bool

    @property
    def label(self) -> str:
        """Text shown in the picker."""
        return self.key if self.shipped else f"{self.key[len(USER_PREFIX) :]} (yours)"


def checkpoint_roots() -> tuple[Path, Path]:
    """(shipped, user) folders; VISFORMER_CHECKPOINTS / VISFORMER_USER_CHECKPOINTS override them (tests, demos)."""
    shipped = os.environ.get("VISFORMER_CHECKPOINTS") or SHIPPED_ROOT
    user = os.environ.get("VISFORMER_USER_CHECKPOINTS") or USER_ROOT
    return Path(shipped), Path(user)


def discover_checkpoints(
    shipped_root: Path | None = None, user_root: Path | None = None
) -> list[CheckpointChoice]:
    """Shipped checkpoints (sorted, English→German first) followed by the user's own."""
    default_shipped, default_user = checkpoint_roots()
    shipped_root, user_root = shipped_root or default_shipped, user_root or default_user
    shipped = [CheckpointChoice(p.name, p, True) for p in _shown(shipped_root)]
    shipped.sort(key=lambda c: (c.key != DEFAULT_CHECKPOINT, c.key))
    user = [CheckpointChoice(USER_PREFIX + p.name, p, False) for p in _shown(user_root)]
    return shipped + user


def _shown(root: Path) -> list[Path]:
    """Checkpoints the pages can show: translation models (Transformers and RNN seq2seq), not the LMs (issue 16)."""
    return [p for p in list_checkpoints(root) if architecture_of(p) in SEQ2SEQ_ARCHITECTURES]


def default_choice(choices: list[CheckpointChoice]) -> CheckpointChoice | None:
    """The shipped English→German model when present, else the first shipped one, else the first."""
    by_key = {c.key: c for c in choices}
    if DEFAULT_CHECKPOINT in by_key:
        return by_key[DEFAULT_CHECKPOINT]
    shipped = [c for c in choices if c.shipped]
    return (shipped or choices or [None])[0]


def find_choice(choices: list[CheckpointChoice], key: str | None) -> CheckpointChoice | None:
    """The choice with this key, or the default when the key is unknown."""
    for choice in choices:
        if choice.key == key:
            return choice
    return default_choice(choices)


def checkpoint_stamp(path: Path) -> float:
    """Latest modification time of a checkpoint folder's files: part of every cache key."""
    path = Path(path)
    times = [f.stat().st_mtime for f in path.iterdir() if f.is_file()] if path.is_dir() else []
    return max(times, default=0.0)


# ---------------------------------------------------------------------------------------------
# Credits and model cards: what each checkpoint was trained on, under which terms, and what it is good at
# ---------------------------------------------------------------------------------------------

CARD_FILE = "card.json"  # optional, next to config.json: bilingual text a checkpoint's info cannot give


@dataclass(frozen=True)
class Corpus(corpora.CorpusInfo):
    """A corpus the app credits: its registry entry (name, licence, credit, URL) and how a checkpoint reveals it."""

    marks: tuple[str, ...] = ()  # lower-case fragments of a data path or mix name that mean "trained on this"
    terms: str = ""  # i18n suffix (frame.terms.TERMS) saying what the licence asks of a model trained on it


_CREDITED = {  # registry key -> (marks, terms) of the corpora behind the shipped models
    "multi30k": (("multi30k", "mix:en-de", "en-de-data"), "research"),
    "tatoeba": (("tatoeba", "mix:en-de", "en-de-data", "mix:ko-en", "ko-en-data"), "by"),
    "kss": (("kss", "ko-en-data", "mix:ko-en"), "by_nc_sa"),
    "stylekqc": (("stylekqc", "ko-en-data", "mix:ko-en"), "by_sa"),
    "korean_eval": (("korean-parallel-corpora", "jhe"), "eval_only"),
}
CORPORA: tuple[Corpus, ...] = tuple(
    Corpus(**vars(corpora.CORPORA[key]), marks=marks, terms=terms)
    for key, (marks, terms) in _CREDITED.items()
)
CORPUS = {c.key: c for c in CORPORA}


@dataclass(frozen=True)
class ModelCard:
    """What a checkpoint is: its languages, training data and terms, what it is good at, examples that suit it."""

    src_lang: str | None
    tgt_lang: str | None
    task: str | None  # a toy task (synthetic data, MIT) instead of corpora
    corpora: tuple[Corpus, ...]  # what it was trained on (eval-only sets are credited, not listed here)
    parameters: int | None
    texts: dict[str, dict[str, str]]  # field ("data", "good_at") -> language -> text, from card.json
    examples: tuple[str, ...]  # sentences suited to it (card.json), before the built-in ones
    test: (
        dict[str, Any] | None
    )  # the held-out score recorded in info["test"] (bleu, chrf, set, sentences, beam_size)
    # an imported model (visformer.marian): source, license, credit, reported_scores; None when trained here
    imported: dict[str, Any] | None = None

    def score(self, lang: str) -> str:
        """The held-out score as one line in `lang` ("" when none was recorded)."""
        return _score(self.test, lang)

    def text(self, name: str, lang: str) -> str:
        """One card.json text in `lang`, else in English, else ""."""
        texts = self.texts.get(name, {})
        return texts.get(lang) or texts.get("en") or ""

    @property
    def licenses(self) -> tuple[str, ...]:
        """The licences the weights carry: MIT for toy tasks, else every training corpus's (in order)."""
        if self.imported:
            return (str(self.imported.get("license", "")),)
        return ("MIT",) if self.task else tuple(dict.fromkeys(c.license for c in self.corpora))


def _read_json(path: Path) -> dict:
    """A JSON object from a file, or {} when it is missing or unreadable (a card is never worth a crash)."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def corpora_in(text: str) -> tuple[Corpus, ...]:
    """Training corpora named in a checkpoint's data description (paths, mix name), in CORPORA order."""
    text = text.lower()
    return tuple(c for c in CORPORA if c.terms != "eval_only" and any(mark in text for mark in c.marks))


def _score(test: object, lang: str) -> str:
    """A held-out score (info["test"]) in `lang`: "sacreBLEU 39.23, chrF 62.60 on test_2016_flickr (1,000 sentences), beam search with 4 beams"."""
    from ..i18n import t

    if not isinstance(test, dict) or not isinstance(test.get("bleu"), int | float):
        return ""
    chrf = test.get("chrf")
    line = f"sacreBLEU {test['bleu']:.2f}" + (f", chrF {chrf:.2f}" if isinstance(chrf, int | float) else "")
    name = str(test.get("set") or "").split(" (")[0]  # the set's name; its count is written below, in `lang`
    n = test.get("sentences")
    if name:
        where = (
            t("frame.card.score_set_n", lang, set=name, n=f"{n:,}") if isinstance(n, int) and n > 0 else name
        )
        line = t("frame.card.score_where", lang, score=line, where=where)
    if isinstance(test.get("beam_size"), int):
        line += t("frame.card.score_beam", lang, k=test["beam_size"])
    return line


def model_card(path: Path, name: str | None = None) -> ModelCard:
    """The card of one checkpoint folder: card.json where present, the rest derived from config.json's info."""
    path = Path(path)
    try:
        config = read_config(path)  # the schema loading uses: a card never shows what loading would refuse
    except CheckpointError:
        config = {}
    card = _read_json(path / CARD_FILE)
    info = config.get("info") if isinstance(config.get("info"), dict) else {}
    task = config.get("task") if isinstance(config.get("task"), str) else None
    src, tgt = language_pair(name or path.name, {**info, **card})
    listed = card.get("corpora")
    if isinstance(listed, list):
        corpora = tuple(CORPUS[k] for k in listed if k in CORPUS)
    else:
        corpora = () if task else corpora_in(f"{info.get('data', '')} mix:{info.get('mix', '')}")
    texts = {
        k: v for k, v in card.items() if isinstance(v, dict) and all(isinstance(s, str) for s in v.values())
    }
    examples = card.get("examples") if isinstance(card.get("examples"), list) else []
    parameters = info.get("parameters")
    return ModelCard(
        src_lang=src,
        tgt_lang=tgt,
        task=task,
        corpora=corpora,
        parameters=parameters if isinstance(parameters, int) else None,
        texts=texts,
        examples=tuple(s for s in examples if isinstance(s, str) and s.strip()),
        test=info["test"] if isinstance(info.get("test"), dict) else None,
        imported=info["imported"] if isinstance(info.get("imported"), dict) else None,
    )


def imported_lines(card: ModelCard, lang: str) -> list[str]:
    """The model card's lines for an imported model: origin, licence and credit, size, reported scores."""
    from ..i18n import t

    info = card.imported or {}
    size = info.get("size") if isinstance(info.get("size"), dict) else {}
    lines = [
        f"**{t('marian.card_title', lang)}**",
        t("marian.card_source", lang, source=info.get("source", "?")),
    ]
    lines.append(
        t("marian.card_license", lang, license=info.get("license", "?"), credit=info.get("credit", "?"))
    )
    lines.append(t("marian.card_size", lang, params=f"{card.parameters or 0:,}", d_model=size.get("d_model"),
                   enc=size.get("encoder_layers"), dec=size.get("decoder_layers"), heads=size.get("heads"),
                   vocab=size.get("vocab_size")))  # fmt: skip
    scores = [s for s in info.get("reported_scores") or [] if isinstance(s, dict)]
    if scores:
        rows = [t("marian.card_score_row", lang, testset=s.get("testset"), bleu=s.get("bleu"),
                  chrf=s.get("chrf") if s.get("chrf") is not None else "–") for s in scores]  # fmt: skip
        lines.append(t("marian.card_scores", lang) + "".join(f"\n- {row}" for row in rows))
    lines.append(t("marian.card_not_trained", lang))
    return lines


def choice_for_language(choices: list[CheckpointChoice], langs: tuple[str, ...]) -> CheckpointChoice | None:
    """The first shipped (else any) checkpoint whose source language is one of `langs`, in that order of languages."""
    ranked = sorted(choices, key=lambda c: not c.shipped)
    for lang in langs:
        for choice in ranked:
            card = model_card(choice.path, choice.key)
            if card.src_lang == lang and not card.task:
                return choice
    return None
