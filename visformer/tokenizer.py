"""Tokenizers: SentencePiece (BPE or unigram, byte fallback) for text, fixed symbols for toy tasks.

visformer's own tokenizers share the special ids pad=0, unk=1, bos=2, eos=3 (an imported Marian model's
tokenizer has its own, see MarianTokenizer). `encode` never adds bos/eos;
`decode` drops pad/bos/eos; `pieces` gives the display strings the heatmap axes show.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")
SENTENCEPIECE_FILE = "tokenizer.model"
SYMBOL_FILE = "tokenizer.json"
MARIAN_FILE, MARIAN_VOCAB_FILE = "marian.json", "vocab.json"  # an imported OPUS-MT model's tokenizer
MODEL_TYPES = ("bpe", "unigram")
MIN_SENTENCEPIECE_VOCAB = len(SPECIAL_PIECES) + 256  # specials + one piece per byte
_SURROGATES = re.compile("[\ud800-\udfff]")  # code points with no UTF-8 form (lone surrogates)


@runtime_checkable
class Tokenizer(Protocol):
    """What the model, trainer, decoder and app need from any tokenizer."""

    pad_id: int
    unk_id: int
    bos_id: int
    eos_id: int

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Iterable[int]) -> str: ...

    def pieces(self, ids: Iterable[int]) -> list[str]: ...

    def save(self, directory: str | os.PathLike) -> None: ...


class _SpecialIds:
    """Shared special ids and id checking."""

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        """Turn ids into plain ints and refuse ids outside the vocabulary."""
        out = [int(i) for i in ids]
        bad = [i for i in out if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary (size {self.vocab_size})")
        return out

    def _without_specials(self, ids: Iterable[int]) -> list[int]:
        """Drop pad, bos and eos (unk stays: it marks real, unknown text)."""
        return [i for i in self._check_ids(ids) if i not in (PAD_ID, BOS_ID, EOS_ID)]


class SentencePieceTokenizer(_SpecialIds):
    """A trained SentencePiece model (BPE or unigram) with byte fallback: no input is unencodable."""

    def __init__(self, model_proto: bytes):
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError on garbage
            raise ValueError(f"not a valid SentencePiece model: {exc}") from exc
        got = tuple(self.sp.id_to_piece(i) for i in range(min(4, self.sp.get_piece_size())))
        if got != SPECIAL_PIECES:
            raise ValueError(f"SentencePiece model must start with specials {SPECIAL_PIECES}, found {got}")
        self._proto = bytes(model_proto)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        model_type: str = "bpe",
        *,
        character_coverage: float = 0.9995,
        normalization: str = "nfkc",
        seed: int = 0,
        num_threads: int | None = None,
    ) -> SentencePieceTokenizer:
        """Train in memory on an iterable of sentences (seconds for ~60k lines)."""
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
        if vocab_size < MIN_SENTENCEPIECE_VOCAB:
            raise ValueError(
                f"vocab_size={vocab_size} is too small: byte fallback alone needs "
                f"{MIN_SENTENCEPIECE_VOCAB} pieces (4 specials + 256 bytes)"
            )
        sentences = [t for t in (s.strip() for s in texts) if t]
        if not sentences:
            raise ValueError("cannot train a tokenizer on an empty corpus")
        model = io.BytesIO()
        spm.set_random_generator_seed(seed)  # unigram sampling is seeded; BPE is deterministic
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                normalization_rule_name=normalization,
                byte_fallback=True,
                hard_vocab_limit=False,  # a small corpus gives a smaller vocabulary instead of an error
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                pad_piece=SPECIAL_PIECES[0],
                unk_piece=SPECIAL_PIECES[1],
                bos_piece=SPECIAL_PIECES[2],
                eos_piece=SPECIAL_PIECES[3],
                num_threads=num_threads or min(4, os.cpu_count() or 1),
                minloglevel=2,
            )
        except RuntimeError as exc:
            raise ValueError(f"SentencePiece training failed: {exc}") from exc
        return cls(model.getvalue())

    @classmethod
    def from_bytes(cls, model_proto: bytes) -> SentencePieceTokenizer:
        """Rebuild from the serialized model (the bytes of tokenizer.model)."""
        return cls(model_proto)

    def to_bytes(self) -> bytes:
        """The serialized model, identical to the contents of tokenizer.model."""
        return self._proto

    @classmethod
    def load(cls, path: str | os.PathLike) -> SentencePieceTokenizer:
        """Load from a tokenizer.model file or a folder holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / SENTENCEPIECE_FILE
        return cls(path.read_bytes())

    def save(self, directory: str | os.PathLike) -> None:
        """Write `tokenizer.model` into directory (created if missing)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / SENTENCEPIECE_FILE).write_bytes(self._proto)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @property
    def model_type(self) -> str:
        """ "bpe" or "unigram", read from the model itself."""
        from sentencepiece import sentencepiece_model_pb2 as pb  # protobuf, only when asked

        proto = pb.ModelProto()
        proto.ParseFromString(self._proto)
        return pb.TrainerSpec.ModelType.Name(proto.trainer_spec.model_type).lower()

    def normalize(self, text: str) -> str:
        """The text as the model sees it (NFKC, runs of spaces collapsed); decode(encode(t)) gives this."""
        return self.sp.normalize(_encodable(text)).replace("▁", " ").removeprefix(" ")

    def encode(self, text: str) -> list[int]:
        """Token ids of text, without bos/eos; a lone surrogate (no UTF-8 form) is read as U+FFFD."""
        return self.sp.encode(_encodable(text))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids; pad, bos and eos are dropped."""
        return self.sp.decode(self._without_specials(ids))

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Display string of each id ('▁' marks a word start, '<0xF0>' a raw byte)."""
        return [self.sp.id_to_piece(i) for i in self._check_ids(ids)]

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer(vocab_size={self.vocab_size})"


def _encodable(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD, so SentencePiece (UTF-8 only) takes any str."""
    return _SURROGATES.sub("\ufffd", text)


