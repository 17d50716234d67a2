"""Decoding strategies that show their work: greedy, beam search and sampling, each with a trace.

Every strategy is a pure `@torch.no_grad()` function of (model, src (B, S)) that decodes the whole
batch with the key/value cache (each step feeds only the newest token) and returns a `DecodeResult`:
the output of every sentence plus what the strategy saw at each step, so the app can draw it.

Conventions: special ids pad=0 unk=1 bos=2 eos=3 unless a tokenizer says otherwise; pad and bos are
never generated (their logits are set to -inf before anything else); an output is the generated
tokens without bos, ending in eos when one was produced. Default length limit: source length + 50
target tokens (eos included), capped by the model's max_len.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from .data import encode_source
from .i18n import TextError
from .model import AttentionMaps, Encoded, HeadMask, KVCache, Transformer
from .text import clean_text
from .tokenizer import BOS_ID, EOS_ID, Tokenizer
from .utils import autocast_dtype

EXTRA_TARGET_TOKENS = 50  # default max length = source length + 50 (paper, section 6.1)
N_CANDIDATES = 10  # candidates per step kept in the trace


# ---------------------------------------------------------------------------------------------
# Filters: small pure functions on logits (..., V); the UI uses them too
# ---------------------------------------------------------------------------------------------


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """logits / T, so softmax gives softmax(logits / T): T < 1 sharpens, T > 1 flattens."""
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; temperature 0 means 'always the most "
            "likely token': use the greedy strategy for that"
        )
    return logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Kept mask (..., V) of exactly the k largest logits; ties are broken towards the lower token id."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices  # equal values keep id order
    keep_sorted = (torch.arange(logits.shape[-1], device=logits.device) < k).expand_as(order)
    return torch.zeros_like(order, dtype=torch.bool).scatter_(-1, order, keep_sorted)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Kept mask (..., V) of the smallest most-probable set whose probability mass reaches p (nucleus)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass of the more likely tokens
    keep_sorted = (mass_before < p) & (sorted_probs > 0)
    keep_sorted[..., 0] = True  # the most likely token is always kept
    return torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)


@dataclass
class Filtered:
    """A sampling distribution after the filters: probabilities (..., V) and the kept mask (..., V)."""

    probs: Tensor
    kept: Tensor


def filter_distribution(
    logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> Filtered:
    """Temperature → top-k → top-p (0 and 1.0 switch a filter off); at least one token is always kept."""
    scaled = apply_temperature(logits, temperature)
    kept = torch.isfinite(scaled)
    if top_k:
        kept &= top_k_filter(scaled, top_k)
    if top_p < 1.0:
        kept &= top_p_filter(scaled.masked_fill(~kept, -math.inf), top_p)
    probs = torch.softmax(scaled.masked_fill(~kept, -math.inf), dim=-1)
    return Filtered(probs, kept)


def draw(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of probs (B, V), drawn with `generator`; zero-probability ids never come out."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def length_penalty(length: int | Tensor, alpha: float) -> float | Tensor:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha; a beam's score is log P(Y|X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


# ---------------------------------------------------------------------------------------------
# Results and traces
# ---------------------------------------------------------------------------------------------


@dataclass
class Step:
    """One decoding step of one sentence: what the model offered, what the filters kept, what was chosen."""

    token: int  # the chosen token
    token_prob: float  # its model probability (before filters)
    logprob: float  # running log P(y_1..y_t | x) under the model
    candidates: list[int]  # the most probable ids, best first
    probs: list[float]  # their model probabilities (before filters)
    filtered: list[float]  # their probabilities after the filters (0 = filtered out)
    kept: list[bool]  # whether each candidate survived the filters (beam: became a beam)
    n_kept: int  # size of the whole kept set


@dataclass
class Hypothesis:
    """A finished output: tokens without bos (ending in eos if produced) and its scores."""

    tokens: list[int]
    logprob: float  # log P(Y | X)
    score: float  # what the strategy ranks by (beam: logprob / length_penalty; otherwise logprob)
    finished: bool  # True when it ended with eos, False when the length limit cut it
    node: tuple[int, int] | None = None  # beam: (step, beam) of its last token in the tree


@dataclass
class BeamNode:
    """A beam at one step: where it came from, the token it added, its score, whether it finished."""

    step: int  # 1-based: the node holds target token `step`
    beam: int  # slot at this step
    parent: int  # slot at step - 1 it extends (step 1: 0, the root [bos])
    token: int
    logprob: float  # running log P of the hypothesis up to this token
    score: float  # logprob / length_penalty(step)
    finished: bool  # this token is eos


@dataclass
class Output:
    """What a strategy produced for one source sentence."""

    best: Hypothesis
    steps: list[Step]  # per step, along the best output
    nbest: list[Hypothesis]  # best first (greedy and sampling: just `best`)
    tree: list[list[BeamNode]] = field(default_factory=list)  # beam search: nodes per step

    @property
    def tokens(self) -> list[int]:
        """Tokens of the best output."""
        return self.best.tokens


@dataclass
class DecodeResult:
    """A strategy's outputs for a batch, one per source sentence, with the parameters it used."""

    strategy: str
    params: dict[str, Any]
    outputs: list[Output]


