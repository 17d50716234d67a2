"""Decoding page: one sentence, several strategies side by side; steps, the beam tree and samples."""

from __future__ import annotations

from typing import Any

import streamlit as st
import torch

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer import i18n
from visformer.checkpoint import Checkpoint
from visformer.classroom import catalogue
from visformer.classroom.hosting import HostedLimits
from visformer.classroom.inputs import check_decoding_params, escape_markdown
from visformer.data import encode_source
from visformer.decoding import STRATEGIES, Translation, get_strategy, run_strategies
from visformer.explain import decoding as dfig
from visformer.explain import style
from visformer.explain import views as sup
from visformer.model import AttentionMaps

session.ensure_frame()

KEYS = ["sentence", *schema.DECODING_PARAMS]  # the view a link restores
TABS = schema.DECODING_TABS  # ids (URL values); labels decoding.tab.ID in the session's language
SAMPLERS = list(schema.SAMPLERS)

# ---------------------------------------------------------------------------------------------
# Cached decoding (keyed on checkpoint, sentence, strategy and parameters)
# ---------------------------------------------------------------------------------------------


def source_ids(ck: Checkpoint, sentence: str, n: int = 1) -> tuple[list[int], torch.Tensor]:
    """The sentence's source ids (cut to fit, then </s>) and n copies of them as a tensor (n, S)."""
    ids, _ = encode_source(ck.src_tokenizer, sentence, ck.model_config.max_len)
    device = next(ck.model.parameters()).device
    return ids, torch.tensor([ids] * n, dtype=torch.long, device=device)


Runs = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]  # ((strategy, params), ...)


@st.cache_data(max_entries=128, show_spinner=False)
def decode_all(path: str, stamp: float, sentence: str, runs: Runs) -> list[dfig.StrategyView]:
    """Each strategy's output, steps and (beam) tree for one sentence; every strategy shares one decoder.

    Runs the strategies alone: `translate()` would add a teacher-forced pass for the attention maps, which
    this page never draws (about 14% of the CPU time of a comparison).
    """
    ck = loading.load(path, stamp)
    src_tok, tgt_tok = ck.src_tokenizer, ck.tgt_tokenizer
    src_ids, src = source_ids(ck, sentence)
    results = run_strategies(
        ck.model,
        src,
        [(name, dict(params)) for name, params in runs],
        bos_id=tgt_tok.bos_id,
        eos_id=tgt_tok.eos_id,
    )
    views = []
    for (name, params), result in zip(runs, results, strict=True):
        tgt_ids = result.outputs[0].tokens
        translation = Translation(
            src_ids, src_tok.pieces(src_ids), tgt_ids, tgt_tok.pieces(tgt_ids), tgt_tok.decode(tgt_ids),
            attention=AttentionMaps(), result=result, bos_id=tgt_tok.bos_id,
        )  # fmt: skip
        views.append(dfig.strategy_view(translation, tgt_tok, name, dict(params)))
    return views


def decode(
    path: str, stamp: float, sentence: str, strategy: str, params: tuple[tuple[str, Any], ...]
) -> dfig.StrategyView:
    """One strategy's view (cached through decode_all)."""
    return decode_all(path, stamp, sentence, ((strategy, params),))[0]


@st.cache_data(max_entries=32, show_spinner=False)
def samples(
    path: str, stamp: float, sentence: str, strategy: str, params: tuple[tuple[str, Any], ...], n: int
) -> tuple[list[str], list[float]]:
    """n samples of one sampling strategy, drawn as one batch from one seeded generator: texts and log P."""
    ck = loading.load(path, stamp)
    _, src = source_ids(ck, sentence, n)
    tgt_tok = ck.tgt_tokenizer
    result = get_strategy(strategy)(
        ck.model, src, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id, **dict(params)
    )
    outputs = result.outputs
    texts = [sup.readable_text(tgt_tok.decode(o.tokens), tgt_tok.pieces(o.tokens)) for o in outputs]  # no "�"
    return texts, [float(o.best.logprob) for o in outputs]


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


