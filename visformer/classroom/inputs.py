"""Input from students, checked before it reaches the model: a clear message instead of a traceback.

Every refusal is an `InputError` (a ValueError) whose message a student can act on. Fixable input
(control characters, a sentence that is too long) is repaired and the repair is described in
`Cleaned.notes`, so the page can say what happened.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..checkpoint import list_checkpoints, safe_checkpoint_dir
from ..config import ModelConfig, TrainConfig
from ..data import Pair, read_parallel, read_tsv, token_room
from ..i18n import Localized, Text, error_text
from ..text import Cleaned, InputError, clean_text
from .hosting import HostedLimits, folder_bytes

_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def _mb(n: int) -> str:
    """Bytes as a short human string."""
    return (
        f"{n / 1024 / 1024:.1f} MB"
        if n >= 1024 * 1024
        else f"{n / 1024:.0f} KB"
        if n >= 1024
        else f"{n} bytes"
    )


# ---------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------


def clean_sentence(text: Any, limits: HostedLimits | None = None) -> Cleaned:
    """A sentence ready to translate under `limits` (default: local): see visformer.text.clean_text."""
    limits = limits or HostedLimits.local()
    return clean_text(
        text, max_word_chars=limits.max_word_chars, max_sentence_chars=limits.max_sentence_chars
    )


def fit_to_model(text: str, tokenizer: Any, max_len: int, limits: HostedLimits | None = None) -> Cleaned:
    """Cut a cleaned sentence to whole words whose tokens (+ eos) fit the model and the token limit."""
    limits = limits or HostedLimits.local()
    room = token_room(max_len)
    if limits.max_sentence_tokens is not None:
        room = min(room, limits.max_sentence_tokens)
    if len(tokenizer.encode(text)) <= room:
        return Cleaned(text)
    words = text.split(" ")
    lo, hi = 0, len(words)  # binary search: the most words whose tokens fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenizer.encode(" ".join(words[:mid]))) <= room:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        raise InputError("error.first_word_tokens", room=room)
    note = f"cut to the first {lo} of {len(words)} words: the model reads at most {room} tokens"
    return Cleaned(" ".join(words[:lo]), (note,))


def escape_markdown(text: str) -> str:
    """User text made literal for st.markdown: markdown, HTML and LaTeX characters are backslash-escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def hide_paths(text: str, roots: Sequence[str | os.PathLike]) -> str:
    """Text with every path below one of `roots` replaced by its last name (a session folder's too)."""
    for root in sorted({str(r) for r in roots if str(r) not in ("", ".", "/")}, key=len, reverse=True):
        below = re.escape(root.rstrip("/")) + r"/(?:[^\s'\"/]+/)*"
        text = re.sub(below, "", text)
        text = text.replace(root, Path(root).name)
    return text


def error_markdown(
    exc: BaseException, lang: str | None, capital: bool = True, roots: Sequence[str | os.PathLike] = ()
) -> str:
    """An error as a page shows it (st.error renders markdown): in `lang`, names for paths, every character literal.

    Errors the app expects (ValueError, OSError and their localized kinds) give their message; anything else
    gives "an unexpected error (ITS TYPE)", so no traceback or internal detail reaches a student.
    """
    if isinstance(exc, Localized | ValueError | OSError):
        text = error_text(exc, lang)
    else:
        text = Text("error.unexpected", {"kind": type(exc).__name__}).render(lang)
    text = hide_paths(text, roots)
    if capital:
        text = text[:1].upper() + text[1:]
    return escape_markdown(text)


# ---------------------------------------------------------------------------------------------
# Decoding parameters: the ranges the strategies declare (visformer.decoding.Param), as InputError
# ---------------------------------------------------------------------------------------------


def check_decoding_params(
    strategy: str, params: Mapping[str, Any], limits: HostedLimits | None = None
) -> dict[str, Any]:
    """Parameters for `strategy` checked against its declared ranges; numbers coerced to int/float."""
    from ..decoding import MAX_LEN, get_strategy

    limits = limits or HostedLimits.local()
    try:
        chosen = get_strategy(strategy)
    except ValueError as exc:
        raise InputError.passing(exc) from exc
    declared = {p.name: p for p in chosen.params}
    out: dict[str, Any] = {}
    for name, raw in params.items():
        if name == "max_len" and raw is None:
            out[name] = None
            continue
        if name not in declared and name != "max_len":
            names = ", ".join(declared) or Text("error.no_settings")
            raise InputError("error.not_setting", name=name, strategy=strategy, names=names)
        p = declared.get(name, MAX_LEN)
        if name == "beam_size":
            p = replace(p, high=min(p.high, limits.max_beam_size))
        try:
            out[name] = p.check(raw)
        except ValueError as exc:
            raise InputError.passing(exc) from exc
    return out


