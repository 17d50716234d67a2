"""The command line: train / translate / evaluate on tiny tasks, and clear errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.training import TINY
from visformer.checkpoint import load_checkpoint
from visformer.cli import main
from visformer.tasks import make_examples


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
    from visformer.decoding import search

    seen = []
    real = search.decoding_dtype
    monkeypatch.setattr(
        search, "decoding_dtype", lambda c, n, d, p="auto": seen.append(p) or real(c, n, d, p)
    )
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
        (
            ["translate", "--checkpoint", "CKPT", "x", "--beam-size", "100000"],
            "--beam-size must be at most 64",
        ),
        (["translate", "--checkpoint", "CKPT", "x", "--beam-size", "0"], "--beam-size must be at least 1"),
        (
            ["translate", "--checkpoint", "CKPT", "x", ""],
            "sentence 2 is empty: there is nothing to translate",
        ),
        (["translate", "--checkpoint", "CKPT", "   "], "sentence 1 is empty"),
        (
            ["evaluate", "--checkpoint", "CKPT", "--src", "S", "--ref", "S", "--batch-size", "0"],
            "--batch-size must be at least 1",
        ),
        (
            ["evaluate", "--checkpoint", "CKPT", "--src", "S", "--ref", "S", "--batch-size", "5000"],
            "--batch-size must be at most 1024",
        ),
        (
            [
                "evaluate",
                "--checkpoint",
                "CKPT",
                "--src",
                "S",
                "--ref",
                "S",
                "--beam-size",
                "64",
                "--batch-size",
                "128",
            ],
            "at most 4096, got 64 x 128",
        ),
        (
            ["evaluate", "--checkpoint", "CKPT", "--src", "LATIN1", "--ref", "S"],
            "LATIN1 is not UTF-8 text (bad byte at line 2)",
        ),
        (["train", "--task", "copy", "--out", "OUT", "--threads", "0"], "--threads must be at least 1"),
    ],
)
def test_bad_input_gives_one_line_error(
    args: list[str], message: str, tmp_path: Path, reverse_ckpt: Path, capsys
) -> None:
    (tmp_path / "s.txt").write_text("a b\n")
    (tmp_path / "latin1.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    names = {
        "OUT": tmp_path / "o",
        "CKPT": reverse_ckpt,
        "LATIN1": tmp_path / "latin1.txt",
        "S": tmp_path / "s.txt",
    }
    args = [str(names.get(a, a)) for a in args]
    message = message.replace("LATIN1", str(names["LATIN1"]))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


TOY = ["--task", "copy", "--steps", "2", "--n-train", "50", "--n-valid", "5", "--eval-every", "2", *TINY]


def test_train_never_replaces_a_folder_it_did_not_write(tmp_path: Path, capsys) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes").write_text("x")
    assert main(["train", "--out", str(precious), *TOY]) == 2
    assert "is a folder that is not a visformer checkpoint" in capsys.readouterr().err
    assert main(["train", "--out", str(precious), "--overwrite", *TOY]) == 2  # not even when asked
    assert (precious / "notes").read_text() == "x" and sorted(p.name for p in precious.iterdir()) == ["notes"]
    a_file = tmp_path / "a-file"
    a_file.write_text("y")
    assert main(["train", "--out", str(a_file), "--overwrite", *TOY]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err and a_file.read_text() == "y"


def test_train_replaces_a_checkpoint_only_with_overwrite(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    out.mkdir()  # an empty folder is fine
    assert main(["train", "--out", str(out), *TOY]) == 0
    stamp = (out / "config.json").stat().st_mtime_ns
    assert main(["train", "--out", str(out), *TOY]) == 2
    assert "is a checkpoint already; add --overwrite to replace it" in capsys.readouterr().err
    assert (out / "config.json").stat().st_mtime_ns == stamp
    assert main(["train", "--out", str(out), "--overwrite", *TOY]) == 0
    assert (out / "config.json").stat().st_mtime_ns != stamp
    assert main(["average", str(out), "--out", str(out)]) == 2  # average asks too
    assert main(["average", str(out), "--out", str(out), "--overwrite"]) == 0
    assert load_checkpoint(out).info["averaged"][0]["name"] == "run"


def test_prepare_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys) -> None:
    from visformer.cli import check_out

    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "thesis.tex").write_text("x")
    assert main(["prepare", "--mix", "en-de", "--data", str(tmp_path / "none"), "--out", str(folder)]) == 2
    assert "holds files that prepare did not write; add --overwrite" in capsys.readouterr().err
    assert check_out(str(folder), overwrite=True, kind="data") == folder
    (folder / "thesis.tex").unlink()
    (folder / "manifest.json").write_text("{}")  # an earlier prepare's folder: written again
    assert check_out(str(folder), kind="data") == folder


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


def _cli(*args: str | bytes) -> subprocess.CompletedProcess:
    """`python -m visformer ARGS` (bytes arguments stay bytes: non-UTF-8 argv)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "visformer", *args], capture_output=True, cwd=REPO, env=env)


@pytest.mark.parametrize("sentence", [b"caf\xe9 \xff\xfe", b"\xed\xa0\x80", "\u202e\x7f ok".encode()])
def test_cli_translate_with_non_utf8_arguments_translates_or_says_one_line(
    text_checkpoint: Path, sentence: bytes
) -> None:
    done = _cli("translate", "--checkpoint", str(text_checkpoint), sentence)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    if done.returncode == 0:
        assert done.stdout.count(b"\n") == 1
    else:
        assert done.returncode == 2 and done.stderr.count(b"\n") == 1


def test_cli_non_utf8_checkpoint_path_is_one_error_line() -> None:
    done = _cli("translate", "--checkpoint", b"/no/such/\xff", "hello")
    assert done.returncode == 2 and done.stderr.startswith(b"error: ") and done.stderr.count(b"\n") == 1


@pytest.mark.parametrize("name", [b"abc\xff", b"abc\n", b"..", b".hidden"])
def test_cli_average_refuses_an_out_name_outside_the_character_set(
    text_checkpoint: Path, tmp_path: Path, name: bytes
) -> None:
    done = _cli("average", str(text_checkpoint), "--out", os.fsencode(tmp_path) + b"/" + name)
    assert done.returncode == 2 and done.stderr.startswith(b"error: invalid checkpoint name")
    assert done.stderr.count(b"\n") == 1 and list(tmp_path.iterdir()) == []


def test_cli_os_errors_are_one_line(text_checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    done = _cli("average", str(text_checkpoint), "--out", str(tmp_path / "a-file" / "avg"))
    assert done.returncode == 2 and done.stderr.startswith(b"error: ") and done.stderr.count(b"\n") == 1
