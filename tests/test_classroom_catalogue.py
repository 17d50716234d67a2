"""classroom.catalogue: which folders are checkpoints, in which order, and the default choice."""

from __future__ import annotations

from pathlib import Path

from visformer.classroom import catalogue


def test_checkpoint_discovery_and_default(tmp_path: Path) -> None:
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    for name in ("reverse", "multi30k-en-de", "en-de", "copy"):
        (shipped / name).mkdir(parents=True)
        (shipped / name / "config.json").write_text("{}")
    (shipped / "half-written").mkdir()  # no config.json: not a checkpoint
    (user / "mine").mkdir(parents=True)
    (user / "mine" / "config.json").write_text("{}")
    found = catalogue.discover_checkpoints(shipped, user)
    assert [c.key for c in found] == ["en-de", "copy", "multi30k-en-de", "reverse", "yours/mine"]
    assert catalogue.default_choice(found).key == catalogue.DEFAULT_CHECKPOINT == "en-de"
    assert catalogue.default_choice([c for c in found if c.key != "en-de"]).key == "copy"
    assert catalogue.find_choice(found, "yours/mine").label == "mine (yours)"
    assert catalogue.find_choice(found, "nope").key == "en-de"
    assert catalogue.default_choice([]) is None
    assert catalogue.checkpoint_stamp(shipped / "copy") > 0
