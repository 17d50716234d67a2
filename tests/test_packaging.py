"""visformer is a real package: its pins match requirements.txt, and `pip install .` gives the command."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines: list[str]) -> dict[str, str]:
    """name -> version of `name==version` lines."""
    return dict(m.groups() for line in lines if (m := re.match(r"\s*([\w.-]+)==([\w.+-]+)", line)))


def test_package_dependencies_are_the_requirements_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    assert _pins(project["dependencies"]) == _pins(requirements)
    assert project["scripts"]["visformer"] == "visformer.cli:main"


def test_every_core_module_is_under_the_layer_contract() -> None:
    """A new module at the package root (or a new model family) falls under the import-linter contract that
    keeps the core free of the teaching views, the classroom services, the CLI and streamlit."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = next(c for c in contracts if "visformer.explain" in c.get("forbidden_modules", ()))
    package = ROOT / "visformer"
    modules = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    above = {"__init__", "__main__", "cli", "explain", "classroom"}  # the package's face and the layers above
    assert set(core["source_modules"]) == {f"visformer.{m}" for m in modules - above}


@pytest.mark.slow
@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_pip_install_in_a_fresh_venv_gives_the_visformer_command(tmp_path: Path, editable: bool) -> None:
    venv = tmp_path / "venv"
    # the venv sees this interpreter's packages (torch & co., pip and setuptools are not downloaded again)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    target = ["-e", str(ROOT)] if editable else [str(ROOT)]
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", *target],
        check=True, cwd=tmp_path,
    )  # fmt: skip
    help_text = subprocess.run(
        [str(venv / "bin" / "visformer"), "--help"], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert "translate" in help_text and "import-marian" in help_text
    where = subprocess.run(
        [str(python), "-c", "import visformer, visformer.i18n as i; print(visformer.__file__); print(i.t('error.empty_file', 'ko', name='x'))"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.split("\n")  # fmt: skip
    assert (str(ROOT) in where[0]) == editable  # a real install runs from site-packages, not the repo
    assert where[1] and "error.empty_file" not in where[1]  # the locales travelled with the package
