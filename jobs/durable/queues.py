"""Queues: where an instance's steps wait, with limits that hold across every worker.

``start(flow, queue="resolver", priority=7)`` puts every step of the instance in that queue
with that priority (copied onto each step row). A queue needs no declaration; declaring one
gives it limits::

    Queue("resolver", concurrency=4, rate=(10, 1.0))   # at most 4 running, 10 starts a second
    Queue("mail", priority_levels=3)                   # priorities 0 to 2 only

or in settings, ``ACURIO_DURABLE_QUEUES = {"resolver": {"concurrency": 4, "rate": [10, 1.0]}}``.

How the limits hold across processes: a declared queue's limits are written to its
:class:`~jobs.durable.models.QueueState` row by every worker that knows the declaration (at
start). A claim from a limited queue is its own short transaction that locks that row (SKIP
LOCKED: a worker finding it locked moves on), counts the queue's running leaf steps, refills
the rate limiter's token bucket for the time elapsed, and claims at most what both allow.
Claims of one queue are thereby serialised, so no two workers can both see the last free slot.
Steps of limited queues are left out of the plain claim and of chaining (a checkpoint never
claims a limited queue's next step itself), so every start of such a step is counted.

Priorities: 0 (the default) to 9, higher first; the claim takes the most urgent due step of
the queues it serves. Across queues, a worker tries its limited queues first, then the rest.
A queue declared with ``priority_levels=n`` takes priorities 0 to n-1 only: a start with a
higher one is refused (DefinitionError), so a caller's "urgent" cannot jump ahead where the
queue's owner allows no levels above "normal". The check reads this process's declarations
(code and settings), as every start does, without a query.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from jobs.durable import statements
from jobs.durable.db import execute_prepared
from jobs.durable.errors import DefinitionError

DEFAULT_QUEUE = "default"
PRIORITIES = range(10)

_declared: dict[str, Queue] = {}


@dataclass(frozen=True)
class Queue:
    """A queue's limits: ``concurrency`` steps running at once across all workers, ``rate``
    ``(count, seconds)`` step starts per period; ``fair``: within a priority, the owner with
    the fewest steps of the queue running goes first (``statements.claim_sql``);
    ``priority_levels``: the priorities a start into the queue may give, 0 to n-1 (1 to 10;
    10, the default, allows them all)."""

    name: str
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    fair: bool = False
    priority_levels: int = len(PRIORITIES)

    def __post_init__(self) -> None:
        check_queue_name(self.name)
        levels = self.priority_levels
        if (
            not isinstance(levels, int)
            or isinstance(levels, bool)
            or not (1 <= levels <= len(PRIORITIES))
        ):
            raise DefinitionError(
                f"Queue({self.name!r}): priority_levels must be an integer from 1 to"
                f" {len(PRIORITIES)}"
            )
        if self.concurrency is not None and (
            not isinstance(self.concurrency, int)
            or isinstance(self.concurrency, bool)
            or self.concurrency < 1
        ):
            raise DefinitionError(f"Queue({self.name!r}): concurrency must be a positive integer")
        if self.rate is not None:
            try:
                count, seconds = self.rate
            except (TypeError, ValueError):
                raise DefinitionError(
                    f"Queue({self.name!r}): rate must be (count, seconds), e.g. (10, 1.0)"
                ) from None
            if not isinstance(count, int) or count < 1 or not (float(seconds) > 0):
                raise DefinitionError(
                    f"Queue({self.name!r}): rate needs a positive count and period"
                )
            object.__setattr__(self, "rate", (int(count), float(seconds)))
        _declared[self.name] = self

    @property
    def limited(self) -> bool:
        return self.concurrency is not None or self.rate is not None or self.fair


def check_queue_name(name: Any) -> str:
    if not isinstance(name, str) or not name or len(name) > 100 or name != name.strip():
        raise DefinitionError(f"queue name {name!r} must be a non-empty string of 100 characters")
    return name


def check_priority(priority: Any, queue: str = DEFAULT_QUEUE) -> int:
    """A start's priority: 0 to 9, and within the levels of its queue's declaration."""
    if not isinstance(priority, int) or isinstance(priority, bool) or priority not in PRIORITIES:
        raise DefinitionError(f"priority {priority!r} must be an integer from 0 to 9")
    if priority:  # 0 is within every queue's levels: the common start reads nothing more
        declared = declared_queues().get(queue)
        if declared is not None and priority >= declared.priority_levels:
            raise DefinitionError(
                f"queue {queue!r} has {declared.priority_levels} priority level(s), 0 to"
                f" {declared.priority_levels - 1}: priority {priority} is not one of them"
            )
    return priority


def declared_queues() -> dict[str, Queue]:
    """The queues declared in code and in ``settings.ACURIO_DURABLE_QUEUES``."""
    queues = dict(_declared)
    for name, options in (getattr(settings, "ACURIO_DURABLE_QUEUES", None) or {}).items():
        options = dict(options)
        rate = options.pop("rate", None)
        queues[name] = Queue(name, rate=tuple(rate) if rate else None, **options)
    return queues


def sync_queues(now: datetime, queues: Iterable[Queue] | None = None) -> None:
    """Write the declared queues' limits to their rows, where every claim reads them."""
    for queue in declared_queues().values() if queues is None else queues:
        count, seconds = queue.rate or (None, None)
        with connection.cursor() as cursor:
            cursor.execute(
                statements.UPSERT_QUEUE,
                [queue.name, queue.concurrency, count, seconds, queue.fair, count, now],
            )


def limited_queue_names() -> list[str]:
    """The queues with a limit in the database (the plain claim leaves them alone)."""
    return [row[0] for row in execute_prepared(statements.LIMITED_QUEUES, [])]


def claim_limited(name: str, limit: int, params: dict[str, Any]) -> list[tuple]:
    """Claim up to ``limit`` steps of the limited queue ``name``, within its concurrency and
    rate, in one short transaction holding the queue's row lock (see the module docstring).
    Returns the claim's rows; none when another worker is claiming from the queue now."""
    now = params["now"]
    with transaction.atomic():
        rows = execute_prepared(statements.LOCK_QUEUE, [name])
        if not rows:
            return []
        concurrency, rate_count, rate_seconds, tokens, refilled_at, fair = rows[0]
        allowed = limit
        if concurrency is not None:
            running = execute_prepared(statements.QUEUE_RUNNING, [name])[0][0]
            allowed = min(allowed, concurrency - running)
        if rate_count is not None:
            elapsed = 0.0 if refilled_at is None else (now - refilled_at).total_seconds()
            tokens = min(float(rate_count), tokens + max(0.0, elapsed) * rate_count / rate_seconds)
            allowed = min(allowed, math.floor(tokens))
        if allowed <= 0:
            claimed: list[tuple] = []
        else:
            claimed = execute_prepared(
                statements.claim_sql(allowed, "fair" if fair else "one"), {**params, "queue": name}
            )
        if rate_count is not None:
            execute_prepared(statements.SET_QUEUE_TOKENS, [tokens - len(claimed), now, name])
        return claimed
