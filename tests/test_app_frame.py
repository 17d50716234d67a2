"""The frame in AppTest: checkpoint picker, language toggle, model card, built-in examples, script check, long
sentences, share link, state across page switches.

Runs on tiny untrained checkpoints: conftest's tiny_shipped, and two "language" models named like shipped ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from tests.helpers.app import APP, ATTENTION, PE, TIMEOUT, run_app, specs, use_checkpoints
from tests.helpers.checkpoints import make_checkpoint
from visformer import i18n
from visformer.checkpoint import save_checkpoint
from visformer.classroom import catalogue
from visformer.classroom.inputs import escape_markdown
from visformer.config import ModelConfig
from visformer.explain import examples as ex
from visformer.model import Transformer
from visformer.tasks import task_tokenizer

LONG = " ".join(["abc"] * 700)  # 2,799 characters
CARD = {
    "corpora": ["multi30k", "tatoeba"],
    "data": {"en": "Photo captions and everyday sentences.", "ko": "사진 설명과 일상 문장."},
    "good_at": {"en": "Describing scenes.", "ko": "장면 묘사."},
    "examples": ["A dog runs.", "Two cats sleep."],
}


def language_model(folder: Path, name: str) -> Path:
    """An untrained model without a toy task (so its languages come from its name, like shipped ones)."""
    torch.manual_seed(0)
    tok = task_tokenizer("reverse")
    cfg = ModelConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=16, n_heads=2,
                      n_encoder_layers=1, n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=24)  # fmt: skip
    info = {"data": f"/data/{name}/train.src", "test": {"bleu": 12.5, "set": "a test set", "beam_size": 4}}
    return save_checkpoint(folder / name, Transformer(cfg).eval(), tok, tok, info=info)


@pytest.fixture(scope="module")
def lang_roots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    shipped = tmp_path_factory.mktemp("shipped-languages")
    (language_model(shipped, "multi30k-en-de") / catalogue.CARD_FILE).write_text(
        json.dumps(CARD), encoding="utf-8"
    )
    language_model(shipped, "tatoeba-ko-en")  # no card.json: everything from its name and info
    make_checkpoint(shipped)  # the toy task model
    return shipped, tmp_path_factory.mktemp("user-languages")


@pytest.fixture
def langs(lang_roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    return use_checkpoints(monkeypatch, lang_roots)


def sidebar_text(at: AppTest) -> str:
    """Every caption, markdown and code text of the sidebar, joined."""
    parts = [e.value for kind in ("caption", "markdown", "code") for e in getattr(at.sidebar, kind)]
    return "\n".join(parts)


def notices(at: AppTest) -> list[str]:
    """Every info and warning message on the page."""
    return [m.value for m in (*at.info, *at.warning)]


def hangul(text: str) -> bool:
    return any("가" <= ch <= "힣" for ch in text)


# ---------------------------------------------------------------------------------------------
# Language
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("env")
def test_url_lang_ko_gives_a_korean_sidebar_and_page() -> None:
    at = run_app(lang="ko")
    assert at.sidebar.segmented_control(key="frame_lang").value == "ko"
    assert at.sidebar.selectbox(key="checkpoint").label == i18n.t("frame.checkpoint", "ko")
    assert i18n.t("frame.about.attention", "ko") in sidebar_text(at)
    assert "장치" in sidebar_text(at) and "이 화면 공유하기" in sidebar_text(at)
    assert at.query_params["lang"] == "ko"  # a link that names its language keeps it
    at.switch_page(PE).run()
    assert not at.exception
    assert at.title[0].value == "포지셔널 인코딩"
    assert at.query_params["lang"] == "ko"


@pytest.mark.usefixtures("env")
def test_english_by_default_and_no_lang_in_the_url_until_chosen() -> None:
    at = run_app()
    assert at.sidebar.segmented_control(key="frame_lang").value == "en"
    assert at.sidebar.selectbox(key="checkpoint").label == "Checkpoint"
    assert "lang" not in at.query_params


@pytest.mark.usefixtures("env")
def test_toggling_the_language_writes_it_to_the_url_and_translates() -> None:
    at = run_app()
    at.sidebar.segmented_control(key="frame_lang").set_value("ko").run()
    assert not at.exception
    assert at.query_params["lang"] == "ko" and at.title[0].value == i18n.t("page.attention", "ko")
    # AppTest drops the sidebar of a rerun (a Streamlit test-harness quirk): open the link the URL now holds
    at = run_app(**dict(at.query_params))
    assert at.sidebar.selectbox(key="checkpoint").label == i18n.t("frame.checkpoint", "ko")
    assert at.sidebar.expander[0].label == i18n.t("frame.card.title", "ko")
    at.sidebar.segmented_control(key="frame_lang").set_value("en").run()
    assert at.query_params["lang"] == "en" and at.title[0].value == "Attention"


@pytest.mark.usefixtures("env")
def test_about_expander_holds_the_quick_start_in_both_languages() -> None:
    for lang, words in (("en", "streamlit run app.py"), ("ko", "직접 실행하기")):
        at = run_app(lang=lang)
        about = next(e for e in at.sidebar.expander if e.label == i18n.t("frame.about_app.title", lang))
        assert any(words in m.value and "VISFORMER_HOSTED=1" in m.value for m in about.markdown)


def test_every_page_of_the_frame_has_a_title_and_about_line_in_both_languages() -> None:
    for stem in ("attention", "positional_encoding", "decoding", "train", "timeline", "lesson"):
        assert i18n.has(f"page.{stem}") or i18n.has(f"frame.page.{stem}"), stem
        assert hangul(i18n.t(f"frame.about.{stem}", "ko")), stem


def test_every_frame_text_key_written_in_the_code_exists() -> None:
    files = ["app.py", "pages/_state.py", "pages/_widgets.py", "pages/_loading.py", "pages/positional_encoding.py",
             "visformer/explain/positional.py"]  # fmt: skip
    repo = Path(__file__).resolve().parents[1]
    used = set()
    for name in files:
        text = (repo / name).read_text(encoding="utf-8")
        used |= set(__import__("re").findall(r"""["']((?:frame|pe)\.[a-z_.]+[a-z_])["']""", text))
    assert used and sorted(k for k in used if not i18n.has(k)) == []


# ---------------------------------------------------------------------------------------------
# Model card, examples, script check
# ---------------------------------------------------------------------------------------------


def test_model_card_from_card_json_and_from_info(lang_roots) -> None:
    card = catalogue.model_card(lang_roots[0] / "multi30k-en-de")
    assert (card.src_lang, card.tgt_lang) == ("en", "de")
    assert [c.key for c in card.corpora] == ["multi30k", "tatoeba"]
    assert card.licenses == ("research/education", "CC BY 2.0 FR")
    assert (
        card.text("data", "ko") == "사진 설명과 일상 문장."
        and card.text("good_at", "fr") == "Describing scenes."
    )
    assert card.examples == ("A dog runs.", "Two cats sleep.")
    assert card.score("en") == "sacreBLEU 12.50 on a test set, beam search with 4 beams"
    assert card.score("ko") == "a test set에서 sacreBLEU 12.50, 빔 서치(빔 4개)"  # the line in Korean too
    shipped = catalogue.model_card(Path(__file__).resolve().parents[1] / "checkpoints" / "multi30k-en-de")
    if shipped.test:  # the set's count and the beams in words of the language, not the recorded English
        assert shipped.score("ko").startswith("test_2016_flickr (1,000문장)에서 sacreBLEU ")
        assert "sentences" not in shipped.score("ko") and "beam" not in shipped.score("ko")
    derived = catalogue.model_card(lang_roots[0] / "tatoeba-ko-en")  # no card.json: from its info
    assert derived.src_lang == "ko" and [c.key for c in derived.corpora] == ["tatoeba"]
    assert derived.text("data", "en") == "" and derived.parameters and derived.parameters > 0
    toy = catalogue.model_card(lang_roots[0] / "tiny-reverse")
    assert toy.task == "reverse" and toy.licenses == ("MIT",)


def test_corpora_are_found_in_a_new_checkpoints_data_description() -> None:
    keys = lambda text: [c.key for c in catalogue.corpora_in(text)]  # noqa: E731
    assert keys("/work/shared/data/kss-ko-en/kss.ko runs/x/stylekqc.ko") == ["kss", "stylekqc"]
    assert keys("runs/ko-en-data/train.ko runs/ko-en-data/train.en") == ["tatoeba", "kss", "stylekqc"]
    assert keys("mix:en-de") == ["multi30k", "tatoeba"]
    assert keys("reverse") == [] and keys("korean-parallel-corpora/jhe-koen-eval.ko") == []  # eval only


def test_shipped_checkpoints_have_cards_with_terms() -> None:
    for choice in catalogue.discover_checkpoints(catalogue.SHIPPED_ROOT, Path("/nonexistent")):
        card = catalogue.model_card(choice.path, choice.key)
        assert card.task or card.corpora, choice.key  # every shipped model names its data and so its terms
        assert card.licenses, choice.key
        if not card.task:
            assert card.src_lang in ex.SCRIPTS, choice.key  # so a mismatched script can be named
        if (choice.path / catalogue.CARD_FILE).exists():  # a card.json speaks both languages
            assert all(card.text(f, "ko") != card.text(f, "en") for f in ("data", "good_at")), choice.key


def test_sidebar_model_card_and_credits(langs) -> None:
    at = run_app(lang="en")
    card = at.sidebar.expander[0]
    text = "\n".join(m.value for m in card.markdown)
    assert card.label == "About this model"
    for expected in ("English → German", "Photo captions", "Describing scenes", "sacreBLEU 12.50", "A dog runs",
                     "The animal didn't cross the street because it was too tired",
                     "research/education only (Multi30k)", "CC BY 2.0 FR (Tatoeba)"):  # fmt: skip
        assert expected in text, (expected, text)
    credits = "\n".join(
        m.value for e in at.sidebar.expander if e.label == "Credits and terms" for m in e.markdown
    )
    for expected in ("Multi30k", "Tatoeba", "KSS", "CC BY-NC-SA 4.0", "StyleKQC", "CC BY-SA 4.0", "CC BY-SA 3.0",
                     "`tatoeba-ko-en`: CC BY 2.0 FR", "`tiny-reverse`: MIT", "Vaswani"):  # fmt: skip
        assert expected in credits, expected
    at = run_app(lang="ko")
    text = "\n".join(m.value for m in at.sidebar.expander[0].markdown)
    assert "영어 → 독일어" in text and "사진 설명과 일상 문장." in text and "장면 묘사." in text
    assert "빔 서치(빔 4개)" in text and ", beam 4" not in text


def test_lecture_examples_are_offered_for_the_matching_source_language(langs) -> None:
    at = run_app()
    options = at.pills(key="example_pick").options
    assert options[:2] == ["A dog runs.", "Two cats sleep."]  # the card's own first
    assert ex.LECTURE_EXAMPLES["en"][0] in options and ex.LECTURE_EXAMPLES["en"][1] in options
    assert not any(hangul(o) for o in options)
    at.sidebar.selectbox(key="checkpoint").set_value("tatoeba-ko-en").run()
    options = at.pills(key="example_pick").options
    assert "드디어 금요일이다" in options and ex.LECTURE_EXAMPLES["ko"][1] in options
    assert at.text_input(key="sentence").value == options[0]  # the old model's example was dropped


def test_example_sentences_add_the_lecture_ones() -> None:
    assert ex.example_sentences("tatoeba-ko-en")[-2:] == ex.LECTURE_EXAMPLES["ko"]
    assert ex.example_sentences("x-en-de", suited=["Hi."]) == ["Hi.", *ex.LECTURE_EXAMPLES["en"]]
    assert ex.example_sentences("multi30k-de-en") == ex.EXAMPLES["de"]  # no lecture example in German
    assert ex.script_of("드디어 금요일이다") == "hangul" and ex.script_of("Zwei Männer") == "latin"
    assert ex.script_of("123 !?") is None
    assert (
        ex.script_mismatch("I love you.", "ko") == "latin"
        and ex.script_mismatch("배가 고파요.", "en") == "hangul"
    )
    assert ex.script_mismatch("배가 고파요.", "ko") is None and ex.script_mismatch("abc", None) is None


def test_hangul_in_the_english_model_is_named_and_one_click_switches_model(langs) -> None:
    at = run_app(sentence="드디어 금요일이다")
    warning = next(w.value for w in at.warning if "Hangul" in w.value)
    assert "multi30k-en-de" in warning and "English" in warning
    switch = at.button(key="frame_switch_model")
    assert "tatoeba-ko-en" in switch.label
    switch.click().run()
    assert not at.exception
    assert at.session_state["checkpoint"] == "tatoeba-ko-en"
    assert at.text_input(key="sentence").value == "드디어 금요일이다"  # the sentence is kept
    assert at.query_params["checkpoint"] == "tatoeba-ko-en"
    assert not any("Hangul" in w.value for w in at.warning)


def test_english_in_the_korean_model_is_named_in_korean(langs) -> None:
    at = run_app(checkpoint="tatoeba-ko-en", sentence="I love you.", lang="ko")
    warning = next(w.value for w in at.warning if "로마자" in w.value)
    assert "한국어" in warning
    assert "multi30k-en-de" in at.button(key="frame_switch_model").label
    assert not [b for b in at.button if b.key == "frame_switch_model" and not hangul(b.label)]


def test_no_script_warning_for_toy_tasks_or_matching_text(langs) -> None:
    assert not run_app(checkpoint="tiny-reverse", sentence="드디어").warning
    assert not [w for w in run_app(sentence="A dog runs.").warning if "Hangul" in w.value]


# ---------------------------------------------------------------------------------------------
# Long sentences, messages, share link
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("env")
def test_long_sentence_is_cut_to_the_local_limit_with_a_message_in_both_languages() -> None:
    at = run_app()
    at.text_input(key="sentence").input(LONG).run()
    assert at.session_state["sentence"] == LONG
    assert any("cut to the first 2,000 of its 2,799 characters" in m for m in notices(at)), notices(at)
    assert any("words: the model reads at most" in m for m in notices(at))  # then to what the model reads
    assert all(m[0].isupper() for m in notices(at))
    at = run_app(sentence=LONG, lang="ko")
    assert any("2,799자 중 앞의 2,000자" in m for m in notices(at)), notices(at)


@pytest.mark.usefixtures("env")
def test_long_sentence_in_url_is_cut_to_the_configured_limit_with_notice() -> None:
    at = run_app(sentence=LONG)
    assert any("cut to the first 2,000 of its 2,799 characters" in m for m in notices(at)), notices(at)


@pytest.mark.usefixtures("env")
def test_long_sentence_in_hosted_mode_is_cut_to_300_characters_saying_so(monkeypatch) -> None:
    monkeypatch.setenv("VISFORMER_HOSTED", "1")
    at = run_app(sentence=LONG)  # from the URL: cut, and the page says so
    assert any("cut to the first 300 of its 2,799 characters" in m for m in notices(at)), notices(at)
    at.text_input(key="sentence").input(LONG[:400]).run()
    assert any("cut to the first 300 of its 399 characters" in m for m in notices(at)), notices(at)


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize(("first", "then"), [(ATTENTION, "pages/lesson.py"), (ATTENTION, "pages/decoding.py"),
                                             ("pages/lesson.py", "pages/decoding.py")])  # fmt: skip
def test_the_sentence_carries_over_a_page_switch_on_its_first_run(first: str, then: str) -> None:
    at = run_app(
        first if first != ATTENTION else None
    )  # the first page fills the box with the model's example
    example = at.text_input(key="sentence").value
    assert example
    at.switch_page(then).run()  # one run only: the browser shows this run
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_input(key="sentence").value == example
    assert escape_markdown(i18n.t("frame.empty", "en")) not in [e.value for e in at.error]
    at.text_input(key="sentence").input("a b c").run()
    at.switch_page(ATTENTION).run()
    assert at.text_input(key="sentence").value == "a b c", "a typed sentence carries over too"
    assert not at.error, [e.value for e in at.error]


def test_empty_sentence_is_a_capitalised_message() -> None:
    at = run_app(lang="ko")
    at.text_input(key="sentence").input("   ").run()
    assert [e.value for e in at.error] == [escape_markdown(i18n.t("frame.empty", "ko"))]  # shown as text


@pytest.mark.usefixtures("env")
def test_every_pages_share_link_keeps_the_language_the_model_and_the_view(monkeypatch) -> None:
    from pages import _state

    root = Path(__file__).resolve().parents[1]
    for page in [*sorted(f"pages/{f.name}" for f in (root / "pages").glob("[!_]*.py")), "pages/train.py"]:
        # AppTest's switch_page puts Streamlit back in pages-folder mode, where a page runs without the frame
        # (no sidebar) unless ensure_frame hands it over again, as on a fresh server
        monkeypatch.setattr(_state, "_HANDED_OVER", False)
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)  # a link to this page, in Korean
        at.query_params.update(lang="ko", checkpoint="tiny-reverse")
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert at.sidebar.code, page
        link = at.sidebar.code[0].value
        for part in ("lang=ko", "checkpoint=tiny-reverse"):
            assert part in link, (page, link)
        assert at.query_params.get("lang") in ("ko", ["ko"]), (page, at.query_params)  # the address bar too
    monkeypatch.setattr(_state, "_HANDED_OVER", False)
    at.selectbox(key="train_task").set_value("reverse").run()  # Train, last: its view is the task
    assert "train_task=reverse" in at.sidebar.code[0].value