# ---------------------------------------------------------------------------------------------
# Shared machinery
# ---------------------------------------------------------------------------------------------


def _forbid_specials(logits: Tensor, pad_id: int, bos_id: int) -> Tensor:
    """Make pad and bos impossible in logits (N, V), in place (callers pass the decoder's fresh output)."""
    logits[:, [pad_id, bos_id]] = -math.inf
    return logits


def _length_limits(src: Tensor, pad_id: int, max_len: int | None, model_max_len: int) -> Tensor:
    """Per-sentence limit on generated tokens (B,): max_len or source length + 50, capped by the model."""
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    src_len = (src != pad_id).sum(dim=1).cpu()  # (B,) tokens + eos
    limits = src_len + EXTRA_TARGET_TOKENS if max_len is None else torch.full_like(src_len, max_len)
    return limits.clamp(max=model_max_len)


def _keep_rows(encoded: Encoded, cache: KVCache, rows: Tensor) -> Encoded:
    """Keep batch rows `rows` of the encoder output and the cache (drop finished, reorder beams)."""
    cache.reorder(rows)
    return Encoded(encoded.memory.index_select(0, rows), encoded.src_mask.index_select(0, rows), [])


def _steps_from_lists(rec: dict[str, list]) -> list[Step]:
    """Per-step Step objects from column lists."""
    return [Step(*values) for values in zip(*(rec[name] for name in _STEP_FIELDS), strict=True)]


_STEP_FIELDS = ("token", "token_prob", "logprob", "candidates", "probs", "filtered", "kept", "n_kept")


def _check_src(model: Transformer, src: Tensor) -> None:
    """Refuse inputs the model cannot encode, with a readable message."""
    if src.dim() != 2 or src.shape[1] == 0:
        raise ValueError(f"src must be a (batch, length) tensor of token ids, got shape {tuple(src.shape)}")
    if src.shape[1] > model.config.max_len:
        raise ValueError(
            f"source of {src.shape[1]} tokens exceeds the model's max_len {model.config.max_len}"
        )


Chooser = Callable[
    [Tensor, Tensor], tuple[Tensor, Filtered]
]  # logits (A, V), rows (A,) -> token (A,), filtered


