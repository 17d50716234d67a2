"""Shared fixtures: tiny configs that run in seconds, the app's checkpoint folders, a server and a browser.

Helpers that are not fixtures live in tests/helpers/ (checkpoints, AppTest, Chromium, system programs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from bench.bench_app import free_port, healthy
from deploy.launch import stop_process, streamlit_args
from tests.helpers.app import use_checkpoints
from tests.helpers.browser import CHROMIUM_ARGS, STARTUP_S
from tests.helpers.checkpoints import (
    make_checkpoint,
    tiny_config,
    trained_checkpoint,
    untrained_checkpoint,
)
from tests.helpers.corpora import generate, is_real
from tests.helpers.paths import REPO, SHARED_DATA
from tests.helpers.system import chromium
from visformer import Transformer
from visformer.checkpoint import list_checkpoints, save_checkpoint
from visformer.tokenizer import SentencePieceTokenizer

# Tests run tiny models: one torch thread is faster than several on a small shared machine (one model test took
# 70 s with the default threads and 8.5 s with one on 2 cores), and results do not depend on the core count.
torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that drives Chromium (through the `server` or `browser` fixture) is marked `browser`."""
    unmarked = [
        item.nodeid
        for item in items
        if {"server", "browser"} & set(getattr(item, "fixturenames", ()))
        and not item.get_closest_marker("browser")
    ]
    if unmarked:
        raise pytest.UsageError(f"tests that drive Chromium without @pytest.mark.browser: {unmarked}")


@pytest.fixture(autouse=True)
def _deterministic() -> None:
    torch.manual_seed(0)


@pytest.fixture
def tiny_model() -> Transformer:
    """A two-layer tiny model in eval mode."""
    return Transformer(tiny_config(n_encoder_layers=2, n_decoder_layers=2)).eval()


@pytest.fixture(scope="session")
def corpus_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixes' data folder: ../shared/data when it is here, else a generated stand-in with the same files."""
    return SHARED_DATA if is_real() else generate(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def sp_tokenizer() -> SentencePieceTokenizer:
    """A small SentencePiece tokenizer with byte fallback (English, German, Korean, an emoji)."""
    sentences = [
        "a dog runs on the beach.",
        "ein Hund läuft am Strand.",
        "개가 해변을 달린다.",
        "café ☕",
    ] * 5
    return SentencePieceTokenizer.train(sentences, 300, num_threads=1)


@pytest.fixture(scope="session")
def text_checkpoint(tmp_path_factory: pytest.TempPathFactory, sp_tokenizer: SentencePieceTokenizer) -> Path:
    """An untrained tiny model with that tokenizer, saved as a checkpoint."""
    v = sp_tokenizer.vocab_size
    model = Transformer(tiny_config(src_vocab_size=v, tgt_vocab_size=v)).eval()
    return save_checkpoint(tmp_path_factory.mktemp("ck") / "text", model, sp_tokenizer, sp_tokenizer)


# ---------------------------------------------------------------------------------------------
# The app's checkpoint folders: a "shipped" folder built once per session, a fresh user folder per module
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained tiny reverse-task model (2 layers, 2 heads): `tiny-reverse`."""
    shipped = tmp_path_factory.mktemp("shipped-tiny")
    make_checkpoint(shipped)
    return shipped


@pytest.fixture(scope="session")
def toy_shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A toy Transformer trained on the copy task with snapshots (`toy-copy`) and one without (`no-snapshots`)."""
    shipped = tmp_path_factory.mktemp("shipped-toy")
    trained_checkpoint(shipped)
    untrained_checkpoint(shipped)
    return shipped


@pytest.fixture(scope="session")
def toy_rnn_shipped(toy_shipped: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """toy_shipped's two models and two RNN seq2seq trained on the same task (Bahdanau attention, none)."""
    shipped = tmp_path_factory.mktemp("shipped-toy-rnn")
    shutil.copytree(toy_shipped, shipped, dirs_exist_ok=True)
    for architecture in ("rnn-bahdanau", "rnn-none"):
        trained_checkpoint(shipped, architecture, architecture=architecture)
    return shipped


@pytest.fixture(scope="module")
def roots(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(shipped, user) checkpoint folders: the fixture a module names in `SHIPPED_FIXTURE` (default tiny_shipped)."""
    shipped = request.getfixturevalue(getattr(request.module, "SHIPPED_FIXTURE", "tiny_shipped"))
    return shipped, tmp_path_factory.mktemp("user")


@pytest.fixture
def shipped_checkpoints(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """Point the app at the repository's shipped checkpoints, with an empty folder for the user's."""
    return use_checkpoints(monkeypatch, (REPO / "checkpoints", tmp_path))


@pytest.fixture
def env(roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Point the app at `roots` for one test."""
    return use_checkpoints(monkeypatch, roots)


# ---------------------------------------------------------------------------------------------
# The real app in a real browser: one `streamlit run app.py` per configuration for the session, one Chromium per module
# ---------------------------------------------------------------------------------------------


def start_server(
    tmp_path_factory: pytest.TempPathFactory, checkpoints: Path | None
) -> tuple[str, subprocess.Popen]:
    """Start `streamlit run app.py` on a free loopback port (shipped models: `checkpoints`, else the repository's)."""
    chromium()
    env = dict(os.environ)
    env["VISFORMER_USER_CHECKPOINTS"] = str(tmp_path_factory.mktemp("user-checkpoints"))
    if checkpoints is None and not list_checkpoints(
        REPO / "checkpoints"
    ):  # no shipped checkpoint in this tree yet
        checkpoints = tmp_path_factory.mktemp("shipped")
        make_checkpoint(checkpoints)
    if checkpoints is not None:
        env["VISFORMER_CHECKPOINTS"] = str(checkpoints)
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    cmd = [sys.executable, "-m", "streamlit", *streamlit_args(port)]  # the options deploy/ runs app.py with
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_S
    while not healthy(url):
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with code {proc.returncode}; see {log}")
        if time.monotonic() > deadline:
            stop_process(proc)
            pytest.fail(f"streamlit did not become healthy within {STARTUP_S} s; see {log}")
        time.sleep(0.1)
    return url, proc


@pytest.fixture(scope="session")
def app_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """`app_servers(checkpoints=None, fresh="")`: the URL of the session's server for these shipped checkpoints.

    Started on first use and shared by every test that asks for the same configuration (its caches stay warm);
    a test that needs a server nobody has visited yet names its own `fresh` key. All stop when the session ends.
    """
    started: dict[tuple[str, str], tuple[str, subprocess.Popen]] = {}

    def url(checkpoints: Path | None = None, fresh: str = "") -> str:
        key = (str(checkpoints), fresh)
        if key not in started:
            started[key] = start_server(tmp_path_factory, checkpoints)
        return started[key][0]

    yield url
    for _, proc in started.values():
        stop_process(proc)


@pytest.fixture
def server(app_servers: Callable[..., str]) -> str:
    """The URL of the session's `streamlit run app.py` on the repository's shipped checkpoints."""
    return app_servers()


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per module (Playwright's event loop closes with the module)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        yield launched
        launched.close()
