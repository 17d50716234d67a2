"""Attention page: translate a sentence and look at every attention weight the model used."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer.classroom import catalogue
from visformer.classroom.inputs import escape_markdown
from visformer.explain import analysis as an
from visformer.explain import attention as fg
from visformer.explain import kinds
from visformer.explain import views as sup

session.ensure_frame()

KEYS = ["sentence", "view", "layer", "head", "tab", "step", "ablate", "stat", "dk"]
TABS = sup.ATTENTION_TABS
DK_OPTIONS = [2**i for i in range(11)]  # 1 .. 1024
STAT_HELP = {
    "entropy": "How spread out a head's attention is (nats; log of the number of keys = perfectly uniform).",
    "diagonal": "Weight on the key at the query's own position.",
    "previous": "Weight on the key just before the query's position.",
    "first": "Weight on the first key.",
    "last": "Weight on the last key (the source's </s> for encoder and cross attention).",
    "alignment": "Share of target tokens whose strongest source token is the true one (task examples).",
}

# ---------------------------------------------------------------------------------------------
# Cached figures (keyed on checkpoint, sentence and view)
# ---------------------------------------------------------------------------------------------


def _masked(kind: str, n_queries: int, n_keys: int):
    """Cells this kind of attention hides (None when it hides none)."""
    return kinds.KIND[kind].mask(n_queries, n_keys)


@st.cache_data(max_entries=64, show_spinner=False)
def head_figures(
    path: str, stamp: float, sentence: str, ablate: tuple[str, ...], kind: str, layer: int, head: int
):
    """(one head, head average of the layer) heatmaps."""
    view = loading.translation(path, stamp, sentence, ablate)
    stack = view.stack(kind)
    queries, keys = view.labels(kind)
    masked = _masked(kind, len(queries), len(keys))
    name = kinds.KIND[kind].short
    off = " (switched off)" if sup.head_code(kind, layer, head) in ablate else ""
    one = fg.attention_heatmap(
        stack[layer, head], queries, keys, masked=masked, title=f"{name} · layer {layer} · head {head}{off}"
    )
    avg = fg.attention_heatmap(
        an.head_average(stack)[layer],
        queries,
        keys,
        masked=masked,
        title=f"{name} · layer {layer} · mean of {stack.shape[1]} heads",
    )
    return one, avg


@st.cache_data(max_entries=32, show_spinner="Drawing every head…")
def grid_figure(path: str, stamp: float, sentence: str, kind: str, layer: int, head: int) -> go.Figure:
    """All layers × heads of one kind, the selected head outlined."""
    view = loading.translation(path, stamp, sentence)
    queries, keys = view.labels(kind)
    return fg.attention_grid(
        view.stack(kind),
        queries,
        keys,
        masked=_masked(kind, len(queries), len(keys)),
        highlight=(layer, head),
        title=f"{kinds.KIND_TITLES[kind]}: every layer and head",
    )


@st.cache_data(max_entries=32, show_spinner=False)
def attention_csv(path: str, stamp: float, sentence: str, kind: str) -> str:
    """Every weight of one kind as a long CSV table."""
    view = loading.translation(path, stamp, sentence)
    queries, keys = view.labels(kind)
    return an.attention_frame(view.stack(kind), queries, keys, kind).to_csv(index=False)


@st.cache_data(max_entries=32, show_spinner=False)
def statistics(path: str, stamp: float, sentence: str, kind: str):
    """Per-head statistics of one kind."""
    return an.head_statistics(loading.translation(path, stamp, sentence).stack(kind))


@st.cache_data(max_entries=4, show_spinner=False)
def saturation_curve():
    """Largest softmax weight vs d_k, scaled and unscaled."""
    return an.saturation_curve(DK_OPTIONS)


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def _use_example() -> None:
    """Copy the clicked example into the sentence box."""
    state = st.session_state
    if state.get("example_pick"):
        state["sentence"] = state["example_pick"]
        state["step"] = 0
    state["example_pick"] = None


def _switch_off(code: str) -> None:
    """Add one head to the switched-off set."""
    st.session_state["ablate"] = sorted({*st.session_state.get("ablate", []), code})


def one_head_section(key: tuple, kind: str, layer: int, head: int) -> None:
    """The chosen head beside its layer's average, and the CSV download."""
    one, avg = head_figures(*key, (), kind, layer, head)
    left, right = st.columns(2)
    with left:
        widgets.chart(one, f"attention-{kind}-L{layer}-H{head}")
    with right:
        widgets.chart(avg, f"attention-{kind}-L{layer}-average")
    if kind == "decoder":
        st.caption(
            "Grey hatched cells are masked: while producing a word the decoder may not look at later ones."
        )
    widgets.csv_button(lambda: attention_csv(*key, kind), f"attention-{kind}")  # built only when clicked


