"""Import OPUS-MT (Marian) translation models into visformer's own Transformer, exactly.

A Marian model (Helsinki-NLP's OPUS-MT, trained with Marian NMT and published through Hugging Face
transformers) is the paper's architecture: a post-LN encoder–decoder with scaled token embeddings,
sinusoidal positions and (usually) one vocabulary shared by source, target and output. Where it
differs, ModelConfig has a field (activation, output_bias, decoder_start_id, tie_output) and the
weights are copied into `Transformer` as they are; nothing of transformers is needed to use the result.

SOURCE is a folder written by transformers' `save_pretrained` (config.json, model.safetensors,
source.spm, target.spm, vocab.json and, for separate vocabularies, target_vocab.json) or a Hub model
id, fetched with huggingface_hub (lazily imported) when the machine is online.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from .checkpoint import save_checkpoint
from .config import ModelConfig
from .i18n import TextError
from .model import Transformer
from .tokenizer import MarianTokenizer

WEIGHT_FILES = ("model.safetensors",)
# older Hub repos have only this: read through transformers (torch.load with weights_only), never unpickled here
TORCH_WEIGHTS = "pytorch_model.bin"
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
HUB_FILES = ("config.json", "README.md", *WEIGHT_FILES, *TOKENIZER_FILES, "target_vocab.json")
ACTIVATIONS = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}
OPUS_LICENSE = "CC BY 4.0"
OPUS_CREDIT = "Helsinki-NLP / OPUS-MT (Tiedemann & Thottingal, 2020), https://github.com/Helsinki-NLP/Opus-MT"
# Settings a Marian config may have that the paper's post-LN Transformer cannot hold: (key, refused value).
_UNSUPPORTED = (
    ("normalize_before", True),
    ("normalize_embedding", True),
    ("layernorm_embedding", True),
    ("add_final_layer_norm", True),
    ("static_position_embeddings", False),
)


# Helsinki-NLP/opus-mt-ko-en's transformers config as far as the bench and the hosted-mode checks need it (sizes,
# special ids, the settings import-marian checks); written here, not fetched: tests and bench download nothing.
OPUS_MT_KO_EN = {
    "model_type": "marian", "activation_function": "swish", "d_model": 512, "encoder_layers": 6,
    "decoder_layers": 6, "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048, "vocab_size": 65001, "pad_token_id": 65000, "decoder_start_token_id": 65000,
    "eos_token_id": 0, "max_position_embeddings": 512, "scale_embedding": True, "normalize_before": False,
    "normalize_embedding": False, "static_position_embeddings": True, "share_encoder_decoder_embeddings": True,
}  # fmt: skip


class MarianImportError(TextError):
    """A Marian model that cannot be imported; the message says why (nothing was written)."""


@dataclass
class MarianSource:
    """A Marian model read from disk: its transformers config, weights, tokenizer files and model card."""

    where: str  # model id or folder, for the model card
    config: dict[str, Any]
    weights: dict[str, Tensor]
    folder: Path
    readme: str = ""


# ---------------------------------------------------------------------------------------------
# Reading the source (a folder or a Hub id)
# ---------------------------------------------------------------------------------------------


def resolve_source(source: str) -> tuple[Path, str]:
    """A local folder for SOURCE (downloading a Hub id into the Hugging Face cache) and its display name."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return folder, str(folder.resolve())
    if folder.exists() or os.sep in source and not re.fullmatch(r"[\w.-]+/[\w.-]+", source):
        raise MarianImportError("error.marian_not_folder", source=source)
    return _download(source), source


def _download(model_id: str) -> Path:
    """Fetch a Hub model's config, weights and tokenizer files (huggingface_hub; one message when offline)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise MarianImportError("error.marian_no_hub", source=model_id) from exc
    try:
        folder = Path(snapshot_download(model_id, allow_patterns=list(HUB_FILES)))
        if not (folder / WEIGHT_FILES[0]).is_file():  # an older repo without safetensors weights
            folder = Path(snapshot_download(model_id, allow_patterns=[*HUB_FILES, TORCH_WEIGHTS]))
        return folder
    except Exception as exc:  # offline, unknown id, gated repo: huggingface_hub raises many kinds
        raise MarianImportError("error.marian_fetch", source=model_id, detail=_first_line(exc)) from exc


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (huggingface_hub's run to many lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def read_source(folder: Path, where: str) -> MarianSource:
    """Config, weights and model card of a save_pretrained folder, checked for what the import needs."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise MarianImportError("error.marian_missing", source=where, files="config.json")
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MarianImportError(
            "error.marian_bad_file", source=where, file="config.json", detail=exc
        ) from exc
    check_config(config, where)
    separate = config.get("share_encoder_decoder_embeddings", True) is False
    files = [*TOKENIZER_FILES, *(["target_vocab.json"] if separate else [])]
    missing = [f for f in files if not (folder / f).is_file()]
    if not (folder / WEIGHT_FILES[0]).is_file() and not (folder / TORCH_WEIGHTS).is_file():
        missing.append(WEIGHT_FILES[0])
    if missing:
        raise MarianImportError("error.marian_missing", source=where, files=", ".join(missing))
    weights = _read_weights(folder, where)
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8", errors="replace") if readme.is_file() else ""
    return MarianSource(where, config, weights, folder, text)


