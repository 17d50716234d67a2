"""The Lesson page in AppTest: every step in Korean and English, no exception, no raw text key, answers revealed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from pages import _views as schema
from tests.helpers.app import APP, TIMEOUT, charts
from visformer import i18n
from visformer.explain import lesson as ls
from visformer.explain import views as sup

LESSON = "pages/lesson.py"
SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints"
pytestmark = pytest.mark.usefixtures("env")  # the tiny checkpoint (conftest: tiny_shipped)
RAW_KEY = re.compile(r"\b(?:lesson|page|lang)\.[a-z_]+(?:\.[a-z_]+)*\b")


def open_lesson(**params: str) -> AppTest:
    """The app with these query parameters, switched to the Lesson page; fail on any exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    at.switch_page(LESSON).run()
    at.run()  # AppTest sends the previous page's widget values on the first run after a switch
    assert not at.exception, [e.value for e in at.exception]
    return at


def param(at: AppTest, name: str, default: str = "") -> str:
    """One URL parameter as a string (AppTest keeps some as lists)."""
    value = at.query_params.get(name, default)
    return value[-1] if isinstance(value, list) else str(value)


def shown_texts(at: AppTest) -> list[str]:
    """Every piece of text on the page: markdown, captions, messages, widget labels and options, chart titles."""
    out = []
    for kind in ("title", "header", "markdown", "caption", "info", "success", "error", "warning", "latex"):
        out += [str(e.value) for e in at.get(kind)]
    for kind in ("radio", "selectbox", "button", "toggle", "text_input", "slider", "button_group"):
        for w in at.get(kind):
            out.append(str(getattr(w, "label", "")))
            out += [str(o) for o in getattr(w, "options", [])]
    for chart in charts(at):
        spec = json.loads(chart.proto.spec)
        out.append(json.dumps(spec["layout"].get("title", {}), ensure_ascii=False))
        out += [json.dumps(a, ensure_ascii=False) for a in spec["layout"].get("annotations", [])]
    return out


def reveal(at: AppTest) -> AppTest:
    """Pick the first option of the step's question and reveal the answer."""
    question = next(r for r in at.radio if r.key and r.key.startswith("lq_"))
    question.set_value(0).run()
    next(b for b in at.button if b.key == f"{question.key}_reveal").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# What the model computed for each step's question: drawn only after "Reveal" (issue 29). Chart names are the
# lesson's widgets.chart names; texts are i18n keys whose sentence states the answer.
ANSWER_CHARTS = {
    "rnn": {"seq2seq"},
    "embedding": {"embedding-lookup", "embedding-norms"},
    "positional": {"pe", "pe-binary", "pe-rotation"},
    "self_attention": {"self-attention-scores", "self-attention", "weighted-sum"},
    "scaled": {"scaling", "saturation"},
    "multi_head": set(),
    "ffn": {"layer-trace"},
    "masked": {"masked"},
    "cross": {"cross"},
    "training": {"noam"},
    "decoding": {"decoding"},
    "why": {"complexity"},
}
ANSWER_TEXTS = {  # the start of a sentence (before its first placeholder) that states the answer
    "positional": "lesson.positional.binary",
    "self_attention": "lesson.self_attention.row_formula",
    "multi_head": "lesson.multi_head.shapes",
    "ffn": "lesson.ffn.caption",
    "masked": "lesson.masked.caption",
    "decoding": "lesson.decoding.outputs",
}


def lesson_charts(at: AppTest) -> set[str]:
    """The names of the lesson's charts on the page (widgets.chart keys 'chart-lesson-NAME')."""
    return {c.proto.id and c.key[len("chart-lesson-") :] for c in charts(at) if c.key}


