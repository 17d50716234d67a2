"""Decoding strategies against references, traces and translate() (the filters: test_decoding_filters.py)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.checkpoints import tiny_config
from visformer.decoding import (
    STRATEGIES,
    beam_search,
    draw,
    filter_distribution,
    get_strategy,
    greedy,
    length_penalty,
    run_strategies,
    sample,
    translate,
)
from visformer.model import HeadMask, Transformer

PAD, UNK, BOS, EOS = 0, 1, 2, 3
FAST = settings(max_examples=40, deadline=None)
MODEL = settings(max_examples=8, deadline=None)

logit_rows = st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=2, max_size=30).map(
    lambda xs: torch.tensor(xs, dtype=torch.float64)
)


def make_model(seed: int = 0, **overrides) -> Transformer:
    """A tiny model in eval mode, its weights fixed by `seed`."""
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()


def make_src(seed: int, batch: int = 3, vocab: int = 20) -> torch.Tensor:
    """Sources (B, S) of different lengths: tokens + eos, padded."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (batch,), generator=gen).tolist()
    src = torch.full((batch, max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, vocab, (n,), generator=gen)
        src[i, n] = EOS
    return src


@torch.no_grad()
def model_log_probs(model: Transformer, src: torch.Tensor, tgt: list[int]) -> torch.Tensor:
    """Per-token log P of tgt given src (1, S) by one teacher-forced pass, pad and bos forbidden."""
    logits = model(src, torch.tensor([[BOS, *tgt[:-1]]])).logits[0].clone()  # (T, V)
    logits[:, [PAD, BOS]] = -math.inf
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(tgt)[:, None]).squeeze(1)


@torch.no_grad()
def uncached_decode(model: Transformer, src: torch.Tensor, limit: int, choose) -> list[int]:
    """Reference: recompute the whole prefix at every step (no cache), batch of one."""
    tgt = [BOS]
    for _ in range(limit):
        logits = model(src, torch.tensor([tgt])).logits[:, -1].clone()  # (1, V)
        logits[:, [PAD, BOS]] = -math.inf
        tgt.append(int(choose(logits)))
        if tgt[-1] == EOS:
            break
    return tgt[1:]


def test_temperature_zero_is_refused_with_a_pointer_to_greedy() -> None:
    model = make_model()
    for t in (0, 0.0, -1.0):
        with pytest.raises(ValueError, match="greedy"):
            sample(model, make_src(0), temperature=t)
    with pytest.raises(ValueError, match="top-p"):
        sample(model, make_src(0), top_p=0.0)


# ---------------------------------------------------------------------------------------------
# Strategies against references
# ---------------------------------------------------------------------------------------------


@MODEL
@given(seed=st.integers(0, 10_000))
def test_cached_decoding_equals_uncached_decoding(seed: int) -> None:
    model, src = make_model(seed % 5), make_src(seed, batch=1)
    out = greedy(model, src, max_len=12).outputs[0]
    assert out.tokens == uncached_decode(model, src, 12, lambda lg: lg.argmax(-1))
    gen = torch.Generator().manual_seed(seed)
    ref = uncached_decode(model, src, 12, lambda lg: draw(filter_distribution(lg, 0.8, 5, 0.9).probs, gen))
    assert (
        sample(model, src, temperature=0.8, top_k=5, top_p=0.9, seed=seed, max_len=12).outputs[0].tokens
        == ref
    )


@MODEL
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([0.0, 0.6, 1.5]))
def test_beam_size_one_is_greedy(seed: int, alpha: float) -> None:
    model, src = make_model(seed % 5), make_src(seed)
    for g, b in zip(
        greedy(model, src, max_len=10).outputs,
        beam_search(model, src, beam_size=1, alpha=alpha, max_len=10).outputs,
        strict=True,
    ):
        assert b.tokens == g.tokens
        assert b.best.logprob == pytest.approx(g.best.logprob, abs=1e-4)


@MODEL
@given(seed=st.integers(0, 10_000))
def test_top_k_one_sampling_is_greedy(seed: int) -> None:
    model, src = make_model(seed % 5), make_src(seed)
    greedy_tokens = [o.tokens for o in greedy(model, src, max_len=10).outputs]
    sampled = sample(model, src, top_k=1, temperature=1.7, seed=seed, max_len=10).outputs
    assert [o.tokens for o in sampled] == greedy_tokens


