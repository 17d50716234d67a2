"""Attention page: translate a sentence and look at every attention weight the model used."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from pages._attention_parts import axis_labels, inside_section, kind_name, tr, where, word_section
from visformer.architectures import Family, architecture
from visformer.classroom import catalogue
from visformer.classroom.inputs import escape_markdown
from visformer.explain import analysis as an
from visformer.explain import attention as fg
from visformer.explain import comparison as cmp
from visformer.explain import kinds
from visformer.explain import views as sup
from visformer.explain.style import escape
from visformer.models import attention_layers
from visformer.tokenizer import BOS_ID

session.ensure_frame()

TABS = schema.ATTENTION_TABS  # ids (URL values); labels attention.tab.ID in the session's language
KEYS = ["sentence", "view", "layer", "head", "tab", "step", "ablate", "stat", "dk", "word", "tword"]
COMPACT_FROM = 32  # heads of one kind from which the all-heads grid opens compact (OPUS-MT: 6 x 8 = 48)
STATS = ("entropy", "diagonal", "previous", "first", "last", "alignment")
CONFIDENCE_CHIPS = (
    ":red-background[**{}**]",
    ":orange-background[{}]",
    "`{}`",
)  # by analysis.confidence_level


# ---------------------------------------------------------------------------------------------
# Cached numbers and figures (keyed on checkpoint, sentence, view and language)
# ---------------------------------------------------------------------------------------------


def _masked(kind: str, n_queries: int, n_keys: int):
    """Cells this kind of attention hides (None when it hides none)."""
    return kinds.KIND[kind].mask(n_queries, n_keys)


@st.cache_data(max_entries=64, show_spinner=False)
def head_figures(
    path: str,
    stamp: float,
    sentence: str,
    ablate: tuple[str, ...],
    kind: str,
    layer: int,
    head: int,
    lang: str,
):
    """(one head, head average of the layer) heatmaps."""
    view = loading.translation(path, stamp, sentence, ablate)
    stack = view.stack(kind)
    queries, keys = axis_labels(view, kind)
    masked = _masked(kind, len(queries), len(keys))
    name = kind_name(kind, short=True)
    off = tr("switched_off") if sup.head_code(kind, layer, head) in ablate else ""
    one = fg.attention_heatmap(
        stack[layer, head],
        queries,
        keys,
        masked=masked,
        title=f"{name} · {where(layer, head)}{off}",
        lang=lang,
    )
    avg = fg.attention_heatmap(
        an.head_average(stack)[layer],
        queries,
        keys,
        masked=masked,
        title=f"{name} · {where(layer)} · {tr('mean_of', n=stack.shape[1])}",
        lang=lang,
    )
    return one, avg


@st.cache_data(max_entries=32, show_spinner=False)
def grid_figure(
    path: str, stamp: float, sentence: str, kind: str, layer: int, head: int, lang: str, compact: bool = False
) -> go.Figure:
    """All layers × heads of one kind and each layer's head average, the selected head outlined."""
    view = loading.translation(path, stamp, sentence)
    queries, keys = axis_labels(view, kind)
    return fg.attention_grid(
        view.stack(kind),
        queries,
        keys,
        masked=_masked(kind, len(queries), len(keys)),
        highlight=(layer, head),
        average=True,
        compact=compact,
        title=tr("grid_title", kind=kind_name(kind)),
        lang=lang,
    )


@st.cache_data(max_entries=32, show_spinner=False)
def attention_csv(path: str, stamp: float, sentence: str, kind: str) -> str:
    """Every weight of one kind as a long CSV table."""
    view = loading.translation(path, stamp, sentence)
    return an.attention_frame(view.stack(kind), *axis_labels(view, kind), kind).to_csv(index=False)


@st.cache_data(max_entries=32, show_spinner=False)
def statistics(path: str, stamp: float, sentence: str, kind: str):
    """Per-head statistics of one kind."""
    return an.head_statistics(loading.translation(path, stamp, sentence).stack(kind))


