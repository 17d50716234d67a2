"""The app on an imported Marian (OPUS-MT layout: 6 + 6 layers, 8 heads, <pad> as start), in Korean and English."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.app import charts, open_tab, specs
from tests.helpers.marian import SOURCES, build_marian
from visformer import i18n
from visformer.checkpoint import CONFIG_FILE, FORMAT, VERSION
from visformer.classroom.archive import check_model_bounds
from visformer.classroom.hosting import HostedLimits
from visformer.marian import OPUS_MT_KO_EN, import_marian, model_config

pytest.importorskip("transformers")

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints"
TIMEOUT = 300  # seconds per script run on a busy 2-core machine, not a performance limit
NAME = "opus-mt-ko-en"
PAGES = [
    "pages/attention.py",
    "pages/positional_encoding.py",
    "pages/decoding.py",
    "pages/train.py",
    "pages/timeline.py",
    "pages/lesson.py",
    "pages/rnn_vs_transformer.py",
    "pages/why_self_attention.py",
    "pages/language_models.py",
]
ATTENTION_TABS = ["one", "all", "steps", "stats", "ablation", "inside", "word"]  # the ids
SENTENCE = SOURCES[0]


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> Path:
    """Small shipped checkpoints (the pages of other families need them) and an imported Marian beside them,
    with OPUS-MT's layer and head counts: what a teacher's checkpoints folder holds after import-marian."""
    root = tmp_path_factory.mktemp("marian-app")
    for name in ("reverse", "reverse-rnn-bahdanau", "reverse-rnn-none", "lm-encoder-en", "lm-decoder-en"):
        shutil.copytree(SHIPPED / name, root / "checkpoints" / name)
    build_marian(root / "hf", d_model=32, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, steps=40)  # fmt: skip
    import_marian(str(root / "hf"), root / "checkpoints" / NAME)
    (root / "user").mkdir()
    return root


@pytest.fixture(autouse=True)
def env(roots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(roots / "checkpoints"))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(roots / "user"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def run(page: str, **params: str) -> AppTest:
    """The app on `page` with the imported model and these query parameters; no exception."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for name, value in ({"checkpoint": NAME} | params).items():
        at.query_params[name] = value
    at.run()
    if page != PAGES[0]:  # the Attention page opens first; AppTest keeps the sidebar of the first run only
        at.switch_page(page).run()
        at.run()  # the first run after a switch gets the previous page's widget values
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def all_text(at: AppTest) -> str:
    """Every markdown, caption, info and expander text on the page, joined."""
    groups = (at.markdown, at.caption, at.info, at.warning, at.title, at.header, at.subheader)
    return "\n".join(str(e.value) for group in groups for e in group)


@pytest.mark.parametrize("lang", i18n.LANGS)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_imported_model(page: str, lang: str) -> None:
    at = run(page, lang=lang, sentence=SENTENCE)
    assert "marian." not in all_text(at)  # no raw key


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_every_attention_tab_on_48_heads(lang: str) -> None:
    at = run("pages/attention.py", lang=lang, sentence=SENTENCE)
    assert i18n.t("marian.start_token", lang, piece="<pad>") in all_text(at)
    for tab in ATTENTION_TABS:
        open_tab(at, tab)
    at.session_state["ablate"] = ["cross-5-3", "encoder-1-8"]
    open_tab(at, "ablation")
    assert not at.exception


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_all_heads_grid_opens_compact_at_6_by_8_heads(lang: str) -> None:
    at = open_tab(run("pages/attention.py", lang=lang, sentence=SENTENCE), "all")
    assert at.toggle(key="grid_compact").value is True
    grid = next(s for s in specs(at) if len(s["layout"].get("annotations", [])) == 9 + 6)
    texts = [a["text"] for a in grid["layout"]["annotations"]]
    assert texts[:9] == [*map(str, range(1, 9)), i18n.t("attention.fig.mean", lang)]
    assert texts[9:] == [i18n.t("attention.fig.layer", lang, n=n) for n in range(1, 7)]
    mosaic = next(t for t in grid["data"] if t["type"] == "heatmap")["z"]  # every panel in one heatmap
    rows, cols = (int(n) for n in mosaic["shape"].split(","))  # plotly sends z as binary with its shape
    assert (rows + 1) % 6 == 0 and (cols + 1) % 9 == 0  # 6 layers x (8 heads + mean), one-cell gaps
    assert grid["layout"]["height"] <= 700  # the whole grid on one screen
    at.toggle(key="grid_compact").set_value(False).run()
    roomy = next(s for s in specs(at) if sum(t["type"] == "heatmap" for t in s["data"]) == 6 * (8 + 1))
    assert roomy["layout"]["height"] > grid["layout"]["height"]


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_decoding_comparison_and_tabs(lang: str) -> None:
    for tab in ("steps", "beam", "samples"):
        at = run("pages/decoding.py", lang=lang, sentence=SENTENCE, dec_tab=tab)
        assert len(charts(at)) + len(at.dataframe) > 0


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_every_lesson_step(lang: str) -> None:
    at = run("pages/lesson.py", lang=lang, sentence=SENTENCE)
    for step in range(1, 13):
        at.session_state["lesson_step"] = step
        at.run()
        assert not at.exception, (step, [e.value for e in at.exception])


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_model_card_says_where_it_came_from_and_its_licence(lang: str) -> None:
    at = run("pages/attention.py", lang=lang, sentence=SENTENCE)
    card = all_text(at)
    assert i18n.t("marian.card_title", lang) in card
    assert "CC BY 4.0" in card and "Helsinki-NLP" in card
    assert i18n.t("marian.card_not_trained", lang) in card
    assert "toy.ko.en" in card and "12.5" in card  # the reported score of its README
    assert "d_model 32" in card and "6+6" in card
    assert i18n.t("frame.lang.ko", lang) in card  # languages from the model's name (opus-mt-ko-en)


@pytest.mark.parametrize("lang", i18n.LANGS)
def test_timeline_says_an_imported_model_has_no_history(lang: str) -> None:
    at = run("pages/timeline.py", lang=lang)
    source = str(Path(os.environ["VISFORMER_CHECKPOINTS"]).parent / "hf")
    assert [i.value for i in at.info] == [i18n.t("marian.no_history", lang, name=NAME, source=source)]


def test_hosted_mode_shows_the_teachers_imported_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISFORMER_HOSTED", "1")
    at = run("pages/attention.py", lang="ko", sentence=SENTENCE)
    assert at.selectbox(key="checkpoint").value == NAME
    at = open_tab(at, "all")
    assert any(len(s["layout"].get("annotations", [])) == 9 + 6 for s in specs(at))  # the compact 6 x 8 grid


def test_students_cannot_upload_an_opus_mt_sized_model(tmp_path: Path) -> None:
    """The hosted upload caps stay: a checkpoint of opus-mt-ko-en's size is refused before it is built."""
    config = {"format": FORMAT, "version": VERSION, "model": model_config(OPUS_MT_KO_EN).to_dict(), "train": None,
              "task": None, "info": {}, "tokenizer": "shared"}  # fmt: skip
    (tmp_path / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ValueError, match="65,?001|77,?484,?009"):
        check_model_bounds(tmp_path, HostedLimits.hosted())
