"""explain.examples: the example sentences follow the checkpoint's language and task."""

from __future__ import annotations

from visformer.explain import examples as example_text


def test_example_sentences_follow_the_checkpoint_language() -> None:
    assert example_text.language_pair("multi30k-en-de") == ("en", "de")
    assert example_text.language_pair("tatoeba-ko-en") == ("ko", "en")
    assert example_text.language_pair("x", {"src_lang": "fr", "tgt_lang": "en"}) == ("fr", "en")
    assert example_text.example_sentences("tatoeba-ko-en")[0] == example_text.EXAMPLES["ko"][0]
    assert example_text.example_sentences("multi30k-de-en") == example_text.EXAMPLES["de"]
    lecture = example_text.LECTURE_EXAMPLES["en"]  # the lecture's examples follow the model's own
    assert example_text.example_sentences("whatever") == [*example_text.EXAMPLES["en"], *lecture]
    reverse = example_text.example_sentences("reverse", task="reverse")
    assert reverse and all(set(s.split()) <= set("abcdefghijklmnopqrstuvwxyz") for s in reverse)