@st.cache_data(max_entries=64, show_spinner=False)
def informative(path: str, stamp: float, sentence: str, kind: str) -> an.HeadPick:
    """The head of this kind to open first on this sentence."""
    return an.informative_head(loading.translation(path, stamp, sentence).stack(kind), kind)


# ---------------------------------------------------------------------------------------------
# Widgets
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


def _chosen_by_hand() -> None:
    """The student moved Layer or Head: stop opening the most informative head for them."""
    st.session_state["_attn_auto"] = False


def _auto_again() -> None:
    """Open the most informative head again (and keep doing so for new sentences)."""
    st.session_state["_attn_auto"] = True
    st.session_state["_attn_picked_for"] = None


def open_tabs() -> dict:
    """The page's tabs, labelled in the session's language; `tab` in the state holds the tab's id (URL value).

    A click changes the widget's label (`_attn_tab_ui`); a link, a test or another page changes `tab`:
    whichever changed since the last run wins.
    """
    state = st.session_state
    shown = {tab: tr(f"tab.{tab}") for tab in TABS}
    back = {label: tab for tab, label in shown.items()}
    if state.get("tab") not in TABS:
        state["tab"] = TABS[0]
    clicked = back.get(state.get("_attn_tab_ui"))
    if (
        state["tab"] == state.get("_attn_tab_seen", state["tab"]) and clicked is not None
    ):  # first run: a click
        state["tab"] = clicked
    state["_attn_tab_seen"], state["_attn_tab_ui"] = state["tab"], shown[state["tab"]]
    containers = st.tabs(list(shown.values()), key="_attn_tab_ui", on_change="rerun")
    return dict(zip(TABS, containers, strict=True))


def pick_first_head(key: tuple, kind: str) -> an.HeadPick:
    """Open the sharpest head of this sentence unless the URL or the student chose one; say which and why."""
    state = st.session_state
    if "_attn_auto" not in state:
        state["_attn_auto"] = not {"layer", "head"} & set(st.query_params.to_dict())
    pick = informative(*key, kind)
    if state["_attn_auto"] and state.get("_attn_picked_for") != (*key, kind):
        state["layer"], state["head"] = pick.layer, pick.head
        state["_attn_picked_for"] = (*key, kind)
    return pick


def pick_caption(pick: an.HeadPick, layer: int, head: int) -> None:
    """Why this head is shown, or a button to the most informative one."""
    reason = tr("pick.all_parked" if pick.all_trivial else "pick.reason", sharp=f"{pick.sharpness:.2f}")
    if (layer, head) == (pick.layer, pick.head):
        st.caption(tr("pick.opened", where=where(layer, head)) + " " + reason)
        return
    left, right = st.columns([3, 1], vertical_alignment="center")
    left.caption(tr("pick.elsewhere", where=where(pick.layer, pick.head)) + " " + reason)
    right.button(
        tr("pick.go"), on_click=_auto_again, icon=":material/center_focus_strong:", key="attn_go_pick"
    )


def confidence_markdown(pieces: list[str], probs: np.ndarray) -> str:
    """Output pieces as chips: red for a guess, orange when unsure, plain when sure."""
    chips = []
    for piece, p in zip(pieces, probs, strict=True):
        level = an.confidence_level(float(p))
        text = piece.replace("`", "ˋ") or "␣"
        chips.append(CONFIDENCE_CHIPS[level].format(text if level == 2 else escape_markdown(text)))
    return " ".join(chips)


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def introduction() -> None:
    """What the page shows: queries and keys, the three kinds, and the special pieces."""
    with st.expander(tr("intro.title"), icon=":material/school:"):
        st.markdown(tr("intro.body"))


