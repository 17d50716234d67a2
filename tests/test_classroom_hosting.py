"""Hosted mode: limits from the environment and secrets, private session folders, the run cap."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.helpers.checkpoints import tiny_checkpoint, tiny_config
from tests.helpers.markdown import rendered
from visformer.classroom.hosting import (
    BusyError,
    HostedLimits,
    RunSlots,
    load_limits,
    session_checkpoint_root,
    session_folder_name,
    user_checkpoint_root,
)


def test_local_is_default_and_generous() -> None:
    limits = load_limits({}, None)
    assert limits == HostedLimits.local()
    assert not limits.is_hosted and not limits.session_folders
    hosted = HostedLimits.hosted()
    assert hosted.max_d_model < limits.max_d_model and hosted.max_steps < limits.max_steps
    assert hosted.max_upload_bytes < limits.max_upload_bytes


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_env_switch_turns_hosted_on(value: str) -> None:
    limits = load_limits({"VISFORMER_HOSTED": value})
    assert limits.is_hosted and limits.session_folders
    assert limits.train_threads == 1 and limits.max_wall_time_s is not None


def test_env_overrides_and_secrets() -> None:
    env = {"VISFORMER_HOSTED": "1", "VISFORMER_MAX_CONCURRENT_RUNS": "5", "VISFORMER_MAX_WALL_TIME_S": "60"}
    limits = load_limits(env)
    assert limits.max_concurrent_runs == 5 and limits.max_wall_time_s == 60.0
    assert limits.max_d_model == HostedLimits.hosted().max_d_model
    secrets = {"visformer": {"hosted": True, "max_steps": 300, "max_concurrent_runs": 3}}
    from_secrets = load_limits({}, secrets)
    assert from_secrets.is_hosted and from_secrets.max_steps == 300 and from_secrets.max_concurrent_runs == 3
    both = load_limits({"VISFORMER_MAX_CONCURRENT_RUNS": "7"}, secrets)  # the environment wins
    assert both.max_concurrent_runs == 7 and both.max_steps == 300
    assert not load_limits({"VISFORMER_HOSTED": "0"}, secrets).is_hosted
    assert load_limits({"VISFORMER_HOSTED": "1", "VISFORMER_TRAIN_THREADS": "none"}).train_threads is None


@pytest.mark.parametrize(
    "env, secrets, fragment",
    [
        ({"VISFORMER_HOSTED": "maybe"}, None, "VISFORMER_HOSTED"),
        ({"VISFORMER_MAX_CONCURRENT_RUNS": "lots"}, None, "must be a number"),
        ({"VISFORMER_MAX_STEPS": "0"}, None, "positive"),
        ({}, {"visformer": {"max_stepz": 3}}, "unknown keys"),
    ],
)
def test_bad_settings_are_named(env: dict, secrets: dict | None, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        load_limits(env, secrets)


def test_secrets_without_section_or_broken_mapping() -> None:
    class Broken(dict):
        def get(self, key, default=None):  # st.secrets raises when there is no secrets.toml
            raise FileNotFoundError("no secrets")

    assert load_limits({}, Broken(x=1)) == HostedLimits.local()
    assert load_limits({}, {"other": {"hosted": True}}) == HostedLimits.local()


@pytest.mark.parametrize(
    "session_id", ["../../etc", "/abs/path", "a/b", "..", "x" * 500, "é", "-rf", "a\x00b"]
)
def test_session_folder_stays_inside_root(tmp_path: Path, session_id: str) -> None:
    folder = session_checkpoint_root(tmp_path, session_id)
    assert folder.parent == tmp_path.resolve()
    assert folder.name.startswith("s-") and "/" not in folder.name and ".." not in folder.name


def test_session_folders_are_distinct_and_stable(tmp_path: Path) -> None:
    a = session_checkpoint_root(tmp_path, "3f1c9a2e-1b2c-4d5e-8f90-123456789abc")
    b = session_checkpoint_root(tmp_path, "9f1c9a2e-1b2c-4d5e-8f90-123456789abc")
    assert a != b and a == session_checkpoint_root(tmp_path, "3f1c9a2e-1b2c-4d5e-8f90-123456789abc")
    assert session_checkpoint_root(tmp_path, "../x") != session_checkpoint_root(tmp_path, "..x")
    with pytest.raises(ValueError):
        session_checkpoint_root(tmp_path, "  ")


def test_user_root_depends_on_mode(tmp_path: Path) -> None:
    assert user_checkpoint_root(tmp_path, "abc", HostedLimits.local()) == tmp_path
    assert user_checkpoint_root(tmp_path, "abc", HostedLimits.hosted()).parent == tmp_path.resolve()
    with pytest.raises(ValueError, match="session id"):
        user_checkpoint_root(tmp_path, None, HostedLimits.hosted())


def test_run_slots_cap_and_one_run_per_session() -> None:
    slots = RunSlots(2)
    slots.acquire("alice")
    with pytest.raises(BusyError, match="already have a training run"):
        slots.acquire("alice")
    slots.acquire("bob")
    with pytest.raises(BusyError, match="busy"):
        slots.acquire("carol")
    slots.release("alice")
    with slots.slot("carol"):
        assert slots.in_use == 2
    assert slots.in_use == 1


def test_run_slots_under_threads() -> None:
    slots = RunSlots(3)
    got, busy = [], []
    barrier = threading.Barrier(12)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            slots.acquire(f"user{i}")
            got.append(i)
        except BusyError:
            busy.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and len(busy) == 9 and slots.in_use == 3


# ---------------------------------------------------------------------------------------------
# Bounded training and isolation, end to end through the job API (visformer.classroom.jobs)
# ---------------------------------------------------------------------------------------------


def _spec(name: str, steps: int = 12, **train: object):
    from visformer.config import TrainConfig
    from visformer.recipes import ModelSize, RunSpec, TaskSource

    config = TrainConfig(steps=steps, max_tokens=512, warmup=4, eval_every=10_000, log_every=2, n_snapshots=2,
                         device="cpu", **train)  # fmt: skip
    return RunSpec(
        name, TaskSource("copy", 100, 10), ModelSize(16, 2, 1, 32), config, max_len=32, dropout=0.0
    )


def _hosted(**changes: object) -> HostedLimits:
    from dataclasses import replace

    return replace(HostedLimits.hosted(), **changes)


def test_job_refuses_busy_server_and_second_run_per_session(tmp_path: Path) -> None:
    from visformer.classroom.jobs import JobRegistry

    limits = _hosted(max_concurrent_runs=1, max_steps=100_000, max_wall_time_s=600.0)
    registry = JobRegistry()
    long_run = registry.start("alice", _spec("long", steps=100_000), limits, tmp_path / "alice")
    try:
        with pytest.raises(BusyError, match="already have a training run"):
            registry.start("alice", _spec("again"), limits, tmp_path / "alice")
        with pytest.raises(BusyError, match="server is busy: 1 training run"):
            registry.start("bob", _spec("bobs"), limits, tmp_path / "bob")
        while long_run.progress().step == 0 and long_run.active:
            time.sleep(0.05)  # let it learn something before Stop
    finally:
        long_run.stop()
        assert long_run.join(timeout=120)
    assert long_run.progress().state == "stopped" and long_run.progress().checkpoint is not None
    done = registry.start("bob", _spec("bobs"), limits, tmp_path / "bob")  # the slot is free again
    assert done.join(timeout=120) and done.progress().state == "done"


def test_job_limits_model_size_steps_wall_time_and_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from visformer.checkpoint import load_checkpoint
    from visformer.classroom.inputs import InputError
    from visformer.classroom.jobs import JobRegistry
    from visformer.recipes import ModelSize
    from visformer.training import Trainer

    registry = JobRegistry()
    limits = _hosted(max_wall_time_s=1.0, max_steps=50_000, max_concurrent_runs=3)
    with pytest.raises(InputError, match="steps is above the limit"):
        registry.start("a", _spec("many", steps=60_000), limits, tmp_path)
    from dataclasses import replace

    big = replace(_spec("big"), size=ModelSize(512, 8, 6, 2048))
    job = registry.start("a", big, limits, tmp_path)
    assert job.join(timeout=120)
    assert job.progress().state == "failed" and "above the limit" in job.progress().message
    assert not any(tmp_path.iterdir())

    threads_seen: list[int] = []
    original = Trainer._steps

    def spy(self: Trainer):  # the loop's body runs inside run()'s thread setting
        threads_seen.append(torch.get_num_threads())
        yield from original(self)

    monkeypatch.setattr(Trainer, "_steps", spy)
    job = registry.start("a", _spec("timed", steps=50_000), limits, tmp_path)
    assert job.join(timeout=120)
    progress = job.progress()
    assert progress.state == "stopped" and "time limit" in progress.message and 0 < progress.step < 50_000
    assert threads_seen == [1]
    saved = load_checkpoint(progress.checkpoint)
    assert saved.train_config.threads == 1 and saved.train_config.time_limit_s == 1.0


def test_nan_loss_stops_and_keeps_the_last_good_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from visformer.checkpoint import load_checkpoint
    from visformer.classroom.jobs import JobRegistry
    from visformer.training import Trainer

    original = Trainer._loss
    calls = {"train": 0}

    def poisoned(self: Trainer, model, batch, smoothing):
        loss, n = original(self, model, batch, smoothing)
        if model.training:
            calls["train"] += 1
            if calls["train"] >= 6:
                loss = loss * float("nan")
        return loss, n

    monkeypatch.setattr(Trainer, "_loss", poisoned)
    job = JobRegistry().start("a", _spec("nan", steps=20), _hosted(), tmp_path)
    assert job.join(timeout=120)
    progress = job.progress()
    assert progress.state == "failed" and "nan" in progress.message.lower() and "step 6" in progress.message
    saved = load_checkpoint(progress.checkpoint)
    assert saved.info["steps"] == 5
    assert all(bool(torch.isfinite(t).all()) for t in saved.model.state_dict().values())


def test_sessions_do_not_see_or_overwrite_each_other(tmp_path: Path) -> None:
    from visformer.classroom.catalogue import discover_checkpoints
    from visformer.classroom.jobs import JobRegistry

    limits = _hosted()
    registry = JobRegistry()
    roots = {who: user_checkpoint_root(tmp_path, f"{who}-session-id", limits) for who in ("alice", "bob")}
    paths = {}
    for who, root in roots.items():
        job = registry.start(who, _spec("mine", steps=4), limits, root)
        assert job.join(timeout=120) and job.progress().state == "done"
        paths[who] = job.progress().checkpoint
    assert paths["alice"] != paths["bob"] and paths["alice"].name == paths["bob"].name == "mine"
    empty = tmp_path / "shipped-none"
    for who, root in roots.items():
        listed = [c.path.resolve() for c in discover_checkpoints(empty, root)]
        assert listed == [paths[who].resolve()]
    assert discover_checkpoints(empty, tmp_path) == []  # the shared root lists nobody's private runs
    again = registry.start("alice", _spec("mine", steps=2), limits, roots["alice"])
    assert again.join(timeout=120)
    assert again.progress().checkpoint.name == "mine-2" and paths["alice"].exists()


def test_crash_while_saving_fails_cleanly_without_a_half_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import visformer.checkpoint as checkpoint_module
    from visformer.checkpoint import list_checkpoints
    from visformer.classroom.jobs import JobRegistry

    def crash(path: Path, data: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module, "_write_json", crash)
    job = JobRegistry().start("a", _spec("crashy", steps=4), _hosted(), tmp_path)
    assert job.join(timeout=120)
    progress = job.progress()
    assert progress.state == "failed" and "disk full" in progress.message and progress.checkpoint is None
    assert list_checkpoints(tmp_path) == [] and [p.name for p in tmp_path.iterdir()] == []


# ---------------------------------------------------------------------------------------------
# The app in hosted mode (AppTest): the picker lists only this session's models; odd input is cleaned
# ---------------------------------------------------------------------------------------------


def test_app_lists_only_this_sessions_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    shipped, users = tmp_path / "shipped", tmp_path / "users"
    tiny_checkpoint(shipped / "toy-copy")
    limits = HostedLimits.hosted()
    tiny_checkpoint(user_checkpoint_root(users, "mine", limits) / "my-run")
    tiny_checkpoint(user_checkpoint_root(users, "theirs", limits) / "their-run")
    tiny_checkpoint(users / "shared-run")  # what local mode would list for everybody
    monkeypatch.setenv("VISFORMER_HOSTED", "1")
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(shipped))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(users))
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    app.session_state["_train_owner"] = "mine"
    app.query_params["checkpoint"] = "yours/their-run"  # a link to someone else's model
    app.query_params["sentence"] = "a\x07 b  <b>c</b> " + "d " * 80
    app.run()
    assert not app.exception
    assert list(app.sidebar.selectbox[0].options) == ["toy-copy", "my-run (yours)"]
    assert app.session_state["checkpoint"] == "toy-copy"  # the link fell back to the shipped model
    notes = " ".join(i.value for i in app.info)
    assert "cut to the first" in notes and "at most 31 tokens" in notes
    importer = next(b for b in app.sidebar.button if b.label == "Import")
    assert importer.disabled  # nothing uploaded yet
    heading = next(m.value for m in app.markdown if m.value.startswith("#### →"))
    assert "<" not in heading.replace("\\<", "")  # output shown as text, never as HTML


def test_inference_after_overlapping_train_page_runs_keeps_the_configured_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from visformer.classroom.jobs import JobRegistry
    from visformer.model import Transformer
    from visformer.training import Trainer

    original = Trainer._steps
    first_running, second_running, first_done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def overlapping(self: Trainer):  # the second run starts while the first trains, and ends after it
        seen[f"seed {self.config.seed}"] = torch.get_num_threads()
        if self.config.seed == 0:
            first_running.set()
            assert second_running.wait(timeout=120)
        else:
            second_running.set()
            assert first_done.wait(timeout=120)
        yield from original(self)

    monkeypatch.setattr(Trainer, "_steps", overlapping)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the app's configured count
    try:
        limits = _hosted(max_concurrent_runs=2)
        registry = JobRegistry()
        first = registry.start("alice", _spec("first", steps=3), limits, tmp_path / "a")
        assert first_running.wait(timeout=120)
        second = registry.start("bob", _spec("second", steps=3, seed=1), limits, tmp_path / "b")
        assert first.join(timeout=120)
        first_done.set()
        assert second.join(timeout=120)
        assert first.progress().state == second.progress().state == "done"
        assert set(seen.values()) == {1}  # each run trained on its one thread
        assert torch.get_num_threads() == 2  # this thread's inference

        def later_script_run() -> None:  # Streamlit runs each rerun in a new thread
            model = Transformer(tiny_config()).eval()
            with torch.no_grad():
                model(torch.tensor([[5, 6, 3]]), torch.tensor([[1, 5]]))
            seen["later"] = torch.get_num_threads()

        worker = threading.Thread(target=later_script_run)
        worker.start()
        worker.join()
        assert seen["later"] == 2
    finally:
        torch.set_num_threads(before)


def _app(users: Path, shipped: Path, monkeypatch: pytest.MonkeyPatch, hosted: bool):
    """The app (AppTest) on these checkpoint folders, hosted or local."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("VISFORMER_HOSTED", "1" if hosted else "0")
    monkeypatch.setenv("VISFORMER_CHECKPOINTS", str(shipped))
    monkeypatch.setenv("VISFORMER_USER_CHECKPOINTS", str(users))
    return AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)


