"""A scripted HTTP server on 127.0.0.1 for the http() tests (each path one behaviour)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict] = []
        self.hits: dict[str, int] = {}
        self.release = threading.Event()  # lets hanging handlers go at teardown

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _send(self, code: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0]
        hit = self.server.hits[path] = self.server.hits.get(path, 0) + 1
        self.server.requests.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        if path == "/ok":
            payload = {"ok": True, "got": json.loads(body) if body else None}
            self._send(200, json.dumps(payload).encode(), "application/json", X_Trace="t-1")
        elif path == "/missing":
            self._send(404, b"no such thesis", "text/plain; charset=utf-8")
        elif path == "/flaky":
            if hit == 1:
                self._send(500, b"boom", "text/plain")
            else:
                self._send(200, b'{"second": true}', "application/json")
        elif path == "/busy":
            if hit == 1:
                self._send(429, b"slow down", "text/plain", Retry_After="7")
            else:
                self._send(200, b"[]", "application/json")
        elif path == "/hang":
            self.server.release.wait(10)
            self._send(200, b"too late", "text/plain")
        elif path == "/big":
            self._send(200, b"x" * (1024 * 1024 + 1), "text/plain")
        elif path == "/fake-json":
            self._send(200, b"not json", "application/json")
        elif path == "/down":
            self._send(503, b"maintenance", "text/plain")
        else:
            self._send(400, b"bad path", "text/plain")

    do_GET = do_POST = do_PUT = _handle
