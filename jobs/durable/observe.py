"""Observation hooks: what the worker reports after each step, for whoever listens.

The engine knows nothing of metrics libraries or of its host: it calls the listeners
registered here, and the host decides what to do with the figures (``jobs.metrics`` turns them
into Prometheus counters and histograms). With no listener registered a hook costs one
``if``. A listener that raises is logged and ignored: observing must never break a step.

* :func:`timed_step` — decorates ``Worker.execute``; after each attempt every
  :func:`on_step` listener gets ``(kind, outcome, seconds)``. ``outcome`` is what ``execute``
  returned (``completed``, ``retry``, ``failed``, ``fenced``, ``handed back``, ``waiting``) or
  ``interrupted`` when it raised (a lost connection: the step is put back after reconnecting).
* :func:`serve_metrics` — a process's own metrics page on a port of its own (``manage.py
  worker --metrics-port``); prometheus-client is imported only then.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

StepListener = Callable[[str, str, float], None]
_step_listeners: list[StepListener] = []


def on_step(listener: StepListener) -> StepListener:
    """Register ``listener(kind, outcome, seconds)``, called after every step attempt.

    Registering the same listener twice keeps one (an app's ``ready()`` may run twice in tests).
    """
    if listener not in _step_listeners:
        _step_listeners.append(listener)
    return listener


def remove_step_listener(listener: StepListener) -> None:
    """Unregister a listener added with :func:`on_step` (nothing if it is not registered)."""
    if listener in _step_listeners:
        _step_listeners.remove(listener)


def step_finished(kind: str, outcome: str, seconds: float) -> None:
    """Tell every listener that a step attempt of ``kind`` ended with ``outcome``."""
    for listener in list(_step_listeners):
        try:
            listener(kind, outcome, seconds)
        except Exception:
            logger.exception("step listener %r failed; ignored", listener)


def timed_step[F: Callable[..., str]](execute: F) -> F:
    """Decorate ``Worker.execute(self, step, ...)``: time each call and report its outcome."""

    @functools.wraps(execute)
    def timed(self: Any, step: Any, *args: Any, **kwargs: Any) -> str:
        if not _step_listeners:
            return execute(self, step, *args, **kwargs)
        started = time.monotonic()
        outcome = "interrupted"
        try:
            outcome = execute(self, step, *args, **kwargs)
            return outcome
        finally:
            step_finished(
                getattr(step, "kind", "") or "unknown", outcome, time.monotonic() - started
            )

    return timed  # type: ignore[return-value]


def serve_metrics(port: int, addr: str = "127.0.0.1") -> None:
    """Serve this process's Prometheus metrics (prometheus-client's default registry, where
    the host registers its counters) over HTTP on ``addr:port``, in a daemon thread.

    The port has no authentication: bind it to a private address (``manage.py worker
    --metrics-port N``; the web's ``/metrics`` has the token and the allow-list). Raises
    ``OSError`` when the port is taken.
    """
    from prometheus_client import start_http_server

    start_http_server(port, addr=addr)
    logger.info("metrics served on http://%s:%s/metrics", addr, port)