# ---------------------------------------------------------------------------------------------
# Uploaded corpora
# ---------------------------------------------------------------------------------------------


def decode_upload(data: bytes, name: str, limits: HostedLimits | None = None) -> str:
    """UTF-8 text of an uploaded file, or InputError for empty, oversized, binary or non-UTF-8 files."""
    limits = limits or HostedLimits.local()
    if len(data) > limits.max_upload_bytes:
        raise InputError(
            "error.upload_too_big", name=name, size=_mb(len(data)), limit=_mb(limits.max_upload_bytes)
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError("error.not_utf8", name=name, line=line) from exc
    if "\x00" in text:
        raise InputError("error.binary", name=name)
    if not text.strip():
        raise InputError("error.empty_file", name=name)
    lines = text.count("\n") + (not text.endswith("\n"))
    if lines > limits.max_upload_lines:
        raise InputError("error.too_many_lines", name=name, lines=lines, limit=limits.max_upload_lines)
    return text


def _parse_as_files(texts: dict[str, str], parse: Any) -> list[Pair]:
    """Run a data.py reader on texts written to temporary files; its messages name the uploads."""
    with tempfile.TemporaryDirectory(prefix="visformer-upload-") as tmp:
        paths = {}
        for i, (name, text) in enumerate(texts.items()):
            paths[name] = Path(tmp) / f"upload{i}.txt"
            paths[name].write_text(text, encoding="utf-8")
        try:
            return parse(*paths.values())
        except ValueError as exc:
            raise InputError.passing(exc, {str(path): name for name, path in paths.items()}) from exc


def _usable(pairs: list[Pair], what: str | Text) -> list[Pair]:
    """Pairs with text on both sides; InputError when none are left."""
    kept = [p for p in pairs if p.src and p.tgt]
    if not kept:
        raise InputError("error.no_pairs", name=what)
    return kept


def parse_uploaded_parallel(
    src_bytes: bytes,
    tgt_bytes: bytes,
    limits: HostedLimits | None = None,
    src_name: str = "the source file",
    tgt_name: str = "the target file",
) -> list[Pair]:
    """Pairs from two uploaded line-aligned files (blank pairs dropped), with clear refusals."""
    if src_name == tgt_name:
        src_name, tgt_name = f"{src_name} (source)", f"{tgt_name} (target)"
    texts = {
        src_name: decode_upload(src_bytes, src_name, limits),
        tgt_name: decode_upload(tgt_bytes, tgt_name, limits),
    }
    return _usable(_parse_as_files(texts, read_parallel), Text("error.the_uploads"))


def parse_uploaded_tsv(
    data: bytes, limits: HostedLimits | None = None, name: str = "the TSV file"
) -> list[Pair]:
    """Pairs from an uploaded tab-separated file (source<TAB>target per line), with clear refusals."""
    texts = {name: decode_upload(data, name, limits)}
    return _usable(_parse_as_files(texts, read_tsv), name)


# ---------------------------------------------------------------------------------------------
# Checkpoint names, model sizes and training bounds
# ---------------------------------------------------------------------------------------------


def checkpoint_name(raw: str) -> str:
    """A safe folder name from what a student typed: 'My run #2' -> 'My-run-2'."""
    name = _NAME_CHARS.sub("-", unicodedata.normalize("NFKD", str(raw)).encode("ascii", "ignore").decode())
    name = re.sub(r"\.{2,}", ".", name).strip(".-_")[:100].rstrip(".-_")
    if not name:
        raise InputError("error.bad_name")
    return name


def checkpoint_path(root: str | Path, raw: str) -> Path:
    """root/<sanitised name>, guaranteed to stay directly inside root."""
    try:
        return safe_checkpoint_dir(root, checkpoint_name(raw))
    except InputError:
        raise
    except ValueError as exc:
        raise InputError.passing(exc) from exc


def count_parameters(config: ModelConfig) -> int:
    """Parameters `Transformer(config)` would have (tied weights once), by arithmetic: nothing is built.

    Building the model on the meta device instead cost about 1.5 s the first time in a process (its
    embedding init imports torch._dynamo), which the Train page paid on every fresh server.
    """
    d, d_ff = config.d_model, config.d_ff
    attention = 4 * (d * d + d)  # W^Q, W^K, W^V, W^O with biases
    feed_forward = (d * d_ff + d_ff) + (d_ff * d + d)
    norm = 2 * d  # LayerNorm gain and bias
    encoder = config.n_encoder_layers * (attention + feed_forward + 2 * norm)
    decoder = config.n_decoder_layers * (2 * attention + feed_forward + 3 * norm)
    final_norms = 2 * norm if config.norm_first else 0  # pre-norm stacks end with a LayerNorm each
    tgt_embedding = config.tgt_vocab_size * d
    if config.share_embeddings:  # source, target and output embeddings are one matrix
        embeddings = tgt_embedding
    else:  # source table, target table, generator (tied to the target table with tie_output)
        embeddings = config.src_vocab_size * d + (1 if config.tie_output else 2) * tgt_embedding
    output_bias = config.tgt_vocab_size if config.output_bias else 0  # imported Marian models
    return encoder + decoder + final_norms + embeddings + output_bias


def refuse_above(
    bounds: Mapping[str, tuple[int, int]],
    key: str = "error.above_limit",
    error: type[InputError] = InputError,
) -> None:
    """`error(key)` naming the first value above its bound (bounds: WHAT -> (value, bound), WHAT in error.what.*)."""
    for what, (value, bound) in bounds.items():
        if value > bound:
            raise error(key, what=Text(f"error.what.{what}"), value=value, bound=bound)


def check_model_config(config: ModelConfig, limits: HostedLimits | None = None) -> int:
    """InputError when a model to be trained is larger than the limits allow; else its parameter count."""
    limits = limits or HostedLimits.local()
    bounds = {
        "d_model": (config.d_model, limits.max_d_model),
        "encoder_layers": (config.n_encoder_layers, limits.max_layers),
        "decoder_layers": (config.n_decoder_layers, limits.max_layers),
        "heads": (config.n_heads, limits.max_heads),
        "d_ff": (config.d_ff, limits.max_d_ff),
        "src_vocab": (config.src_vocab_size, limits.max_vocab_size),
        "tgt_vocab": (config.tgt_vocab_size, limits.max_vocab_size),
        "max_len": (config.max_len, limits.max_len),
    }
    refuse_above(bounds)
    n = count_parameters(config)
    if n > limits.max_params:
        raise InputError("error.too_many_params", n=n, limit=limits.max_params)
    return n


def check_session_space(root: str | Path, limits: HostedLimits | None = None, adding: int = 0) -> None:
    """InputError when a session's folder holds as many models, or as many bytes (+ adding), as it may."""
    limits = limits or HostedLimits.local()
    if limits.max_session_checkpoints is None and limits.max_session_bytes is None:
        return
    n, used = len(list_checkpoints(root)), folder_bytes(root)
    full_n = limits.max_session_checkpoints is not None and n >= limits.max_session_checkpoints
    full_bytes = limits.max_session_bytes is not None and used + adding > limits.max_session_bytes
    if full_n or full_bytes:
        raise InputError(
            "error.session_full", n=n, size=_mb(used), limit_n=limits.max_session_checkpoints or "-",
            limit_size=_mb(limits.max_session_bytes) if limits.max_session_bytes else "-",
        )  # fmt: skip


def bounded_train_config(config: TrainConfig, limits: HostedLimits | None = None) -> TrainConfig:
    """A TrainConfig within the limits: steps refused above the cap, time limit and threads imposed."""
    limits = limits or HostedLimits.local()
    if config.steps > limits.max_steps:
        raise InputError("error.too_many_steps", steps=config.steps, limit=limits.max_steps)
    time_limit = config.time_limit_s
    if limits.max_wall_time_s is not None:
        time_limit = min(time_limit or math.inf, limits.max_wall_time_s)
    threads = config.threads
    if limits.train_threads is not None:
        threads = min(threads or limits.train_threads, limits.train_threads)
    return replace(config, time_limit_s=time_limit, threads=threads)