def steps_section(key: tuple, view: sup.TranslationView, layer: int, head: int) -> None:
    """Slide over output steps: which source tokens the decoder read to produce each token."""
    n_steps = len(view.output_pieces)
    step = widgets.index_slider("Output step", n_steps, "step")
    produced = view.output_pieces[step]
    st.markdown("Output: " + widgets.pieces_markdown(view.output_pieces, highlight=step))
    st.markdown(
        "Source: "
        + widgets.pieces_markdown(view.src_pieces, highlight=int(view.cross[layer, :, step].mean(0).argmax()))
    )
    left, right = st.columns(2)
    with left:
        fig = fg.step_figure(
            view.cross[layer, :, step].mean(0),
            view.src_pieces,
            title=f"Producing “{produced}”: layer {layer}, average of heads",
        )
        widgets.chart(fig, f"step-{step}-L{layer}-average")
    with right:
        fig = fg.step_figure(
            view.cross[layer, head, step],
            view.src_pieces,
            title=f"Producing “{produced}”: layer {layer}, head {head}",
        )
        widgets.chart(fig, f"step-{step}-L{layer}-H{head}")


def statistics_section(key: tuple, task: str | None) -> None:
    """Entropy and pattern scores per head for all three kinds (and task alignment for toy tasks)."""
    options = list(STAT_HELP) if task else [s for s in STAT_HELP if s != "alignment"]
    if st.session_state.get("stat") not in options:
        st.session_state["stat"] = "entropy"
    stat = st.radio("Statistic", options, key="stat", persist_state=session.PERSIST, horizontal=True)
    st.caption(STAT_HELP[stat])
    if stat == "alignment":
        grid = loading.task_alignment(key[0], key[1], task)
        st.markdown(f"Cross-attention heads on 32 held-out **{task}** examples (teacher-forced):")
        widgets.chart(
            fg.metric_heatmap(
                grid, value_name="hits", zmin=0, zmax=1, title="Agreement with the task's true alignment"
            ),
            "heads-alignment",
        )
        return
    columns = st.columns(3)
    for column, kind in zip(columns, kinds.KINDS, strict=True):
        stats = statistics(*key, kind)
        grid = an.metric_grid(stats, stat)
        zmax = None if stat == "entropy" else 1.0
        with column:
            widgets.chart(
                fg.metric_heatmap(grid, value_name=stat, zmin=0, zmax=zmax, title=kinds.KIND_TITLES[kind]),
                f"heads-{stat}-{kind}",
            )
            with st.expander("Table"):
                st.dataframe(stats.round(3), hide_index=True)


def ablation_section(
    key: tuple,
    view: sup.TranslationView,
    sizes: dict[str, int],
    n_heads: int,
    kind: str,
    layer: int,
    head: int,
) -> None:
    """Switch heads off and compare translation and attention with the original."""
    codes = sup.all_head_codes(sizes, n_heads)
    st.session_state["ablate"] = [c for c in st.session_state.get("ablate", []) if c in codes]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    off = left.multiselect(
        "Switch these heads off",
        codes,
        key="ablate",
        persist_state=session.PERSIST,
        format_func=sup.head_label,
        placeholder="Choose heads, or use the button for the head selected above",
    )
    selected = sup.head_code(kind, layer, head)
    right.button(
        "Switch off this head",
        on_click=_switch_off,
        args=(selected,),
        disabled=selected in off,
        icon=":material/block:",
        width="stretch",
        help="Adds the head chosen with Layer and Head above.",
    )
    off = tuple(sorted(off))
    ablated = loading.translation(*key, off)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Original:** {escape_markdown(view.text)}")
        widgets.chart(
            head_figures(*key, (), kind, layer, head)[0],
            f"ablation-original-{kind}-L{layer}-H{head}",
            key="ablation-original",
        )
    with right:
        label = f"{len(off)} head{'s' if len(off) != 1 else ''} off"
        st.markdown(f"**{label}:** {escape_markdown(ablated.text)}")
        widgets.chart(
            head_figures(*key, off, kind, layer, head)[0],
            f"ablation-{kind}-L{layer}-H{head}",
            key="ablation-ablated",
        )
    if off:
        (st.success if ablated.text == view.text else st.warning)(
            "Same translation." if ablated.text == view.text else "The translation changed."
        )


