"""The command line: train / translate / evaluate on tiny tasks, and clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from visformer.checkpoint import load_checkpoint
from visformer.cli import main
from visformer.tasks import make_examples

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--max-len", "32",
        "--max-tokens", "256", "--warmup", "10", "--log-every", "5", "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def reverse_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny reverse-task checkpoint trained by the CLI."""
    out = tmp_path_factory.mktemp("cli") / "reverse"
    args = ["train", "--task", "reverse", "--out", str(out), "--steps", "10", "--eval-every", "10",
            "--n-train", "200", "--n-valid", "20", "--snapshots", "3", *TINY]  # fmt: skip
    assert main(args) == 0
    return out


def test_train_task_writes_a_loadable_checkpoint(reverse_ckpt: Path) -> None:
    ckpt = load_checkpoint(reverse_ckpt)
    assert ckpt.task == "reverse" and ckpt.info["steps"] == 10
    assert ckpt.model_config.d_model == 16 and ckpt.train_config.steps == 10
    assert ckpt.metrics["final"]["exact_match"] is not None
    assert [s.step for s in ckpt.snapshots][-1] == 10


def test_translate_prints_one_line_per_sentence(reverse_ckpt: Path, capsys) -> None:
    assert main(["translate", "--checkpoint", str(reverse_ckpt), "a b c", "d e", "--beam-size", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 2  # one line per sentence, even when a barely trained model outputs nothing
    assert all(set(line.split()) <= set("abcdefghijklmnopqrstuvwxyz") for line in out.split("\n"))


def test_evaluate_json_last_line(reverse_ckpt: Path, tmp_path: Path, capsys) -> None:
    examples = make_examples("reverse", 8, seed=7)
    (tmp_path / "src.txt").write_text("\n".join(ex.src for ex in examples) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(ex.tgt for ex in examples) + "\n")
    args = ["evaluate", "--checkpoint", str(reverse_ckpt), "--src", str(tmp_path / "src.txt"),
            "--ref", str(tmp_path / "ref.txt"), "--beam-size", "2", "--json", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out.strip().split("\n")
    assert out[0].startswith("BLEU = ") and out[1].startswith("chrF = ")
    result = json.loads(out[-1])
    assert {"bleu", "chrf"} <= set(result) and 0 <= result["bleu"] <= 100 and result["sentences"] == 8
    assert "by_length" not in result


def test_evaluate_takes_the_decoding_precision(
    reverse_ckpt: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """--precision reaches the decoder: bf16 autocast (forced here) and fp32 both score, and say which ran."""
    from visformer import decoding

    seen = []
    real = decoding.precision_context
    monkeypatch.setattr(decoding, "precision_context", lambda m, p="auto": seen.append(p) or real(m, p))
    examples = make_examples("reverse", 4, seed=7)
    (tmp_path / "src.txt").write_text("\n".join(ex.src for ex in examples) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(ex.tgt for ex in examples) + "\n")
    for precision in ("fp32", "bf16"):
        args = ["evaluate", "--checkpoint", str(reverse_ckpt), "--src", str(tmp_path / "src.txt"),
                "--ref", str(tmp_path / "ref.txt"), "--json", "--no-progress", "--precision", precision]  # fmt: skip
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out.strip().split("\n")[-1])["precision"] == precision
        assert set(seen) == {precision}
        seen.clear()
    with pytest.raises(SystemExit):
        main(["evaluate", "--checkpoint", "x", "--src", "a", "--ref", "b", "--precision", "fp8"])


def test_evaluate_by_length_scores_every_bucket(reverse_ckpt: Path, tmp_path: Path, capsys) -> None:
    examples = make_examples("reverse", 8, seed=7)
    sources = [ex.src for ex in examples] + ["a b c d e f g h i j k l"]  # one sentence over 10 words
    refs = [ex.tgt for ex in examples] + ["l k j i h g f e d c b a"]
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n")
    args = ["evaluate", "--checkpoint", str(reverse_ckpt), "--src", str(tmp_path / "src.txt"),
            "--ref", str(tmp_path / "ref.txt"), "--beam-size", "1", "--json", "--no-progress", "--by-length"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out.strip().split("\n")
    buckets = json.loads(out[-1])["by_length"]
    expected = [("1-8", 7), ("9-11", 1), ("12-14", 1)]  # sources of 4-10 words, then one of 12
    assert [(b["words"], b["n"]) for b in buckets] == expected
    assert any("12-14 source words" in line for line in out)


def test_train_on_a_corpus_with_split_and_test(tmp_path: Path) -> None:
    words = ["cat", "dog", "red", "blue", "big", "small", "runs", "sleeps"]
    src = [f"the {a} {b} {c}" for a in words for b in words for c in words[:2]]
    tgt = [s.upper() for s in src]
    (tmp_path / "c.src").write_text("\n".join(src) + "\n")
    (tmp_path / "c.tgt").write_text("\n".join(tgt) + "\n")
    out = tmp_path / "corpus"
    args = ["train", "--corpus", str(tmp_path / "c.src"), str(tmp_path / "c.tgt"), "--out", str(out),
            "--steps", "4", "--eval-every", "4", "--vocab-size", "300", "--eval-examples", "8",
            "--beam-size", "2", "--snapshots", "0", *TINY]  # fmt: skip
    assert main(args) == 0
    ckpt = load_checkpoint(out)
    assert ckpt.src_tokenizer is ckpt.tgt_tokenizer and ckpt.task is None
    assert ckpt.metrics["final"]["bleu"] is not None
    assert (
        ckpt.info["test"]["beam_size"] == 2
        and "bleu" in ckpt.info["test"]
        and ckpt.info["test"]["sentences"] > 0
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["translate", "--checkpoint", "/no/such/dir", "hi"], "no checkpoint folder"),
        (["train", "--task", "juggle", "--out", "OUT"], "unknown task"),
        (["train", "--task", "copy", "--out", "OUT", "--steps", "0"], "--steps must be at least 1"),
        (["train", "--corpus", "/no/a.txt", "/no/b.txt", "--out", "OUT"], "file not found"),
        (["evaluate", "--checkpoint", "CKPT", "--src", "/no/src", "--ref", "/no/ref"], "file not found"),
        (["train", "--task", "copy", "--out", "../../x y"], "invalid checkpoint name"),
    ],
)
def test_bad_input_gives_one_line_error(
    args: list[str], message: str, tmp_path: Path, reverse_ckpt: Path, capsys
) -> None:
    args = [a.replace("OUT", str(tmp_path / "o")).replace("CKPT", str(reverse_ckpt)) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_python_dash_m_entry_point(reverse_ckpt: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "visformer", "translate", "--checkpoint", str(reverse_ckpt), "x y z"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    bad = subprocess.run(
        [sys.executable, "-m", "visformer", "translate"], cwd=root, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_idle_cores_leaves_busy_cores_to_other_work() -> None:
    from visformer.utils import idle_cores

    assert idle_cores(cores=2, load=2.2) == 1  # two training runs in the background: one thread
    assert idle_cores(cores=2, load=0.1) == 2  # an idle laptop uses both cores
    assert idle_cores(cores=16, load=5.6) == 10 and idle_cores(cores=4, load=40.0) == 1


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_translate_and_evaluate_document_threads(command: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--threads N|auto" in text and "auto (default)" in text and "load average" in text


def test_evaluate_and_translate_run_on_the_free_cores_and_restore_the_threads(
    reverse_ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import os

    import torch

    import visformer.cli as cli

    seen: list[int] = []
    original = cli.translate_all

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(cli, "translate_all", spy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.3, 2.0, 1.5))  # a 2-core machine with other work
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (tmp_path / "src.txt").write_text("a b c\nd e\n")
        (tmp_path / "ref.txt").write_text("c b a\ne d\n")
        files = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt")]
        assert main(["evaluate", "--checkpoint", str(reverse_ckpt), *files, "--json", "--no-progress"]) == 0
        assert json.loads(capsys.readouterr().out.strip().split("\n")[-1])["threads"] == 1
        assert main(["translate", "--checkpoint", str(reverse_ckpt), "a b", "--threads", "2"]) == 0
        assert seen == [1, 2] and torch.get_num_threads() == 2  # the caller's count comes back
    finally:
        torch.set_num_threads(before)
    for bad in ("0", "-1", "many"):
        with pytest.raises(SystemExit):
            main(["translate", "--checkpoint", str(reverse_ckpt), "a", "--threads", bad])
        assert "expected a positive number or 'auto'" in capsys.readouterr().err


def test_evaluate_typed_scores_sources_as_students_type_them(
    reverse_ckpt: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from visformer import cli

    seen: list[list[str]] = []
    real = cli.translate_all
    monkeypatch.setattr(
        cli,
        "translate_all",
        lambda m, s, t, texts, *a, **k: seen.append(list(texts)) or real(m, s, t, texts, *a, **k),
    )
    (tmp_path / "src.txt").write_text("a b c.\nd e f?\n")
    (tmp_path / "ref.txt").write_text("c b a\nf e d\n")
    args = ["evaluate", "--checkpoint", str(reverse_ckpt), "--src", str(tmp_path / "src.txt"),
            "--ref", str(tmp_path / "ref.txt"), "--json", "--no-progress", "--typed"]  # fmt: skip
    assert main(args) == 0
    typed = json.loads(capsys.readouterr().out.strip().split("\n")[-1])["typed"]
    assert set(typed) == {"no final punctuation", "one space fewer"}
    assert seen == [["a b c.", "d e f?"], ["a b c", "d e f"], ["a bc.", "d ef?"]]
