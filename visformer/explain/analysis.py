"""Numbers behind the app's pictures: head statistics, positional-encoding facts, one head opened up.

Attention arrays here are NumPy: one map is (queries, keys); a stack is (layers, heads, queries, keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..data import encode_source, fit_tokens
from ..model import (
    AttentionMaps,
    Transformer,
    apply_pe_rotation,
    padding_mask,
    pe_rotation,
    pe_wavelengths,
    positional_encoding,
)
from ..models import attention_layers
from ..tasks import TaskExample, alignment_score
from .kinds import future_mask, get_kind

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: not needed by the first page

    from ..decoding import Translation


# ---------------------------------------------------------------------------------------------
# Attention maps as arrays
# ---------------------------------------------------------------------------------------------


def stack_maps(maps: AttentionMaps, kind: str, index: int = 0) -> np.ndarray:
    """One kind of attention for batch row `index` as a float array (layers, heads, queries, keys)."""
    layers = getattr(maps, get_kind(kind).name)
    if not layers:
        raise ValueError(f"no {kind} attention was recorded (was need_weights=True?)")
    return np.stack([w[index].detach().float().cpu().numpy() for w in layers])  # (L, h, q, k)


def head_average(stack: np.ndarray) -> np.ndarray:
    """Mean over heads: (layers, heads, q, k) -> (layers, q, k)."""
    return stack.mean(axis=1)


def attention_frame(
    stack: np.ndarray, query_labels: list[str], key_labels: list[str], kind: str
) -> pd.DataFrame:
    """Long table (kind, layer, head, query, key, weight) of a (layers, heads, q, k) stack, for CSV."""
    import pandas as pd

    n_layers, n_heads, n_q, n_k = stack.shape
    if len(query_labels) != n_q or len(key_labels) != n_k:
        raise ValueError(f"labels ({len(query_labels)}, {len(key_labels)}) do not match maps ({n_q}, {n_k})")
    layer, head, qi, ki = np.meshgrid(
        np.arange(n_layers), np.arange(n_heads), np.arange(n_q), np.arange(n_k), indexing="ij"
    )
    return pd.DataFrame(
        {
            "kind": kind,
            "layer": layer.ravel(),
            "head": head.ravel(),
            "query_index": qi.ravel(),
            "query": np.asarray(query_labels, dtype=object)[qi.ravel()],
            "key_index": ki.ravel(),
            "key": np.asarray(key_labels, dtype=object)[ki.ravel()],
            "weight": stack.ravel(),
        }
    )


# ---------------------------------------------------------------------------------------------
# Head statistics
# ---------------------------------------------------------------------------------------------


def entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each attention row: (..., k) -> (...); 0·log 0 counts as 0."""
    w = np.clip(weights, 0.0, None)
    logs = np.log(np.where(w > 0, w, 1.0))
    return -(w * logs).sum(axis=-1)


def diagonal_score(weights: np.ndarray) -> float:
    """Mean weight a query puts on the key at its own position, over the queries that have one."""
    n = min(weights.shape[-2:])
    return float(weights[..., np.arange(n), np.arange(n)].mean())


def previous_token_score(weights: np.ndarray) -> float:
    """Mean weight a query i puts on key i-1 (queries 1..n-1); 0 when there is no previous token."""
    n = min(weights.shape[-2], weights.shape[-1] + 1)
    if n < 2:
        return 0.0
    i = np.arange(1, n)
    return float(weights[..., i, i - 1].mean())


def first_token_score(weights: np.ndarray) -> float:
    """Mean weight on the first key."""
    return float(weights[..., 0].mean())


def last_token_score(weights: np.ndarray) -> float:
    """Mean weight on the last key (the source's </s> in encoder and cross attention)."""
    return float(weights[..., -1].mean())


def pattern_scores(weights: np.ndarray) -> dict[str, float]:
    """All simple pattern scores of one (q, k) map."""
    return {
        "diagonal": diagonal_score(weights),
        "previous": previous_token_score(weights),
        "first": first_token_score(weights),
        "last": last_token_score(weights),
    }


def head_statistics(stack: np.ndarray, alignment: list[int] | None = None) -> pd.DataFrame:
    """One row per (layer, head): mean entropy, its ratio to uniform, pattern scores, task alignment hits."""
    import pandas as pd

    n_layers, n_heads, _, n_keys = stack.shape
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            w = stack[layer, head]  # (q, k)
            ent = float(entropy(w).mean())
            row = {
                "layer": layer,
                "head": head,
                "entropy": ent,
                "entropy / log k": ent / max(math.log(n_keys), 1e-9),
            }
            row.update(pattern_scores(w))
            if alignment is not None:
                row["alignment"] = alignment_score(np.ascontiguousarray(w), alignment)
            rows.append(row)
    return pd.DataFrame(rows)