@pytest.mark.usefixtures("env")
def test_a_share_link_names_the_language_the_browser_chose() -> None:
    at = run_app()  # English from the browser: the URL stays without lang, the link to send names it
    assert "lang" not in at.query_params
    assert "lang=en" in at.sidebar.code[0].value


@pytest.mark.usefixtures("env")
def test_sidebar_share_link_holds_the_current_view() -> None:
    at = run_app(sentence="a b c", layer="1", lang="ko")
    link = at.sidebar.code[0].value
    assert link.startswith("/attention?") or link.startswith("/?")
    for part in ("checkpoint=tiny-reverse", "sentence=a+b+c", "layer=1", "lang=ko"):
        assert part in link, link


def test_state_survives_a_page_switch(env) -> None:
    at = run_app(sentence="b c d")
    at.select_slider(key="layer").set_value(1).run()
    at.switch_page(PE).run()
    at.switch_page(ATTENTION).run()
    assert not at.exception
    assert at.text_input(key="sentence").value == "b c d"
    assert at.select_slider(key="layer").value == 1


def test_no_checkpoint_is_a_message_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(tmp_path / "none"))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(tmp_path / "none-either"))
    at = run_app()
    assert any("No checkpoint" in i.value for i in at.info)
    at.switch_page(PE).run()
    assert not at.exception
    assert specs(at)