def precision_context(model: Transformer, precision: str = "auto") -> torch.autocast:
    """bf16 autocast for a Transformer where `precision` resolves to it (utils.autocast_dtype), else a no-op.

    "auto" decodes the shipped-size models in bf16 on CPUs with native bf16 (as they were trained): about half
    the time of fp32 (bench/RESULTS.md, Generation vs Hugging Face Marian). Log-probabilities stay fp32.
    """
    device = next(model.parameters()).device
    transformer = model.config.architecture == "transformer"
    dtype = autocast_dtype(precision, device, model.config.d_model) if transformer else None
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def _generate(
    model: Transformer,
    src: Tensor,
    choose: Chooser,
    *,
    max_len: int | None,
    bos_id: int,
    eos_id: int,
    head_mask: HeadMask | None,
    n_candidates: int,
    precision: str = "auto",
) -> list[Output]:
    """Token-by-token decoding with the cache; finished sentences leave the batch."""
    _check_src(model, src)
    pad_id = model.config.pad_id
    limits = _length_limits(src, pad_id, max_len, model.config.max_len)  # (B,)
    batch = src.shape[0]
    # one autocast region for encode and every step: bf16 copies of the weights are made once, not per step
    with precision_context(model, precision):
        encoded = model.encode(src, head_mask=head_mask)
        cache = model.new_cache()
        rows = torch.arange(batch)  # original sentence of each active row
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)  # (A, 1)
        running = torch.zeros(batch, device=src.device)  # (A,) log P so far
        recs = [{name: [] for name in _STEP_FIELDS} for _ in range(batch)]
        for t in range(1, int(limits.max()) + 1):
            logits = model.decode(tokens, encoded, cache=cache, head_mask=head_mask).logits[:, -1]  # (A, V)
            logits = _forbid_specials(logits.float(), pad_id, bos_id)
            log_probs = torch.log_softmax(logits, dim=-1)  # (A, V)
            token, filtered = choose(logits, rows)  # (A,)
            running += log_probs.gather(1, token[:, None]).squeeze(1)
            _record(recs, rows, token, log_probs, filtered, running, n_candidates)
            done = (token == eos_id).cpu() | (t >= limits[rows])  # (A,)
            if done.all():
                break
            if done.any():
                keep = (~done).nonzero().squeeze(1)
                rows = rows[keep]
                keep = keep.to(src.device)
                encoded, token, running = _keep_rows(encoded, cache, keep), token[keep], running[keep]
            tokens = token[:, None]
    return [_output(rec, eos_id) for rec in recs]


def _record(
    recs: list[dict[str, list]],
    rows: Tensor,
    token: Tensor,
    log_probs: Tensor,
    filtered: Filtered,
    running: Tensor,
    n_candidates: int,
) -> None:
    """Append one step's trace (top candidates, kept set, choice) to each active sentence's record.

    n_candidates 0 records only the choice and its probabilities (no candidates, n_kept 0): for bulk
    translation, where nobody looks at the trace.
    """
    columns = {
        "token": token,
        "token_prob": log_probs.gather(1, token[:, None]).squeeze(1).exp(),
        "logprob": running,
    }
    if n_candidates > 0:
        top_logp, top_i = log_probs.topk(min(n_candidates, log_probs.shape[-1]), dim=-1)  # (A, n)
        columns |= {
            "candidates": top_i,
            "probs": top_logp.exp(),
            "filtered": filtered.probs.gather(1, top_i),
            "kept": filtered.kept.gather(1, top_i),
            "n_kept": filtered.kept.count_nonzero(dim=1),
        }
    lists = {name: col.tolist() for name, col in columns.items()}
    empty = {name: [] for name in ("candidates", "probs", "filtered", "kept")} | {"n_kept": 0}
    for a, row in enumerate(rows.tolist()):
        for name in _STEP_FIELDS:
            recs[row][name].append(lists[name][a] if name in lists else empty[name])


def _output(rec: dict[str, list], eos_id: int) -> Output:
    """One sentence's Output from its step record."""
    tokens = rec["token"]
    logprob = rec["logprob"][-1]
    best = Hypothesis(list(tokens), logprob, logprob, finished=tokens[-1] == eos_id)
    return Output(best, _steps_from_lists(rec), [best])


# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------


def _choose_greedy(logits: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Filtered]:
    """The most probable token of each row of logits (A, V) (ties: the lower id), as a one-token filter."""
    token = logits.argmax(dim=-1)  # (A,) first maximum
    kept = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, token[:, None], True)
    return token, Filtered(kept.to(logits.dtype), kept)


