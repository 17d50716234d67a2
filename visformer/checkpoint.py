"""Checkpoint folders: JSON + safetensors only, written atomically, loaded without unpickling.

A checkpoint folder holds
  config.json              {"format", "version", "model", "train", "task", "info", "tokenizer"}
  weights.safetensors      model weights (float32, or float16 for shipping; loaded as float32)
  tokenizer/ or src/ + tgt/  tokenizer files (one shared folder for a joint vocabulary)
  metrics.json             training history and evaluation numbers
  snapshots.safetensors    attention maps of the probe sentences during training (float16)
  snapshots.json           step, loss, probes and targets of each snapshot
  optimizer.safetensors    Adam's moments, only in resumable training folders (never shipped)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file as load_safetensors_file
from safetensors.torch import save_file
from torch import Tensor

from .architectures import DEFAULT
from .config import ModelConfig, TrainConfig
from .i18n import Text, TextError
from .model import AttentionMaps
from .models import Model, attention_layers, build_model
from .records import Snapshot
from .tasks import TASKS
from .utils import hardware_info

FORMAT = "visformer-checkpoint"
VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"
METRICS_FILE = "metrics.json"
SNAPSHOTS_FILE = "snapshots.safetensors"
SNAPSHOTS_INDEX = "snapshots.json"
OPTIMIZER_FILE = "optimizer.safetensors"
SHARED_TOKENIZER, SRC_TOKENIZER, TGT_TOKENIZER = "tokenizer", "src", "tgt"
CONFIG_KEYS = {"format", "version", "model", "train", "task", "info", "tokenizer"}
TOKENIZER_LAYOUTS = ("shared", "separate")
# weights may be stored in these (loaded as float32); integer, bool, complex or float8 tensors are refused
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # whole name: re.fullmatch (no "\n" after `$`)


class CheckpointError(TextError):
    """A checkpoint folder is missing, damaged or incompatible; the message names what is wrong."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model in eval mode and everything needed to use and explain it."""

    name: str
    path: Path
    model: Model  # whatever the config's architecture builds (models.build_model)
    model_config: ModelConfig
    train_config: TrainConfig | None
    src_tokenizer: Any
    tgt_tokenizer: Any
    metrics: dict[str, Any] = field(default_factory=dict)
    snapshots: list[Snapshot] = field(default_factory=list)
    task: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Names and listing
# ---------------------------------------------------------------------------------------------


def safe_checkpoint_dir(root: str | os.PathLike, name: str) -> Path:
    """root/name for a plain checkpoint name; refuses separators, '..', hidden names and odd characters."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise TextError("error.invalid_name", name=repr(name))
    root = Path(root).resolve()
    path = (root / name).resolve()
    if path.parent != root:
        raise TextError("error.name_escapes", name=repr(name), root=root)
    return path


def list_checkpoints(root: str | os.PathLike) -> list[Path]:
    """Checkpoint folders (those holding config.json) directly inside root, sorted by name."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / CONFIG_FILE).is_file()
    )


# ---------------------------------------------------------------------------------------------
# Saving
# ---------------------------------------------------------------------------------------------


def _unique_state(model: Model, half: bool) -> dict[str, Tensor]:
    """State dict with tied weights stored once (safetensors refuses shared storage)."""
    seen: set[int] = set()
    state = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        t = tensor.detach().cpu()
        state[name] = (t.half() if half and t.is_floating_point() else t).contiguous().clone()
    return state


def _snapshot_tensors(snapshots: Sequence[Snapshot]) -> tuple[dict[str, Tensor], list[dict[str, Any]]]:
    """Flatten snapshots into named float16 tensors plus a JSON index."""
    tensors: dict[str, Tensor] = {}
    index = []
    for i, snap in enumerate(snapshots):
        for kind, maps in vars(snap.attention).items():  # AttentionMaps: encoder, decoder, cross
            for layer, m in enumerate(maps):
                tensors[f"{i}.{kind}.{layer}"] = m.detach().to("cpu", torch.float16).contiguous()
        index.append(
            {"step": snap.step, "loss": snap.loss, "probes": list(snap.probes), "targets": list(snap.targets)}
        )
    return tensors, index