def exhaustive_best(
    model: Transformer, src: torch.Tensor, max_len: int, alpha: float
) -> tuple[list[int], float]:
    """The best sequence by log P / lp over every output: w + [eos] with |w| < max_len, or |w| = max_len."""
    words = [UNK] + list(range(EOS + 1, model.config.tgt_vocab_size))  # what may be generated besides eos
    outputs = [[*w, EOS] for n in range(max_len) for w in itertools.product(words, repeat=n)]
    outputs += [list(w) for w in itertools.product(words, repeat=max_len)]
    scored = [
        (float(model_log_probs(model, src, y).sum()) / length_penalty(len(y), alpha), y) for y in outputs
    ]
    score, best = max(scored, key=lambda s: s[0])
    return best, score


@pytest.mark.parametrize(
    ("max_len", "beam"),
    [(2, 5), (3, 6), (4, 12)],  # beam >= everything one step can offer: nothing is ever pruned
)
@pytest.mark.parametrize("seed", range(4))
@torch.no_grad()
def test_wide_beam_finds_the_exhaustive_best(max_len: int, beam: int, seed: int) -> None:
    model = make_model(seed, src_vocab_size=5, tgt_vocab_size=5, max_len=4)  # tokens: unk, eos, one word
    src = torch.tensor([[4, 4, EOS]])
    best, score = exhaustive_best(model, src, max_len, 0.6)
    found = beam_search(model, src, beam_size=beam, max_len=max_len).outputs[0].best
    assert found.tokens == best
    assert found.score == pytest.approx(score, abs=1e-5)


@pytest.mark.parametrize("seed", range(6))
@torch.no_grad()
def test_beam_as_wide_as_the_vocabulary_never_beats_exhaustive_and_scores_honestly(seed: int) -> None:
    # With 5 ids and 4 steps a beam of 5 can prune (8 live prefixes at step 3), so it may miss the best
    # sequence, but the score it reports must be the true score of what it returns.
    model = make_model(seed, src_vocab_size=5, tgt_vocab_size=5, max_len=4)
    src = torch.tensor([[4, EOS]])
    _, best_score = exhaustive_best(model, src, 4, 0.6)
    for hyp in beam_search(model, src, beam_size=5).outputs[0].nbest:
        logprob = float(model_log_probs(model, src, hyp.tokens).sum())
        assert hyp.logprob == pytest.approx(logprob, abs=1e-4)
        assert hyp.score == pytest.approx(logprob / length_penalty(len(hyp.tokens), 0.6), abs=1e-4)
        assert hyp.score <= best_score + 1e-5