def _sampling_generator(
    temperature: float, top_k: int, top_p: float, seed: int | None, device: torch.device
) -> tuple[torch.Generator, int]:
    """Check the sampling parameters (clear errors) and make the seeded generator: (generator, seed)."""
    apply_temperature(torch.zeros(1), temperature)  # fail early and clearly on temperature <= 0
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 switches it off), got {top_k}")
    top_p_filter(torch.zeros(1), top_p)  # validates p
    generator = torch.Generator(device=device)
    seed = generator.seed() if seed is None else seed
    generator.manual_seed(seed)
    return generator, seed


@torch.no_grad()
def greedy(
    model: Transformer,
    src: Tensor,
    *,
    max_len: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    head_mask: HeadMask | None = None,
    n_candidates: int = N_CANDIDATES,
    precision: str = "auto",
) -> DecodeResult:
    """Pick the most probable token at every step (ties: the lower id) for each sentence of src (B, S)."""

    outputs = _generate(
        model, src, _choose_greedy, max_len=max_len, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask,
        n_candidates=n_candidates, precision=precision,
    )  # fmt: skip
    return DecodeResult("greedy", {"max_len": max_len}, outputs)


@torch.no_grad()
def sample(
    model: Transformer,
    src: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    max_len: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    head_mask: HeadMask | None = None,
    n_candidates: int = N_CANDIDATES,
    precision: str = "auto",
) -> DecodeResult:
    """Draw each token from the filtered distribution (temperature → top-k → top-p); a seed repeats it."""
    generator, seed = _sampling_generator(temperature, top_k, top_p, seed, src.device)

    def choose(logits: Tensor, rows: Tensor) -> tuple[Tensor, Filtered]:
        filtered = filter_distribution(logits, temperature, top_k, top_p)
        return draw(filtered.probs, generator), filtered

    outputs = _generate(
        model, src, choose, max_len=max_len, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask,
        n_candidates=n_candidates, precision=precision,
    )  # fmt: skip
    params = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed, "max_len": max_len}
    return DecodeResult("sample", params, outputs)