def inside_section(key: tuple, view: sup.TranslationView, kind: str, layer: int, head: int) -> None:
    """softmax(QKᵀ/√d_k)V for the chosen head, step by step, and why the √d_k is there."""
    inside = loading.internals(key[0], key[1], tuple(view.src_ids), tuple(view.query_ids), kind, layer, head)
    queries, keys = view.labels(kind)
    d_k = inside.q.shape[1]
    dims = [f"{j}" for j in range(d_k)]
    st.markdown(f"Layer {layer}, head {head} of the {kinds.KIND_TITLES[kind].lower()}; d_k = {d_k}.")
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")
    columns = st.columns(3)
    for column, (name, matrix, rows) in zip(
        columns,
        (("Q (queries)", inside.q, queries), ("K (keys)", inside.k, keys), ("V (values)", inside.v, keys)),
        strict=True,
    ):
        with column:
            fig = fg.matrix_heatmap(matrix, rows, dims, title=name, value_name=name[0], x_title="dimension")
            widgets.chart(fig, f"inside-{name[0]}")
    masked = inside.masked if inside.masked.any() else None
    columns = st.columns(3)
    steps = (
        ("QKᵀ", inside.scores, "score"),
        (f"QKᵀ / √{d_k}", inside.scaled, "scaled"),
        ("softmax (attention weights)", inside.weights, "weight"),
    )
    for column, (name, matrix, value_name) in zip(columns, steps, strict=True):
        with column:
            if value_name == "weight":
                fig = fg.attention_heatmap(matrix, queries, keys, masked=masked, title=name)
            else:
                fig = fg.matrix_heatmap(
                    matrix, queries, keys, masked=masked, title=name, value_name=value_name
                )
            widgets.chart(fig, f"inside-{value_name}")
    left, right = st.columns([1, 2])
    fig = fg.matrix_heatmap(
        inside.output,
        queries,
        dims,
        title="weights · V (this head's output)",
        value_name="out",
        x_title="dimension",
    )
    with left:
        widgets.chart(fig, "inside-output")
    right.markdown(
        "Each output row is a weighted average of the rows of **V**, with the softmax row as the weights. "
        "The model concatenates the outputs of all heads and multiplies them by W^O."
    )

    st.markdown("##### Why divide by √d_k?")
    st.markdown(
        "Dot products of random vectors grow like √d_k. Without the scaling, large scores push softmax "
        "towards one-hot, where its gradient vanishes. Slide d_k and compare."
    )
    if st.session_state.get("dk") not in DK_OPTIONS:
        st.session_state["dk"] = 64
    dk = st.select_slider("d_k", DK_OPTIONS, key="dk", persist_state=session.PERSIST)
    unscaled, scaled = an.saturation_example(dk)
    left, right = st.columns(2)
    with left:
        widgets.chart(fg.softmax_bars(unscaled, scaled, dk), "softmax-saturation-example")
    with right:
        widgets.chart(fg.saturation_figure(saturation_curve()), "softmax-saturation-curve")


# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


def main() -> None:
    """Sentence → translation → views."""
    state = st.session_state
    st.title("Attention")
    loaded = loading.current_checkpoint()
    if loaded is None:
        session.sync_url(KEYS)
        return
    choice, ck = loaded
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    examples = loading.offer_examples(choice, ck)

    if ck.task:
        from visformer.tasks import get_task

        st.markdown(f"Toy task **{ck.task}**: {get_task(ck.task).description}")
    st.text_input(
        "Sentence to translate",
        key="sentence",
        persist_state=session.PERSIST,
    )
    if examples:
        st.pills(
            "Examples", examples, key="example_pick", on_change=_use_example, label_visibility="collapsed"
        )
    try:
        sentence = loading.fitted_sentence(ck, state["sentence"])
        view = loading.translation(*key, sentence)
    except ValueError as exc:
        st.error(str(exc))
        session.sync_url(KEYS)
        return
    key = (*key, sentence)
    if view.truncated:
        st.warning("The sentence was longer than the model's max_len and was cut.")
    st.markdown(f"#### → {escape_markdown(view.text) or '(empty)'}")
    st.markdown("Source pieces: " + widgets.pieces_markdown(view.src_pieces))
    st.markdown("Output pieces: " + widgets.pieces_markdown(view.output_pieces))

    sizes = kinds.layer_counts(ck.model_config)
    n_heads = ck.model_config.n_heads
    c1, c2, c3 = st.columns([2, 1, 1])
    kind = c1.radio(
        "Attention",
        kinds.KINDS,
        key="view",
        persist_state=session.PERSIST,
        horizontal=True,
        format_func=kinds.KIND_TITLES.get,
    )
    layer = widgets.index_slider("Layer", sizes[kind], "layer", c2)
    head = widgets.index_slider("Head", n_heads, "head", c3)

    if state.get("tab") not in TABS:
        state["tab"] = TABS[0]
    tabs = dict(zip(TABS, st.tabs(TABS, key="tab", on_change="rerun"), strict=True))
    with tabs["One head"]:
        if tabs["One head"].open:
            one_head_section(key, kind, layer, head)
    with tabs["All heads"]:
        if tabs["All heads"].open:
            widgets.chart(grid_figure(*key, kind, layer, head), f"attention-{kind}-all-heads")
            st.caption(
                "Layers top to bottom, heads left to right; the outlined head is the one selected above. "
                "Hover for tokens and weights."
            )
    with tabs["Step through generation"]:
        if tabs["Step through generation"].open:
            steps_section(key, view, min(layer, sizes["cross"] - 1), head)
    with tabs["Head statistics"]:
        if tabs["Head statistics"].open:
            statistics_section(key, ck.task)
    with tabs["Ablation"]:
        if tabs["Ablation"].open:
            ablation_section(key, view, sizes, n_heads, kind, layer, head)
    with tabs["Inside one head"]:
        if tabs["Inside one head"].open:
            inside_section(key, view, kind, layer, head)
    session.sync_url(KEYS)


main()