def test_same_seed_same_samples_other_seed_other_samples() -> None:
    model, src = make_model(1), make_src(3, batch=4)
    runs = [[o.tokens for o in sample(model, src, seed=s, max_len=15).outputs] for s in (7, 7, 8)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    unseeded = sample(model, src, max_len=15)
    again = sample(model, src, max_len=15, seed=unseeded.params["seed"])  # the used seed is reported
    assert [o.tokens for o in again.outputs] == [o.tokens for o in unseeded.outputs]


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("seed", range(3))
def test_batch_decoding_equals_one_by_one(strategy: str, seed: int) -> None:
    model, src = make_model(seed, n_decoder_layers=2), make_src(seed + 10, batch=4)
    together = STRATEGIES[strategy](model, src, max_len=12).outputs
    for i, out in enumerate(together):
        row = src[i : i + 1, : int((src[i] != PAD).sum())]  # unpadded, alone
        alone = STRATEGIES[strategy](model, row, max_len=12).outputs[0]
        assert out.tokens == alone.tokens
        assert [h.tokens for h in out.nbest] == [h.tokens for h in alone.nbest]
        assert out.best.score == pytest.approx(alone.best.score, abs=1e-4)


def test_default_length_limit_is_source_plus_50_capped_by_max_len() -> None:
    model = make_model(2, max_len=64)
    model.generator.register_forward_hook(lambda m, i, out: out.index_fill(-1, torch.tensor([EOS]), -1e9))
    src = torch.tensor([[5, 6, 7, EOS], [5, 6, EOS, PAD]])
    assert [len(o.tokens) for o in greedy(model, src).outputs] == [54, 53]
    assert [len(o.tokens) for o in greedy(model, src, max_len=7).outputs] == [7, 7]
    assert all(not o.best.finished for o in greedy(model, src, max_len=7).outputs)
    long_src = torch.full((1, 30), 5)
    assert len(beam_search(model, long_src, beam_size=2).outputs[0].tokens) == 64


# ---------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------


def test_greedy_and_sample_traces_tell_the_truth() -> None:
    model, src = make_model(3), make_src(4, batch=2)
    for result in (greedy(model, src, max_len=9), sample(model, src, top_k=4, top_p=0.8, seed=1, max_len=9)):
        for i, out in enumerate(result.outputs):
            row = src[i : i + 1]
            log_probs = model_log_probs(model, row, out.tokens)
            assert [s.token for s in out.steps] == out.tokens
            assert [s.logprob for s in out.steps] == pytest.approx(
                torch.cumsum(log_probs, 0).tolist(), abs=1e-4
            )
            assert out.best.finished == (out.tokens[-1] == EOS)
            assert EOS not in out.tokens[:-1] and PAD not in out.tokens and BOS not in out.tokens
            for step, lp in zip(out.steps, log_probs, strict=True):
                assert step.token_prob == pytest.approx(math.exp(float(lp)), abs=1e-5)
                assert step.probs == sorted(step.probs, reverse=True)
                assert sum(step.kept) <= step.n_kept
                if step.token in step.candidates:
                    assert step.kept[step.candidates.index(step.token)]
                if result.strategy == "sample":
                    assert step.n_kept <= 4
                    assert all(f == 0.0 for f, k in zip(step.filtered, step.kept, strict=True) if not k)
                else:
                    assert step.token == step.candidates[0] and step.n_kept == 1


def test_beam_tree_is_consistent() -> None:
    model, src = make_model(4), make_src(5, batch=2)
    result = beam_search(model, src, beam_size=3, max_len=8)
    for out in result.outputs:
        tree = out.tree
        assert all(len(nodes) <= 3 for nodes in tree)
        assert {n.parent for n in tree[0]} == {0}
        for prev, nodes in itertools.pairwise(tree):
            live = {n.beam: n for n in prev if not n.finished}
            for n in nodes:
                assert n.parent in live  # only live beams have children
                assert n.logprob <= live[n.parent].logprob + 1e-6  # log P only falls
                assert n.score == pytest.approx(n.logprob / length_penalty(n.step, 0.6))
        scores = [h.score for h in out.nbest]
        assert scores == sorted(scores, reverse=True) and len(out.nbest) <= 3
        assert out.best is out.nbest[0]
        for hyp in out.nbest:  # following parents from a hypothesis' last node spells its tokens
            step, beam, tokens = *hyp.node, []
            while step:
                node = next(n for n in tree[step - 1] if n.beam == beam)
                tokens.append(node.token)
                step, beam = step - 1, node.parent
            assert tokens[::-1] == hyp.tokens
        assert [s.token for s in out.steps] == out.best.tokens
        assert all(s.kept[s.candidates.index(s.token)] for s in out.steps if s.token in s.candidates)


# ---------------------------------------------------------------------------------------------
# Registry and translate()
# ---------------------------------------------------------------------------------------------


def test_every_registered_strategy_runs_with_its_declared_defaults() -> None:
    model, src = make_model(), make_src(1, batch=2)
    assert {"greedy", "beam", "sample", "temperature", "top-k", "top-p"} <= set(STRATEGIES)
    for name, strategy in STRATEGIES.items():
        for p in strategy.params:
            assert p.low <= p.default <= p.high
        result = strategy(model, src, max_len=5)
        assert result.strategy == name and len(result.outputs) == 2
    with pytest.raises(ValueError, match="fixes top_k"):
        STRATEGIES["top-p"](model, src, top_k=3)
    with pytest.raises(ValueError, match="greedy"):
        get_strategy("nope")


class FakeTokenizer:
    """Whitespace symbols over a fixed vocabulary (ids 0-3 special)."""

    pad_id, unk_id, bos_id, eos_id = PAD, UNK, BOS, EOS

    def __init__(self, vocab_size: int = 20) -> None:
        self.vocab = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, vocab_size)]

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        return [self.vocab.index(w) if w in self.vocab else UNK for w in text.split()]

    def decode(self, ids) -> str:
        return " ".join(self.vocab[i] for i in ids if i not in (PAD, BOS, EOS))

    def pieces(self, ids) -> list[str]:
        return [self.vocab[i] for i in ids]

    def save(self, directory) -> None:
        raise NotImplementedError


