"""Decoding strategies that show their work: greedy, beam search and sampling, each with a trace.

Every strategy is a pure `@torch.no_grad()` function of (model, src (B, S)) that decodes the whole
batch with the key/value cache (each step feeds only the newest token) and returns a `DecodeResult`:
the output of every sentence plus what the strategy saw at each step, so the app can draw it.

Conventions: special ids pad=0 unk=1 bos=2 eos=3 unless a tokenizer says otherwise; pad and bos are
never generated (their logits are set to -inf before anything else); an output is the generated
tokens without bos, ending in eos when one was produced. Default length limit: source length + 50
target tokens (eos included), capped by the model's max_len.

Modules by role: `filters` (temperature, top-k, top-p), `trace` (what a strategy returns), `search`
(the strategies and their loop), `fast` (the decoder step on prepared weights with a preallocated
cache), `registry` (names and parameters for the UI), `translate` (one call for the app).
"""

from .fast import FastDecoder, decoding_dtype, forget_weights, reference_decoding
from .filters import (
    Filtered,
    apply_temperature,
    draw,
    filter_distribution,
    length_penalty,
    top_k_filter,
    top_p_filter,
)
from .registry import MAX_LEN, STRATEGIES, Param, Strategy, get_strategy, run_strategies
from .search import (
    EXTRA_TARGET_TOKENS,
    N_CANDIDATES,
    beam_search,
    forbid_tokens,
    forbidden_ids,
    greedy,
    precision_context,
    sample,
)
from .trace import BeamNode, DecodeResult, Hypothesis, Output, Step
from .translate import Translation, output_attention, translate

__all__ = [
    "EXTRA_TARGET_TOKENS",
    "MAX_LEN",
    "N_CANDIDATES",
    "STRATEGIES",
    "BeamNode",
    "DecodeResult",
    "FastDecoder",
    "forget_weights",
    "Filtered",
    "Hypothesis",
    "Output",
    "Param",
    "Step",
    "Strategy",
    "Translation",
    "apply_temperature",
    "beam_search",
    "decoding_dtype",
    "draw",
    "filter_distribution",
    "forbid_tokens",
    "forbidden_ids",
    "get_strategy",
    "greedy",
    "length_penalty",
    "output_attention",
    "precision_context",
    "reference_decoding",
    "run_strategies",
    "sample",
    "top_k_filter",
    "top_p_filter",
    "translate",
]
