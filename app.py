"""visformer: watch a Transformer translate, layer by layer and head by head.

The frame: page config, navigation, the shared sidebar (language, checkpoint and its model card, device,
checkpoint transfer, a shareable link, about, credits). Pages live in pages/.
Run with `streamlit run app.py`.
"""

from __future__ import annotations

import logging
import os

# torch's OpenMP threads must not spin while waiting: on a shared or busy machine spinning threads made
# decoding several times slower and the cold start slower (bench/RESULTS.md, App). Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

# Loaded first, whole, by every session: imported lazily (by plotly, inside a figure) by two sessions at once on
# a fresh server, one of them got a partially initialised pandas ("no attribute 'Series'"; bench/RESULTS.md,
# Class load).
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import streamlit as st

from pages._preload import preload_plotly

# The tab icon 🔭 drawn the way Streamlit's frontend draws an emoji favicon (the emoji as SVG text), passed
# as an ASCII data URL: given the emoji itself, set_page_config loads Streamlit's emoji catalogue to check
# it, 50-350 ms of every cold start.
FAVICON = "data:image/svg+xml," + quote(
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 100 100'><text y='.9em' font-size='90'>🔭</text></svg>"
)

# Sent before torch and the app's libraries load (about 2 s of a cold start): the page config and a hidden
# empty chart, so that the browser loads plotly.js meanwhile (pages/_preload.py).
st.set_page_config(page_title="visformer", page_icon=FAVICON, layout="wide")
preload_plotly()

from pages import _loading as loading  # noqa: E402 (after the preload on purpose)
from pages import _state as session  # noqa: E402
from pages import _widgets as widgets  # noqa: E402
from visformer import i18n  # noqa: E402
from visformer.classroom import catalogue  # noqa: E402
from visformer.classroom.inputs import escape_markdown  # noqa: E402
from visformer.explain.examples import example_sentences  # noqa: E402
from visformer.utils import resolve_device  # noqa: E402


@dataclass(frozen=True)
class PageInfo:
    """One page of the app.

    title and about are the English fallbacks: the interface shows page.STEM (or frame.page.STEM) and
    frame.about.STEM from visformer/locales when they exist (STEM: the file's name without .py).
    """

    file: str
    title: str
    icon: str
    about: str  # the sidebar's "what am I looking at" line


PAGES = [
    PageInfo(
        "pages/attention.py",
        "Attention",
        ":material/grid_view:",
        "Where each word looks: the model's attention weights while it translates your sentence.",
    ),
    PageInfo(
        "pages/positional_encoding.py",
        "Positional encoding",
        ":material/waves:",
        "How the model knows word order: sines and cosines of many wavelengths added to each word.",
    ),
    PageInfo(
        "pages/decoding.py",
        "Decoding",
        ":material/account_tree:",
        "How a translation is chosen word by word: greedy, beam search and sampling.",
    ),
    PageInfo(
        "pages/train.py",
        "Train",
        ":material/model_training:",
        "Train a small Transformer yourself and watch its loss and attention change.",
    ),
    PageInfo(
        "pages/timeline.py",
        "Attention timeline",
        ":material/movie:",
        "Replay training: how the probe sentences' attention looked at each saved step, beside the loss.",
    ),
    PageInfo(
        "pages/lesson.py",
        "Lesson",
        ":material/school:",
        "A guided path through the lecture, on your own sentence.",
    ),
    PageInfo(
        "pages/rnn_vs_transformer.py",
        "RNN vs Transformer",
        ":material/compare_arrows:",
        "The same input through an RNN with attention and a Transformer: outputs, alignments, scores.",
    ),
    PageInfo(
        "pages/why_self_attention.py",
        "Why self-attention",
        ":material/speed:",
        "The paper's Table 1 beside one self-attention and one recurrent layer timed on this machine.",
    ),
    PageInfo(
        "pages/language_models.py",
        "Encoder only, decoder only",
        ":material/text_fields:",
        "BERT-style and GPT-style models on your sentence: bidirectional vs masked self-attention.",
    ),
]


def page_title(page: PageInfo) -> str:
    """A page's title in the interface language (page.STEM or frame.page.STEM), else its English title."""
    stem = Path(page.file).stem
    key = next((k for k in (f"page.{stem}", f"frame.page.{stem}") if i18n.has(k)), None)
    return session.tr(key) if key else page.title


def page_about(page: PageInfo) -> str:
    """A page's "what am I looking at" line in the interface language, else its English line."""
    key = f"frame.about.{Path(page.file).stem}"
    return session.tr(key) if i18n.has(key) else page.about


def sidebar(about: str) -> None:
    """Language, what this page shows, checkpoint picker and its model card, device, transfer box."""
    with st.sidebar:
        language_toggle()
        st.caption(about)
        options = loading.choices()
        if options:
            keys = [c.key for c in options]
            if st.session_state.get("checkpoint") not in keys:
                st.session_state["checkpoint"] = loading.current_choice().key
            labels = {c.key: loading.label(c) for c in options}
            st.selectbox(
                session.tr("frame.checkpoint"),
                keys,
                key="checkpoint",
                persist_state=session.PERSIST,
                format_func=labels.get,
                help=session.tr("frame.checkpoint_help"),
                on_change=_checkpoint_changed,
            )
            model_card(loading.current_choice())
        else:
            st.info(session.tr("frame.no_checkpoint_yet"))
        st.caption(session.tr("frame.device", device=resolve_device("auto")))
        widgets.checkpoint_transfer(loading.current_choice())


