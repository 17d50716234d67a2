"""The repository as a new user meets it: install commands, licence terms, CI lanes, lint, test layout."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"\s*# fmt: skip\s*$")  # a trailing comment, not the words in a string


def _section(text: str, heading: str) -> str:
    """The body of the markdown section `heading` (up to the next heading of the same or higher level)."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def _pinned(requirement: str) -> str:
    """The pinned version of `requirement` in requirements.txt."""
    text = (REPO / "requirements.txt").read_text(encoding="utf-8")
    return re.search(rf"^{requirement}==(\S+)", text, flags=re.M).group(1)


def test_readme_says_pypi_torch_is_the_cuda_build_and_gives_the_cpu_one_liner() -> None:
    setup = _section((REPO / "README.md").read_text(encoding="utf-8"), "## Set up")
    torch = _pinned("torch")
    assert "installs the pinned CPU build" not in setup
    assert f"`torch=={torch}` from PyPI is the CUDA build" in setup
    assert f"python -m pip install torch=={torch} --index-url https://download.pytorch.org/whl/cpu" in setup
    # the two commands the README has always given (and .ci/run runs) stay as they are
    assert "python -m pip install -r requirements.txt && streamlit run app.py" in setup
    assert "python -m pip install -r requirements-test.txt && python -m pytest" in setup


def test_the_code_has_a_license_and_every_shipped_checkpoint_its_terms() -> None:
    license_text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "Permission is hereby granted" in license_text
    shipped = sorted(p.parent.name for p in (REPO / "checkpoints").glob("*/config.json"))
    assert "multi30k-en-de" in shipped and "tatoeba-ko-en" in shipped
    terms = {
        "README.md": _section((REPO / "README.md").read_text(encoding="utf-8"), "## License"),
        "checkpoints/README.md": _section(
            (REPO / "checkpoints" / "README.md").read_text(encoding="utf-8"), "## Terms of use"
        ),
    }
    for where, section in terms.items():
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        named = {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}
        assert set(shipped) <= named, f"{where} states no terms for {sorted(set(shipped) - named)}"


def test_ci_runs_the_pinned_ruff_lint_and_format_checks() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m ruff check ." in ci and "python -m ruff format --check ." in ci
    assert re.search(r"^ruff==\S+", (REPO / "requirements-test.txt").read_text(encoding="utf-8"), flags=re.M)


def test_ci_runs_the_readme_suite_in_a_fast_lane_then_the_rest_selecting_every_test_once() -> None:
    """The lanes of .ci/run are the README's `python -m pytest`: whatever its markers, a test is in exactly one."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in ci.splitlines() if line.startswith("python -m pytest")]
    lanes = [
        re.fullmatch(r'python -m pytest -m "([a-z ]+)"( -x -q)?( -n \d+( --dist load\w*)?)?', command)
        for command in commands
    ]
    assert len(lanes) == 2 and all(lanes), commands  # no unfiltered run beside the lanes
    assert lanes[0].group(1) == "not browser and not slow" and lanes[0].group(2)  # fast, stops at a failure
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
        "ini_options"
    ]
    markers = [line.split(":")[0] for line in config["markers"]]
    for marked in itertools.product([False, True], repeat=len(markers)):
        names = dict(zip(markers, marked, strict=True))
        chosen = [lane.group(1) for lane in lanes if eval(lane.group(1), {"__builtins__": {}}, names)]
        assert len(chosen) == 1, f"a test marked {names} runs in {chosen}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert all(f"`{command}`" in readme for command in commands)  # the README says how CI splits it


def test_shared_test_code_lives_in_conftest_and_helpers_not_in_test_files() -> None:
    """A test file imports neither conftest nor another test file: fixtures are found, helpers imported."""
    borrowing = re.compile(
        r"^\s*(from\s+(tests)?\.?(conftest|test_\w+)\s+import|from\s+(tests|\.)\s+import\s+(conftest|test_)"
        r"|import\s+tests\.(conftest|test_))",
        re.M,
    )
    found = [
        p.name for p in (REPO / "tests").rglob("*.py") if borrowing.search(p.read_text(encoding="utf-8"))
    ]
    assert not found, f"move what these import into tests/conftest.py or tests/helpers/: {found}"


def test_every_fmt_skip_is_one_the_formatter_needs(tmp_path: Path) -> None:
    """Dropping any one `# fmt: skip` must change what `ruff format` makes of the file; else it is clutter."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")  # the project's line length
    trials: dict[str, str] = {}
    for name in files:
        path = REPO / name
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines):
            if SKIP.search(line):
                trial = tmp_path / f"t{len(trials)}.py"
                trial.write_text(
                    "\n".join([*lines[:i], SKIP.sub("", line), *lines[i + 1 :]]), encoding="utf-8"
                )
                trials[trial.name] = f"{name}:{i + 1}"
    if not trials:
        return
    check = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    reformatted = set(re.findall(r"(t\d+\.py)", check.stdout + check.stderr))
    unneeded = sorted(where for trial, where in trials.items() if trial not in reformatted)
    assert not unneeded, f"# fmt: skip the formatter does not need: {unneeded}"
