"""bench/bench_class.py: simulated students at the protocol level against a hosted server (tiny model)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bench.bench_class import (
    VIEWING,
    StudentReport,
    check_picker,
    kind_rows,
    level_row,
    percentile,
    run_level,
    section,
)
from bench.bench_soak import curve_rows
from bench.class_protocol import Run
from bench.process_sampler import Sample, Sampler
from tests.helpers.system import nginx


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


@pytest.mark.slow  # a hosted app server and three simulated students
def test_every_student_follows_the_script_without_errors_or_leaks(level) -> None:
    assert level.errors == [] and level.leaks == []
    kinds = level.by_kind()
    assert set(VIEWING) | {"decoding comparison", "url to another's model"} <= set(kinds)
    assert len(kinds["decoding comparison"]) == 3 and len(kinds["url to another's model"]) == 2
    trainer = level.reports[0]
    assert trainer.role == "trainer" and trainer.trained == "class-0"
    assert {"start training", "training progress", "open own model"} <= {k for k, _ in trainer.timings}


@pytest.mark.slow
def test_the_server_is_sampled_and_identical_work_is_measured(level) -> None:
    assert len(level.samples) >= 2 and level.samples[-1].cpu_s > level.samples[0].cpu_s
    assert level.samples[-1].threads > 1 and level.samples[-1].rss_mib > 50
    assert level.shared is not None and level.shared.first_s > 0 and level.shared.second_s > 0
    text = section([level], 0.1, 10)
    assert level_row(level) in text and all(row in text for row in kind_rows(level))


def test_the_sampler_reads_what_the_server_writes_to_its_probe(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.write_text("3 7\n")
    with Sampler(os.getpid(), every_s=0.01, probe=probe) as sampler:
        for _ in range(1000):  # a bound on waits, not a time limit
            if len(sampler.samples) >= 2:
                break
            time.sleep(0.01)
    assert len(sampler.samples) >= 2 and all(s.held == (3, 7) for s in sampler.samples)
    assert sampler.samples[0].threads >= 2 and sampler.samples[0].rss_mib > 10  # this process and its sampler


def test_the_soak_curve_has_one_row_per_interval_with_what_the_server_held() -> None:
    samples = [
        Sample(0.0, 0.0, 100.0, 5, 0.5, (1, 2)),
        Sample(30.0, 1.0, 101.0, 5, 0.7, ()),  # inside the interval: no row
        Sample(60.0, 3.0, 102.0, 6, 1.0, (2, 3)),
        Sample(70.0, 3.5, 102.0, 6, 1.0, ()),  # the last sample always gets a row; no probe reading: "?"
    ]
    assert curve_rows(samples, 60.0) == [
        "| 0.0 | 100 | 5 | 1 | 2 | 0 % | 0.50 |",
        "| 1.0 | 102 | 6 | 2 | 3 | 5 % | 1.00 |",
        "| 1.2 | 102 | 6 | ? | ? | 5 % | 1.00 |",
    ]


@pytest.mark.slow  # two app processes behind nginx
def test_a_class_behind_nginx_on_two_processes_runs_without_errors_or_leaks() -> None:
    nginx()  # skips without nginx (fails in CI)
    level = run_level(4, trainers=1, think_s=0.1, train_steps=10, checkpoints=None, ramp_s=0.5, processes=2)
    assert level.errors == [] and level.leaks == [] and level.processes == 2
    assert all(
        r.server for r in level.reports
    )  # every websocket went through the proxy (test_deploy: spread)
    assert level.reports[0].trained == "class-0"
    assert level.samples[-1].threads > 2  # two app processes summed
    assert "| 4 | 2 |" in level_row(level)