def test_translate_returns_pieces_text_and_attention_of_the_output() -> None:
    model, tok = make_model(5, n_encoder_layers=2, n_decoder_layers=2), FakeTokenizer()
    tr = translate(model, tok, tok, "w5 w6 w7 nonsense", "beam", beam_size=2, max_len=6)
    assert tr.src_ids == [5, 6, 7, UNK, EOS] and tr.src_pieces[-1] == "</s>"
    assert tr.tgt_ids == tr.result.outputs[0].tokens and 1 <= len(tr.tgt_ids) <= 6
    assert tr.tgt_pieces == tok.pieces(tr.tgt_ids) and tr.text == tok.decode(tr.tgt_ids)
    assert tr.decoder_input_ids == [BOS, *tr.tgt_ids[:-1]] and not tr.truncated
    s, t, h = len(tr.src_ids), len(tr.tgt_ids), model.config.n_heads
    assert [a.shape for a in tr.attention.encoder] == [(1, h, s, s)] * 2
    assert [a.shape for a in tr.attention.decoder] == [(1, h, t, t)] * 2
    assert [a.shape for a in tr.attention.cross] == [(1, h, t, s)] * 2
    # query t is the position that produced token t: the greedy output read off one forward pass
    g = translate(model, tok, tok, "w5 w6 w7")
    src = torch.tensor([g.src_ids])
    logits = model(src, torch.tensor([g.decoder_input_ids])).logits[0].clone()
    logits[:, [PAD, BOS]] = -math.inf
    assert logits.argmax(-1).tolist() == g.tgt_ids


def test_translate_refuses_empty_text_and_truncates_long_text() -> None:
    model, tok = make_model(6, max_len=16), FakeTokenizer()
    for text in ("", "   \n\t"):
        with pytest.raises(ValueError, match="nothing to translate"):
            translate(model, tok, tok, text)
    tr = translate(model, tok, tok, " ".join(["w9"] * 40), max_len=3)
    assert tr.truncated and len(tr.src_ids) == 16 and tr.src_ids[-1] == EOS


def test_translate_passes_the_head_mask_through() -> None:
    model, tok = make_model(7, n_encoder_layers=2, n_decoder_layers=2), FakeTokenizer()
    mask = HeadMask.ones(model.config)
    mask.cross[:, 1:] = 0  # keep one cross-attention head per layer
    tr = translate(model, tok, tok, "w4 w8 w9", head_mask=mask, max_len=8)
    src = torch.tensor([tr.src_ids])
    assert tr.tgt_ids == greedy(model, src, head_mask=mask, max_len=8).outputs[0].tokens
    masked_out = model(src, torch.tensor([tr.decoder_input_ids]), need_weights=True, head_mask=mask)
    for got, want in zip(tr.attention.cross, masked_out.attention.cross, strict=True):
        assert torch.allclose(got, want)
    plain = translate(model, tok, tok, "w4 w8 w9", max_len=8)
    assert plain.result.outputs[0].steps[0].probs != tr.result.outputs[0].steps[0].probs


RUNS = [
    ("greedy", {}),
    ("temperature", {"temperature": 1.5, "seed": 3}),
    ("top-k", {"top_k": 3, "seed": 4}),
    ("beam", {"beam_size": 3}),
    ("top-p", {"top_p": 0.8, "seed": 5}),
    ("sample", {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "seed": 6, "max_len": 4}),
]


def test_run_strategies_shares_a_batch_and_equals_each_run_alone() -> None:
    model = make_model(seed=2)
    src = make_src(7, batch=1)
    together = run_strategies(model, src, RUNS, eos_id=EOS)
    assert [r.strategy for r in together] == [name for name, _ in RUNS]
    for (name, params), result in zip(RUNS, together, strict=True):
        alone = STRATEGIES[name](model, src, eos_id=EOS, **params)
        assert result.outputs[0].tokens == alone.outputs[0].tokens, name
        assert result.outputs[0].best.logprob == pytest.approx(alone.outputs[0].best.logprob, abs=1e-4), name
        steps = [(s.candidates, s.kept, s.n_kept) for s in result.outputs[0].steps]
        assert steps == [(s.candidates, s.kept, s.n_kept) for s in alone.outputs[0].steps], name
        assert result.params == alone.params, name
    assert len(together[-1].outputs[0].tokens) <= 4  # its own max_len, decoded in its own group