def test_a_link_never_becomes_markdown_in_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    tiny_checkpoint(tmp_path / "shipped" / "toy-copy")
    for word in ("![](//127.1:8999/)" + "A" * 70, "[Login](//127.1/)" + "B" * 70):
        app = _app(tmp_path / "users", tmp_path / "shipped", monkeypatch, hosted=True)
        app.query_params["sentence"] = word
        app.run()
        assert not app.exception
        errors = [e.value for e in app.error]
        assert any(word[:20] in rendered(e)[1] for e in errors), errors  # the word, shown as typed
        for shown in errors + [w.value for w in app.warning] + [i.value for i in app.info]:
            kinds = rendered(shown)[0]
            assert not kinds & {"image", "link_open", "html_inline", "html_block"}, shown


def test_broken_checkpoints_never_break_a_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that loading refuses is listed, and picking it gives one message; every other page still works."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    shipped, users = tmp_path / "shipped", tmp_path / "users"
    tiny_checkpoint(shipped / "toy-copy")
    for name, change in {
        "bogus-task": lambda c: c.update(task="bogus"),
        "info-text": lambda c: c.update(info="a string"),
    }.items():
        folder = tiny_checkpoint(users / name)
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))
    deep = tiny_checkpoint(users / "deep")
    (deep / "config.json").write_text(
        '{"format": "visformer-checkpoint", "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    )
    fp8 = tiny_checkpoint(users / "float8")
    weights = load_file(str(fp8 / "weights.safetensors"))
    save_file({k: t.to(torch.float8_e4m3fn) for k, t in weights.items()}, str(fp8 / "weights.safetensors"))
    for name in ("bogus-task", "info-text", "deep", "float8"):
        app = _app(users, shipped, monkeypatch, hosted=False)
        app.query_params["checkpoint"] = f"yours/{name}"
        app.run()
        assert not app.exception, (name, [e.value for e in app.exception])
        assert app.session_state["checkpoint"] == f"yours/{name}"
        errors = " ".join(e.value for e in app.error)
        assert "Could not load checkpoint" in errors, (name, errors)
        app.switch_page("pages/decoding.py").run()  # the sidebar and the next page survive it too
        assert not app.exception, (name, [e.value for e in app.exception])


def test_one_upload_limit_stated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The uploader refuses what the server would refuse: its limit is never above server.maxUploadSize."""
    import tomllib

    from visformer.classroom.hosting import MB, UPLOAD_MB, upload_megabytes

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == UPLOAD_MB
    assert HostedLimits.hosted().max_archive_bytes == UPLOAD_MB * MB  # README: 50 MB, the server's limit
    assert upload_megabytes(2048 * MB) == UPLOAD_MB and upload_megabytes(2 * MB) == 2
    tiny_checkpoint(tmp_path / "shipped" / "toy-copy")
    for hosted in (True, False):
        app = _app(tmp_path / "users", tmp_path / "shipped", monkeypatch, hosted=hosted)
        app.run()
        assert not app.exception
        uploaders = app.get("file_uploader")  # the sidebar's checkpoint import
        assert uploaders and all(u.proto.max_upload_size_mb == UPLOAD_MB for u in uploaders)


def test_session_disk_is_capped_and_leftovers_swept(tmp_path: Path) -> None:
    import os

    from visformer.checkpoint import list_checkpoints
    from visformer.classroom.archive import export_checkpoint_zip, import_checkpoint_zip
    from visformer.classroom.hosting import old_sessions, sweep_leftovers
    from visformer.classroom.inputs import InputError, check_session_space

    limits = HostedLimits.hosted()
    root = user_checkpoint_root(tmp_path / "users", "student", limits)
    data = export_checkpoint_zip(tiny_checkpoint(tmp_path / "src" / "tiny"))
    for i in range(limits.max_session_checkpoints):
        import_checkpoint_zip(data, root, f"m{i}", limits)
    with pytest.raises(InputError, match="already keeps 10 model"):
        import_checkpoint_zip(data, root, "one-more", limits)
    with pytest.raises(InputError, match="already keeps 10 model"):
        check_session_space(root, limits)  # what a training run checks before it starts
    small = HostedLimits(max_session_bytes=len(data) - 1)
    with pytest.raises(InputError, match="the most allowed here is - models or"):
        import_checkpoint_zip(data, tmp_path / "users" / "s-other", "m", small)
    check_session_space(root, HostedLimits.local())  # local mode: no cap
    from visformer.classroom.jobs import JobRegistry

    with pytest.raises(InputError, match="already keeps 10 model"):  # repeated training stops at the cap too
        JobRegistry().start("student", _spec("again"), limits, root)
    # leftovers of killed saves and imports: old ones are removed, a fresh one (a save going on) stays
    old = root / ".m0.tmp-123-0a1b2c3d"
    fresh = root / ".m1.tmp-124-0a1b2c3e"
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "weights.safetensors").write_bytes(b"x" * 10)
    now = time.time()
    for path in (old, old / "weights.safetensors"):
        os.utime(path, (now - 7200, now - 7200))
    assert sweep_leftovers(tmp_path / "users", now=now) == [old]
    assert not old.exists() and fresh.exists() and len(list_checkpoints(root)) == 10
    # a teacher's clean-up: sessions untouched for a week
    assert old_sessions(tmp_path / "users", 7 * 86400, now=now) == []
    assert old_sessions(tmp_path / "users", 7 * 86400, now=now + 8 * 86400)[0].name == root.name


def test_teacher_cleans_old_sessions(tmp_path: Path, capsys) -> None:
    import os

    from visformer.classroom.__main__ import main

    limits = HostedLimits.hosted()
    old, new = (user_checkpoint_root(tmp_path, sid, limits) for sid in ("old", "new"))
    tiny_checkpoint(old / "m")
    tiny_checkpoint(new / "m")
    (tmp_path / "shared-run").mkdir()  # not a session folder: never touched
    week_ago = time.time() - 8 * 86400
    for base, dirs, files in os.walk(old):
        for name in [base, *(os.path.join(base, f) for f in dirs + files)]:
            os.utime(name, (week_ago, week_ago))
    assert main(["clean", "--root", str(tmp_path), "--dry-run"]) == 0
    assert old.exists() and "would remove" in capsys.readouterr().out
    assert main(["clean", "--root", str(tmp_path), "--days", "7"]) == 0
    assert not old.exists() and new.exists() and (tmp_path / "shared-run").exists()
    assert main(["clean", "--root", str(tmp_path), "--days", "-1"]) == 2


@pytest.mark.parametrize("hosted", [True, False])
def test_an_unexpected_error_in_a_page_is_one_line_when_hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hosted: bool
) -> None:
    from visformer.explain import views

    def broken(*args, **kwargs):
        raise RuntimeError(f"boom in {tmp_path}/secret")

    monkeypatch.setattr(views, "translation_view", broken)
    tiny_checkpoint(tmp_path / "shipped" / "toy-copy")
    app = _app(tmp_path / "users", tmp_path / "shipped", monkeypatch, hosted=hosted)
    app.query_params["sentence"] = f"a b c {hosted}"  # a sentence no other test has cached
    app.run()
    if hosted:
        assert not app.exception
        shown = " ".join(e.value for e in app.error)
        assert "unexpected error \\(RuntimeError\\)" in shown and "secret" not in shown, shown
    else:  # locally (and in every other test) the traceback shows, so nothing is hidden from a developer
        assert app.exception and "boom" in app.exception[0].value


def test_cached_data_is_bounded_by_bytes_as_the_readme_says() -> None:
    """README, Memory: cached translations and figures take at most 64 MB per process (server.maxCacheDataSize)."""
    import tomllib

    import streamlit.config

    repo = Path(__file__).resolve().parents[1]
    config = tomllib.loads((repo / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxCacheDataSize"] == "64mb"
    assert "at most 64 MB of serialized data per process" in (repo / "README.md").read_text()
    streamlit.config.get_config_options(force_reparse=True)  # the value Streamlit reads at start
    assert streamlit.config.get_option("server.maxCacheDataSize") == "64mb"


def test_a_session_id_with_a_trailing_newline_is_hashed_not_used_as_a_folder_name() -> None:
    assert session_folder_name("abc") == "s-abc"
    folder = session_folder_name("abc\n")
    assert "\n" not in folder and folder != "s-abc\n"