@dataclass
class _BeamRecord:
    """Bookkeeping of one sentence during beam search."""

    limit: int
    finished: list[Hypothesis] = field(default_factory=list)
    tree: list[list[BeamNode]] = field(default_factory=list)
    offers: list[tuple[list, list]] = field(default_factory=list)  # per step: top ids, probs per slot


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    *,
    beam_size: int = 4,
    alpha: float = 0.6,
    n_best: int | None = None,
    max_len: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    head_mask: HeadMask | None = None,
    n_candidates: int = N_CANDIDATES,
    precision: str = "auto",
) -> DecodeResult:
    """Keep the beam_size most probable hypotheses; rank finished ones by log P / ((5+|Y|)/6)^alpha.

    Each step every live beam is extended by every token and the beam_size best extensions (by log P;
    they all have the same length) survive. Survivors ending in eos are set aside as finished while
    the others continue. A sentence is done when no live beam is left, when beam_size hypotheses have
    finished and none of the live ones can still beat the worst of them (log P only falls as tokens
    are added), or at the length limit, where the live beams are kept as unfinished hypotheses.
    With beam_size 1 this is greedy decoding.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    _check_src(model, src)
    n_best = beam_size if n_best is None else n_best
    k, pad_id, device = beam_size, model.config.pad_id, src.device
    limits = _length_limits(src, pad_id, max_len, model.config.max_len).tolist()
    records = [_BeamRecord(limit) for limit in limits]
    expand = torch.arange(src.shape[0], device=device).repeat_interleave(k)  # (B*K,) sentence of each row
    # one autocast region for encode and every step: bf16 copies of the weights are made once, not per step
    with precision_context(model, precision):
        encoded = model.encode(src, head_mask=head_mask)
        encoded = Encoded(encoded.memory[expand], encoded.src_mask[expand], [])
        cache = model.new_cache()
        active = list(range(src.shape[0]))  # sentences still searching
        scores = torch.full((len(active), k), -math.inf, device=device)  # (A, K) log P of live beams
        scores[:, 0] = 0.0  # one root [bos]; the other slots start dead
        seqs = torch.empty(len(active), k, 0, dtype=torch.long, device=device)  # (A, K, t)
        tokens = torch.full((len(active) * k, 1), bos_id, dtype=torch.long, device=device)
        for t in range(1, max(limits) + 1):
            logits = model.decode(tokens, encoded, cache=cache, head_mask=head_mask).logits[:, -1]  # (A*K, V)
            log_probs = torch.log_softmax(_forbid_specials(logits.float(), pad_id, bos_id), dim=-1)
            vocab = log_probs.shape[-1]
            log_probs = log_probs.view(len(active), k, vocab)  # (A, K, V)
            extended = scores[:, :, None] + log_probs  # (A, K, V)
            top_scores, flat = extended.view(len(active), k * vocab).topk(k, dim=-1)  # (A, K)
            parent, token = flat // vocab, flat % vocab
            seqs = torch.cat(
                [seqs.gather(1, parent[:, :, None].expand(-1, -1, t - 1)), token[:, :, None]], dim=2
            )
            offer_logp, offer_i = log_probs.topk(min(n_candidates, vocab), dim=-1)  # (A, K, n)
            offer_p = offer_logp.exp()
            scores = _beam_step(
                records, active, t, alpha, eos_id, top_scores, parent, token, seqs, offer_i, offer_p
            )
            done = _beams_done(records, active, t, alpha, k, scores)
            if all(done):
                break
            keep = torch.tensor([a for a, d in enumerate(done) if not d], device=device)
            rows = (keep[:, None] * k + parent[keep]).view(-1)  # (A'*K,) parent rows of the survivors
            encoded = _keep_rows(encoded, cache, rows)
            active = [active[a] for a in keep.tolist()]
            scores, seqs, tokens = scores[keep], seqs[keep], token[keep].view(-1, 1)
    outputs = [_beam_output(rec, n_best, eos_id) for rec in records]
    return DecodeResult("beam", {"beam_size": beam_size, "alpha": alpha, "max_len": max_len}, outputs)


def _beam_step(
    records: list[_BeamRecord],
    active: list[int],
    t: int,
    alpha: float,
    eos_id: int,
    top_scores: Tensor,
    parent: Tensor,
    token: Tensor,
    seqs: Tensor,
    offer_i: Tensor,
    offer_p: Tensor,
) -> Tensor:
    """Record step t's survivors in the tree, set finished ones aside; returns the live scores (A, K)."""
    valid = torch.isfinite(top_scores)
    final = valid & (token == eos_id)
    last = torch.tensor([t >= records[b].limit for b in active], device=top_scores.device)[:, None]
    lists = [x.tolist() for x in (top_scores, parent, token, valid, final | last)]
    penalty = length_penalty(t, alpha)
    for a, b in enumerate(active):
        rec = records[b]
        rec.offers.append((offer_i[a].tolist(), offer_p[a].tolist()))
        nodes = []
        for j, (score, par, tok, ok, ends) in enumerate(zip(*(col[a] for col in lists), strict=True)):
            if not ok:
                continue
            nodes.append(BeamNode(t, j, par, tok, score, score / penalty, tok == eos_id))
            if ends:
                tokens = seqs[a, j].tolist()
                rec.finished.append(Hypothesis(tokens, score, score / penalty, tok == eos_id, (t, j)))
        rec.tree.append(nodes)
    return top_scores.masked_fill(final | ~valid, -math.inf)


def _beams_done(
    records: list[_BeamRecord], active: list[int], t: int, alpha: float, k: int, scores: Tensor
) -> list[bool]:
    """Per active sentence: True when its search is over (see beam_search)."""
    best_live = scores.max(dim=1).values.tolist()  # (A,) -inf when no beam is live
    done = []
    for a, b in enumerate(active):
        rec = records[b]
        if t >= rec.limit or best_live[a] == -math.inf:
            done.append(True)
            continue
        # log P only falls, so a live beam's best possible score divides it by the largest penalty ahead
        bound = best_live[a] / max(length_penalty(t + 1, alpha), length_penalty(rec.limit, alpha))
        worst = (
            sorted((h.score for h in rec.finished), reverse=True)[k - 1] if len(rec.finished) >= k else None
        )
        done.append(worst is not None and worst >= bound)
    return done


