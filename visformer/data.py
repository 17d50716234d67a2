"""Parallel corpora: reading, length filtering, held-out splits that share no sentence, token-budget batching."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, TypeVar

import torch

from visformer.i18n import TextError
from visformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

Example = tuple[list[int], list[int]]  # (source ids, target ids), both without bos/eos


@dataclass(frozen=True, slots=True)
class Pair:
    """One sentence and its translation."""

    src: str
    tgt: str


class _HasText(Protocol):
    src: str
    tgt: str


P = TypeVar("P", bound=_HasText)


class Splits(NamedTuple):
    """Train / valid / test pairs; unpacks as a tuple."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]


def read_lines(path: str | os.PathLike) -> list[str]:
    """Lines of a UTF-8 text file, without line endings; clear errors for missing, empty or non-UTF-8."""
    path = Path(path)
    if not path.is_file():
        raise TextError("error.file_missing", name=path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")  # tolerate a BOM
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TextError("error.not_utf8", name=path, line=line) from exc
    if not text.strip():
        raise TextError("error.empty_file", name=path)
    # split on "\n" only: str.splitlines would also split on rare separators and break line alignment
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> list[Pair]:
    """Pairs from two line-aligned files (line i of src translates line i of tgt); keeps every line."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise TextError("error.line_counts", src=src_path, n_src=len(src), tgt=tgt_path, n_tgt=len(tgt))
    return [Pair(s.strip(), t.strip()) for s, t in zip(src, tgt, strict=True)]


def read_tsv(path: str | os.PathLike, src_col: int = 0, tgt_col: int = 1) -> list[Pair]:
    """Pairs from a tab-separated file (Tatoeba/manythings format: English<TAB>other[<TAB>attribution])."""
    pairs = []
    for n, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) == 1:
            raise TextError("error.no_tab", name=path, n=n, line=repr(line))
        if max(src_col, tgt_col) >= len(cols):
            raise TextError("error.columns", name=path, n=n, cols=len(cols), need=max(src_col, tgt_col))
        pairs.append(Pair(cols[src_col].strip(), cols[tgt_col].strip()))
    return pairs


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())


def filter_by_length(
    pairs: Iterable[P], max_len: int, min_len: int = 1, length: Callable[[str], int] = word_count
) -> list[P]:
    """Keep pairs whose source and target both have min_len..max_len units (words by default)."""
    return [p for p in pairs if min_len <= length(p.src) <= max_len and min_len <= length(p.tgt) <= max_len]


def _components(keys: Sequence[Sequence[str]]) -> list[int]:
    """Connected-component id of each item, items being linked when they share any key (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for item_keys in keys:
        first = find(item_keys[0])
        for key in item_keys[1:]:
            parent[find(key)] = first
    roots: dict[str, int] = {}
    return [roots.setdefault(find(k[0]), len(roots)) for k in keys]


def split_disjoint(
    pairs: Sequence[Pair],
    valid: int,
    test: int,
    seed: int = 0,
    groups: Sequence[str | None] | None = None,
    held_out_from: Callable[[int], bool] | None = None,
) -> Splits:
    """Split so that no source or target sentence (nor paraphrase group) of valid/test occurs in train.

    Pairs that share a source, a target or a group form one component, and a component goes whole to
    one split. `valid` and `test` are minimum pair counts; `held_out_from(i)` limits which pairs may be
    held out (e.g. only one corpus of a mix).
    """
    keys = [
        [f"s\t{p.src}", f"t\t{p.tgt}"] + ([f"g\t{groups[i]}"] if groups and groups[i] else [])
        for i, p in enumerate(pairs)
    ]
    comp = _components(keys)
    members: dict[int, list[int]] = {}
    for i, c in enumerate(comp):
        members.setdefault(c, []).append(i)
    eligible = [
        c for c, idx in members.items() if held_out_from is None or all(held_out_from(i) for i in idx)
    ]
    rank = {c: hashlib.sha256(f"{seed}\t{pairs[members[c][0]].src}".encode()).digest() for c in eligible}
    eligible.sort(key=rank.__getitem__)
    where: dict[int, str] = {}
    counts = {"test": 0, "valid": 0}
    for c in eligible:
        name = "test" if counts["test"] < test else "valid" if counts["valid"] < valid else None
        if name is None:
            break
        if len(members[c]) > max(10, (test if name == "test" else valid) // 20):
            continue  # a huge component ("Yes." with many translations) would skew a held-out set
        where[c] = name
        counts[name] += len(members[c])
    if counts["test"] < test or counts["valid"] < valid:
        raise ValueError(
            f"only {counts} pairs could be held out disjointly (asked {test} test, {valid} valid)"
        )
    out: dict[str, list[Pair]] = {"train": [], "valid": [], "test": []}
    for i, p in enumerate(pairs):
        out[where.get(comp[i], "train")].append(p)
    return Splits(out["train"], out["valid"], out["test"])


def drop_overlapping(pairs: Sequence[Pair], held_out: Iterable[Pair]) -> list[Pair]:
    """Pairs that share neither their source nor their target with any held-out pair."""
    held = list(held_out)
    srcs, tgts = {p.src for p in held}, {p.tgt for p in held}
    return [p for p in pairs if p.src not in srcs and p.tgt not in tgts]


FINAL_PUNCTUATION = ".?!。？！"


def _share(seed: int, kind: str, text: str) -> float:
    """A number in [0, 1) fixed by the seed, the kind of change and the text (reproducible choices)."""
    digest = hashlib.sha256(f"{seed}\t{kind}\t{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def as_typed(text: str, drop_final: bool, join_at: float | None) -> str:
    """The sentence as a student may type it: without its final punctuation, and/or one space fewer."""
    if drop_final:
        text = text.rstrip(FINAL_PUNCTUATION).rstrip() or text
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if join_at is not None and spaces:
        i = spaces[min(int(join_at * len(spaces)), len(spaces) - 1)]
        text = text[:i] + text[i + 1 :]
    return text


def augment_typing(
    pairs: Sequence[Pair], drop_final: float = 0.3, drop_space: float = 0.1, seed: int = 0
) -> list[Pair]:
    """A share of sources as students type them: final punctuation dropped, two words run together."""
    out = []
    for p in pairs:
        join = _share(seed, "join", p.src)
        src = as_typed(
            p.src,
            drop_final=_share(seed, "final", p.src) < drop_final,
            join_at=_share(seed, "where", p.src) if join < drop_space else None,
        )
        out.append(Pair(src, p.tgt))
    return out


def token_room(max_len: int) -> int:
    """Tokens of one sentence that a model of max_len positions reads: one position is kept for </s> (or <s>)."""
    return max_len - 1


def fit_tokens(ids: Sequence[int], max_len: int) -> list[int]:
    """The one cut of a sentence's token ids to the model's length: the first token_room(max_len) of them."""
    return list(ids[: token_room(max_len)])


def encode_source(tokenizer: Tokenizer, text: str, max_len: int) -> tuple[list[int], bool]:
    """The one encoding of a source sentence: its ids cut by fit_tokens, then </s>; and whether it was cut."""
    ids = list(tokenizer.encode(text))
    fitted = fit_tokens(ids, max_len)
    return [*fitted, tokenizer.eos_id], len(fitted) < len(ids)


def source_batch(tokenizer: Tokenizer, texts: Sequence[str], max_len: int) -> torch.Tensor:
    """Sentences encoded by encode_source and padded into one batch (B, S)."""
    return _pad([encode_source(tokenizer, text, max_len)[0] for text in texts], tokenizer.pad_id)


def encode_example(src_tok: Tokenizer, tgt_tok: Tokenizer, source: str, target: str, max_len: int) -> Example:
    """A (source, target) text pair as ids for make_batch: encode_source's cut, without the </s> it adds."""
    return encode_source(src_tok, source, max_len)[0][:-1], fit_tokens(tgt_tok.encode(target), max_len)


def encode_pairs(
    pairs: Iterable[_HasText], src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int | None = None
) -> list[Example]:
    """Token ids of each pair; with max_len, drop pairs whose src+eos or bos+tgt exceed max_len positions."""
    examples = []
    for p in pairs:
        src, tgt = src_tok.encode(p.src), tgt_tok.encode(p.tgt)
        if max_len is None or max(len(src), len(tgt)) <= token_room(max_len):
            examples.append((src, tgt))
    return examples


@dataclass
class Batch:
    """Padded tensors for one step: src = ids+[eos], tgt_in = [bos]+ids, tgt_out = ids+[eos]."""

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor  # (B, T) long
    tgt_out: torch.Tensor  # (B, T) long
    n_tgt_tokens: int  # non-pad tokens in tgt_out (the loss is averaged over these)
    index: list[int] = field(default_factory=list)  # positions of the examples in the input list

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on another device."""
        return Batch(
            self.src.to(device),
            self.tgt_in.to(device),
            self.tgt_out.to(device),
            self.n_tgt_tokens,
            self.index,
        )

    def __len__(self) -> int:
        return self.src.size(0)


def padded_tokens(examples: Sequence[Example]) -> int:
    """Cost of a batch under the token budget: B * max(S, T), with S = src+eos and T = tgt+1."""
    return len(examples) * max(max(len(s), len(t)) + 1 for s, t in examples)


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad rows into a (B, L) LongTensor."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(
    examples: Sequence[Example], pad_id: int = PAD_ID, bos_id: int = BOS_ID, eos_id: int = EOS_ID
) -> Batch:
    """Pad a list of (src ids, tgt ids) into one Batch."""
    src = _pad([list(s) + [eos_id] for s, _ in examples], pad_id)  # (B, S)
    tgt_in = _pad([[bos_id] + list(t) for _, t in examples], pad_id)  # (B, T)
    tgt_out = _pad([list(t) + [eos_id] for _, t in examples], pad_id)  # (B, T)
    return Batch(src, tgt_in, tgt_out, sum(len(t) + 1 for _, t in examples))


def _length_key(example: Example) -> tuple[int, int, int]:
    """Sort key that groups examples of similar padded length on both sides."""
    src, tgt = len(example[0]), len(example[1])
    return max(src, tgt), src, tgt


def _plan_batches(
    examples: Sequence[Example],
    max_tokens: int,
    shuffle: bool,
    seed: int,
    bucket_size: int | None,
    sort_by_length: bool = True,
) -> list[list[int]]:
    """Index lists of batches: sort by length inside buckets, cut greedily under max_tokens."""
    rng = random.Random(seed)
    order = list(range(len(examples)))
    if shuffle:
        rng.shuffle(order)  # which examples share a bucket; also breaks length ties randomly
    size = bucket_size or len(order) or 1
    batches: list[list[int]] = []
    for start in range(0, len(order), size):
        bucket = order[start : start + size]
        if sort_by_length:
            bucket = sorted(bucket, key=lambda i: _length_key(examples[i]))
        current: list[int] = []
        width = 0  # padded length of the batch being filled
        for i in bucket:
            need = max(len(examples[i][0]), len(examples[i][1])) + 1
            new_width = max(width, need)
            if current and new_width * (len(current) + 1) > max_tokens:
                batches.append(current)
                current, new_width = [], need
            current.append(i)
            width = new_width
        if current:
            batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches


def batch_by_tokens(
    examples: Sequence[Example],
    max_tokens: int,
    pad_id: int = PAD_ID,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    shuffle: bool = True,
    seed: int = 0,
    bucket_size: int | None = 16384,
    sort_by_length: bool = True,
) -> Iterator[Batch]:
    """Batches of similar-length examples, each within max_tokens padded tokens (see `padded_tokens`).

    Examples are shuffled (seeded), sorted by length inside buckets of `bucket_size`, cut greedily
    under the budget, and the batch order is shuffled. Pass a new seed each epoch for new batches.
    Every example appears in exactly one batch; `Batch.index` says which. bucket_size=None sorts
    everything at once; sort_by_length=False gives plain random batches (a baseline: more padding).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    too_long = [i for i, (s, t) in enumerate(examples) if max(len(s), len(t)) + 1 > max_tokens]
    if too_long:
        i = too_long[0]
        raise ValueError(
            f"{len(too_long)} example(s) do not fit in max_tokens={max_tokens} even alone (e.g. example {i} "
            f"with {len(examples[i][0])} source / {len(examples[i][1])} target tokens); "
            "filter by length first or raise max_tokens"
        )
    plan = _plan_batches(examples, max_tokens, shuffle, seed, bucket_size, sort_by_length)

    def generate() -> Iterator[Batch]:
        for idx in plan:
            batch = make_batch([examples[i] for i in idx], pad_id, bos_id, eos_id)
            batch.index = idx
            yield batch

    return generate()


def batches(
    examples: Sequence[tuple[list[int], list[int]]],
    max_tokens: int,
    tok: Tokenizer,
    shuffle: bool,
    seed: int,
) -> Iterator[Batch]:
    """One epoch of token-budget batches with the tokenizer's special ids."""
    return batch_by_tokens(list(examples), max_tokens, tok.pad_id, tok.bos_id, tok.eos_id, shuffle, seed)
