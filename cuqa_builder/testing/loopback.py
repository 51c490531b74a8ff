"""What the test servers share: a threaded HTTP server on 127.0.0.1 counting requests in flight."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) refuses connections when a client opens 16 at once.
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that hangs up on a kept-alive connection (a run stopping mid-flight) is
        # normal; printing its traceback to stderr would pollute what tests read there.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and tolerates clients that hang up (timeout tests)."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms per call on loopback).
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass

    def send_body(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up; nothing to answer


class LoopbackServer:
    """Start and stop with `with`; `arrive()` and `leave()` bracket each request."""

    def __init__(self, handler: type[QuietHandler]) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), handler)
        # A short poll interval so that leaving the `with` block (shutdown) is quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arrive(self) -> int:
        """Count a request in; returns how many are in flight with it."""
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.in_flight

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1
