"""`LoopbackServer`: a threaded JSON-over-HTTP server on 127.0.0.1 for faking hosted APIs.

Subclasses map POST paths to handlers and say how their API shapes errors. The server records every
request (JSON body and headers, minus Authorization), checks the bearer token, and can be told to
answer the next requests with injected faults (429, 503, ...) before serving normally.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ApiError", "Fault", "LoopbackServer", "RecordedRequest"]

Handler = Callable[[Any], Any]


class ApiError(Exception):
    """Raised by a route handler to answer with an error status and the API's error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class RecordedRequest:
    """One request as the server saw it.

    Attributes:
        method: the HTTP method.
        path: the request path, e.g. "/v1/embeddings".
        headers: lower-cased header names to values, without Authorization.
        body: the parsed JSON body (None when it was not JSON).
        authorized: whether `Authorization: Bearer <the server's key>` arrived.
        status: the status code the server answered with.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    authorized: bool
    status: int = 0


@dataclass
class Fault:
    """An injected failure answered instead of the next request."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "injected fault"


class LoopbackServer:
    """Base class: serve `routes()` on 127.0.0.1 (a free port) from a daemon thread.

    Args:
        api_key: the bearer token requests must carry; anything else gets a 401.

    Use as a context manager: `with FakeXServer() as server: ...` (or `start()` / `stop()`).
    """

    def __init__(self, api_key: str = "test-key") -> None:
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- to override ------------------------------------------------------------------------

    def routes(self) -> dict[str, Handler]:
        """POST path -> handler(json_body) returning the JSON response (or raising ApiError)."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The API's JSON error shape."""
        return {"message": message}

    # -- control ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>, the server's root."""
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "injected fault",
    ) -> None:
        """Answer the next `times` requests with `status` (default header retry-after: 0)."""
        with self._lock:
            for _ in range(times):
                self._faults.append(Fault(status, dict(headers or {"retry-after": "0"}), message))

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The recorded requests for one path, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def reset(self) -> None:
        """Forget recorded requests and pending faults."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()

    def start(self) -> LoopbackServer:
        httpd = _QuietServer(("127.0.0.1", 0), _RequestHandler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd, self._thread = serve_in_thread(httpd, self, type(self).__name__)
        return self

    def stop(self) -> None:
        stop_server(self._httpd, self._thread)
        self._httpd, self._thread = None, None

    def open_connections(self) -> int:
        """How many client connections the server holds open now (kept alive between requests)."""
        return open_connections(self._httpd)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ----------------------------------------------------------------------------

    def _serve(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], Any]:
        authorization = headers.pop("authorization", "")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = RecordedRequest(method, path, headers, body, authorization == f"Bearer {self.api_key}")
        with self._lock:
            self.requests.append(record)
            fault = self._faults.popleft() if self._faults else None
        status, extra, payload = self._answer(record, fault)
        record.status = status
        return status, extra, payload

    def _answer(self, record: RecordedRequest, fault: Fault | None) -> tuple[int, dict[str, str], Any]:
        if not record.authorized:
            return 401, {}, self.error_body(401, "Provided API key is invalid.")
        if fault is not None:
            return fault.status, fault.headers, self.error_body(fault.status, fault.message)
        handler = self.routes().get(record.path) if record.method == "POST" else None
        if handler is None:
            return 404, {}, self.error_body(404, f"no route for {record.method} {record.path}")
        if not isinstance(record.body, dict):
            return 400, {}, self.error_body(400, "the request body must be a JSON object")
        try:
            return 200, {}, handler(record.body)
        except ApiError as exc:
            return exc.status, {}, self.error_body(exc.status, exc.message)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection (a closed event loop, a killed process) is normal."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def serve_in_thread(httpd: Any, owner: object, name: str) -> tuple[Any, threading.Thread]:
    """Serve `httpd` (its handlers reach `owner` as server.owner) in a daemon thread."""
    httpd.owner = owner
    # remember every open connection, so that `stop_server` can close the keep-alive ones: a stopped
    # server must stop answering, not go on serving the connections a client already holds
    httpd.open_sockets = open_sockets = set()
    process, finish = httpd.process_request, httpd.shutdown_request

    def process_request(request: Any, client_address: Any) -> None:
        open_sockets.add(request)
        process(request, client_address)

    def shutdown_request(request: Any) -> None:
        open_sockets.discard(request)
        finish(request)

    httpd.process_request, httpd.shutdown_request = process_request, shutdown_request
    # served by our own loop rather than `serve_forever`, whose `shutdown()` only notices the request
    # at its next poll: a pipe wakes the loop, so a test's server stops as soon as it is told to
    httpd.wake_pipe = os.pipe()
    thread = threading.Thread(target=_serve_until_woken, args=(httpd,), name=name, daemon=True)
    thread.start()
    return httpd, thread


def _serve_until_woken(httpd: Any) -> None:
    wake = httpd.wake_pipe[0]
    with selectors.DefaultSelector() as selector:
        selector.register(httpd, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        while True:
            ready = selector.select()
            if any(key.fileobj == wake for key, _ in ready):
                return
            httpd._handle_request_noblock()  # accept, and hand the connection to a handler thread
            httpd.service_actions()


def open_connections(httpd: Any) -> int:
    """How many connections a server started by `serve_in_thread` holds open now."""
    return len(httpd.open_sockets) if httpd is not None else 0


def stop_server(httpd: Any, thread: threading.Thread | None) -> None:
    """Shut a server started by `serve_in_thread` down and wait for its thread."""
    if httpd is not None:
        wake_r, wake_w = httpd.wake_pipe
        os.write(wake_w, b"x")
        if thread is not None:
            thread.join(timeout=5)
        for connection in list(getattr(httpd, "open_sockets", ())):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if thread is None or not thread.is_alive():  # else its loop may still be selecting on the pipe
            os.close(wake_r)
            os.close(wake_w)
    elif thread is not None:
        thread.join(timeout=5)


class _RequestHandler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # keep-alive + Nagle stalls ~40 ms per request
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner: LoopbackServer = self.server.owner  # type: ignore[attr-defined]
        status, extra, payload = owner._serve(self.command, self.path.split("?", 1)[0], headers, raw)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_POST = _handle
    do_GET = _handle

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass
