"""``http(url, ...)`` at run time: a workflow step that calls an outside HTTP API with httpx.

The node and its checks live in :mod:`jobs.durable.graph` (:class:`~jobs.durable.graph.Http`).

The result is ``{"status", "headers", "body", "duration"}`` — ``body`` is parsed JSON when the
response says it is JSON, else text; ``duration`` is in seconds. A 4xx response is a result
(the workflow decides what it means); 5xx, 429 and network errors (refused, reset, timed out)
raise, so the step retries under its policy (``max_attempts``, ``backoff``); a 429 or 503 with
``Retry-After`` waits that long instead of the backoff.

Outside effects cannot commit with a checkpoint, so the kind is non-transactional: the worker
calls it outside any transaction and checkpoints afterwards. A crash between the two repeats
the call (at-least-once), which is why every request carries an ``Idempotency-Key`` header
derived from the instance and the step's key: the same across retries of one activation,
different for each loop iteration or fan-out chunk.

The URL's path and query may hold ``%(name)s`` placeholders, replaced by named results
(URL-quoted), and ``body_from="name"`` sends a named result (or ``"input"``) as the JSON body;
the host is always written out, so the allow-list below can be reasoned about.

Destinations must match a host pattern of ``settings.ACURIO_HTTP_ALLOW`` (fnmatch, e.g.
``api.example.org`` — ports 80 and 443 only —, ``*.example.org``, ``127.0.0.1:8080``,
``[::1]:8765``, ``host:*``; none by default; :mod:`jobs.durable.hostpatterns`). Any other host
fails the step at once with a clear error. Redirects are not followed (a redirect could lead
to a host that is not allowed); a 3xx is returned as a result.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from django.conf import settings
from django.db import connection
from django.utils import timezone

from jobs.durable import statements
from jobs.durable.context import Context
from jobs.durable.errors import PermanentError, RetryLater
from jobs.durable.graph import BUILTIN_NAMES, PARAM_RE
from jobs.durable.hostpatterns import PatternError, parse_patterns, url_allowed
from jobs.durable.kinds.base import Kind, register

__all__ = ["HttpKind", "host_allowed", "idempotency_key", "retry_after"]

MAX_BODY_BYTES = 1024 * 1024  # step outputs are for small data (DESIGN.md)
MAX_RETRY_AFTER = 3600.0  # a server asking for more than an hour gets the hour
IDEMPOTENCY_NAMESPACE = uuid.UUID("6f4f4d1e-8c55-4a53-9a3f-1f1d2b5e7a10")


class HttpError(Exception):
    """A response or failure that the step's retry policy should retry (5xx, network)."""


def _value(ctx: Context, name: str) -> Any:
    return getattr(ctx, name) if name in BUILTIN_NAMES else ctx[name]


def render_url(url: str, ctx: Context) -> str:
    """The URL with each ``%(name)s`` replaced by that result, URL-quoted."""
    return PARAM_RE.sub(lambda m: quote(str(_value(ctx, m.group(1))), safe=""), url)


def host_allowed(url: str, patterns: list[str] | None = None) -> bool:
    """Whether ``url``'s host and port match an allowed pattern (jobs.durable.hostpatterns:
    a host alone allows ports 80 and 443, ``host:*`` every port, ``[v6]:port`` an IPv6
    address). The settings were checked when they loaded; a malformed pattern given here is
    a PermanentError."""
    if patterns is None:
        patterns = list(getattr(settings, "ACURIO_HTTP_ALLOW", []))
    try:
        return url_allowed(url, parse_patterns(patterns))
    except PatternError as exc:
        raise PermanentError(f"ACURIO_HTTP_ALLOW: {exc}") from exc


def idempotency_key(instance_id: uuid.UUID, step_key: str) -> str:
    """Stable for one activation of one node of one instance (across its retries)."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{instance_id}/{step_key}"))


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (when - timezone.now()).total_seconds()
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


_client: httpx.Client | None = None
_client_lock = threading.Lock()


def shared_client() -> httpx.Client:
    """One client per process: its connection pool and TLS context are built once (building
    them costs more than a request to a nearby service). httpx clients are thread-safe."""
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                _client = httpx.Client(follow_redirects=False)
    return _client


def _step_key(step_id: int) -> str:
    # Outside any transaction (the kind is non-transactional): one indexed read.
    with connection.cursor() as cursor:
        cursor.execute(statements.STEP_KEY, [step_id])
        return cursor.fetchone()[0]


@register
class HttpKind(Kind):
    name = "http"
    leaf = True
    transactional = False  # never call the network inside a transaction

    def execute(self, ctx: Context, node: dict[str, Any]) -> Any:
        url = render_url(node["url"], ctx)
        if not host_allowed(url):
            host = urlsplit(url).hostname
            raise PermanentError(
                f"http: host {host!r} is not allowed; add a matching pattern to"
                " ACURIO_HTTP_ALLOW to call it"
            )
        headers = {
            "Idempotency-Key": idempotency_key(ctx.instance_id, _step_key(ctx.step_id)),
            **node["headers"],
        }
        body = node["body"]
        if node.get("body_from"):
            body = _value(ctx, node["body_from"])
        kwargs: dict[str, Any] = {}
        if node.get("body_from") or isinstance(body, dict | list):
            kwargs["json"] = body
        elif body is not None:
            kwargs["content"] = body.encode()
        request = shared_client().build_request(
            node["method"], url, headers=headers, timeout=node["timeout"], **kwargs
        )
        started = time.monotonic()
        try:
            response = shared_client().send(request, stream=True)
            try:
                raw = bytearray()
                for part in response.iter_bytes():
                    raw.extend(part)
                    if len(raw) > MAX_BODY_BYTES:
                        raise PermanentError(
                            f"http: the response of {url} is larger than"
                            f" {MAX_BODY_BYTES // 1024} KiB; step results are for small data"
                        )
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            raise HttpError(
                f"http: {node['method']} {url} timed out after {node['timeout']:g}s"
            ) from exc
        except httpx.TransportError as exc:
            raise HttpError(f"http: {node['method']} {url} failed: {exc!r}") from exc
        duration = round(time.monotonic() - started, 6)
        status = response.status_code
        if status == 429 or (status >= 500 and "retry-after" in response.headers):
            delay = retry_after(response.headers.get("retry-after"))
            if delay is not None:
                raise RetryLater(
                    f"http: {node['method']} {url} answered {status}; retrying after"
                    f" {delay:g}s (Retry-After)",
                    delay,
                )
            if status == 429:
                raise HttpError(f"http: {node['method']} {url} answered 429 Too Many Requests")
        if status >= 500:
            raise HttpError(f"http: {node['method']} {url} answered {status}")
        return {
            "status": status,
            "headers": {k.lower(): v for k, v in response.headers.items()},
            "body": _body(response, bytes(raw)),
            "duration": duration,
        }

    def describe(self, node):
        label = f"http {node['method']} {node['url']}"
        return f"{node['name']} ({label})" if node["name"] else label


def _body(response: httpx.Response, raw: bytes) -> Any:
    text = raw.decode(response.encoding or "utf-8", errors="replace")
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return text  # says JSON, is not: keep the text rather than lose it
    return text
