"""Running CPU-heavy work in a child process, where a memory and a time budget can be enforced
and a cancel can stop it.

Two ways in:

* ``task("pkg.mod.fn", isolate=True, memory_mb=..., timeout=...)`` — the whole task runs in a
  forked child; the worker waits for its result and checkpoints it in the worker's own
  transaction. The child never touches the worker's database connection: if the function
  uses the ORM, Django opens a new connection in the child, whose writes commit on their own
  (autocommit), so they are **not** exactly-once (a retried attempt writes again). Isolate
  pure computation, or writes that may safely happen twice.
* :func:`run_isolated` inside an ordinary task — the task reads and writes in its checkpoint
  transaction (exactly once) and hands only the computation to the child. The analysis
  pipeline does this (``jobs.pipeline``: extract, parse, verify).

The child is made with ``fork`` (cheap: the worker's code and the arguments are already in
memory, nothing is pickled on the way in); its result comes back pickled through a pipe. In the
child ``RLIMIT_AS`` caps the address space at what the worker already maps plus the budget, so
an allocation past it raises ``MemoryError`` there; the parent enforces the wall clock with
``SIGKILL``. Either ends the step with :class:`BudgetExceeded`, a permanent error (running it
again would exceed the budget again), and the worker lives on for the next step.

While it waits, the parent asks ``should_stop()`` every :data:`CHECK_INTERVAL` seconds (the
worker passes "is this step still running under my claim?"); when the answer is yes (the
instance was cancelled, the lease lost) the child is killed at once and :class:`Stopped` is
raised, so a cancel stops an isolated step within about half a second.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import resource
import select
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from django.db import connections

from jobs.durable.errors import Fenced, PermanentError

MB = 1024 * 1024
# Seconds between should_stop() calls while a child runs.
CHECK_INTERVAL = 0.25


class BudgetExceeded(PermanentError):
    """An isolated step used more memory or time than its budget allows."""


class Stopped(Fenced):
    """The step was cancelled (or lost its claim) while its child ran; the child is killed."""


def _address_space() -> int:
    """Bytes of address space this process maps now (its VmSize)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def _forget_connections() -> None:
    """In the child: drop the inherited database connections without closing them (closing
    would end the parent's session on the shared socket); kept referenced so that no
    finaliser closes them either. Django connects afresh if the function uses the ORM."""
    keep = []
    for conn in connections.all(initialized_only=True):
        keep.append(conn.connection)
        conn.connection = None
        conn.in_atomic_block = False
        conn.savepoint_ids = []
        conn.needs_rollback = False
        conn.run_on_commit = []
    _forget_connections.kept = keep  # type: ignore[attr-defined]


def _child(write_fd: int, fn: Callable[..., Any], args: tuple, kwargs: dict, limit: int) -> None:
    try:
        _forget_connections()
        # The parent's objects are the parent's: a work-heavy child (a DOCX reader builds
        # hundreds of thousands of objects) sets off full collections, and each would walk
        # the whole inherited heap and, writing the objects' GC headers, copy its pages from
        # the parent (0.3-0.7 s of a 300-page DOCX's extract step). Frozen, they are skipped;
        # the child's own objects are collected as usual, and it exits after one call.
        gc.freeze()
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            payload = ("ok", fn(*args, **kwargs))
        except MemoryError:
            payload = ("memory", None)
        except BaseException as exc:
            payload = ("error", (exc, traceback.format_exc()))
        try:
            data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            data = pickle.dumps(("memory", None))
        except Exception as exc:  # an exception or result pickle cannot carry
            data = pickle.dumps(("error", (RuntimeError(repr(exc)), traceback.format_exc())))
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)  # no atexit, no finalisers: nothing of the parent's may be touched


def run_isolated(
    fn: Callable[..., Any],
    *args: Any,
    memory_mb: int,
    timeout: float,
    should_stop: Callable[[], bool] | None = None,
    what: str = "",
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in a forked child with ``memory_mb`` MB of address space on top
    of what this process maps and ``timeout`` seconds of wall clock; its return value.

    Raises :class:`BudgetExceeded` past either budget, :class:`Stopped` when ``should_stop()``
    says so, and the child's own exception (with its traceback in the message's notes) when
    ``fn`` raised.
    """
    label = what or getattr(fn, "__qualname__", "step")
    limit = _address_space() + int(memory_mb) * MB
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # The worker has threads (its heartbeat): a lock one of them held at the fork stays
        # held in the child. The child only runs ``fn`` and leaves with os._exit; should it
        # block on such a lock, the wall clock ends it like any step past its budget.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        _child(write_fd, fn, args, kwargs, limit)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BudgetExceeded(
                    f"{label} took longer than its time budget of {timeout:g} s; stopped"
                )
            ready, _, _ = select.select([read_fd], [], [], min(left, CHECK_INTERVAL))
            if ready:
                data = os.read(read_fd, 1 << 20)
                if not data:
                    break  # the child closed the pipe: done (or died)
                chunks.append(data)
                continue
            if should_stop is not None and should_stop():
                raise Stopped(f"{label} was stopped: its step is no longer running")
    finally:
        os.close(read_fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            if os.WTERMSIG(status) == signal.SIGKILL:
                # The kernel's OOM killer, or an operator.
                raise BudgetExceeded(f"{label} was killed ({name}), likely out of memory")
            raise PermanentError(f"{label} crashed with {name}")
        raise PermanentError(f"{label} ended without a result")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "ok":
        return value
    if kind == "memory":
        raise BudgetExceeded(
            f"{label} needed more memory than its budget of {memory_mb} MB; stopped"
        )
    exc, text = value
    with contextlib.suppress(Exception):
        exc.add_note(f"in the isolated child process:\n{text}")
    raise exc