def _read_weights(folder: Path, where: str) -> dict[str, Tensor]:
    """model.safetensors (read without transformers), else pytorch_model.bin through transformers."""
    if (folder / WEIGHT_FILES[0]).is_file():
        try:
            return load_file(str(folder / WEIGHT_FILES[0]))
        except (SafetensorError, OSError, ValueError) as exc:
            raise MarianImportError(
                "error.marian_bad_file", source=where, file=WEIGHT_FILES[0], detail=exc
            ) from exc
    try:
        from transformers import MarianMTModel
    except ImportError as exc:
        raise MarianImportError("error.marian_no_hub", source=where) from exc
    try:  # transformers loads .bin files with torch.load(weights_only=True): tensors only, no code
        return dict(MarianMTModel.from_pretrained(folder).state_dict())
    except Exception as exc:  # damaged or foreign weights: one message
        raise MarianImportError(
            "error.marian_bad_file", source=where, file=TORCH_WEIGHTS, detail=exc
        ) from exc


def check_config(config: Any, where: str) -> None:
    """Refuse, with one message, a config that is not a Marian model the paper's Transformer can hold."""
    if not isinstance(config, dict) or config.get("model_type") != "marian":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise MarianImportError("error.marian_not_marian", source=where, kind=kind)
    for key, refused in _UNSUPPORTED:
        if key in config and config[key] == refused:
            raise MarianImportError("error.marian_variant", source=where, setting=f"{key}={refused}")
    if config.get("scale_embedding") is not True:  # transformers' default is False; OPUS-MT sets True
        raise MarianImportError("error.marian_variant", source=where, setting="scale_embedding=False")
    if ACTIVATIONS.get(config.get("activation_function", "gelu")) is None:
        setting = f"activation_function={config.get('activation_function')}"
        raise MarianImportError("error.marian_variant", source=where, setting=setting)
    heads = {config.get("encoder_attention_heads"), config.get("decoder_attention_heads")}
    ffn = {config.get("encoder_ffn_dim"), config.get("decoder_ffn_dim")}
    if len(heads) != 1 or len(ffn) != 1:
        raise MarianImportError(
            "error.marian_variant", source=where, setting="encoder and decoder sizes differ"
        )


# ---------------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------------


def model_config(config: dict[str, Any]) -> ModelConfig:
    """The ModelConfig that holds a Marian config exactly (dropout 0: the model is for inference)."""
    shared = config.get("share_encoder_decoder_embeddings", True)
    vocab = int(config["vocab_size"])
    tgt_vocab = vocab if shared else int(config.get("decoder_vocab_size") or vocab)
    pad = int(config["pad_token_id"])
    return ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=tgt_vocab,
        d_model=int(config["d_model"]),
        n_heads=int(config["encoder_attention_heads"]),
        n_encoder_layers=int(config["encoder_layers"]),
        n_decoder_layers=int(config["decoder_layers"]),
        d_ff=int(config["encoder_ffn_dim"]),
        dropout=0.0,
        max_len=int(config.get("max_position_embeddings", 512)),
        norm_first=False,
        share_embeddings=bool(shared),
        pad_id=pad,
        activation=ACTIVATIONS[config.get("activation_function", "gelu")],
        output_bias=True,
        decoder_start_id=int(config.get("decoder_start_token_id", pad)),
        tie_output=not shared and config.get("tie_word_embeddings", True) is not False,
    )


