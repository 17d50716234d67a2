"""The strategies: greedy, sampling and beam search over one decoding loop with the key/value cache."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..architectures import Family, architecture
from ..model import Encoded, HeadMask, KVCache, Transformer
from ..tokenizer import BOS_ID, EOS_ID
from ..utils import autocast_dtype
from .fast import FastDecoder, decoding_dtype, fast_path_applies, fast_weights
from .filters import (
    Filtered,
    apply_temperature,
    draw,
    filter_distribution,
    first_max,
    largest,
    length_penalty,
    top_p_filter,
)
from .trace import BeamNode, DecodeResult, Hypothesis, Output, Step, TraceRecorder

EXTRA_TARGET_TOKENS = 50  # default max length = source length + 50 (paper, section 6.1)
N_CANDIDATES = 10  # candidates per step kept in the trace


def forbidden_ids(pad_id: int, bos_id: int) -> tuple[int, ...]:
    """The tokens no decoding step may choose: <pad> and <s> (which may be one token, as in Marian)."""
    return tuple(dict.fromkeys((pad_id, bos_id)))


def forbid_tokens(logits: Tensor, ids: Sequence[int]) -> Tensor:
    """Make tokens `ids` impossible in logits (..., V), in place (callers pass a fresh tensor)."""
    logits[..., list(ids)] = -math.inf
    return logits


def _length_limits(src: Tensor, pad_id: int, max_len: int | None, model_max_len: int) -> Tensor:
    """Per-sentence limit on generated tokens (B,): max_len or source length + 50, capped by the model."""
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    src_len = (src != pad_id).sum(dim=1).cpu()  # (B,) tokens + eos
    limits = src_len + EXTRA_TARGET_TOKENS if max_len is None else torch.full_like(src_len, max_len)
    return limits.clamp(max=model_max_len)


class ReferenceDecoder:
    """`model.decode` with its KVCache (torch.cat per step): any model, head masks, the modules as written."""

    def __init__(self, model: Transformer, encoded: Encoded, head_mask: HeadMask | None) -> None:
        self.model, self.encoded, self.head_mask = model, encoded, head_mask
        self.cache: KVCache = model.new_cache()

    def step(self, tokens: Tensor) -> Tensor:
        """Logits (A, V) in fp32 for one new token per row, tokens (A,)."""
        out = self.model.decode(tokens[:, None], self.encoded, cache=self.cache, head_mask=self.head_mask)
        return out.logits[:, -1].float()

    def keep(self, rows: Tensor) -> None:
        """Keep batch rows `rows` of the encoder output and the cache (drop finished, reorder beams)."""
        self.cache.reorder(rows)
        enc = self.encoded
        self.encoded = Encoded(enc.memory.index_select(0, rows), enc.src_mask.index_select(0, rows), [])


@contextmanager
def decoder(
    model: Transformer,
    src: Tensor,
    *,
    max_steps: int,
    head_mask: HeadMask | None = None,
    precision: str = "auto",
    beams: int = 1,
) -> Iterator[FastDecoder | ReferenceDecoder]:
    """Encode src (B, S) and hand out a decoder of `beams` consecutive rows per sentence for `max_steps`.

    The fast step on prepared weights where it applies (a Transformer in eval mode without a head mask),
    else `model.decode` under one autocast region for encode and every step (bf16 weight copies made once).
    """
    if fast_path_applies(model, head_mask):
        dtypes = decoding_dtype(model.config, src.shape[0] * beams, src.device, precision)
        with precision_context(model, "bf16" if dtypes.layers == torch.bfloat16 else "fp32"):  # int8: fp32
            encoded = model.encode(src)
        yield FastDecoder(fast_weights(model, dtypes), encoded, max_steps, group=beams)
        return
    with precision_context(model, precision):
        encoded = model.encode(src, head_mask=head_mask)
        if beams > 1:
            rows = torch.arange(src.shape[0], device=src.device).repeat_interleave(beams)  # (B*K,)
            encoded = Encoded(encoded.memory[rows], encoded.src_mask[rows], [])
        yield ReferenceDecoder(model, encoded, head_mask)


def _check_src(model: Transformer, src: Tensor) -> None:
    """Refuse inputs the model cannot encode, with a readable message."""
    if src.dim() != 2 or src.shape[1] == 0:
        raise ValueError(f"src must be a (batch, length) tensor of token ids, got shape {tuple(src.shape)}")
    if src.shape[1] > model.config.max_len:
        raise ValueError(
            f"source of {src.shape[1]} tokens exceeds the model's max_len {model.config.max_len}"
        )


# logits (A, V), rows (A,) -> token (A,), filtered (None: only the chosen token was kept, as greedy does)
Chooser = Callable[[Tensor, Tensor], tuple[Tensor, Filtered | None]]


def precision_context(model: Transformer, precision: str = "auto") -> torch.autocast:
    """bf16 autocast for a Transformer where `precision` resolves to it (utils.autocast_dtype), else a no-op.

    "auto" decodes the shipped-size models in bf16 on CPUs with native bf16 (as they were trained): about half
    the time of fp32 (bench/RESULTS.md, Generation vs Hugging Face Marian). Log-probabilities stay fp32.
    """
    device = next(model.parameters()).device
    transformer = architecture(model.config.architecture).family is Family.TRANSFORMER
    precision = "bf16" if precision == "int8" else precision  # int8 weights exist on the fast path only
    dtype = autocast_dtype(precision, device, model.config.d_model) if transformer else None
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


class _TokenSearch:
    """Greedy or sampling, one row per sentence of its batch (run_strategies: one per run of a sentence); a
    token per row and step until eos or the row's length limit."""

    def __init__(
        self, choose: Chooser, limits: Tensor, *, bos_id: int, eos_id: int, pad_id: int, n_candidates: int,
        device: torch.device,
    ) -> None:  # fmt: skip
        self.choose, self.limits, self.eos_id = choose, limits, eos_id
        self.forbidden = forbidden_ids(pad_id, bos_id)
        batch = len(limits)
        self.rows = torch.arange(batch)  # original sentence of each active row
        self.tokens = torch.full((batch,), bos_id, dtype=torch.long, device=device)  # (A,) next input
        self.running = torch.zeros(batch, device=device)  # (A,) log P so far
        self.trace = TraceRecorder(batch, n_candidates)

    def advance(self, logits: Tensor, t: int) -> Tensor:
        """Choose step t's tokens from logits (A, V); the rows (A',) that go on (sets their next tokens)."""
        logits = forbid_tokens(logits, self.forbidden)  # (A, V) fp32
        log_probs = torch.log_softmax(logits, dim=-1)  # (A, V)
        token, filtered = self.choose(logits, self.rows)  # (A,)
        self.running += log_probs.gather(1, token[:, None]).squeeze(1)
        self.trace.add(self.rows, token, log_probs, filtered, self.running)
        done = (token == self.eos_id).cpu() | (t >= self.limits[self.rows])  # (A,)
        keep = (~done).nonzero().squeeze(1)  # (A',)
        self.rows = self.rows[keep]
        keep = keep.to(token.device)
        self.tokens, self.running = token[keep], self.running[keep]
        return keep

    def outputs(self) -> list[Output]:
        """Every sentence's Output."""
        return self.trace.outputs(self.eos_id)