def test_run_strategies_errors_are_clear() -> None:
    model = make_model()
    with pytest.raises(ValueError, match="one sentence"):
        run_strategies(model, make_src(0, batch=2), [("greedy", {})])
    with pytest.raises(ValueError, match="temperature must be between"):
        run_strategies(model, make_src(0, batch=1), [("greedy", {}), ("temperature", {"temperature": 0})])
    with pytest.raises(ValueError, match="fixes"):
        run_strategies(model, make_src(0, batch=1), [("top-k", {"top_p": 0.5})])


@pytest.mark.parametrize("strategy", ["greedy", "beam", "top-k"])
def test_no_trace_gives_the_same_output_without_candidates(strategy: str) -> None:
    """n_candidates=0 (bulk translation) changes nothing but the recorded candidates."""
    model, src = make_model(seed=3), make_src(5)
    params = {"seed": 1} if strategy == "top-k" else {}
    traced = STRATEGIES[strategy](model, src, max_len=10, **params).outputs
    bare = STRATEGIES[strategy](model, src, max_len=10, n_candidates=0, **params).outputs
    assert [o.tokens for o in bare] == [o.tokens for o in traced]
    assert [o.best.logprob for o in bare] == pytest.approx([o.best.logprob for o in traced])
    if strategy != "beam":
        assert all(step.candidates == [] and step.n_kept == 0 for o in bare for step in o.steps)
        assert any(step.candidates for o in traced for step in o.steps)


@pytest.mark.parametrize(("d_model", "native", "arch", "expected"), [
    (256, True, "transformer", torch.bfloat16),  # the shipped size on a CPU with native bf16
    (256, False, "transformer", None),  # no native bf16: fp32
    (32, True, "transformer", None),  # too narrow to gain
    (256, True, "rnn-bahdanau", None),  # GRU models decode in fp32
])  # fmt: skip
def test_decoding_runs_in_bf16_where_training_would(monkeypatch, d_model, native, arch, expected) -> None:
    from dataclasses import replace

    from visformer import utils
    from visformer.decoding import precision_context

    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: native)
    model = Transformer(tiny_config(d_model=d_model, n_heads=4))
    model.config = replace(model.config, architecture=arch)
    context = precision_context(model)
    assert (context.fast_dtype if context._enabled else None) == expected
    assert not precision_context(model, "fp32")._enabled


@pytest.mark.parametrize("name", ["multi30k-en-de", "en-de"])
def test_bf16_and_fp32_decoding_agree_on_the_shipped_models(monkeypatch, name: str) -> None:
    """bf16 decoding picks the tokens of the reference path (bf16 autocast) for the app's examples, and fp32's
    for all but at most one (multi30k-en-de, trained on image captions, rambles on a lecture sentence)."""
    from pathlib import Path

    from visformer import utils
    from visformer.checkpoint import load_checkpoint
    from visformer.decoding import reference_decoding, translate
    from visformer.explain.examples import EXAMPLES, LECTURE_EXAMPLES

    path = Path(__file__).resolve().parents[1] / "checkpoints" / name
    monkeypatch.setattr(utils, "_cpu_has_bf16", lambda: True)  # bf16 runs (slowly) on any CPU
    ck = load_checkpoint(path)
    sentences = EXAMPLES["en"] + LECTURE_EXAMPLES["en"]
    same, gaps = 0, []
    for text in sentences:
        bf16 = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, text, "greedy", precision="bf16")
        fp32 = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, text, "greedy", precision="fp32")
        with reference_decoding():
            reference = translate(
                ck.model, ck.src_tokenizer, ck.tgt_tokenizer, text, "greedy", precision="fp32"
            )
            autocast = translate(
                ck.model, ck.src_tokenizer, ck.tgt_tokenizer, text, "greedy", precision="bf16"
            )
        assert fp32.tgt_ids == reference.tgt_ids
        assert bf16.tgt_ids == autocast.tgt_ids
        same += bf16.tgt_ids == fp32.tgt_ids
        gaps.append(abs(bf16.output.steps[0].token_prob - fp32.output.steps[0].token_prob))
    assert same >= len(sentences) - 1
    assert 0 < max(gaps) < 0.02  # bf16 did run (the numbers moved), and moved them little