def _write_json(path: Path, data: Any) -> None:
    """Write JSON (UTF-8, indented) and flush it to disk."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, sort_keys=False)
        f.flush()
        os.fsync(f.fileno())


def _same_tokenizer(a: Any, b: Any) -> bool:
    """Whether two tokenizers are one (joint vocabulary) and can share a folder."""
    if a is b:
        return True
    to_bytes = getattr(a, "to_bytes", None)
    if to_bytes is not None and hasattr(b, "to_bytes"):
        return to_bytes() == b.to_bytes()
    return (
        type(a) is type(b) and getattr(a, "vocab", None) is not None and a.vocab == getattr(b, "vocab", None)
    )


def _write_folder(
    folder: Path,
    model: Model,
    src_tokenizer: Any,
    tgt_tokenizer: Any,
    train_config: TrainConfig | None,
    task: str | None,
    metrics: dict[str, Any],
    snapshots: Sequence[Snapshot],
    info: dict[str, Any],
    half: bool,
    optimizer: dict[str, Tensor] | None = None,
) -> None:
    """Write every file of a checkpoint into an empty folder."""
    shared = _same_tokenizer(src_tokenizer, tgt_tokenizer)
    if shared:
        src_tokenizer.save(folder / SHARED_TOKENIZER)
    else:
        src_tokenizer.save(folder / SRC_TOKENIZER)
        tgt_tokenizer.save(folder / TGT_TOKENIZER)
    save_file(_unique_state(model, half), str(folder / WEIGHTS_FILE), metadata={"format": FORMAT})
    tensors, index = _snapshot_tensors(snapshots)
    save_file(tensors, str(folder / SNAPSHOTS_FILE), metadata={"format": FORMAT})
    _write_json(folder / SNAPSHOTS_INDEX, index)
    _write_json(folder / METRICS_FILE, metrics)
    if optimizer is not None:
        save_file(optimizer, str(folder / OPTIMIZER_FILE), metadata={"format": FORMAT})
    config = {
        "format": FORMAT,
        "version": VERSION,
        "model": model.config.to_dict(),
        "train": train_config.to_dict() if train_config is not None else None,
        "task": task,
        "info": {**info, "weights_dtype": "float16" if half else "float32"},
        "tokenizer": "shared" if shared else "separate",
    }
    _write_json(folder / CONFIG_FILE, config)  # written last: a folder without it is incomplete


def save_checkpoint(
    path: str | os.PathLike,
    model: Model,
    src_tokenizer: Any,
    tgt_tokenizer: Any,
    *,
    train_config: TrainConfig | None = None,
    task: str | None = None,
    metrics: dict[str, Any] | None = None,
    snapshots: Sequence[Snapshot] = (),
    info: dict[str, Any] | None = None,
    half: bool = False,
    optimizer: dict[str, Tensor] | None = None,
) -> Path:
    """Write a checkpoint folder atomically: a temp sibling is filled, then swapped in by rename."""
    path = Path(path)
    full_info = {
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hardware": hardware_info(),
        "parameters": model.num_parameters(),
        **(info or {}),
    }
    with atomic_folder(path) as tmp:
        _write_folder(
            tmp, model, src_tokenizer, tgt_tokenizer, train_config, task, metrics or {}, snapshots, full_info, half,
            optimizer,
        )  # fmt: skip
    return path


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temp sibling of `path`; on success it replaces `path`, on any error `path` stays as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = path.parent / f".{path.name}.tmp-{tag}"
    old = path.parent / f".{path.name}.old-{tag}"
    try:
        tmp.mkdir()
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not path.exists():
            os.replace(old, path)  # put the previous folder back
        raise
    shutil.rmtree(old, ignore_errors=True)


def save_trainer(
    path: str | os.PathLike,
    trainer: Any,
    *,
    info: dict[str, Any] | None = None,
    half: bool = False,
    resumable: bool = False,
) -> Path:
    """Save a Trainer's model, tokenizers, config, metrics and snapshots (and Adam's state if resumable)."""
    run_info = {"steps": trainer.step, "train_time_s": round(trainer.elapsed_s, 2), **(info or {})}
    return save_checkpoint(
        path,
        trainer.model,
        trainer.src_tok,
        trainer.tgt_tok,
        train_config=trainer.config,
        task=trainer.task,
        metrics={**trainer.metrics_dict(), **(info or {}).get("metrics", {})},
        snapshots=trainer.snapshots,
        info=run_info,
        half=half,
        optimizer=trainer.optimizer_tensors() if resumable else None,
    )


# ---------------------------------------------------------------------------------------------
# Loading (JSON and safetensors only: nothing is unpickled)
# ---------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    """Parse a JSON file or raise CheckpointError naming it."""
    if not path.is_file():
        raise CheckpointError("error.ckpt_missing", folder=path.parent.name, file=path.name)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, huge numbers, nesting too deep
        detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise CheckpointError(
            "error.ckpt_bad_json", folder=path.parent.name, file=path.name, detail=detail
        ) from exc


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    """Tensors of a safetensors file or CheckpointError (missing, truncated, garbage)."""
    if not path.is_file():
        raise CheckpointError("error.ckpt_missing", folder=path.parent.name, file=path.name)
    try:
        # load_file maps the file instead of reading it into one more copy: an imported 77 M-parameter model
        # peaked at 1.25 GB while loading with read_bytes (file bytes + tensors + model), 1.0 GB with this
        return load_safetensors_file(str(path))
    except (SafetensorError, ValueError, RuntimeError, OSError) as exc:
        raise CheckpointError(
            "error.ckpt_damaged", folder=path.parent.name, file=path.name, detail=exc
        ) from exc


def _schema_error(folder: Path, where: str, kind: str, got: Any, **fmt: object) -> CheckpointError:
    """The one refusal for a config.json value of the wrong kind (`kind`: error.kind.KIND in the locale files)."""
    shown = type(got).__name__ if isinstance(got, dict | list) else repr(got)[:40]
    expected = Text(f"error.kind.{kind}", fmt)
    return CheckpointError("error.ckpt_schema", folder=folder.name, field=where, expected=expected, got=shown)


def _check_model_fields(folder: Path, model: dict[str, Any]) -> None:
    """Every ModelConfig value of its declared kind: whole numbers, a fraction, switches, a name."""
    for f in fields(ModelConfig):
        if f.name not in model:
            continue
        value, default = model[f.name], f.default
        if isinstance(default, bool):
            ok, kind = isinstance(value, bool), "bool"
        elif isinstance(default, int):
            ok, kind = isinstance(value, int) and not isinstance(value, bool), "whole"
        elif isinstance(default, float):
            ok, kind = isinstance(value, int | float) and not isinstance(value, bool), "number"
        else:
            ok, kind = isinstance(value, str), "text"
        if not ok:
            raise _schema_error(folder, f"model.{f.name}", kind, value)


def read_config(folder: str | os.PathLike, schema: bool = True) -> dict[str, Any]:
    """config.json checked against the checkpoint schema (format, version, keys, the kind of every value).

    The one reader of a checkpoint's config: loading, importing, the app's model cards and the CLI's --out
    check all go through it. schema=False checks only that it is a visformer checkpoint's config (its format).
    """
    folder = Path(folder)
    config = _read_json(folder / CONFIG_FILE)
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise CheckpointError("error.ckpt_not_config", folder=folder.name)
    if not schema:
        return config
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise CheckpointError("error.ckpt_unknown_keys", folder=folder.name, keys=", ".join(unknown))
    if config.get("version") != VERSION:
        raise CheckpointError(
            "error.ckpt_version",
            folder=folder.name,
            version=repr(config.get("version"))[:20],
            expected=VERSION,
        )
    if not isinstance(config.get("model"), dict):
        raise _schema_error(folder, "model", "object", config.get("model"))
    _check_model_fields(folder, config["model"])
    if config.get("train") is not None and not isinstance(config["train"], dict):
        raise _schema_error(folder, "train", "object_or_null", config["train"])
    if config.get("info") is not None and not isinstance(config["info"], dict):
        raise _schema_error(folder, "info", "object_or_null", config["info"])
    task = config.get("task")
    if task is not None and (not isinstance(task, str) or task not in TASKS):
        raise _schema_error(folder, "task", "one_of", task, names=", ".join(["null", *TASKS]))
    if config.get("tokenizer", "shared") not in TOKENIZER_LAYOUTS:
        raise _schema_error(
            folder, "tokenizer", "one_of", config.get("tokenizer"), names=", ".join(TOKENIZER_LAYOUTS)
        )
    return config


def architecture_of(folder: str | os.PathLike) -> str:
    """The architecture a checkpoint folder's config names (the default when it names none or cannot be read:
    loading it will say what is wrong)."""
    try:
        model = read_config(folder, schema=False).get("model")
    except (CheckpointError, OSError):
        return DEFAULT
    return str(model.get("architecture", DEFAULT)) if isinstance(model, dict) else DEFAULT


def _load_tokenizers(folder: Path, layout: str) -> tuple[Any, Any]:
    """Source and target tokenizers from the shared or separate folders."""
    from .tokenizer import load_tokenizer

    def one(sub: str) -> Any:
        where = folder / sub
        if not where.is_dir():
            raise CheckpointError("error.ckpt_no_tokenizer", folder=folder.name, sub=sub)
        try:
            return load_tokenizer(where)
        except (ValueError, OSError) as exc:
            raise CheckpointError(
                "error.ckpt_bad_tokenizer", folder=folder.name, sub=sub, detail=exc
            ) from exc

    if layout == "shared":
        tok = one(SHARED_TOKENIZER)
        return tok, tok
    return one(SRC_TOKENIZER), one(TGT_TOKENIZER)


def _load_weights(folder: Path, model: Model) -> None:
    """Copy safetensors weights into the model, checking names and shapes."""
    tensors = _read_safetensors(folder / WEIGHTS_FILE)
    state = model.state_dict()
    unknown = sorted(set(tensors) - set(state))
    if unknown:
        raise CheckpointError(
            "error.ckpt_unexpected_tensors", folder=folder.name, names=", ".join(unknown[:5])
        )
    tensors = {k: tensors[k] for k in state if k in tensors}  # model order: the same first error
    for name, tensor in tensors.items():
        if tensor.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(
                "error.ckpt_dtype",
                folder=folder.name,
                name=name,
                dtype=str(tensor.dtype).replace("torch.", ""),
            )
        if tuple(tensor.shape) != tuple(state[name].shape):
            raise CheckpointError(
                "error.ckpt_shape",
                folder=folder.name,
                name=name,
                shape=tuple(tensor.shape),
                expected=tuple(state[name].shape),
            )
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError("error.ckpt_nan", folder=folder.name, name=name)
    stored = {state[k].data_ptr() for k in tensors}  # tied weights are stored once
    missing = [k for k in state if k not in tensors and state[k].data_ptr() not in stored]
    if missing:
        raise CheckpointError("error.ckpt_lacks", folder=folder.name, names=", ".join(missing[:5]))
    with torch.no_grad():
        for name, tensor in tensors.items():
            state[name].copy_(tensor.to(state[name].dtype))


def _check_snapshot_map(m: Tensor, probes: int, config: ModelConfig, name: str) -> None:
    """A snapshot's attention map is (probes, heads, queries, keys) of floats: ValueError otherwise."""
    if (
        not m.is_floating_point()
        or m.dim() != 4
        or m.shape[0] != probes
        or m.shape[1] not in (1, config.n_heads)
    ):
        raise ValueError(f"tensor {name} has shape {tuple(m.shape)} and dtype {m.dtype}")


