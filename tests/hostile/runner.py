"""Run hostile inputs, each in a process of its own under an address-space limit (RLIMIT_AS).

A :class:`CaseServer` is ``python -m tests.hostile.child --serve`` started with the caller's
environment (the tests give it ``child_env()``): it imports Django and the analysis once, then
forks one process per case, which sets RLIMIT_AS and analyses the input as the pipeline does
(tests/hostile/child.py). So the start-up (1.2-1.7 s of CPU on a quiet 2-core machine, about
2.4 s of wall on a busy one) is paid once per server, not once per case, and each case still
runs alone under the limit: a memory regression fails there, as a MemoryError, instead of taking
the machine down; a case that crashes or outlives its timeout is reported as outcome "crash"
and the next case runs as usual. :class:`CasePool` runs cases on several servers at a time;
:func:`run_case` runs one case on a server of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
MEMORY_LIMIT_MB = 1024
TIMEOUT = 180  # seconds for one case, building its input included
START_SECONDS = 120  # for a server to be ready: interpreter, django.setup(), imports
SLACK = 30  # beyond a case's timeout before the server itself counts as stuck


class CaseServer:
    """One preloaded server; :meth:`run` runs one case at a time (not thread-safe)."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._proc: subprocess.Popen | None = None
        self._spawn()

    def _spawn(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the server)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.hostile.child", "--serve"],
            cwd=ROOT,
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # its own process group: killed with its case, if any
        )
        self._buffer = b""
        self._ready = False

    def _line(self, timeout: float) -> dict | None:
        """The server's next JSON line, or None when it ended or said nothing for ``timeout``."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            line, found, rest = self._buffer.partition(b"\n")
            if found:
                self._buffer = rest
                if line.startswith(b"{"):
                    return json.loads(line)
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk

    def _failure(self, what: str) -> str:
        """Stop the server; ``what`` with its exit status and the tail of its stderr."""
        assert self._proc is not None
        self._kill()
        code = self._proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        self._close_pipes()
        self._proc = None
        return f"{what} (server exit {code}): {' | '.join(tail)}"[:800]

    def run(self, name: str, *, memory_mb: int = MEMORY_LIMIT_MB, timeout: float = TIMEOUT) -> dict:
        """The result of input ``name`` (``outcome`` "crash" when its process died)."""
        if self._proc is None:
            self._spawn()
        assert self._proc is not None and self._proc.stdin is not None
        if not self._ready:
            if self._line(START_SECONDS) is None:
                raise RuntimeError(self._failure(f"no server ready within {START_SECONDS} s"))
            self._ready = True
        request = {"name": name, "memory_mb": memory_mb, "timeout": timeout}
        try:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the server ended: _line() says so
        answer = self._line(timeout + SLACK)
        if answer is None:
            message = self._failure(f"no answer from the server within {timeout + SLACK:.0f} s")
            return {"name": name, "outcome": "crash", "message": message}
        return answer

    def _kill(self) -> None:
        """Kill the server and the case it runs (its process group)."""
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)

    def _close_pipes(self) -> None:
        assert self._proc is not None
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._stderr.close()

    def close(self) -> None:
        if self._proc is None:
            return
        proc = self._proc
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # end of requests: the server returns
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._kill()
            proc.wait()
        self._close_pipes()
        self._proc = None

    def __enter__(self) -> CaseServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CasePool:
    """``workers`` servers, started at once; :meth:`map` runs cases ``workers`` at a time."""

    def __init__(self, env: dict[str, str], workers: int = 2) -> None:
        self._servers = [CaseServer(env) for _ in range(workers)]
        self._free: queue.Queue[CaseServer] = queue.Queue()
        for server in self._servers:
            self._free.put(server)

    def run(self, name: str, **kwargs) -> dict:
        server = self._free.get()
        try:
            return server.run(name, **kwargs)
        finally:
            self._free.put(server)

    def map(self, names: Iterable[str], **kwargs) -> list[dict]:
        with ThreadPoolExecutor(len(self._servers)) as pool:
            return list(pool.map(lambda name: self.run(name, **kwargs), names))

    def close(self) -> None:
        for server in self._servers:
            server.close()

    def __enter__(self) -> CasePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_case(
    name: str, env: dict[str, str], *, memory_mb: int = MEMORY_LIMIT_MB, timeout: float = TIMEOUT
) -> dict:
    """Input ``name`` on a server of its own (which pays the start-up, as one case alone must)."""
    with CaseServer(env) as server:
        return server.run(name, memory_mb=memory_mb, timeout=timeout)