@pytest.mark.parametrize(("name", "lang"), [("en-de", "en"), ("ko-en", "ko")])
def test_int8_weights_pick_fp32s_tokens_on_the_shipped_models(name: str, lang: str) -> None:
    """int8 decoding (what "auto" picks for one sentence of an opus-mt-sized model) picks fp32's tokens for the
    app's examples, with probabilities that moved (int8 did run) but little; where it picks another token, fp32's
    two best were a near-tie at that step: their log-probabilities within 0.2 (int8's rounding moves the logits
    additively, so a tie is measured on them; e.g. 0.499 against 0.428)."""
    from visformer.checkpoint import load_checkpoint
    from visformer.decoding import translate
    from visformer.explain.examples import EXAMPLES, LECTURE_EXAMPLES

    ck = load_checkpoint(Path(__file__).resolve().parents[1] / "checkpoints" / name)
    args = (ck.model, ck.src_tokenizer, ck.tgt_tokenizer)
    sentences = EXAMPLES[lang] + LECTURE_EXAMPLES.get(lang, [])
    same, gaps = 0, []
    for text in sentences:
        int8 = translate(*args, text, "greedy", precision="int8")
        fp32 = translate(*args, text, "greedy", precision="fp32")
        same += int8.tgt_ids == fp32.tgt_ids
        gaps.append(abs(math.log(int8.output.steps[0].token_prob / fp32.output.steps[0].token_prob)))
        if int8.tgt_ids != fp32.tgt_ids:
            pairs = zip(int8.tgt_ids, fp32.tgt_ids, strict=False)
            step = next(
                (i for i, (a, b) in enumerate(pairs) if a != b), min(len(int8.tgt_ids), len(fp32.tgt_ids))
            )
            top = fp32.output.steps[step].probs
            assert math.log(top[0] / top[1]) < 0.2, (text, step, top[:2])  # a near-tie int8's rounding tipped
    assert same >= len(sentences) - 2
    # measured as log-probabilities, like the tie above: int8 shifts logits additively, so a flat first step
    # (ko-en: "드디어 금요일이다", 0.233 in fp32 against 0.299 in int8, a log-ratio of 0.25) moves most in absolute terms
    assert 0 < max(gaps) < 0.3


def test_translate_cleans_its_input_like_the_app(text_checkpoint: Path) -> None:
    from visformer.checkpoint import load_checkpoint
    from visformer.decoding import translate

    ck = load_checkpoint(text_checkpoint)
    args = (ck.model, ck.src_tokenizer, ck.tgt_tokenizer)
    plain = translate(*args, "a dog runs")
    dirty = translate(*args, "a\u202e dog\x07\udcff\n  runs\t")
    assert dirty.src_ids == plain.src_ids and dirty.text == plain.text
    for empty in ("", "  \n", "\x00\u202e"):
        with pytest.raises(ValueError, match="nothing to translate"):
            translate(*args, empty)


def _each_param_just_outside() -> list[tuple[str, str, float]]:
    """(strategy, parameter, a value just below its range) for every declared parameter."""
    from visformer.decoding import STRATEGIES

    return [(s.name, p.name, p.low - p.step) for s in STRATEGIES.values() for p in s.params]


@pytest.mark.parametrize(("strategy", "name", "value"), _each_param_just_outside())
def test_strategies_and_the_app_refuse_the_same_out_of_range_values(
    strategy: str, name: str, value: float
) -> None:
    import torch

    from visformer.classroom.inputs import InputError, check_decoding_params
    from visformer.decoding import get_strategy

    model = Transformer(tiny_config()).eval()
    src = torch.tensor([[5, 6, 7, 3]])  # (1, S)
    with pytest.raises(ValueError, match=f"{name} must be between") as api:
        get_strategy(strategy)(model, src, **{name: value})
    with pytest.raises(InputError) as app:
        check_decoding_params(strategy, {name: value})
    assert str(app.value) == str(api.value)


def test_top_k_sampling_refuses_k_0_and_the_app_offers_k_from_1() -> None:
    import torch

    from pages import _views as schema
    from visformer.decoding import get_strategy

    model = Transformer(tiny_config()).eval()
    with pytest.raises(ValueError, match="top_k must be between 1 and"):
        get_strategy("top-k")(model, torch.tensor([[5, 6, 3]]), top_k=0, seed=0)
    assert schema.VIEW_PARAMS[schema.decoding_param_key("top-k", "top_k")].lo == 1
    assert get_strategy("sample")(model, torch.tensor([[5, 6, 3]]), top_k=0, seed=0).params["top_k"] == 0
