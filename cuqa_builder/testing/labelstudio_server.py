"""A real Label Studio server for tests and benchmarks, run from its own virtualenv (SPEC 4).

`scripts/install-label-studio.sh` installs it into `$CUQA_LS_VENV` (default
`~/.cache/cuqa-builder/label-studio-venv`). The server gets a fresh data directory, a known admin
user and a legacy API token, listens on 127.0.0.1 only, and is stopped with SIGTERM to its own PID.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_VENV = Path.home() / ".cache" / "cuqa-builder" / "label-studio-venv"
START_TIMEOUT_S = 180.0  # the first start runs ~35 s of migrations on a quiet machine


class LabelStudioUnavailable(RuntimeError):
    """The server's virtualenv is not installed."""


def label_studio_venv() -> Path:
    return Path(os.environ.get("CUQA_LS_VENV") or DEFAULT_VENV)


def label_studio_executable(venv: Path | None = None) -> Path:
    exe = (venv or label_studio_venv()) / "bin" / "label-studio"
    if not exe.is_file():
        raise LabelStudioUnavailable(
            f"Label Studio is not installed at {exe.parent.parent} "
            "(run scripts/install-label-studio.sh or set CUQA_LS_VENV)"
        )
    return exe


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LabelStudioServer:
    url: str
    token: str = field(repr=False)
    username: str
    password: str = field(repr=False)  # for a browser that logs in as the admin
    process: subprocess.Popen
    log_path: Path

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> LabelStudioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_label_studio(data_dir: Path, timeout_s: float = START_TIMEOUT_S) -> LabelStudioServer:
    """Start a server on a free loopback port and wait until it answers with our token."""
    exe = label_studio_executable()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    token = secrets.token_hex(20)
    username = "reviewer@example.com"
    password = secrets.token_urlsafe(16)
    env = {
        **os.environ,
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LABEL_STUDIO_USERNAME": username,
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
    }
    env.pop("VIRTUAL_ENV", None)
    log_path = data_dir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(exe), "start", "--no-browser", "--internal-host", "127.0.0.1",
             "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    server = LabelStudioServer(
        url=f"http://127.0.0.1:{port}", token=token, username=username, password=password,
        process=process, log_path=log_path,
    )
    try:
        _wait_until_ready(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_ready(server: LabelStudioServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"Label Studio exited early:\n{_log_tail(server.log_path)}")
        if _answers_as_us(server):
            return
        time.sleep(1.0)
    raise RuntimeError(
        f"Label Studio did not answer within {timeout_s:.0f} s:\n{_log_tail(server.log_path)}"
    )


def _answers_as_us(server: LabelStudioServer) -> bool:
    # A busy port makes the server silently move to the next one, so a bare health check could
    # reach someone else's server: ask who we are with our own token instead.
    request = urllib.request.Request(
        f"{server.url}/api/current-user/whoami",
        headers={"Authorization": f"Token {server.token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response).get("email") == server.username
    except (OSError, ValueError):
        return False


def _log_tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])
