"""explain.views: head codes and masks, byte pieces shown as the characters they spell."""

from __future__ import annotations

from visformer.explain import views as sup


def test_heads_codes_round_trip_and_mask_rows() -> None:
    assert sup.parse_head("d2.7") == ("decoder", 2, 7)
    assert sup.head_code("cross", 1, 0) == "c1.0"
    sizes = {"encoder": 2, "decoder": 1, "cross": 1}
    assert len(sup.all_head_codes(sizes, 3)) == (2 + 1 + 1) * 3
    rows = sup.head_mask_rows(["e1.2", "c0.0", "e5.0", "junk"], sizes, 3)
    assert rows["encoder"].sum() == 5 and rows["encoder"][1, 2] == 0 and rows["cross"][0, 0] == 0
    assert rows["decoder"].all()


def test_a_run_of_byte_pieces_shows_the_character_it_spells() -> None:
    pieces = [
        "▁A",
        "▁",
        "<0xEB>",
        "<0xB5>",
        "<0x88>",
        "▁dog",
        "<0x3F>",
        "<0xF0>",
        "<0x9F>",
        "<0x98>",
        "<0x80>",
    ]
    assert sup.readable_pieces(pieces) == [
        "▁A", "▁", "뵈 (1/3)", "뵈 (2/3)", "뵈 (3/3)", "▁dog", "?", "😀 (1/4)", "😀 (2/4)", "😀 (3/4)", "😀 (4/4)",
    ]  # fmt: skip
    assert sup.readable_pieces(["<0xEB>", "<0xB5>", "x"]) == ["byte EB", "byte B5", "x"]  # half a character
    assert sup.readable_pieces(["▁<0xEB>", "<unk>"]) == ["▁<0xEB>", "<unk>"]  # only whole byte pieces
    assert sup.unseen_characters(pieces) == ["뵈", "?", "😀"]
    assert sup.unseen_characters(["▁A", "▁dog"]) == []


def test_bytes_that_spell_no_character_are_written_as_bytes_not_a_replacement_mark() -> None:
    pieces = ["▁Ein", "▁", "<0xEB>", "<0xB5>", "▁Hund", "</s>"]  # a sample that stopped inside a character
    assert sup.readable_text("Ein \ufffd Hund", pieces) == "Ein ⟨EB⟩⟨B5⟩ Hund"
    assert (
        sup.readable_text("Ein 뵈", ["▁Ein", "▁", "<0xEB>", "<0xB5>", "<0x88>"]) == "Ein 뵈"
    )  # nothing to mend