@torch.no_grad()
def task_alignment_grid(
    model: Transformer, src_tokenizer, tgt_tokenizer, examples: list[TaskExample]
) -> np.ndarray:
    """Per cross-attention head (layers, heads): share of target tokens whose argmax hits the true source token.

    Teacher-forced on task examples, averaged over the examples that have aligned tokens.
    """
    device = next(model.parameters()).device
    cfg = model.config
    totals = np.zeros((cfg.n_decoder_layers, cfg.n_heads))
    counts = np.zeros_like(totals)
    for ex in examples:
        src = torch.tensor([encode_source(src_tokenizer, ex.src, cfg.max_len)[0]], device=device)  # (1, S)
        tgt_ids = [tgt_tokenizer.bos_id, *fit_tokens(tgt_tokenizer.encode(ex.tgt), cfg.max_len)]
        tgt = torch.tensor([tgt_ids], device=device)  # (1, T)
        cross = stack_maps(model(src, tgt, need_weights=True).attention, "cross")  # (L, h, T, S)
        for layer in range(cross.shape[0]):
            for head in range(cross.shape[1]):
                score = alignment_score(cross[layer, head], ex.alignment)
                if not math.isnan(score):
                    totals[layer, head] += score
                    counts[layer, head] += 1
    return np.divide(totals, counts, out=np.full_like(totals, np.nan), where=counts > 0)


def metric_grid(stats: pd.DataFrame, metric: str) -> np.ndarray:
    """One column of `head_statistics` as a (layers, heads) array."""
    table = stats.pivot(index="layer", columns="head", values=metric)
    return table.to_numpy(dtype=float)


# ---------------------------------------------------------------------------------------------
# Positional encoding (section 3.5)
# ---------------------------------------------------------------------------------------------


def pe_matrix(length: int, d_model: int) -> np.ndarray:
    """PE for positions 0..length-1 as (length, d_model)."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even number >= 2, got {d_model}")
    return positional_encoding(torch.arange(length), d_model).double().numpy()


def pe_pair(length: int, d_model: int, i: int) -> tuple[np.ndarray, np.ndarray, float]:
    """sin and cos of dimension pair i over positions 0..length-1, and its wavelength 2π·10000^(2i/d)."""
    if not 0 <= i < d_model // 2:
        raise ValueError(f"pair index i must be in 0..{d_model // 2 - 1}, got {i}")
    pe = pe_matrix(length, d_model)
    return pe[:, 2 * i], pe[:, 2 * i + 1], float(pe_wavelengths(d_model)[i])


def pe_norm(d_model: int) -> float:
    """‖PE(pos)‖ = √(d/2) for every position (each pair lies on the unit circle)."""
    return math.sqrt(d_model / 2)


def binary_bits(count: int = 16) -> np.ndarray:
    """Bits of 0..count-1, least significant first: (count, n_bits)."""
    n_bits = max(1, math.ceil(math.log2(max(count, 2))))
    values = np.arange(count)[:, None]
    return (values >> np.arange(n_bits)[None, :]) & 1


@dataclass(frozen=True)
class RotationCheck:
    """M_k for every pair and how far M_k·PE(pos) is from PE(pos+k)."""

    matrices: np.ndarray  # (d/2, 2, 2)
    rotated: np.ndarray  # (d,) = M_k · PE(pos)
    target: np.ndarray  # (d,) = PE(pos + k)
    max_error: float


def rotation_check(pos: int, k: int, d_model: int) -> RotationCheck:
    """Verify numerically that the fixed rotation M_k moves PE(pos) to PE(pos + k)."""
    pe = positional_encoding(torch.tensor([pos, pos + k]), d_model).double()  # (2, d)
    rotated = apply_pe_rotation(pe[0], k)
    error = float((rotated - pe[1]).abs().max())
    return RotationCheck(pe_rotation(k, d_model).double().numpy(), rotated.numpy(), pe[1].numpy(), error)


def pe_dot_products(pos: int, max_k: int, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Offsets k = -min(pos, max_k)..max_k and PE(pos)·PE(pos+k); it depends on k only."""
    ks = np.arange(-min(pos, max_k), max_k + 1)
    pe = positional_encoding(torch.tensor(pos + ks), d_model).double().numpy()  # (n_k, d)
    base = positional_encoding(torch.tensor([pos]), d_model).double().numpy()[0]
    return ks, pe @ base