def _beam_output(rec: _BeamRecord, n_best: int, eos_id: int) -> Output:
    """The n best hypotheses of one sentence, the tree, and the steps along the best one."""
    nbest = sorted(rec.finished, key=lambda h: h.score, reverse=True)[:n_best]
    return Output(nbest[0], _beam_path_steps(rec, nbest[0]), nbest, rec.tree)


def _beam_path_steps(rec: _BeamRecord, hyp: Hypothesis) -> list[Step]:
    """Steps along one hypothesis: what its parent beam offered at each step and which offers survived."""
    step, slot = hyp.node
    path = []
    while step >= 1:
        node = next(n for n in rec.tree[step - 1] if n.beam == slot)
        path.append(node)
        step, slot = step - 1, node.parent
    steps = []
    for node in reversed(path):
        ids, probs = (x[node.parent] for x in rec.offers[node.step - 1])
        survivors = {n.token for n in rec.tree[node.step - 1] if n.parent == node.parent}
        kept = [i in survivors for i in ids]
        token_prob = math.exp(node.logprob - (steps[-1].logprob if steps else 0.0))
        filtered = [p if keep else 0.0 for p, keep in zip(probs, kept, strict=True)]
        steps.append(Step(node.token, token_prob, node.logprob, ids, probs, filtered, kept, len(survivors)))
    return steps


# ---------------------------------------------------------------------------------------------
# Registry for the UI's selectors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A strategy parameter the UI can offer: name, default and allowed range."""

    name: str
    default: float
    low: float
    high: float
    step: float
    help: str

    @property
    def is_int(self) -> bool:
        """Whether the parameter takes whole numbers."""
        return float(self.step).is_integer()

    def check(self, raw: Any) -> int | float:
        """raw as a number in [low, high] (an int when the parameter takes whole numbers), else ValueError."""
        try:
            value = float(raw)
        except (TypeError, ValueError) as exc:
            raise TextError("error.param_number", name=self.name, raw=repr(raw)) from exc
        if not math.isfinite(value) or not self.low <= value <= self.high:
            key = "error.param_range_temperature" if self.name == "temperature" else "error.param_range"
            raise TextError(key, name=self.name, low=f"{self.low:g}", high=f"{self.high:g}", raw=repr(raw))
        if not self.is_int:
            return value
        if not value.is_integer():
            raise TextError("error.param_whole", name=self.name, raw=repr(raw))
        return int(value)