def _decode_searches(
    model: Transformer,
    src: Tensor,
    searches: Sequence[_TokenSearch | _BeamSearch],
    *,
    head_mask: HeadMask | None,
    precision: str = "auto",
) -> None:
    """Run searches side by side on one decoder: each holds a block of its rows, all blocks step together.

    One search decodes a batch src (B, S) (the same number of rows per sentence). Several share one
    sentence, src (1, S): one encoder pass, one cross K/V, and one weight read per step for every row,
    which at batch 1 costs about what one row costs (the step reads its weights from memory).
    """
    if len(searches) > 1 and src.shape[0] != 1:
        raise ValueError(f"searches decode together on one sentence, src (1, S); got {tuple(src.shape)}")
    group = sum(len(s.tokens) for s in searches) // src.shape[0]  # rows per sentence (in sentence order)
    max_steps = int(max(max(s.limits) for s in searches))  # the longest length limit of any row
    with decoder(
        model, src, max_steps=max_steps, head_mask=head_mask, precision=precision, beams=group
    ) as dec:
        for t in range(1, max_steps + 1):
            live = [s for s in searches if len(s.tokens)]
            if not live:
                break
            sizes = [len(s.tokens) for s in live]
            logits = dec.step(torch.cat([s.tokens for s in live]))  # (A, V)
            kept, start = [], 0
            for search, n in zip(live, sizes, strict=True):
                kept.append(search.advance(logits[start : start + n], t) + start)
                start += n
            rows = torch.cat(kept)  # (A',) rows that go on, as each search ordered them
            if len(rows) == 0:
                break
            if len(rows) != start or not bool((rows == torch.arange(start, device=rows.device)).all()):
                dec.keep(rows)


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
    search = _token_search(model, src, choose, max_len, bos_id, eos_id, n_candidates)
    _decode_searches(model, src, [search], head_mask=head_mask, precision=precision)
    return search.outputs()


def _token_search(
    model: Transformer, src: Tensor, choose: Chooser, max_len: int | None, bos_id: int, eos_id: int,
    n_candidates: int,
) -> _TokenSearch:  # fmt: skip
    """A greedy or sampling search over the sentences of src (B, S)."""
    _check_src(model, src)
    pad_id = model.config.pad_id
    limits = _length_limits(src, pad_id, max_len, model.config.max_len)  # (B,)
    return _TokenSearch(
        choose,
        limits,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        n_candidates=n_candidates,
        device=src.device,
    )