def embedding_norms(model: Transformer, side: str = "src") -> np.ndarray:
    """‖√d · E[token]‖ for every token except padding, as the model adds it to PE."""
    embed = model.src_embed if side == "src" else model.tgt_embed
    with torch.no_grad():
        weights = embed.token.weight.detach().float().cpu() * embed.scale  # (V, d)
        norms = weights.norm(dim=-1).numpy()
    keep = np.ones(len(norms), dtype=bool)
    keep[model.config.pad_id] = False
    return norms[keep]


# ---------------------------------------------------------------------------------------------
# Inside one head: softmax(QKᵀ/√d_k)V step by step
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadInternals:
    """Every intermediate of one head on one sentence (queries q, keys k, head size dh)."""

    q: np.ndarray  # (q, dh)
    k: np.ndarray  # (k, dh)
    v: np.ndarray  # (k, dh)
    scores: np.ndarray  # (q, k) QKᵀ, -inf where masked
    scaled: np.ndarray  # (q, k) QKᵀ/√dk, -inf where masked
    weights: np.ndarray  # (q, k) softmax over keys
    output: np.ndarray  # (q, dh) weights @ V
    masked: np.ndarray  # (q, k) bool, True where the key is hidden


@torch.no_grad()
def head_internals(
    model: Transformer, src_ids: list[int], tgt_in_ids: list[int], kind: str, layer: int, head: int
) -> HeadInternals:
    """One head's Q, K, V (as the model's forward pass recorded them), scores and output for one sentence."""
    get_kind(kind)
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)  # (1, S)
    n_layers = attention_layers(model.config)[kind]
    if not 0 <= layer < n_layers or not 0 <= head < model.config.n_heads:
        raise ValueError(f"layer {layer} / head {head} out of range for this model")
    if kind == "encoder":
        encoded = model.encode(src, record=True)
        record, mask = encoded.intermediates[layer].self_attn, encoded.src_mask
    else:
        tgt = torch.tensor([tgt_in_ids], device=device)  # (1, T)
        layer_record = model(src, tgt, record=True).intermediates.decoder[layer]
        if kind == "decoder":
            record = layer_record.self_attn
            mask = torch.from_numpy(~future_mask(tgt.shape[1], tgt.shape[1])).to(device)
        else:
            record, mask = layer_record.cross_attn, padding_mask(src, model.config.pad_id)
    q, k, v = record.q[0, head], record.k[0, head], record.v[0, head]  # (q, dh), (k, dh), (k, dh)
    scores = q @ k.T  # (q, k)
    mask = torch.broadcast_to(mask.reshape(mask.shape[-2:]), scores.shape)  # True = visible
    scores = scores.masked_fill(~mask, float("-inf"))
    scaled = scores / math.sqrt(q.shape[-1])
    weights = torch.softmax(scaled, dim=-1)
    out = weights @ v  # (q, dh)

    def arr(t: torch.Tensor) -> np.ndarray:
        return t.double().cpu().numpy()

    return HeadInternals(
        arr(q), arr(k), arr(v), arr(scores), arr(scaled), arr(weights), arr(out), ~arr(mask).astype(bool)
    )