def answer_shown(at: AppTest, name: str, lang: str) -> tuple[set[str], bool, bool]:
    """(answer-bearing charts on the page, the answer's sentence on the page, a table on the page)."""
    charts = lesson_charts(at) & ANSWER_CHARTS[name]
    texts = [t for t in shown_texts(at) if not t.startswith(f"**{i18n.t('lesson.predict', lang)}**")]
    key = ANSWER_TEXTS.get(name)
    stated = bool(key) and any(i18n.catalog(lang)[key].split("{")[0].strip() in t for t in texts)
    return charts, stated, bool(at.table)


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_every_step_asks_then_shows_what_the_model_computed_without_a_raw_key(lang: str) -> None:
    """One walk through the steps per language: the question first, then the model's answer (issue 29)."""
    at = open_lesson(lang=lang, sentence="a b c d e")
    assert at.title[0].value == i18n.t("lesson.title", lang)
    titles = []
    for step, name in enumerate(ls.STEPS, start=1):
        at.session_state["lesson_step"] = step
        at.run()
        assert not at.exception, (step, [e.value for e in at.exception])
        assert at.header[0].value == i18n.t(f"lesson.{name}.title", lang)
        titles.append(at.header[0].value)
        assert answer_shown(at, name, lang) == (set(), False, False), f"step {step} ({name}) shows its answer"
        assert not any(r.value is not None for r in at.radio if r.key and r.key.startswith("lq_"))
        reveal(at)
        feedback = [m.value for m in (*at.success, *at.error, *at.info) if "**" in m.value or "!" in m.value]
        assert feedback, f"step {step}: no feedback after revealing"
        charts, stated, table = answer_shown(at, name, lang)
        assert charts == ANSWER_CHARTS[name], f"step {step} ({name}): the reveal drew {charts}"
        assert stated == (name in ANSWER_TEXTS) and table == (name == "why"), f"step {step} ({name})"
        raw = [text for text in shown_texts(at) if RAW_KEY.search(text)]
        assert raw == [], f"step {step} shows raw keys: {raw}"
        assert param(at, "lesson_step", "1") == str(step)
        assert param(at, "lang") == lang
    assert len(set(titles)) == len(ls.STEPS)
    if lang == "ko":
        assert any(re.search("[가-힣]", t) for t in titles)


def test_the_reveal_belongs_to_one_sentence_and_a_new_sentence_asks_again() -> None:
    at = open_lesson(lang="en", lesson_step="6", sentence="a b c")
    reveal(at)
    shapes = i18n.catalog("en")["lesson.multi_head.shapes"].split("{")[0]
    assert any(shapes in c.value for c in at.caption)
    at.session_state["lesson_step"] = 5
    at.run()
    at.session_state["lesson_step"] = 6
    at.run()
    assert any(shapes in c.value for c in at.caption), "going back to a step keeps its revealed answer"
    at.text_input(key="sentence").set_value("c b a").run()
    assert not any(shapes in c.value for c in at.caption), "a new sentence must ask again"
    assert all(r.value is None for r in at.radio if r.key.startswith("lq_"))


def test_the_language_comes_from_the_url_else_the_browser_locale() -> None:
    assert open_lesson(lang="ko").title[0].value == i18n.t("lesson.title", "ko")
    at = open_lesson()
    assert at.title[0].value == i18n.t("lesson.title", "en")  # AppTest's browser has no Korean locale
    assert not at.main.get("button_group"), "one language toggle only: the sidebar's (app.py)"
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()  # the sidebar's toggle, picked on the first page, holds on the lesson
    at.button_group(key="frame_lang").set_value("ko").run()
    at.switch_page(LESSON).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == i18n.t("lesson.title", "ko")
    assert param(at, "lang") == "ko"


def test_the_right_answer_is_praised_and_a_wrong_one_corrected() -> None:
    at = open_lesson(lang="en", lesson_step="4")
    question = next(r for r in at.radio if r.key.startswith("lq_"))
    weights_answer = None
    for i in range(len(question.options)):
        question.set_value(i).run()
        next(b for b in at.button if b.key == f"{question.key}_reveal").click().run()
        if at.success:
            weights_answer = i
            assert at.success[0].value.startswith("Right!")
        else:
            assert at.error[0].value.startswith("Not this time")
        question = next(r for r in at.radio if r.key.startswith("lq_"))
    assert weights_answer is not None, "no option was accepted as the answer"


def test_the_praised_answer_is_what_the_model_computes(roots) -> None:
    from visformer.checkpoint import load_checkpoint
    from visformer.classroom.inputs import escape_markdown
    from visformer.decoding import translate

    at = open_lesson(lang="en", lesson_step="9", sentence="a b c d")
    ck = load_checkpoint(roots[0] / "tiny-reverse")
    result = translate(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, "a b c d", "greedy")
    view = sup.translation_view(result, ck.tgt_tokenizer, "a b c d")
    weights = view.cross[0].mean(0)  # layer 1 (the slider's start), mean of the heads: (T, S)
    row = ls.most_decided(weights)  # the output piece the step opens on
    expected = int(np.argmax(weights[row]))
    question = next(r for r in at.radio if r.key.startswith("lq_"))
    assert list(question.options) == [escape_markdown(p) for p in ls.piece_options(view.src_pieces)]
    question.set_value(expected).run()
    next(b for b in at.button if b.key == f"{question.key}_reveal").click().run()
    assert at.success and not at.error, "the model's own argmax was not accepted as the answer"