def strategy_text(strategy: str) -> str:
    """What a strategy does, in this session's language."""
    return session.tr(f"decoding.strategy.{strategy}")


def param_help(p) -> str:
    """A parameter's help in this session's language (the package's English text when there is no key)."""
    key = f"decoding.param.{p.name}"
    return session.tr(key) if i18n.has(key) else p.help


def param_widgets(strategy: str, limits: HostedLimits) -> None:
    """Inputs for every parameter a strategy exposes (values kept in session state)."""
    chosen = get_strategy(strategy)
    st.markdown(f"**{strategy}**")
    st.caption(strategy_text(strategy))
    for p in chosen.params:
        key = schema.decoding_param_key(strategy, p.name)
        low, high = p.low, p.high
        if p.name == "beam_size":
            high = min(high, limits.max_beam_size)
        value = st.session_state.get(key, p.default)
        st.session_state[key] = (
            int(schema.clamp(value, low, high)) if p.is_int else min(max(float(value), low), high)
        )
        if p.is_int:
            st.number_input(p.name, int(low), int(high), step=int(p.step), key=key, help=param_help(p),
                            persist_state=session.PERSIST)  # fmt: skip
        else:
            st.slider(p.name, float(low), float(high), step=float(p.step), key=key, help=param_help(p),
                      persist_state=session.PERSIST)  # fmt: skip
    if not chosen.params:
        st.caption(session.tr("decoding.no_params"))


def params_of(strategy: str, limits: HostedLimits, drop: tuple[str, ...] = ()) -> tuple[tuple[str, Any], ...]:
    """The strategy's parameters from session state (defaults where unset), checked against the limits."""
    chosen = get_strategy(strategy)
    raw = {
        name: st.session_state.get(schema.decoding_param_key(strategy, name), value)
        for name, value in chosen.defaults().items()
        if name not in drop
    }
    return tuple(sorted(check_decoding_params(strategy, raw, limits).items()))


def vary_seeds(strategies: list[str]) -> None:
    """Give each sampling strategy its own seed (0, 1, 2, …): a callback of the seed note's button."""
    for i, strategy in enumerate(s for s in strategies if s in dfig.SAMPLING):
        st.session_state[schema.decoding_param_key(strategy, "seed")] = i


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def comparison_section(views: list[dfig.StrategyView], reference: str, n_allowed: int) -> None:
    """Table and bar chart of every chosen strategy's output, and what the sampling filters did."""
    table = dfig.comparison_table(views, reference, session.lang())
    widths = {"strategy": "medium", "output": "large"}
    columns = {
        name: st.column_config.Column(session.tr(dfig.COLUMN_KEYS[name]), width=widths.get(name, "small"),
                                      help=session.tr(dfig.COLUMN_KEYS[name] + "_help"))
        for name in table.columns
    }  # fmt: skip
    st.dataframe(table, hide_index=True, width="stretch", column_config=columns)
    if reference.strip():
        st.caption(session.tr("decoding.bleu_caption"))
    widgets.chart(dfig.comparison_figure(views, session.lang()), "decoding-comparison")
    sampled = [v for v in views if v.strategy in dfig.SAMPLING]
    if sampled:
        st.caption(" ".join(dfig.filter_note(v, n_allowed, session.lang()) for v in sampled))
    for seed, group in dfig.shared_seeds(views).items():
        same = len({v.text for v in group}) == 1
        names = ", ".join(v.strategy for v in group)
        st.info(session.tr("decoding.same_seed", seed=seed, names=names)
                + (" " + session.tr("decoding.same_seed_same") if same else ""))  # fmt: skip
        st.button(session.tr("decoding.vary_seeds"), key=f"dec_vary_seeds_{seed}", on_click=vary_seeds,
                  args=([v.strategy for v in views],), icon=":material/casino:")  # fmt: skip