@dataclass(frozen=True)
class Strategy:
    """A named decoding strategy: the function, the parameters it exposes and the ones it fixes."""

    name: str
    fn: Callable[..., DecodeResult]
    params: tuple[Param, ...]
    description: str
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        """Default values of the exposed parameters."""
        return {p.name: int(p.default) if p.is_int else p.default for p in self.params}

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults, then the fixed values, then `params`; a fixed value or one outside its range is refused."""
        clash = sorted(set(params) & set(self.fixed))
        if clash:
            raise TextError("error.param_fixed", name=self.name, names=", ".join(clash))
        merged = {**self.defaults(), **self.fixed, **params}
        for p in (*self.params, MAX_LEN):  # the declared ranges, also what the app's validation checks
            if merged.get(p.name) is not None:
                merged[p.name] = p.check(merged[p.name])
        return merged

    def __call__(self, model: Transformer, src: Tensor, **params: Any) -> DecodeResult:
        """Run on src (B, S) with defaults, the fixed values and `params` (exposed or decoding options)."""
        result = self.fn(model, src, **self.resolve(params))
        result.strategy = self.name
        return result


MAX_LEN = Param("max_len", 0, 1, math.inf, 1, "most target tokens to generate (default: source length + 50)")
_SEED = Param("seed", 0, 0, 2**31 - 1, 1, "random seed: the same seed gives the same samples")
_TEMPERATURE = Param("temperature", 1.0, 0.05, 3.0, 0.05, "divide logits by T: < 1 sharper, > 1 flatter")
_TOP_K = Param("top_k", 10, 0, 200, 1, "keep only the k most probable tokens (0 = off)")
_TOP_P = Param(
    "top_p", 0.9, 0.05, 1.0, 0.05, "keep the smallest set of tokens whose mass reaches p (1 = off)"
)

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("greedy", greedy, (), "the most probable token at every step"),
        Strategy(
            "beam",
            beam_search,
            (
                Param("beam_size", 4, 1, 16, 1, "hypotheses kept at every step"),
                Param("alpha", 0.6, 0.0, 2.0, 0.1, "length penalty ((5+|Y|)/6)^alpha; 0 = plain log P"),
            ),
            "beam search with the GNMT length penalty (paper: beam 4, alpha 0.6)",
        ),
        Strategy(
            "sample",
            sample,
            (_TEMPERATURE, replace(_TOP_K, default=0), replace(_TOP_P, default=1.0), _SEED),
            "draw from the distribution after temperature → top-k → top-p",
        ),
        Strategy(
            "temperature",
            sample,
            (_TEMPERATURE, _SEED),
            "pure sampling at temperature T",
            {"top_k": 0, "top_p": 1.0},
        ),
        Strategy(
            "top-k",
            sample,
            (replace(_TOP_K, low=1, help="keep only the k most probable tokens"), _SEED),
            "sample among the k most probable tokens",
            {"temperature": 1.0, "top_p": 1.0},
        ),
        Strategy("top-p", sample, (_TOP_P, _SEED), "nucleus sampling", {"temperature": 1.0, "top_k": 0}),
    )
}


@torch.no_grad()
def run_strategies(
    model: Transformer,
    src: Tensor,
    runs: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    head_mask: HeadMask | None = None,
) -> list[DecodeResult]:
    """Several (strategy, params) runs on one sentence src (1, S), one DecodeResult each.

    Greedy and sampling runs share one batch, a row each, so they cost about one decoding instead of one
    each; every row keeps its own rule and seeded generator, so each result equals running it alone.
    Beam search runs on its own.
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"run_strategies decodes one sentence, src (1, S); got shape {tuple(src.shape)}")
    results: list[DecodeResult | None] = [None] * len(runs)
    groups: dict[tuple, list[tuple[int, dict[str, Any]]]] = {}
    for i, (name, params) in enumerate(runs):
        strategy = get_strategy(name)
        merged = strategy.resolve(params)
        if strategy.fn in (greedy, sample):
            options = (merged.pop("max_len", None), merged.pop("n_candidates", N_CANDIDATES))
            groups.setdefault(options, []).append((i, merged))
        else:
            results[i] = strategy(model, src, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask, **params)
    for (max_len, n_candidates), members in groups.items():
        choosers = [_row_chooser(runs[i][0], merged, src.device) for i, merged in members]

        def choose(logits: Tensor, rows: Tensor, choosers: list = choosers) -> tuple[Tensor, Filtered]:
            picked = [choosers[r][0](logits[a : a + 1]) for a, r in enumerate(rows.tolist())]
            token = torch.cat([t for t, _ in picked])  # (A,)
            probs = torch.cat([f.probs for _, f in picked])  # (A, V)
            return token, Filtered(probs, torch.cat([f.kept for _, f in picked]))

        batch = src.expand(len(members), -1)  # (R, S): one row per run
        outputs = _generate(
            model, batch, choose, max_len=max_len, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask,
            n_candidates=n_candidates,
        )  # fmt: skip
        for (i, _), output, (_, params) in zip(members, outputs, choosers, strict=True):
            results[i] = DecodeResult(runs[i][0], {**params, "max_len": max_len}, [output])
    return [r for r in results if r is not None]