def header(key: tuple, view: sup.TranslationView) -> None:
    """The translation, its pieces, and how sure the model was of each output piece."""
    if view.truncated:
        st.warning(tr("truncated"))
    st.markdown(f"#### → {escape_markdown(view.text) or tr('empty')}")
    st.markdown(tr("source_pieces") + " " + widgets.pieces_markdown(view.src_pieces))
    probs = view.token_probs  # of this translation (with any switched-off heads), from its own greedy steps
    if len(probs) != len(view.output_pieces):  # cannot happen with greedy; plain chips rather than a crash
        st.markdown(tr("output_pieces") + " " + widgets.pieces_markdown(view.output_pieces))
        return
    st.markdown(tr("output_pieces") + " " + confidence_markdown(view.output_pieces, probs))
    low = int((probs < an.CONFIDENCE_LEVELS[0]).sum())
    st.caption(tr("confidence.caption", low=low, n=len(probs)))
    if st.toggle(tr("confidence.expander"), key="attn_confidence"):  # drawn only when asked for
        fig = fg.confidence_strip(
            view.output_pieces, probs, title=tr("confidence.title"), lang=session.lang()
        )
        widgets.chart(fig, "output-confidence")


def one_head_section(key: tuple, kind: str, layer: int, head: int, n_keys: int) -> None:
    """The chosen head beside its layer's average (one above the other for long sentences), and the CSV."""
    one, avg = head_figures(*key, (), kind, layer, head, session.lang())
    left, right = st.columns(2) if n_keys <= fg.LONG else (st.container(), st.container())
    with left:
        widgets.chart(one, f"attention-{kind}-L{layer + 1}-H{head + 1}")
    with right:
        widgets.chart(avg, f"attention-{kind}-L{layer + 1}-average")
    if kinds.KIND[kind].queries == "target":
        rows_caption(key)
    if kinds.KIND[kind].masked:
        st.caption(tr("masked_caption"))
    widgets.csv_button(
        lambda: attention_csv(*key, kind), f"attention-{kind}", tr("csv")
    )  # built only when clicked


def steps_section(key: tuple, view: sup.TranslationView, layer: int, head: int) -> None:
    """Slide over output steps: which source tokens the decoder read to produce each token."""
    step = widgets.index_slider(tr("step"), len(view.output_pieces), "step", from_one=True)
    produced = escape(view.output_pieces[step])  # a plotly title: '</s>' would read as a tag
    st.markdown(tr("output") + " " + widgets.pieces_markdown(view.output_pieces, highlight=step))
    strongest = int(view.cross[layer, :, step].mean(0).argmax())
    st.markdown(tr("source") + " " + widgets.pieces_markdown(view.src_pieces, highlight=strongest))
    lang = session.lang()
    left, right = st.columns(2)
    with left:
        title = tr("producing", piece=produced, where=f"{where(layer)} · {tr('mean_of_heads')}")
        fig = fg.step_figure(view.cross[layer, :, step].mean(0), view.src_pieces, title=title, lang=lang)
        widgets.chart(fig, f"step-{step + 1}-L{layer + 1}-average")
    with right:
        title = tr("producing", piece=produced, where=where(layer, head))
        fig = fg.step_figure(view.cross[layer, head, step], view.src_pieces, title=title, lang=lang)
        widgets.chart(fig, f"step-{step + 1}-L{layer + 1}-H{head + 1}")


