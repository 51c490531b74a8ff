"""The embedded model served by llama.cpp: `LocalServer` runs llama.cpp's own OpenAI-compatible
server (`xllamacpp`) on 127.0.0.1 for a registry model (`local_registry.py`; pulled on first use
by `local_pull.py`), so the gateway talks to it exactly as to any remote endpoint; `SERVERS`
keeps one running per model and settings for the whole process."""

from __future__ import annotations

import atexit
import logging
import threading
from collections import Counter
from typing import Any

from cuqa_builder.cores import available_cores
from cuqa_builder.llm.local_pull import ensure_model
from cuqa_builder.llm.local_registry import ModelError, registry_model

log = logging.getLogger(__name__)


class LocalServer:
    """llama.cpp's OpenAI-compatible server for a registry model, on 127.0.0.1.

    `parallel` slots decode that many requests together, each with `n_ctx` tokens of context.
    `threads` defaults to every core this process may use: a count taken from the load at
    start would keep a whole run on one thread after a passing load (a pip install, spaCy
    loading). Use as a context manager; `base_url` is ready once `start()` returns.
    """

    def __init__(
        self, name: str, n_ctx: int = 4096, threads: int | None = None, parallel: int = 1
    ) -> None:
        self.model = registry_model(name)
        self.n_ctx = n_ctx
        self.threads = threads or available_cores()
        self.parallel = parallel
        self._server: Any = None
        self.base_url = ""

    def start(self) -> str:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelError(f"the embedded model needs xllamacpp: {exc}") from None
        path = ensure_model(self.model.name)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.n_ctx * self.parallel
        params.n_parallel = self.parallel
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # llama.cpp binds a free port and reports it
        params.verbosity = 0  # errors only: its per-request timings would flood the console
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:  # the binding raises plain RuntimeErrors
            raise ModelError(f"llama.cpp could not start {self.model.name}: {exc}") from None
        self.base_url = self._server.listening_address.rstrip("/") + "/v1"
        log.info("local model %s served at %s (threads: %d)", self.model.name, self.base_url,
                 self.threads)
        return self.base_url

    def close(self) -> None:
        # The binding stops its HTTP thread and frees the model when the object is released.
        self._server = None

    @property
    def settings(self) -> tuple[str, int, int, int]:
        return self.model.name, self.n_ctx, self.threads, self.parallel

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerPool:
    """The embedded models this process serves, shared by the gateways that use them.

    Loading the 1.5B model takes seconds (a dozen on a busy machine), and each stage of a
    command opens its own gateway: so a server stays up when its last gateway closes, warm for
    the next stage with the same settings. A server in use is never closed; an idle one is
    closed when another is released (one warm model at most) and at exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, int, int, int], LocalServer] = {}
        self._users: Counter[tuple[str, int, int, int]] = Counter()
        atexit.register(self.close_all)

    def acquire(self, wanted: LocalServer) -> LocalServer:
        """A started server with `wanted`'s settings (started now if none runs)."""
        with self._lock:
            server = self._servers.get(wanted.settings)
            if server is None:
                wanted.start()
                server = self._servers[wanted.settings] = wanted
            self._users[wanted.settings] += 1
            return server

    def release(self, server: LocalServer) -> None:
        """One user fewer; idle servers other than this one are closed."""
        with self._lock:
            self._users[server.settings] -= 1
            for key, other in list(self._servers.items()):
                if key != server.settings and self._users[key] <= 0:
                    other.close()
                    del self._servers[key]

    def close_all(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.close()
            self._servers.clear()


SERVERS = ServerPool()

