"""deploy/: two app processes behind nginx on loopback; sessions spread over both, sticky, models private.

Needs Debian's nginx (`.ci/run` installs it); skipped without it, failed in CI (CI set) without it.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest

from bench.bench_class import Script, drive_class
from bench.bench_load import free_port, make_shipped_checkpoint, server_env
from deploy.launch import (
    app_command,
    nginx_config,
    start_app,
    start_nginx,
    stop_process,
    streamlit_args,
    wait_healthy,
)
from tests.helpers.system import nginx

UPSTREAM = "X-Visformer-Upstream"


def visit(url: str, cookie: str = "") -> tuple[str, str]:
    """GET the app's page through the proxy: (route cookie, upstream that answered)."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        set_cookie = response.headers.get("Set-Cookie", "")
        return set_cookie.split(";")[0], response.headers[UPSTREAM]


def test_the_config_lists_every_app_process_and_the_listen_address() -> None:
    text = nginx_config([9001, 9002, 9003], "127.0.0.1:9999")
    assert [line.strip() for line in text.splitlines() if line.strip().startswith("server 127")] == [
        "server 127.0.0.1:9001;",
        "server 127.0.0.1:9002;",
        "server 127.0.0.1:9003;",
    ]
    assert "listen 127.0.0.1:9999;" in text and "# @listen" not in text and "# @servers" not in text
    assert "proxy_set_header Upgrade $http_upgrade;" in text and "hash $visformer_route consistent;" in text


def test_each_app_process_preloads_then_serves_without_a_full_gc_after_every_run() -> None:
    assert app_command(9001)[1:] == ["-m", "deploy.launch", "--serve", "--", *streamlit_args(9001)]
    args = streamlit_args(9001, "0.0.0.0")
    assert args[:2] == ["run", str(Path(__file__).resolve().parents[1] / "app.py")]
    assert [args[args.index(flag) + 1] for flag in ("--server.port", "--server.address", "--runner.postScriptGC")] == [
        "9001", "0.0.0.0", "false",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """Two hosted app processes sharing one checkpoints and one user folder, behind nginx."""
    binary = nginx()
    work = tmp_path_factory.mktemp("deploy")
    make_shipped_checkpoint(work / "shipped")
    (work / "user").mkdir()
    env = server_env(work, max_steps=10)
    ports = [free_port(), free_port()]
    procs = []
    try:
        for port in ports:
            procs.append(start_app(port, env, work / f"app-{port}.log"))
        listen = free_port()
        procs.append(start_nginx(ports, f"127.0.0.1:{listen}", work / "nginx", binary))
        url = f"http://127.0.0.1:{listen}"
        wait_healthy(url)
        yield url, [f"127.0.0.1:{p}" for p in ports], work
    finally:
        for proc in reversed(procs):
            stop_process(proc)


@pytest.mark.slow  # two app processes behind nginx
def test_sessions_spread_over_both_processes_and_stay_sticky(proxy) -> None:
    url, upstreams, _ = proxy
    first = [visit(url) for _ in range(40)]  # 40 new visitors: each gets a route cookie
    assert {up for _, up in first} == set(upstreams)
    for cookie, upstream in first[:6]:
        assert cookie.startswith("visformer_route=")
        assert {visit(url, cookie)[1] for _ in range(3)} == {upstream}  # the cookie keeps its process


@pytest.mark.slow
def test_students_through_the_proxy_keep_their_process_and_their_models_private(proxy) -> None:
    url, upstreams, work = proxy
    visitors = [visit(url) for _ in range(40)]
    # two students per process; student 0 trains
    chosen = [v for up in upstreams for v in [v for v in visitors if v[1] == up][:2]]
    chosen.sort(key=lambda v: v[1] != upstreams[0])
    script = Script(url, 0.1, ["proxied-0"], asyncio.Event(), headers=lambda i: {"Cookie": chosen[i][0]})
    script.train_deadline_s = 300
    reports = asyncio.run(drive_class(script, len(chosen), trainers=1, ramp_s=0.5))
    assert [e for r in reports for e in r.errors] == []
    assert [r.server for r in reports] == [
        up for _, up in chosen
    ]  # each websocket went where its cookie says
    assert [r.trained for r in reports] == ["proxied-0", "", "", ""]
    assert [leak for r in reports for leak in r.leaks] == []  # no picker or URL shows the model to others
    assert all(any(kind == "url to another's model" for kind, _ in r.timings) for r in reports[1:])
    saved = list((work / "user").glob("s-*/proxied-0/config.json"))
    assert len(saved) == 1  # one private folder in the shared user folder
