"""Serve a class from several app processes behind nginx: `python -m deploy.launch --processes 4 --listen 0.0.0.0:8080`.

Starts N `streamlit run app.py` processes in hosted mode on 127.0.0.1:BASE … BASE+N-1, all reading one
checkpoints folder and writing one user_checkpoints folder (VISFORMER_CHECKPOINTS, VISFORMER_USER_CHECKPOINTS),
fills deploy/nginx.conf's upstream with them and runs nginx in the foreground on --listen with sticky sessions.
Ctrl-C (or SIGTERM) stops nginx and every app process. Each process keeps its own caches, its own loaded models
and its own cap on training runs (VISFORMER_MAX_CONCURRENT_RUNS per process).

`python -m deploy.launch --serve -- run app.py [streamlit options]` is one app process as the launcher starts it:
torch, plotly and the package imported before the server answers, then `streamlit` in the same process.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NGINX_TEMPLATE = Path(__file__).resolve().parent / "nginx.conf"
NGINX = "/usr/sbin/nginx"


# Imported before the server answers, so that the first students of a class do not wait for torch & co.
PRELOAD = (
    "torch", "pandas", "plotly.graph_objects", "plotly.subplots", "visformer.checkpoint", "visformer.decoding",
    "visformer.explain.analysis", "visformer.explain.attention", "visformer.explain.decoding",
    "visformer.explain.views", "visformer.classroom.catalogue",
)  # fmt: skip


def streamlit_args(port: int, address: str = "127.0.0.1") -> list[str]:
    """`streamlit` arguments: run app.py headless on address:port, no file watching, no full GC after each run.

    Streamlit's default `runner.postScriptGC` runs `gc.collect(2)` after each script run, holding the GIL for
    ~0.14 CPU s with the models and figures in memory: half the server's CPU under a class (bench/RESULTS.md,
    "Class load"), while reference counting frees what a run leaves and Python's own GC still collects cycles.
    """
    return [
        "run", str(REPO / "app.py"), "--server.address", address, "--server.port", str(port),
        "--server.headless", "true", "--server.fileWatcherType", "none", "--server.runOnSave", "false",
        "--browser.gatherUsageStats", "false", "--runner.postScriptGC", "false",
    ]  # fmt: skip


def app_command(port: int, address: str = "127.0.0.1") -> list[str]:
    """One app process: `serve` (preload, then streamlit) with `streamlit_args`."""
    return [sys.executable, "-m", "deploy.launch", "--serve", "--", *streamlit_args(port, address)]


def serve(args: list[str]) -> None:
    """Import PRELOAD, then run `streamlit ARGS` in this process (a module that fails to import is skipped)."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # a warm-up only: the app reports its own import errors
            print(f"visformer: not preloaded: {name}: {exc}", file=sys.stderr, flush=True)
    from streamlit.web import cli

    sys.argv = ["streamlit", *args]
    cli.main(prog_name="streamlit")


def healthy(url: str) -> bool:
    """True when the app answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_healthy(url: str, tries: int = 100, every_s: float = 0.1) -> bool:
    """Poll `url`'s health check until it answers (nginx in front of running apps); False if it never did."""
    for _ in range(tries):
        if healthy(url):
            return True
        time.sleep(every_s)
    return False


def start_app(
    port: int, env: dict[str, str], log: Path, command: list[str] | None = None
) -> subprocess.Popen:
    """Start one app process (default `app_command(port)`); return once /_stcore/health answers."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command or app_command(port), cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early: {log.read_text(errors='replace')[-2000:]}")
        if healthy(f"http://127.0.0.1:{port}"):
            return proc
        time.sleep(0.5)
    stop_process(proc)
    raise RuntimeError("streamlit did not become healthy")


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a process we started (and wait for it; kill it when it does not end)."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def nginx_config(ports: list[int], listen: str, template: Path = NGINX_TEMPLATE) -> str:
    """deploy/nginx.conf with one upstream server per app port and the given listen address."""
    text = template.read_text(encoding="utf-8")
    servers = "".join(f"        server 127.0.0.1:{port};\n" for port in ports)
    text = re.sub(r"(?:[ ]*server [^\n]*# @servers\n)+", lambda _: servers, text)
    return re.sub(r"listen [^;]*;\s*# @listen", f"listen {listen};", text)


def start_nginx(ports: list[int], listen: str, prefix: Path, nginx: str = NGINX) -> subprocess.Popen:
    """nginx in the foreground with its config, pid, temp files and log under `prefix`."""
    for sub in ("temp", "logs"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    (prefix / "nginx.conf").write_text(nginx_config(ports, listen), encoding="utf-8")
    cmd = [nginx, "-p", str(prefix), "-c", "nginx.conf", "-e", "stderr", "-g", "daemon off;"]
    check = subprocess.run([*cmd, "-t"], capture_output=True, text=True)
    if check.returncode:
        raise RuntimeError(f"nginx refused its config: {check.stderr}")
    with open(prefix / "logs" / "nginx.log", "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def hosted_env(checkpoints: Path, user_checkpoints: Path) -> dict[str, str]:
    """The environment of every app process: hosted mode and the shared checkpoint folders."""
    return {
        **os.environ,
        "VISFORMER_HOSTED": "1",
        "VISFORMER_CHECKPOINTS": str(checkpoints),
        "VISFORMER_USER_CHECKPOINTS": str(user_checkpoints),
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    }


def main(argv: list[str] | None = None) -> int:
    """Start the app processes and nginx; wait until interrupted, then stop them all."""
    if argv is None and sys.argv[1:2] == ["--serve"]:  # one app process: `--serve -- STREAMLIT ARGS`
        serve(sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--processes", type=int, default=os.cpu_count() or 2, help="app processes (one per core)"
    )
    parser.add_argument("--base-port", type=int, default=8601, help="port of the first app process")
    parser.add_argument(
        "--listen", default="0.0.0.0:8080", help="nginx's address:port (default 0.0.0.0:8080)"
    )
    parser.add_argument("--checkpoints", type=Path, default=REPO / "checkpoints")
    parser.add_argument("--user-checkpoints", type=Path, default=REPO / "user_checkpoints")
    parser.add_argument("--run-dir", type=Path, default=REPO / "runs" / "deploy", help="logs and nginx files")
    args = parser.parse_args(argv)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    args.user_checkpoints.mkdir(parents=True, exist_ok=True)
    env = hosted_env(args.checkpoints.resolve(), args.user_checkpoints.resolve())
    ports = [args.base_port + i for i in range(args.processes)]
    procs: list[subprocess.Popen] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for port in ports:
            procs.append(start_app(port, env, args.run_dir / f"app-{port}.log"))
        procs.append(start_nginx(ports, args.listen, args.run_dir, shutil.which("nginx") or NGINX))
        print(f"visformer: {len(ports)} app processes behind http://{args.listen}", flush=True)
        procs[-1].wait()
    except KeyboardInterrupt:
        pass
    finally:
        for proc in reversed(procs):
            stop_process(proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