def pe_permutation(d_model: int) -> Tensor:
    """perm (d,) with paper_vector = marian_vector[perm]: Marian's [sin_0..sin_{d/2-1} | cos_0..] interleaved."""
    half = torch.arange(d_model // 2)
    return torch.stack([half, half + d_model // 2], dim=1).reshape(-1)  # (d,) = [0, d/2, 1, d/2+1, ...]


def _marian_names(config: ModelConfig) -> dict[str, str]:
    """visformer parameter name -> Marian (transformers) parameter name, for every layer."""
    names = {}
    attention = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "out_proj"}
    for side, n, parts in (
        ("encoder", config.n_encoder_layers, (("self_attn", "self_attn"),)),
        ("decoder", config.n_decoder_layers, (("self_attn", "self_attn"), ("cross_attn", "encoder_attn"))),
    ):
        norms = [f"{marian}_layer_norm" for _, marian in parts] + ["final_layer_norm"]
        for i in range(n):
            ours, theirs = f"{side}.layers.{i}", f"model.{side}.layers.{i}"
            for kind, marian in parts:
                for w, proj in attention.items():
                    for p in ("weight", "bias"):
                        names[f"{ours}.{kind}.{w}.{p}"] = f"{theirs}.{marian}.{proj}.{p}"
            for j, norm in enumerate(norms, start=1):
                for p in ("weight", "bias"):
                    names[f"{ours}.sublayer{j}.norm.{p}"] = f"{theirs}.{norm}.{p}"
            for lin, fc in (("linear1", "fc1"), ("linear2", "fc2")):
                for p in ("weight", "bias"):
                    names[f"{ours}.feed_forward.{lin}.{p}"] = f"{theirs}.{fc}.{p}"
    return names


def _embedding_weights(weights: dict[str, Tensor], config: ModelConfig) -> dict[str, Tensor]:
    """Source and target token embeddings and the output projection (V, d) under visformer's names."""

    def first(*names: str) -> Tensor:
        for name in names:
            if name in weights:
                return weights[name]
        raise KeyError(names[0])

    if config.share_embeddings:
        shared = first("model.shared.weight", "model.encoder.embed_tokens.weight")
        return {"tgt_embed.token.weight": shared}
    src = first("model.encoder.embed_tokens.weight", "model.shared.weight")
    tgt = first("model.decoder.embed_tokens.weight")
    out = {"src_embed.token.weight": src, "tgt_embed.token.weight": tgt}
    if not config.tie_output:
        out["generator.weight"] = first("lm_head.weight")
    return out


def _permuted(name: str, tensor: Tensor, perm: Tensor) -> Tensor:
    """tensor with its model-dimension axes reordered by perm (the residual stream in the paper's PE layout).

    Marian's sinusoidal encoding is [all sines | all cosines]; the paper's (and visformer's) interleaves
    sin/cos pairs. Rather than a layout field that every PE view would have to honour, the conversion
    permutes the model dimension: every LayerNorm is permutation-equivariant and every projection that
    reads or writes the residual stream is permuted with it, so the model computes exactly the same
    function and the Positional-encoding page stays true for it. Heads' own dimensions are not touched,
    so Q, K, V and attention weights are Marian's own.
    """
    reads = (".w_q.", ".w_k.", ".w_v.", ".linear1.")  # (out, d): columns read the residual stream
    writes = (".w_o.", ".linear2.")  # (d, in) and bias (d,): rows write it
    if "token.weight" in name or name == "generator.weight":
        return tensor[:, perm]  # (V, d)
    if ".norm." in name:
        return tensor[perm]  # (d,)
    if any(r in name for r in reads):
        return tensor[:, perm] if name.endswith("weight") else tensor
    if any(w in name for w in writes):
        return tensor[perm]
    raise KeyError(name)


def convert_weights(weights: dict[str, Tensor], config: ModelConfig) -> dict[str, Tensor]:
    """visformer state dict (float32) from a Marian state dict, model dimension in the paper's PE layout."""
    perm = pe_permutation(config.d_model)
    try:
        state = {ours: weights[theirs] for ours, theirs in _marian_names(config).items()}
        state |= _embedding_weights(weights, config)
        bias = weights["final_logits_bias"].reshape(-1)  # (1, V) -> (V,)
    except KeyError as exc:
        raise MarianImportError("error.marian_lacks", name=exc.args[0]) from exc
    state = {name: _permuted(name, t.float(), perm) for name, t in state.items()}
    return state | {"generator.bias": bias.float()}


def build_model(source: MarianSource) -> Transformer:
    """visformer's Transformer holding the Marian weights (eval mode, float32)."""
    try:
        config = model_config(source.config)
    except (KeyError, TypeError, ValueError) as exc:  # a missing or odd size in config.json
        raise MarianImportError(
            "error.marian_bad_file", source=source.where, file="config.json", detail=repr(exc)
        ) from exc
    model = Transformer(config)
    state = convert_weights(source.weights, config)
    expected = model.state_dict()
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise MarianImportError(
                "error.marian_shape",
                name=name,
                shape=tuple(tensor.shape),
                expected=tuple(expected[name].shape),
            )
    result = model.load_state_dict(state, strict=False)
    left = [
        k
        for k in result.missing_keys
        if expected[k].data_ptr() not in {expected[s].data_ptr() for s in state}
    ]
    if left:
        raise MarianImportError("error.marian_lacks", name=left[0])
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Tokenizers, model card, the whole import
# ---------------------------------------------------------------------------------------------


def build_tokenizers(source: MarianSource, config: ModelConfig) -> tuple[MarianTokenizer, MarianTokenizer]:
    """Source- and target-side tokenizers with the model's special ids (transformers' decoding rules)."""
    folder = source.folder
    src_vocab = _read_vocab(folder / "vocab.json", source.where)
    separate = not config.share_embeddings
    tgt_vocab = _read_vocab(folder / "target_vocab.json", source.where) if separate else src_vocab
    src_spm, tgt_spm = (folder / "source.spm").read_bytes(), (folder / "target.spm").read_bytes()
    unk, eos = src_vocab.get("<unk>", 1), src_vocab.get("</s>", int(source.config.get("eos_token_id", 0)))
    ids = {"pad_id": config.pad_id, "unk_id": unk, "eos_id": eos, "bos_id": config.decoder_start_id}
    decode_with = tgt_spm if separate else src_spm  # transformers decodes with source.spm when shared
    try:
        src = MarianTokenizer(src_spm, src_spm, src_vocab, vocab_size=config.src_vocab_size, **ids)
        tgt = MarianTokenizer(tgt_spm, decode_with, tgt_vocab, vocab_size=config.tgt_vocab_size, **ids)
    except ValueError as exc:
        raise MarianImportError(
            "error.marian_bad_file", source=source.where, file="*.spm", detail=exc
        ) from exc
    return src, tgt


def _read_vocab(path: Path, where: str) -> dict[str, int]:
    """A vocab.json mapping of piece -> id."""
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise MarianImportError("error.marian_bad_file", source=where, file=path.name, detail=exc) from exc
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise MarianImportError(
            "error.marian_bad_file", source=where, file=path.name, detail="not piece -> id"
        )
    return vocab


_SCORE_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*(\d+(?:\.\d+)?)\s*\|\s*(\d*(?:\.\d+)?)\s*\|")


def reported_scores(readme: str) -> list[dict[str, Any]]:
    """The (test set, BLEU, chrF) rows of an OPUS-MT model card's benchmark table, as published."""
    scores = []
    for line in readme.splitlines():
        m = _SCORE_ROW.match(line.strip())
        if m and not set(m.group(1)) <= set("-: "):
            chrf = float(m.group(3)) if m.group(3) else None
            scores.append({"testset": m.group(1), "bleu": float(m.group(2)), "chrf": chrf})
    return scores[:20]


_OPUS_PAIR = re.compile(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})(?:$|[-_])")
_TWO_LETTER = {"kor": "ko", "eng": "en", "deu": "de", "fra": "fr", "jpn": "ja", "spa": "es"}


def language_pair(source: MarianSource, out: str | os.PathLike = "") -> dict[str, str]:
    """src_lang / tgt_lang from an OPUS-MT name (opus-mt-ko-en: the source's, else the output folder's) or
    tokenizer_config.json; {} when unknown."""
    for name in (Path(source.where).name, Path(out).name):
        match = _OPUS_PAIR.search(name.lower())
        if match:
            return {"src_lang": match.group(1), "tgt_lang": match.group(2)}
    try:
        config = json.loads((source.folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    pair = {k: config.get(f"{side}_lang") for k, side in (("src_lang", "source"), ("tgt_lang", "target"))}
    if not all(isinstance(v, str) for v in pair.values()):
        return {}
    return {k: _TWO_LETTER.get(v, v) for k, v in pair.items()}


def import_info(source: MarianSource, out: str | os.PathLike = "") -> dict[str, Any]:
    """What the model card says about an imported model: languages, origin, licence, credit, reported scores."""
    return {
        **language_pair(source, out),
        "imported": {
            "from": "marian",
            "source": source.where,
            "license": OPUS_LICENSE,
            "credit": OPUS_CREDIT,
            "reported_scores": reported_scores(source.readme),
            "trained_by_visformer": False,
            "size": {
                k: source.config.get(k) for k in ("d_model", "encoder_layers", "decoder_layers", "vocab_size")
            }
            | {"heads": source.config.get("encoder_attention_heads")},
        },
    }


def import_marian(source: str, out: str | os.PathLike) -> Path:
    """Convert a Marian folder or Hub id into a visformer checkpoint folder at `out` (atomic; refusals write nothing)."""
    folder, where = resolve_source(source)
    marian = read_source(folder, where)
    model = build_model(marian)
    src_tok, tgt_tok = build_tokenizers(marian, model.config)
    return save_checkpoint(out, model, src_tok, tgt_tok, info=import_info(marian, out))