def test_each_step_links_to_its_full_page_with_the_same_sentence() -> None:
    at = open_lesson(lang="en", lesson_step="9", sentence="1 2 3")
    links = at.get("page_link")
    assert links, "no link to the full page"
    proto = links[0].proto
    assert proto.page == "attention"
    view = schema.parse_view(parse_qs(proto.query_string))
    assert (view["sentence"], view["checkpoint"], view["view"]) == ("1 2 3", "tiny-reverse", "cross")
    assert view["tab"] == "steps"
    assert "lang=en" in proto.query_string


def test_a_url_opens_the_step_it_names() -> None:
    at = open_lesson(lang="ko", lesson_step="7")
    assert at.header[0].value == i18n.t("lesson.ffn.title", "ko")
    at.button[-1].click().run()  # next step
    assert at.header[0].value == i18n.t("lesson.masked.title", "ko")
    assert param(at, "lesson_step") == "8"


@pytest.mark.skipif(not (SHIPPED / "ko-en").is_dir(), reason="the shipped Korean model is not in this tree")
def test_the_korean_model_shows_the_lectures_example_in_the_self_attention_step(monkeypatch) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(SHIPPED))
    at = open_lesson(lang="ko", lesson_step="4", checkpoint="ko-en")
    assert at.toggle(key="lesson_example").value is True
    pieces = "".join(str(o) for r in at.selectbox for o in r.options)
    assert "디어" in pieces and "금" in pieces  # 드디어 금요일 이다, cut into pieces
    at.toggle(key="lesson_example").set_value(False).run()
    pieces = "".join(str(o) for r in at.selectbox for o in r.options)
    assert "디어" not in pieces


@pytest.mark.skipif(not (SHIPPED / "ko-en").is_dir(), reason="the shipped Korean model is not in this tree")
def test_another_model_offers_the_korean_model_with_the_lectures_example(monkeypatch) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(SHIPPED))
    at = open_lesson(lang="ko", lesson_step="4", checkpoint="multi30k-en-de")
    assert not at.toggle, "an English source model has no lecture example to toggle"
    at.button(key="lesson_to_korean").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["checkpoint"] == "ko-en"
    assert at.session_state["sentence"] == ls.LECTURE_EXAMPLE
    assert at.toggle(key="lesson_example").value is True
    assert param(at, "checkpoint") == "ko-en" and param(at, "lesson_step") == "4"


def test_a_checkpoint_that_is_not_a_transformer_gets_one_message(tmp_path, monkeypatch) -> None:
    import torch

    from visformer.checkpoint import save_checkpoint
    from visformer.classroom import catalogue
    from visformer.config import ModelConfig
    from visformer.models import build_model
    from visformer.tasks import task_tokenizer

    torch.manual_seed(0)
    tok = task_tokenizer("reverse")
    cfg = ModelConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=16, n_heads=2,
                      n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=24,
                      architecture="rnn-bahdanau")  # fmt: skip
    save_checkpoint(tmp_path / "tiny-rnn", build_model(cfg).eval(), tok, tok, task="reverse")
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(tmp_path))
    monkeypatch.setattr(catalogue, "_shown", catalogue.list_checkpoints)  # as once the pages list RNNs too
    for lang in i18n.LANGS:
        at = open_lesson(lang=lang, checkpoint="tiny-rnn", lesson_step="6")
        assert [m.value for m in at.info] == [i18n.t("lesson.needs_transformer", lang, name="tiny-rnn")]
        assert not at.header, "no step is drawn for a model without encoder layers"


def test_the_url_schema_knows_every_step_and_language() -> None:
    assert schema.VIEW_PARAMS["lesson_step"].hi == len(ls.STEPS)
    assert set(schema.VIEW_PARAMS["lang"].options) == {"", *i18n.LANGS}