def statistics_section(key: tuple, task: str | None) -> None:
    """Entropy and pattern scores per head for all three kinds (and task alignment for toy tasks)."""
    options = list(STATS) if task else [s for s in STATS if s != "alignment"]
    if st.session_state.get("stat") not in options:
        st.session_state["stat"] = "entropy"
    stat = st.radio(
        tr("stat.label"), options, key="stat", persist_state=session.PERSIST, horizontal=True,
        format_func={s: tr(f"stat.{s}") for s in options}.get,
    )  # fmt: skip
    st.caption(tr(f"stat.{stat}.help"))
    lang = session.lang()
    if stat == "alignment":
        grid = loading.task_alignment(key[0], key[1], task)
        st.markdown(tr("stat.alignment.intro", task=task))
        fig = fg.metric_heatmap(
            grid, value_name=tr("stat.hits"), zmin=0, zmax=1, title=tr("stat.alignment.title"), lang=lang
        )
        widgets.chart(fig, "heads-alignment")
        return
    columns = st.columns(3)
    for column, kind in zip(columns, kinds.KINDS, strict=True):
        stats = statistics(*key, kind)
        grid = an.metric_grid(stats, stat)
        zmax = None if stat == "entropy" else 1.0
        with column:
            fig = fg.metric_heatmap(
                grid, value_name=tr(f"stat.{stat}"), zmin=0, zmax=zmax, title=kind_name(kind), lang=lang
            )
            widgets.chart(fig, f"heads-{stat}-{kind}")
            with st.expander(tr("stat.table")):
                shown = stats.assign(layer=stats["layer"] + 1, head=stats["head"] + 1)  # counted from 1
                st.dataframe(shown.round(3), hide_index=True)


def head_text(code: str) -> str:
    """'e0.1' -> 'Encoder self · layer 1 · head 2' in the session's language."""
    kind, layer, head = sup.parse_head(code)
    return f"{kind_name(kind, short=True)} · {where(layer, head)}"


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
    st.info(tr("ablation.note"), icon=":material/info:")
    codes = sup.all_head_codes(sizes, n_heads)
    st.session_state["ablate"] = [c for c in st.session_state.get("ablate", []) if c in codes]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    off = left.multiselect(
        tr("ablation.pick"), codes, key="ablate", persist_state=session.PERSIST, format_func={c: head_text(c) for c in codes}.get,
        placeholder=tr("ablation.placeholder"),
    )  # fmt: skip
    selected = sup.head_code(kind, layer, head)
    right.button(
        tr("ablation.button"), on_click=_switch_off, args=(selected,), disabled=selected in off,
        icon=":material/block:", width="stretch", help=tr("ablation.button_help"),
    )  # fmt: skip
    off = tuple(sorted(off))
    ablated = loading.translation(*key, off)
    lang = session.lang()
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{tr('ablation.original')}** {escape_markdown(view.text)}")
        widgets.chart(
            head_figures(*key, (), kind, layer, head, lang)[0],
            f"ablation-original-{kind}-L{layer + 1}-H{head + 1}",
            key="ablation-original",
        )
    with right:
        label = tr("ablation.off_one" if len(off) == 1 else "ablation.off", n=len(off))
        st.markdown(f"**{label}** {escape_markdown(ablated.text)}")
        widgets.chart(
            head_figures(*key, off, kind, layer, head, lang)[0],
            f"ablation-{kind}-L{layer + 1}-H{head + 1}",
            key="ablation-ablated",
        )
    if off:
        same = ablated.text == view.text
        (st.success if same else st.warning)(tr("ablation.same" if same else "ablation.changed"))


# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


@st.cache_data(max_entries=32, show_spinner=False)
def recurrent_run(path: str, stamp: float, sentence: str) -> cmp.SystemRun:
    """An RNN checkpoint's greedy output and cross-attention (its only kind of attention)."""
    return cmp.run_system(loading.load(path, stamp), sentence)


def recurrent_section(key: tuple, sentence: str) -> None:
    """An RNN has no self-attention: say so, and show its one attention map (decoder state -> encoder states)."""
    st.info(tr("rnn_only_cross"))
    run = recurrent_run(*key, sentence)
    st.markdown(tr("rnn_output", text=escape_markdown(run.text)))
    if run.cross.shape[0]:
        widgets.chart(fg.attention_heatmap(run.layer_map(0), run.query_pieces, run.src_pieces,
                                           title=tr("rnn_map"), lang=session.lang()), "attention-rnn-cross")  # fmt: skip
    else:
        st.warning(tr("rnn_no_attention"))
    st.page_link("pages/rnn_vs_transformer.py", label=tr("rnn_compare_link"))