def _argmax(logits: Tensor, rows: Tensor | None = None) -> tuple[Tensor, None]:
    """The most probable token of each row of logits (A, V) (ties: the lower id); None: no other token kept."""
    return first_max(logits), None


def _choose_greedy(logits: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Filtered]:
    """The most probable token of each row of logits (A, V) (ties: the lower id), as a one-token filter."""
    token = first_max(logits)  # (A,) first maximum
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
        model, src, _argmax, max_len=max_len, bos_id=bos_id, eos_id=eos_id, head_mask=head_mask,
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
    search = _beam_search(model, src, beam_size, alpha, max_len, bos_id, eos_id, n_candidates)
    _decode_searches(model, src, [search], head_mask=head_mask, precision=precision)
    return DecodeResult(
        "beam", {"beam_size": beam_size, "alpha": alpha, "max_len": max_len}, search.outputs(n_best)
    )


def _beam_search(
    model: Transformer, src: Tensor, beam_size: int, alpha: float, max_len: int | None, bos_id: int,
    eos_id: int, n_candidates: int,
) -> _BeamSearch:  # fmt: skip
    """A beam search over the sentences of src (B, S), parameters checked."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    _check_src(model, src)
    pad_id = model.config.pad_id
    limits = _length_limits(src, pad_id, max_len, model.config.max_len).tolist()
    return _BeamSearch(
        beam_size, alpha, limits, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, n_candidates=n_candidates,
        device=src.device,
    )  # fmt: skip


class _BeamSearch:
    """Beam search over its rows: beam_size consecutive rows per sentence still searching."""

    def __init__(
        self, k: int, alpha: float, limits: list[int], *, bos_id: int, eos_id: int, pad_id: int,
        n_candidates: int, device: torch.device,
    ) -> None:  # fmt: skip
        self.k, self.alpha, self.limits, self.eos_id = k, alpha, limits, eos_id
        self.forbidden, self.n_candidates = forbidden_ids(pad_id, bos_id), n_candidates
        self.records = [_BeamRecord(limit) for limit in limits]
        self.active = list(range(len(limits)))  # sentences still searching
        self.scores = torch.full((len(limits), k), -math.inf, device=device)  # (A, K) log P of live beams
        self.scores[:, 0] = 0.0  # one root [bos]; the other slots start dead
        self.seqs = torch.empty(len(limits), k, 0, dtype=torch.long, device=device)  # (A, K, t)
        self.tokens = torch.full((len(limits) * k,), bos_id, dtype=torch.long, device=device)  # (A*K,)

    def advance(self, logits: Tensor, t: int) -> Tensor:
        """Extend the beams with step t's logits (A*K, V); the parent rows (A'*K,) of the survivors."""
        k, active = self.k, self.active
        log_probs = torch.log_softmax(forbid_tokens(logits, self.forbidden), dim=-1)  # (A*K, V)
        vocab = log_probs.shape[-1]
        log_probs = log_probs.view(len(active), k, vocab)  # (A, K, V)
        # the K best extensions are among each beam's K best tokens: one top-k over V serves the search
        # and the trace's offers
        n_top = min(max(k, self.n_candidates), vocab)
        best_logp, best_i = largest(log_probs, n_top)  # (A, K, n) each beam's best tokens
        extended = self.scores[:, :, None] + best_logp[:, :, :k]  # (A, K, K)
        top_scores, flat = extended.view(len(active), -1).topk(k, dim=-1)  # (A, K)
        parent = flat // min(k, n_top)
        token = best_i[:, :, :k].reshape(len(active), -1).gather(1, flat)  # (A, K)
        seqs = torch.cat(
            [self.seqs.gather(1, parent[:, :, None].expand(-1, -1, t - 1)), token[:, :, None]], dim=2
        )
        n = self.n_candidates
        offer_logp, offer_i = best_logp[:, :, :n], best_i[:, :, :n]  # (A, K, n)
        scores = _beam_step(
            self.records, active, t, self.alpha, self.eos_id, top_scores, parent, token, seqs, offer_i,
            offer_logp.exp(),
        )  # fmt: skip
        done = _beams_done(self.records, active, t, self.alpha, k, scores)
        keep = torch.tensor([a for a, d in enumerate(done) if not d], dtype=torch.long, device=logits.device)
        self.active = [active[a] for a in keep.tolist()]
        self.scores, self.seqs, self.tokens = scores[keep], seqs[keep], token[keep].view(-1)
        return (keep[:, None] * k + parent[keep]).view(-1)  # (A'*K,) parent rows of the survivors

    def outputs(self, n_best: int | None = None) -> list[Output]:
        """Every sentence's n best hypotheses (default: beam_size), tree and steps."""
        return [_beam_output(rec, self.k if n_best is None else n_best, self.eos_id) for rec in self.records]


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