def language_toggle() -> None:
    """한국어 / English: the interface language, written into the URL once chosen (?lang=ko)."""
    st.session_state["frame_lang"] = session.lang()
    st.segmented_control(
        session.tr("lang.label"),
        i18n.LANGS,
        key="frame_lang",
        required=True,
        format_func=i18n.LANG_NAMES.get,
        on_change=lambda: session.choose_lang(st.session_state["frame_lang"]),
    )


def terms(card: catalogue.ModelCard) -> str:
    """Under which terms a checkpoint's weights are offered: MIT for toy tasks, else each corpus's licence."""
    if card.task:
        return session.tr("frame.terms.mit")
    if card.imported:
        return f"{card.imported.get('license')} ({card.imported.get('credit')})"
    if not card.corpora:
        return session.tr("frame.terms.unknown")
    return "; ".join(
        session.tr(f"frame.terms.{c.terms}", license=c.license, corpus=c.name) for c in card.corpora
    )


def model_card(choice: catalogue.CheckpointChoice | None) -> None:
    """The picked model's card: languages, training data and size, what it is good at, examples, terms."""
    if choice is None:
        return
    card, lang = loading.card_of(choice), session.lang()
    if card.task:
        from visformer.tasks import get_task

        lines = [session.tr("frame.card.task", task=card.task, description=get_task(card.task).description)]
    else:
        lines = [session.tr("frame.card.languages", src=loading.language_name(card.src_lang),
                            tgt=loading.language_name(card.tgt_lang))]  # fmt: skip
        data = card.text("data", lang) or ", ".join(c.name for c in card.corpora)
        if card.imported:
            lines.extend(catalogue.imported_lines(card, lang))
        else:
            lines.append(
                session.tr("frame.card.trained_on", data=data or session.tr("frame.card.unknown_data"))
            )
    if card.parameters and not card.imported:
        lines.append(session.tr("frame.card.size", params=f"{card.parameters:,}"))
    if card.score(lang):
        lines.append(session.tr("frame.card.score", score=card.score(lang)))
    if card.text("good_at", lang):
        lines.append(session.tr("frame.card.good_at", text=card.text("good_at", lang)))
    if not card.task:
        pair = {"src_lang": card.src_lang, "tgt_lang": card.tgt_lang}
        shown = example_sentences(choice.key, pair, None, suited=card.examples)
        lines.append(session.tr("frame.card.examples") + "".join(f"\n- {escape_markdown(s)}" for s in shown))
    lines.append(session.tr("frame.card.terms", terms=terms(card)))
    with st.expander(session.tr("frame.card.title"), icon=":material/badge:"):
        st.markdown("\n\n".join(lines))


def credits() -> None:
    """Every corpus credited, the terms of every shipped checkpoint's weights, the paper and the code's licence."""
    corpora = [f"- [{c.name}]({c.url}): {c.credit}. {c.license}." for c in catalogue.CORPORA]
    shipped = [f"- `{c.key}`: {terms(loading.card_of(c))}" for c in loading.choices() if c.shipped]
    with st.expander(session.tr("frame.credits.title"), icon=":material/copyright:"):
        st.markdown("\n".join([session.tr("frame.credits.data"), *corpora]))
        if shipped:
            st.markdown("\n".join([session.tr("frame.credits.weights"), *shipped]))
        st.markdown(session.tr("frame.credits.model"))


def share_link(url_path: str) -> None:
    """The sidebar's shareable link to this exact view (st.code has a copy button).

    It always names the language and the model, so the link opens as the sender sees it whatever page it is
    and whatever the receiver's browser language.
    """
    params = {"checkpoint": st.session_state.get("checkpoint") or "", **st.query_params.to_dict()}
    params.setdefault("lang", session.lang())
    query = urlencode({k: v for k, v in params.items() if v})
    here = st.context.url  # the page's address without its query (None outside a browser)
    link = (here or f"/{url_path}") + (f"?{query}" if query else "")
    with st.sidebar:
        st.markdown(f"**{session.tr('frame.share.title')}**")
        st.caption(
            session.tr("frame.share.help") + ("" if here else " " + session.tr("frame.share.relative"))
        )
        st.code(link, language=None, wrap_lines=True)
        with st.expander(session.tr("frame.about_app.title"), icon=":material/info:"):
            st.markdown(session.tr("frame.about_app.body"))
        credits()


def _checkpoint_changed() -> None:
    """A new model: drop the old model's example sentence and start at layer 0, head 0."""
    session.switch_checkpoint(st.session_state["checkpoint"])


def main() -> None:
    """Build the frame and run the chosen page."""
    session.init_state()
    pages = {p.file: p for p in PAGES}
    shown = [st.Page(p.file, title=page_title(p), icon=p.icon) for p in pages.values()]
    nav = st.navigation(shown)
    here = next(
        p for p, page in zip(pages.values(), shown, strict=True) if page._script_hash == nav._script_hash
    )
    sidebar(page_about(here))
    framed = session.FRAMED.set(True)
    try:
        nav.run()
    except session.PageEnd:  # a page that ends early (no model of its kind yet) keeps its share link
        pass
    except Exception as exc:  # hosted: the page boundary shows one line, never a traceback (the log has it)
        if not loading.limits().is_hosted:
            raise
        logging.getLogger(__name__).exception("page %s failed", here.file)
        st.error(session.error(exc))
    finally:
        session.FRAMED.reset(framed)
    share_link(nav.url_path)


main()