def _row_chooser(
    name: str, params: dict[str, Any], device: torch.device
) -> tuple[Callable[[Tensor], tuple[Tensor, Filtered]], dict[str, Any]]:
    """The token rule of one run of run_strategies for logits (1, V), and the parameters it records."""
    if get_strategy(name).fn is greedy:
        return _choose_greedy, {}
    t, k, p = params["temperature"], params["top_k"], params["top_p"]
    generator, seed = _sampling_generator(t, k, p, params.get("seed"), device)

    def choose(logits: Tensor) -> tuple[Tensor, Filtered]:
        filtered = filter_distribution(logits, t, k, p)
        return draw(filtered.probs, generator), filtered

    return choose, {"temperature": t, "top_k": k, "top_p": p, "seed": seed}


def get_strategy(name: str) -> Strategy:
    """The registered strategy `name`, or a ValueError listing the choices."""
    if name not in STRATEGIES:
        raise TextError("error.unknown_strategy", name=name, names=", ".join(STRATEGIES))
    return STRATEGIES[name]


# ---------------------------------------------------------------------------------------------
# One call for the app
# ---------------------------------------------------------------------------------------------


@dataclass
class Translation:
    """A translated sentence with its pieces, the strategy's trace and the attention of the output."""

    src_ids: list[int]  # source tokens + [eos]
    src_pieces: list[str]
    tgt_ids: list[int]  # output without bos, ending in eos if produced
    tgt_pieces: list[str]
    text: str  # detokenised output
    attention: AttentionMaps  # B=1, queries = decoder inputs [bos] + tgt_ids[:-1] (query t produced token t)
    result: DecodeResult
    truncated: bool = False  # the source was cut to fit the model's max_len
    bos_id: int = BOS_ID

    @property
    def output(self) -> Output:
        """The strategy's output for this sentence (best, n-best, steps, tree)."""
        return self.result.outputs[0]

    @property
    def decoder_input_ids(self) -> list[int]:
        """[bos] + tgt_ids[:-1]: the tokens the decoder read (keys of decoder self-attention)."""
        return [self.bos_id, *self.tgt_ids[:-1]]


def _special(tokenizer: object, name: str, default: int) -> int:
    """A special id from the tokenizer when it has one."""
    value = getattr(tokenizer, name, None)
    return default if value is None else int(value)


@torch.no_grad()
def output_attention(
    model: Transformer,
    src: Tensor,
    tgt_ids: list[int],
    bos_id: int = BOS_ID,
    head_mask: HeadMask | None = None,
) -> AttentionMaps:
    """All attention maps of one teacher-forced pass over the output, decoder input [bos] + tgt_ids[:-1]."""
    tgt_in = torch.tensor([[bos_id, *tgt_ids[:-1]]], dtype=torch.long, device=src.device)  # (1, T)
    out = model(src, tgt_in, need_weights=True, head_mask=head_mask)
    return out.attention.cpu()


def translate(
    model: Transformer,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    text: str,
    strategy: str = "greedy",
    *,
    head_mask: HeadMask | None = None,
    **params: Any,
) -> Translation:
    """Clean the text as the app does, tokenise, decode with `strategy` (and its params), attention once.

    Cleaning (visformer.text.clean_text, local limits): control, surrogate and bidi-override
    characters removed, spaces collapsed; empty text or an overlong word is a ValueError.
    """
    text = clean_text(text).text
    chosen = get_strategy(strategy)
    bos_id, eos_id = _special(tgt_tokenizer, "bos_id", BOS_ID), _special(tgt_tokenizer, "eos_id", EOS_ID)
    src_ids, truncated = encode_source(src_tokenizer, text, model.config.max_len)
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], dtype=torch.long, device=device)  # (1, S)
    result = chosen(model, src, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask, **params)
    tgt_ids = result.outputs[0].tokens
    return Translation(
        src_ids=src_ids,
        src_pieces=src_tokenizer.pieces(src_ids),
        tgt_ids=tgt_ids,
        tgt_pieces=tgt_tokenizer.pieces(tgt_ids),
        text=tgt_tokenizer.decode(tgt_ids),
        attention=output_attention(model, src, tgt_ids, bos_id, head_mask),
        result=result,
        truncated=truncated,
        bos_id=bos_id,
    )