def _load_snapshots(folder: Path, config: ModelConfig) -> list[Snapshot]:
    """Snapshots from snapshots.safetensors + snapshots.json (empty when absent)."""
    if not (folder / SNAPSHOTS_INDEX).is_file():
        return []
    index = _read_json(folder / SNAPSHOTS_INDEX)
    tensors = _read_safetensors(folder / SNAPSHOTS_FILE)
    layers = attention_layers(config)  # per architecture (an RNN has only cross-attention)
    snapshots = []
    try:
        if not isinstance(index, list):
            raise TypeError(f"{SNAPSHOTS_INDEX} is a {type(index).__name__}, not a list")
        for i, entry in enumerate(index):
            texts = [*entry["probes"], *entry.get("targets", [])]
            if not isinstance(entry["probes"], list) or not all(isinstance(t, str) for t in texts):
                raise TypeError(f"snapshot {i}: probes and targets must be lists of text")
            maps = {kind: [tensors[f"{i}.{kind}.{j}"] for j in range(n)] for kind, n in layers.items()}
            for kind, ms in maps.items():
                for m in ms:
                    _check_snapshot_map(m, len(entry["probes"]), config, f"{i}.{kind}")
            snapshots.append(
                Snapshot(
                    int(entry["step"]),
                    float(entry["loss"]),
                    list(entry["probes"]),
                    AttentionMaps(**maps),
                    list(entry.get("targets", [])),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError("error.ckpt_snapshots", folder=folder.name, detail=repr(exc)) from exc
    return snapshots


def load_checkpoint(path: str | os.PathLike, device: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint folder; the model is float32, in eval mode, on `device`."""
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError("error.ckpt_no_folder", folder=folder)
    config = read_config(folder)
    try:
        model_config = ModelConfig.from_dict(config["model"])
        train_config = TrainConfig.from_dict(config["train"]) if config.get("train") else None
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError("error.ckpt_incompatible", folder=folder.name, detail=exc) from exc
    src_tok, tgt_tok = _load_tokenizers(folder, config.get("tokenizer", "shared"))
    if src_tok.vocab_size != model_config.src_vocab_size or tgt_tok.vocab_size != model_config.tgt_vocab_size:
        raise CheckpointError(
            "error.ckpt_vocab",
            folder=folder.name,
            src=src_tok.vocab_size,
            tgt=tgt_tok.vocab_size,
            model_src=model_config.src_vocab_size,
            model_tgt=model_config.tgt_vocab_size,
        )
    try:
        model = build_model(model_config)  # the architecture the config names (default: Transformer)
    except (TypeError, ValueError, RuntimeError) as exc:  # e.g. d_model 16.0 or a layer count of 1.5
        raise CheckpointError("error.ckpt_unbuildable", folder=folder.name, detail=exc) from exc
    _load_weights(folder, model)
    metrics = _read_json(folder / METRICS_FILE) if (folder / METRICS_FILE).exists() else {}
    if not isinstance(metrics, dict):
        raise _schema_error(folder, METRICS_FILE, "object", metrics)
    snapshots = _load_snapshots(folder, model_config)
    return Checkpoint(
        name=folder.name,
        path=folder,
        model=model.to(device).eval(),
        model_config=model_config,
        train_config=train_config,
        src_tokenizer=src_tok,
        tgt_tokenizer=tgt_tok,
        metrics=metrics,
        snapshots=snapshots,
        task=config.get("task"),
        info=config.get("info") or {},
    )


def load_optimizer_state(path: str | os.PathLike) -> dict[str, Tensor] | None:
    """Adam's saved state of a resumable training folder, or None when it was not saved."""
    file = Path(path) / OPTIMIZER_FILE
    return _read_safetensors(file) if file.exists() else None


def average_checkpoints(
    paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, half: bool = True
) -> Path:
    """Average the weights of checkpoints of one model (the paper averages its last 5 checkpoints).

    Tokenizers, metrics and snapshots come from the last checkpoint; all must share one config, except
    dropout (a fine-tuning run with more dropout has the same weights' shapes; the last one's is kept).
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    ckpts = [load_checkpoint(p) for p in paths]
    last = ckpts[-1]
    for ckpt in ckpts[:-1]:
        if replace(ckpt.model_config, dropout=last.model_config.dropout) != last.model_config:
            raise CheckpointError(f"{ckpt.name} and {last.name} have different model configs")
        if ckpt.task != last.task:
            raise CheckpointError(f"{ckpt.name} and {last.name} were trained on different tasks")
        if not _same_tokenizer(ckpt.tgt_tokenizer, last.tgt_tokenizer):
            raise CheckpointError(f"{ckpt.name} and {last.name} have different tokenizers")
    states = [c.model.state_dict() for c in ckpts]
    means = {  # computed before any copy: tied weights share one tensor
        name: torch.stack([s[name] for s in states]).mean(dim=0)
        for name, tensor in states[-1].items()
        if tensor.is_floating_point()
    }
    with torch.no_grad():
        for name, mean in means.items():
            states[-1][name].copy_(mean)
    info = {
        **_carried_info(last),
        "averaged": [{"name": c.name, "steps": c.info.get("steps")} for c in ckpts],
    }
    info.pop("test", None)  # the scores of the last checkpoint do not describe the average
    return _save_loaded(last, out, info, half)


def _carried_info(ckpt: Checkpoint) -> dict[str, Any]:
    """A loaded checkpoint's info without what a new save writes afresh."""
    return {k: v for k, v in ckpt.info.items() if k not in ("weights_dtype", "saved_at")}


def _save_loaded(ckpt: Checkpoint, dst: str | os.PathLike, info: dict[str, Any], half: bool) -> Path:
    """Save a loaded checkpoint (model, tokenizers, recipe, metrics, snapshots) under a new name and info."""
    return save_checkpoint(
        dst,
        ckpt.model,
        ckpt.src_tokenizer,
        ckpt.tgt_tokenizer,
        train_config=ckpt.train_config,
        task=ckpt.task,
        metrics=ckpt.metrics,
        snapshots=ckpt.snapshots,
        info=info,
        half=half,
    )