class SymbolTokenizer(_SpecialIds):
    """A fixed list of whitespace-separated symbols (toy tasks): one token per symbol, exact alignments."""

    def __init__(self, vocab: Sequence[str]):
        if tuple(vocab[: len(SPECIAL_PIECES)]) != SPECIAL_PIECES:
            raise ValueError(f"a symbol vocabulary must start with {SPECIAL_PIECES}")
        self.vocab = list(vocab)
        self.index = {s: i for i, s in enumerate(self.vocab)}
        if len(self.index) != len(self.vocab):
            raise ValueError("symbols must be unique")

    @classmethod
    def from_symbols(cls, symbols: list[str]) -> SymbolTokenizer:
        """Build from the task's symbols; specials get ids 0–3, symbols follow in the given order."""
        for s in symbols:
            if not s or any(c.isspace() for c in s):
                raise ValueError(f"symbol {s!r} is empty or contains whitespace")
            if s in SPECIAL_PIECES:
                raise ValueError(f"symbol {s!r} is reserved for a special token")
        return cls([*SPECIAL_PIECES, *dict.fromkeys(symbols)])

    @classmethod
    def load(cls, path: str | os.PathLike) -> SymbolTokenizer:
        """Load from a tokenizer.json file or a folder holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / SYMBOL_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            symbols = data["symbols"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a valid symbol tokenizer file: {exc!r}") from exc
        if data.get("type") != "symbol" or not isinstance(symbols, list):
            raise ValueError(f"{path} is not a symbol tokenizer file")
        return cls.from_symbols([str(s) for s in symbols])

    def save(self, directory: str | os.PathLike) -> None:
        """Write `tokenizer.json` into directory (created if missing)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        data = {"type": "symbol", "specials": list(SPECIAL_PIECES), "symbols": self.symbols}
        (directory / SYMBOL_FILE).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")

    @property
    def symbols(self) -> list[str]:
        """The non-special symbols, in id order."""
        return self.vocab[len(SPECIAL_PIECES) :]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """One id per whitespace-separated symbol; unknown symbols become unk."""
        return [self.index.get(s, UNK_ID) for s in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        """Symbols joined by spaces; pad, bos and eos are dropped."""
        return " ".join(self.vocab[i] for i in self._without_specials(ids))

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """The symbol of each id."""
        return [self.vocab[i] for i in self._check_ids(ids)]

    def __repr__(self) -> str:
        return f"SymbolTokenizer(vocab_size={self.vocab_size})"


class MarianTokenizer(_SpecialIds):
    """One side of an OPUS-MT (Marian) tokenizer: SentencePiece splits text, the model's vocabulary numbers it.

    Its special ids are the model's (Marian: </s> 0, <unk> 1, <pad> last), and `bos_id` is the token the
    decoder starts from (Marian: <pad>). Texts match transformers' MarianTokenizer without sacremoses:
    `encode` is `spm.encode(text)` mapped through the vocabulary (unknown pieces -> <unk>; a leading
    language code such as >>kor<< is one token); `decode` drops every special id (<unk> too, as
    transformers' skip_special_tokens does) and joins the pieces with `decode_spm` (transformers decodes
    with the source model when the vocabulary is shared, the target model when separate).
    """

    def __init__(
        self,
        encode_spm: bytes,
        decode_spm: bytes,
        piece_ids: dict[str, int],
        *,
        vocab_size: int,
        pad_id: int,
        unk_id: int,
        eos_id: int,
        bos_id: int,
    ) -> None:
        try:
            self._encoder = spm.SentencePieceProcessor(model_proto=encode_spm)
            self._decoder = spm.SentencePieceProcessor(model_proto=decode_spm)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError on garbage
            raise ValueError(f"not a valid SentencePiece model: {exc}") from exc
        if any(not isinstance(i, int) or not 0 <= i < vocab_size for i in piece_ids.values()):
            raise ValueError(f"the Marian vocabulary has ids outside 0..{vocab_size - 1}")
        self._protos = (bytes(encode_spm), bytes(decode_spm))
        self.piece_ids = dict(piece_ids)
        self.id_pieces = {i: p for p, i in self.piece_ids.items()}
        self._vocab_size = vocab_size
        self.pad_id, self.unk_id, self.eos_id, self.bos_id = pad_id, unk_id, eos_id, bos_id
        self._specials = {pad_id, unk_id, eos_id, bos_id}

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str) -> list[int]:
        """Model ids of text, without eos; a leading >>xx<< language code is kept as one token."""
        text, code = _encodable(text), []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        pieces = code + self._encoder.encode(text, out_type=str)
        return [self.piece_ids.get(p, self.unk_id) for p in pieces]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ids as transformers' decode(ids, skip_special_tokens=True) gives it."""
        pieces = [self.id_pieces.get(i, "<unk>") for i in self._check_ids(ids) if i not in self._specials]
        return self._decoder.decode_pieces(pieces).replace("▁", " ").strip()

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """The model's own piece of each id ('▁' marks a word start)."""
        return [self.id_pieces.get(i, "<unk>") for i in self._check_ids(ids)]

    def save(self, directory: str | os.PathLike) -> None:
        """Write marian.json, encode.spm, decode.spm and vocab.json into directory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "encode.spm").write_bytes(self._protos[0])
        (directory / "decode.spm").write_bytes(self._protos[1])
        text = json.dumps(self.piece_ids, ensure_ascii=False, indent=0)
        (directory / MARIAN_VOCAB_FILE).write_text(text, encoding="utf-8")
        ids = {"vocab_size": self.vocab_size, "pad_id": self.pad_id, "unk_id": self.unk_id}
        meta = {"type": "marian", **ids, "eos_id": self.eos_id, "bos_id": self.bos_id}
        (directory / MARIAN_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> MarianTokenizer:
        """Rebuild from a folder written by `save`."""
        directory = Path(directory)
        try:
            meta = json.loads((directory / MARIAN_FILE).read_text(encoding="utf-8"))
            vocab = json.loads((directory / MARIAN_VOCAB_FILE).read_text(encoding="utf-8"))
            ids = {k: int(meta[k]) for k in ("vocab_size", "pad_id", "unk_id", "eos_id", "bos_id")}
            protos = [(directory / f).read_bytes() for f in ("encode.spm", "decode.spm")]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, OSError) as exc:
            raise ValueError(f"{directory} is not a valid Marian tokenizer folder: {exc!r}") from exc
        if meta.get("type") != "marian" or not isinstance(vocab, dict):
            raise ValueError(f"{directory} is not a Marian tokenizer folder")
        return cls(*protos, vocab, **ids)

    def __repr__(self) -> str:
        return f"MarianTokenizer(vocab_size={self.vocab_size})"


def load_tokenizer(
    directory: str | os.PathLike,
) -> SentencePieceTokenizer | SymbolTokenizer | MarianTokenizer:
    """Load whichever tokenizer a folder holds (tokenizer.model, tokenizer.json or marian.json)."""
    directory = Path(directory)
    model, symbols = directory / SENTENCEPIECE_FILE, directory / SYMBOL_FILE
    if (directory / MARIAN_FILE).is_file():
        return MarianTokenizer.load(directory)
    if model.is_file():
        return SentencePieceTokenizer.load(model)
    if symbols.is_file():
        return SymbolTokenizer.load(symbols)
    raise ValueError(f"no tokenizer in {directory}: expected {SENTENCEPIECE_FILE} or {SYMBOL_FILE}")
