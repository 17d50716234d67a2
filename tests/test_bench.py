"""The benchmark runner's quick mode: it runs, prints tables and writes a well-formed RESULTS.md."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bench import bench_training
from bench.common import TINY, Section, Stat, alternate, ratio_stat
from bench.run import main, split_sections


def test_stat_summarises_and_inverts() -> None:
    s = Stat.of([2.0, 1.0, 4.0])
    assert (s.median, s.low, s.high, s.n) == (2.0, 1.0, 4.0, 3)
    rate = s.inverse(8.0)  # 8 tokens in 1..4 s
    assert (rate.median, rate.low, rate.high) == (4.0, 2.0, 8.0)
    assert ratio_stat([2.0, 6.0], [1.0, 2.0]).median == pytest.approx(2.5)


def test_alternate_runs_every_function_each_round() -> None:
    calls: list[str] = []
    times = alternate({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=3, warmup=1)
    assert calls == ["a", "b"] + ["a", "b"] * 3
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}


def test_peer_and_visformer_train_on_the_same_batch() -> None:
    batch = bench_training.make_batch(TINY, 4, 6, seed=1)
    assert batch.src.shape[0] == batch.tgt_in.shape[0] == 4
    assert batch.tgt_in.shape == batch.tgt_out.shape
    assert (batch.src == TINY.pad_id).any(), "a padded batch should contain padding"
    assert batch.n_tgt_tokens == int((batch.tgt_out != TINY.pad_id).sum())
    peer = bench_training.PeerModel(TINY).train()
    step = bench_training.train_step_fn(peer, peer, batch, TINY.pad_id)
    before = peer.generator.weight.detach().clone()
    loss = step()
    assert loss > 0 and not torch.equal(before, peer.generator.weight), "the peer's step must update weights"
    assert peer.generator.weight is peer.token.weight  # tied like visformer's shared embeddings


def _table_rows(section: str) -> list[list[str]]:
    """Data rows of the first markdown table in a section."""
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def test_quick_run_writes_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# old\n\n## Decoding\n\nkept from another helper\n", encoding="utf-8")
    threads = torch.get_num_threads()
    try:  # one thread: tiny ops on a shared machine wait less for each other
        assert (
            main(["--quick", "--only", "training,profile,scaling", "--output", str(out), "--threads", "1"])
            == 0
        )
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "== Training throughput ==" in printed and "speed-up" in printed
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# visformer benchmarks")
    for key in ("cpu", "torch threads", "torch", "gpu", "date"):
        assert re.search(rf"^\| {key} \| .+ \|$", text, re.M), f"machine row {key!r} missing"
    assert "shared" in text  # says the machine was shared
    sections = split_sections(text)
    # other helpers' sections survive a run that did not measure them
    assert sections["Decoding"].strip().endswith("kept from another helper")
    training = _table_rows(sections["Training throughput"])
    labels = [label for label, _ in bench_training.precision_runs()]
    assert [r[0] for r in training] == [f"{a}, {b}" for a in labels for b in ("padded batch", "no padding")]
    assert labels[-1] == "both fp32" and labels[0].startswith("visformer default")
    median_spread = re.compile(r"^[\d,.]+ \([\d,.]+–[\d,.]+\)$")
    assert all(median_spread.match(cell.rstrip("×")) for r in training for cell in r[2:6]), training
    assert "matmul peak" in sections["Training throughput"]
    assert "fp32 vs bf16 autocast" in sections["Training throughput"]
    shares = {r[0]: r[1:] for r in _table_rows(sections["Training profile"])}
    assert "matmul" in shares and all(cell.endswith("%") for row in shares.values() for cell in row)
    lengths = _table_rows(sections["Scaling: sentence length"])
    assert [r[0] for r in lengths] == ["8", "16"]
    (fast8, maps8), (fast16, maps16) = [(float(r[4]), float(r[5])) for r in lengths]
    assert 0 < fast8 < fast16 and 0 < maps8 < maps16, lengths  # memory grows with the sentence
    assert maps8 > fast8 and maps16 > fast16, lengths  # returning the maps costs memory
    assert _table_rows(sections["Scaling: model size"])[0][0] == "tiny"
    assert list(sections).index("Training throughput") < list(sections).index("Decoding")


def test_peak_tensor_memory_counts_what_a_pass_allocates() -> None:
    from bench.bench_scaling import peak_tensor_mib

    def allocate() -> None:
        kept = [torch.empty(2**20, dtype=torch.uint8) for _ in range(3)]  # 3 MiB alive at once
        del kept
        torch.empty(2**20, dtype=torch.uint8)  # 1 MiB after they are freed: not a new peak

    assert peak_tensor_mib(allocate) == pytest.approx(3.0, abs=0.05)


def test_time_to_learn_keeps_the_task_and_stops_at_exact_match() -> None:
    from bench.bench_time_to_learn import LearnSettings, time_to_learn

    settings = LearnSettings(
        d_model=16,
        n_heads=2,
        encoder_layers=1,
        decoder_layers=1,
        d_ff=32,
        max_tokens=256,
        threads=1,
        eval_every=5,
    )
    config = settings.train_config(seed=0, limit_s=1.0)
    assert config.stop_at_exact_match == 1.0 and config.label_smoothing == 0.0
    assert settings.model_config(30).dropout == 0.0
    result = time_to_learn(settings, limit_s=1.0)
    assert result.curve and all(0.0 <= e <= 1.0 for _, e in result.curve)
    assert result.step >= 5 and result.wall_s >= result.train_s > 0
    assert result.solved == (result.exact_match >= 1.0)


def test_best_settings_are_the_train_pages_toy_recipe() -> None:
    from bench.bench_time_to_learn import BEST
    from visformer import recipes

    spec = recipes.toy_spec("toy", seed=2)
    assert BEST.model_config(30) == spec.size.config(30, 30, spec.max_len, spec.dropout)
    assert BEST.train_config(seed=2, limit_s=60.0) == replace(
        spec.train, steps=100_000, n_snapshots=0, time_limit_s=60.0, threads=BEST.threads
    )
    assert spec.source.n_train == 20_000 and spec.source.n_valid == 200


def test_app_bench_helpers() -> None:
    import os

    from bench import bench_app

    rss, peak = bench_app.proc_memory_mib(os.getpid())
    assert 0 < rss <= peak
    assert bench_app.verdict(200, 300) == "met"
    assert bench_app.verdict(600, 300).startswith("missed (2.0×")
    assert len(set(bench_app.fresh_sentences(None, 6))) == 6
    assert len(set(bench_app.fresh_sentences("reverse", 6))) == 6
    assert "--server.headless" in bench_app.streamlit_cmd(8501)


def test_unknown_benchmark_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--quick", "--only", "nonsense", "--output", str(tmp_path / "R.md")])


def test_section_markdown_has_a_table() -> None:
    s = Section("T", "intro", ["a", "b"], rows=[["1", "2"]], notes=["n"])
    assert s.markdown() == "## T\n\nintro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- n\n"


@pytest.mark.slow
def test_marian_peer_generates_in_quick_mode() -> None:
    pytest.importorskip("transformers")
    from bench import bench_marian

    section = bench_marian.run(TINY, quick=True)
    rows = _table_rows(section.markdown())
    assert rows and rows[0][0].startswith("decoding.greedy")
    assert all(r[-1].endswith("×") for r in rows)
