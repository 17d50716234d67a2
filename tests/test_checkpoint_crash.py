"""kill -9: of a checkpoint save half-way, and of the hosted app during a training run.

After either, every listed checkpoint loads and no half-written folder is listed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_class import SAVED
from bench.bench_load import free_port, make_shipped_checkpoint, start_server, stop_server
from bench.class_protocol import Session, click_state, text_state
from visformer.checkpoint import list_checkpoints, load_checkpoint
from visformer.classroom.catalogue import discover_checkpoints

pytestmark = pytest.mark.slow  # child processes killed mid-save, an app server killed mid-run and restarted

# Saves the toy checkpoint into argv[1] but stops for a minute just before config.json (written last).
SLOW_SAVE = """
import sys, time
from pathlib import Path
from visformer import checkpoint

write = checkpoint._write_json
def slow(path, data):
    if path.name == checkpoint.CONFIG_FILE:
        print("writing", flush=True)
        time.sleep(60)
    write(path, data)
checkpoint._write_json = slow
from bench.bench_load import make_shipped_checkpoint
make_shipped_checkpoint(Path(sys.argv[1]))
"""


def kill_mid_save(root: Path) -> None:
    """Run a save of root/toy-reverse in a child process and kill -9 it half-way."""
    repo = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-c", SLOW_SAVE, str(root)], cwd=repo, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "writing"
    child.kill()
    child.wait()


def test_a_save_killed_half_way_is_never_listed_and_an_older_save_survives(tmp_path: Path) -> None:
    kill_mid_save(tmp_path / "fresh")
    assert list_checkpoints(tmp_path / "fresh") == []  # the half-written folder is not listed
    assert [p.name for p in (tmp_path / "fresh").iterdir() if p.name.startswith(".toy-reverse.tmp-")]

    make_shipped_checkpoint(tmp_path / "again")  # a complete save, then a second save of the same name dies
    kill_mid_save(tmp_path / "again")
    assert [p.name for p in list_checkpoints(tmp_path / "again")] == ["toy-reverse"]
    assert load_checkpoint(tmp_path / "again" / "toy-reverse").task == "reverse"


async def train_until_running(url: str, name: str) -> None:
    """Start a training run on the Train page and return once it has trained a few steps."""
    session = Session(url.replace("http", "ws", 1) + "/_stcore/stream")
    await session.connect()
    try:
        await session.rerun(query="")
        run = await session.rerun(page="Train")
        run = await session.rerun(states=[text_state(run.widgets["Checkpoint name"], name)])
        run = await session.rerun(states=[click_state(run.widgets["Start training"])])
        for _ in range(600):  # a bound on polls, not a time limit
            assert session.fragment is not None and not SAVED.search(run.text()), run.text()[-300:]
            if "Outputs at step" in run.text():
                return
            await asyncio.sleep(session.fragment[1])
            run = await session.rerun(auto=True)
        raise AssertionError("the run never reported a step")
    finally:
        await session.close()


def test_kill_9_during_a_training_run_leaves_every_listed_checkpoint_loadable(tmp_path: Path) -> None:
    make_shipped_checkpoint(tmp_path / "shipped")
    earlier = tmp_path / "user" / "s-earlier"
    make_shipped_checkpoint(earlier)  # a model an earlier session saved
    port = free_port()
    server = start_server(tmp_path, port, max_steps=200)  # the page's run: 200 steps, outputs every 40
    try:
        asyncio.run(train_until_running(f"http://127.0.0.1:{port}", "killed-run"))
    finally:
        server.kill()  # kill -9 in the middle of the run
        server.wait()
    folders = [p for p in (tmp_path / "user").iterdir() if p.is_dir()]  # every session's private folder
    listed = [
        ck
        for folder in folders
        for ck in discover_checkpoints(tmp_path / "shipped", folder)
        if not ck.shipped
    ]
    assert [ck.path for ck in listed] == [earlier / "toy-reverse"]  # the run in progress left nothing listed
    assert all(load_checkpoint(ck.path).model is not None for ck in listed)

    server = start_server(tmp_path, port, max_steps=200)  # the restart serves again
    try:

        async def open_app() -> list[str]:
            session = Session(f"ws://127.0.0.1:{port}/_stcore/stream")
            await session.connect()
            try:
                run = await session.rerun(query="")
                return run.errors() + ([] if "Toy task **reverse**" in run.text() else ["no model shown"])
            finally:
                await session.close()

        assert asyncio.run(open_app()) == []
    finally:
        stop_server(server)