def step_section(views: list[dfig.StrategyView]) -> None:
    """For one strategy and step: candidates before and after the filters, the kept set, the choice."""
    names = [v.strategy for v in views]
    labels = {v.strategy: v.label(session.lang()) for v in views}
    state = st.session_state
    if state.get("dec_step_strategy") not in names:
        state["dec_step_strategy"] = names[0]
    left, right = st.columns([1, 2])
    name = left.selectbox(session.tr("decoding.strategy"), names, key="dec_step_strategy",
                          persist_state=session.PERSIST, format_func=labels.get)  # fmt: skip
    view = views[names.index(name)]
    with right:
        step = widgets.index_slider(
            session.tr("decoding.output_step"), len(view.steps), "dec_step", from_one=True
        )
    st.markdown(session.tr("decoding.output") + " " + widgets.pieces_markdown(view.pieces, highlight=step))
    s = view.steps[step]
    title = session.tr(
        "decoding.step_title", step=step + 1, n=s.n_kept, token=style.escape(s.candidates[s.chosen])
    )  # steps count from 1 on screen, from 0 in the code and the URL
    widgets.chart(
        dfig.candidates_figure(s, title=title, lang=session.lang()),
        f"decoding-step-{view.strategy}-{step + 1}",
    )
    note = session.tr(
        f"decoding.note.{view.strategy}" if view.strategy in ("greedy", "beam") else "decoding.note.sample"
    )
    st.caption(note + " " + session.tr("decoding.bars", logp=f"{s.logprob:.3f}"))


def beam_section(key: tuple, sentence: str, limits: HostedLimits) -> None:
    """The beam search tree and its n best hypotheses."""
    params = params_of("beam", limits)
    view = decode(*key, sentence, "beam", params)
    output = escape_markdown(view.text) or session.tr("decoding.empty")
    st.markdown(f"**{view.label(session.lang())}** → {output}")
    widgets.chart(dfig.beam_tree_figure(view.tree, view.best_node, lang=session.lang()), "beam-tree")
    st.caption(session.tr("decoding.beam_caption"))
    cols = [session.tr(k) for k in ("decoding.col.rank", "decoding.col.hypothesis", "decoding.col.logp",
                                    "decoding.col.score")]  # fmt: skip
    rows = [dict(zip(cols, (i + 1, t or session.tr("decoding.empty"), round(lp, 3), round(sc, 3)), strict=True))
            for i, (t, lp, sc) in enumerate(view.nbest)]  # fmt: skip
    st.dataframe(rows, hide_index=True, width="stretch")


def samples_section(key: tuple, sentence: str, selected: list[str], limits: HostedLimits) -> None:
    """N samples with a seed and how diverse they are."""
    state = st.session_state
    offered = [s for s in selected if s in SAMPLERS] or ["temperature"]
    if state.get("dec_sampler") not in SAMPLERS:
        state["dec_sampler"] = offered[0]
    c1, c2, c3 = st.columns(3)
    strategy = c1.selectbox(
        session.tr("decoding.sampler"), SAMPLERS, key="dec_sampler", persist_state=session.PERSIST
    )
    state["dec_n"] = schema.clamp(state.get("dec_n", 10), 2, limits.max_samples)
    n = c2.slider(
        session.tr("decoding.n_samples"), 2, limits.max_samples, key="dec_n", persist_state=session.PERSIST
    )
    state.setdefault("dec_seed", 0)
    seed = c3.number_input(session.tr("decoding.seed"), 0, 2**31 - 1, key="dec_seed", persist_state=session.PERSIST,
                           help=session.tr("decoding.seed_help"))  # fmt: skip
    params = (*params_of(strategy, limits, drop=("seed",)), ("seed", int(seed)))
    with st.spinner(session.tr("decoding.drawing")):
        texts, logprobs = samples(*key, sentence, strategy, tuple(sorted(params)), n)
    d = dfig.diversity(texts)
    m = st.columns(4)
    m[0].metric(session.tr("decoding.distinct"), f"{d.distinct} / {d.n}")
    m[1].metric("distinct-1", f"{d.distinct_1:.2f}", help=session.tr("decoding.distinct1_help"))
    m[2].metric("distinct-2", f"{d.distinct_2:.2f}", help=session.tr("decoding.distinct2_help"))
    m[3].metric("self-BLEU", f"{d.self_bleu:.1f}", help=session.tr("decoding.self_bleu_help"))
    widgets.chart(dfig.samples_figure(texts, logprobs, session.lang()), "decoding-samples")
    st.caption(session.tr("decoding.samples_params", params=dfig.params_label(strategy, dict(params))))


# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


def _tab_picked() -> None:
    """The tab widget's callback: keep the id (URL value) of the picked tab in dec_tab."""
    shown = st.session_state.get("_dec_tab_shown")
    st.session_state["dec_tab"] = next(
        (tab for tab in TABS if session.tr(f"decoding.tab.{tab}") == shown), TABS[0]
    )


def main() -> None:
    """Sentence and strategies → comparison, step view, beam tree, samples."""
    state = st.session_state
    limits = loading.limits()
    st.title(session.tr("decoding.title"))
    st.markdown(session.tr("decoding.intro"))
    loaded = loading.current_checkpoint()
    if loaded is None:
        return
    choice, ck = loaded
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    loading.offer_examples(choice, ck)
    left, right = st.columns(2)
    widgets.sentence_input(session.tr("decoding.sentence"), left)
    reference = right.text_input(session.tr("decoding.reference"), key="dec_reference",
                                 persist_state=session.PERSIST)  # fmt: skip
    try:
        sentence = loading.fitted_sentence(ck, state.get("sentence", ""))
    except ValueError as exc:
        st.error(session.error(exc))
        session.sync_url(KEYS)
        return

    names = {s: dfig.params_label(s, {}, session.lang()) for s in STRATEGIES}  # in the interface language
    selected = st.multiselect(session.tr("decoding.strategies"), list(STRATEGIES), key="dec_strategies",
                              persist_state=session.PERSIST, help=session.tr("decoding.strategies_help"),
                              format_func=names.get)  # fmt: skip
    if not selected:
        st.info(session.tr("decoding.choose"))
        session.sync_url(KEYS)
        return
    with st.expander(session.tr("decoding.parameters"), expanded=False, icon=":material/tune:"):
        for column, strategy in zip(st.columns(len(selected)), selected, strict=True):
            with column:
                param_widgets(strategy, limits)

    runs = tuple((strategy, params_of(strategy, limits)) for strategy in selected)
    try:
        with st.spinner(session.tr("decoding.decoding")):
            views = decode_all(*key, sentence, runs)
    except ValueError:  # name the strategy whose parameters are wrong
        views = []
        for strategy, params in runs:
            try:
                views.append(decode(*key, sentence, strategy, params))
            except ValueError as exc:
                st.error(f"{strategy}: {session.error(exc)}")
    if views:
        comparison_section(views, reference, dfig.allowed_tokens(ck.tgt_tokenizer))
    if state.get("dec_tab") not in TABS:
        state["dec_tab"] = TABS[0]
    labels = [session.tr(f"decoding.tab.{tab}") for tab in TABS]
    state["_dec_tab_shown"] = labels[TABS.index(state["dec_tab"])]
    tabs = dict(zip(TABS, st.tabs(labels, key="_dec_tab_shown", on_change=_tab_picked), strict=True))
    with tabs["steps"]:
        if tabs["steps"].open and views:
            step_section(views)
    with tabs["beam"]:
        if tabs["beam"].open:
            beam_section(key, sentence, limits)
    with tabs["samples"]:
        if tabs["samples"].open:
            samples_section(key, sentence, selected, limits)
    session.sync_url(KEYS)


main()