def main() -> None:
    """Sentence → translation → views."""
    state = st.session_state
    st.title(tr("title"))
    introduction()
    loaded = loading.current_checkpoint()
    if loaded is None:
        session.sync_url(KEYS)
        return
    choice, ck = loaded
    key = (str(choice.path), catalogue.checkpoint_stamp(choice.path))
    examples = loading.offer_examples(choice, ck)

    if ck.task:
        from visformer.tasks import get_task

        st.markdown(tr("task", task=ck.task, description=get_task(ck.task).description))
    widgets.sentence_input(tr("sentence"))
    if examples:
        st.pills(
            tr("examples"), examples, key="example_pick", on_change=_use_example, label_visibility="collapsed"
        )
    try:
        sentence = loading.fitted_sentence(ck, state["sentence"])
        if architecture(ck.model_config.architecture).family is Family.RNN:
            recurrent_section(key, sentence)
            session.sync_url(KEYS)
            return
        view = loading.translation(*key, sentence)
    except ValueError as exc:
        st.error(session.error(exc))
        session.sync_url(KEYS)
        return
    key = (*key, sentence)
    header(key, view)
    start = ck.model_config.decoder_start_id
    if start != BOS_ID:  # an imported Marian model starts from <pad>, where the texts say <s>
        st.caption(session.tr("marian.start_token", piece=ck.tgt_tokenizer.pieces([start])[0]))

    sizes = attention_layers(ck.model_config)
    n_heads = ck.model_config.n_heads
    c1, c2, c3 = st.columns([2, 1, 1])
    kind = c1.radio(
        tr("kind_label"), kinds.KINDS, key="view", persist_state=session.PERSIST, horizontal=True,
        format_func={k: kind_name(k) for k in kinds.KINDS}.get,  # a dict: AppTest calls it outside the run
    )  # fmt: skip
    pick = pick_first_head(key, kind)
    layer = widgets.index_slider(
        tr("layer"), sizes[kind], "layer", c2, from_one=True, on_change=_chosen_by_hand
    )
    head = widgets.index_slider(tr("head"), n_heads, "head", c3, from_one=True, on_change=_chosen_by_hand)
    pick_caption(pick, layer, head)

    tabs = open_tabs()
    n_keys = len(view.labels(kind)[1])
    sections = {
        "one": lambda: one_head_section(key, kind, layer, head, n_keys),
        "all": lambda: all_heads_section(key, kind, layer, head),
        "steps": lambda: steps_section(key, view, min(layer, sizes["cross"] - 1), head),
        "stats": lambda: statistics_section(key, ck.task),
        "ablation": lambda: ablation_section(key, view, sizes, n_heads, kind, layer, head),
        "inside": lambda: inside_section(key, view, kind, layer, head),
        "word": lambda: word_section(view),
    }
    for tab, container in tabs.items():
        with container:
            if container.open:  # only the open tab is computed
                sections[tab]()
    session.sync_url(KEYS)


def all_heads_section(key: tuple, kind: str, layer: int, head: int) -> None:
    """Every layer and head of one kind, with each layer's mean in the last column (compact for many heads)."""
    n_layers, n_heads = loading.translation(*key).stack(kind).shape[:2]
    compact = st.toggle(tr("grid_compact"), value=n_layers * n_heads >= COMPACT_FROM, key="grid_compact")
    fig = grid_figure(*key, kind, layer, head, session.lang(), compact)
    widgets.chart(fig, f"attention-{kind}-all-heads")
    st.caption(tr("grid_caption"))
    if kinds.KIND[kind].queries == "target":
        rows_caption(key)


def rows_caption(key: tuple) -> None:
    """How decoder rows are named, with this translation's own first piece as the example (→ …)."""
    produced = loading.translation(*key).output_pieces
    st.caption(tr("rows_produced", piece=escape_markdown(produced[0] if produced else "</s>")))


main()