def test_user_checkpoints_are_listed_after_shipped_ones(env) -> None:
    make_checkpoint(env[1], "my-run")
    at = run_app()
    assert at.sidebar.selectbox(key="checkpoint").options == ["tiny-reverse", "my-run (yours)"]
    at.sidebar.selectbox(key="checkpoint").set_value("yours/my-run").run()
    assert not at.exception
    assert at.query_params["checkpoint"] == "yours/my-run"


SHIPPED_EN_DE = Path(__file__).resolve().parents[1] / "checkpoints" / "en-de"


@pytest.mark.skipif(not SHIPPED_EN_DE.is_dir(), reason="the shipped en-de model is not in this tree")
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_unseen_characters_are_named_and_shown_as_characters_not_bytes(lang: str, monkeypatch) -> None:
    from visformer import i18n

    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(SHIPPED_EN_DE.parent))
    at = run_app(checkpoint="en-de", sentence="A dog 🐕 runs ★.", lang=lang)
    warning = i18n.catalog(lang)["frame.unseen"].split("{chars}")[1][:12]
    unseen = [w.value for w in at.warning if warning in w.value]
    assert len(unseen) == 1 and "🐕" in unseen[0] and "★" in unseen[0], [w.value for w in at.warning]
    ticks = json.dumps([s["layout"] for s in specs(at)], ensure_ascii=False)
    assert "0xF0" not in ticks and "🐕 (1/4)" in ticks
    at.text_input(key="sentence").input("A dog runs.").run()
    assert not [w.value for w in at.warning if warning in w.value], "a sentence the model knows: no warning"
