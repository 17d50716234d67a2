"""bench/bench_class.py: simulated students at the protocol level against a hosted server (tiny model)."""

from __future__ import annotations

import pytest

from bench.bench_class import (
    VIEWING,
    Run,
    StudentReport,
    check_picker,
    kind_rows,
    level_row,
    percentile,
    run_level,
    section,
)


def test_percentile_and_the_picker_check() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0 and percentile([3.0, 1.0, 2.0, 4.0], 0.95) == 4.0
    report = StudentReport("s", "trainer", trained="mine")
    check_picker(Run(0.1, options={"Checkpoint": ["toy-reverse", "mine (yours)"]}), report, "mine")
    assert report.leaks == []
    check_picker(Run(0.1, options={"Checkpoint": ["toy-reverse", "theirs (yours)"]}), report, "mine")
    assert report.leaks == ["picker lists ['theirs (yours)']"]


@pytest.fixture(scope="module")
def level():
    return run_level(3, trainers=1, think_s=0.1, train_steps=10, checkpoints=None, ramp_s=0.5)


def test_every_student_follows_the_script_without_errors_or_leaks(level) -> None:
    assert level.errors == [] and level.leaks == []
    kinds = level.by_kind()
    assert set(VIEWING) | {"decoding comparison", "url to another's model"} <= set(kinds)
    assert len(kinds["decoding comparison"]) == 3 and len(kinds["url to another's model"]) == 2
    trainer = level.reports[0]
    assert trainer.role == "trainer" and trainer.trained == "class-0"
    assert {"start training", "training progress", "open own model"} <= {k for k, _ in trainer.timings}


def test_the_server_is_sampled_and_identical_work_is_measured(level) -> None:
    assert len(level.samples) >= 2 and level.samples[-1].cpu_s > level.samples[0].cpu_s
    assert level.samples[-1].threads > 1 and level.samples[-1].rss_mib > 50
    assert level.shared is not None and level.shared.first_s > 0 and level.shared.second_s > 0
    text = section([level], 0.1, 10)
    assert level_row(level) in text and all(row in text for row in kind_rows(level))