def softmax(x: np.ndarray) -> np.ndarray:
    """Numerically stable softmax over the last axis."""
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def saturation_example(d_k: int, n_keys: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Softmax of q·k for random unit-variance q, k of size d_k: unscaled and scaled by 1/√d_k."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d_k)
    keys = rng.standard_normal((n_keys, d_k))
    scores = keys @ q  # (n_keys,), variance d_k
    return softmax(scores), softmax(scores / math.sqrt(d_k))


def saturation_curve(d_ks: list[int], n_keys: int = 8, trials: int = 200, seed: int = 0) -> pd.DataFrame:
    """Mean largest softmax weight and entropy vs d_k, with and without the 1/√d_k scaling."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for d_k in d_ks:
        q = rng.standard_normal((trials, 1, d_k))
        keys = rng.standard_normal((trials, n_keys, d_k))
        scores = (keys * q).sum(-1)  # (trials, n_keys)
        for name, s in (("unscaled", scores), ("scaled", scores / math.sqrt(d_k))):
            w = softmax(s)
            rows.append(
                {"d_k": d_k, "variant": name, "max weight": w.max(-1).mean(), "entropy": entropy(w).mean()}
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Which head to open first, where one word looks, how sure the model was
# ---------------------------------------------------------------------------------------------

TRIVIAL_SHARE = 0.5  # a head putting more than this mean weight on one fixed key is "parked" there


@dataclass(frozen=True)
class HeadPick:
    """The head to open first: its place, how sharp it is, and whether every head was trivial."""

    layer: int
    head: int
    sharpness: float  # mean row entropy / log(visible keys): 0 = one-hot, 1 = uniform
    all_trivial: bool  # True when every head was parked on a fixed key (then the sharpest of all)


def normalized_entropy(weights: np.ndarray, masked: np.ndarray | None = None) -> float:
    """Mean over rows of entropy / log(visible keys) of one (q, k) map; rows seeing one key are skipped."""
    visible = np.ones(weights.shape, dtype=bool) if masked is None else ~np.asarray(masked, dtype=bool)
    n = visible.sum(axis=-1)  # (q,)
    rows = n > 1
    if not rows.any():
        return 0.0
    return float((entropy(weights[rows]) / np.log(n[rows])).mean())


def parked_head(weights: np.ndarray, kind: str) -> bool:
    """Whether a (q, k) map is parked on a fixed key: the first, the last (</s>) or, in self-attention, itself."""
    spec = get_kind(kind)
    scores = [first_token_score(weights)]
    if not spec.masked:  # the decoder's last key is visible to its last row only
        scores.append(last_token_score(weights))
    if spec.queries == spec.keys:
        scores.append(diagonal_score(weights))
    return max(scores) > TRIVIAL_SHARE


def informative_head(stack: np.ndarray, kind: str) -> HeadPick:
    """The sharpest head (lowest normalized entropy) of a (layers, heads, q, k) stack, parked heads last."""
    n_layers, n_heads, n_q, n_k = stack.shape
    masked = get_kind(kind).mask(n_q, n_k)
    ranked = sorted(
        (parked_head(stack[layer, head], kind), normalized_entropy(stack[layer, head], masked), layer, head)
        for layer in range(n_layers)
        for head in range(n_heads)
    )
    parked, sharpness, layer, head = ranked[0]
    return HeadPick(layer, head, sharpness, parked)


def with_head_average(stack: np.ndarray) -> np.ndarray:
    """The stack with the mean of its heads appended as one more head: (L, h, q, k) -> (L, h + 1, q, k)."""
    return np.concatenate([stack, stack.mean(axis=1, keepdims=True)], axis=1)


@dataclass(frozen=True)
class TopKeys:
    """For one query: the key each (layer, head) attends to most, and with what weight."""

    index: np.ndarray  # (L, h) key position
    weight: np.ndarray  # (L, h) its attention weight

    def counts(self) -> dict[int, int]:
        """How many (layer, head) cells picked each key, most picked first."""
        keys, counts = np.unique(self.index, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        return {int(keys[i]): int(counts[i]) for i in order}


def top_keys(stack: np.ndarray, query: int, skip: tuple[int, ...] = ()) -> TopKeys:
    """Where query `query` looks most in every (layer, head) of a (L, h, q, k) stack; keys in `skip` never win."""
    if not 0 <= query < stack.shape[2]:
        raise ValueError(f"query {query} out of range for {stack.shape[2]} queries")
    rows = np.array(stack[:, :, query, :], dtype=float)  # (L, h, k)
    ranked = rows.copy()
    keep_out = [k for k in skip if 0 <= k < rows.shape[-1]]
    if len(keep_out) < rows.shape[-1]:
        ranked[..., keep_out] = -np.inf
    index = ranked.argmax(axis=-1)  # (L, h)
    return TopKeys(index, np.take_along_axis(rows, index[..., None], axis=-1)[..., 0])


PRONOUNS = frozenset(
    "it its he him his she her they them their "  # English
    "es sie er ihn ihm ihr ihnen "  # German
    "그것 그것을 그것이 그것은 그가 그는 그를 그녀 그녀가 그녀는 그녀를 그들 그들은 그들이 그".split()  # Korean
)


def bare_piece(piece: str) -> str:
    """A piece without the word-start mark ▁ and surrounding spaces, lower-cased ('▁It' -> 'it')."""
    return piece.replace("▁", " ").strip().lower()


def pronoun_position(pieces: list[str]) -> int | None:
    """The first piece that is a whole pronoun ('▁it', '▁es', '▁그것을'), or None."""
    return next((i for i, p in enumerate(pieces) if bare_piece(p) in PRONOUNS), None)


def attending_position(cross: np.ndarray, source: int) -> int:
    """The output position whose cross-attention (mean of layers and heads) weighs source `source` most."""
    return int(np.asarray(cross, dtype=float)[:, :, :, source].mean(axis=(0, 1)).argmax())


def step_probabilities(translation: Translation) -> np.ndarray:
    """The model's probability of each output token when it was chosen: (T,)."""
    return np.array([step.token_prob for step in translation.output.steps], dtype=float)


CONFIDENCE_LEVELS = (0.3, 0.6)  # below the first: a guess; below the second: unsure; else sure


def confidence_level(prob: float) -> int:
    """0 (a guess, p < 0.3), 1 (unsure, p < 0.6) or 2 (sure)."""
    return int(np.searchsorted(CONFIDENCE_LEVELS, prob, side="right"))
