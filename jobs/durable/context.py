"""The ``ctx`` a step function receives: named results, the start input, its fan-out chunk."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from jobs.durable import statements
from jobs.durable.db import decode_json
from jobs.durable.errors import PermanentError

_MISSING = object()


class Context:
    """What a step sees of its instance.

    ``ctx["name"]`` is the output of the completed step named ``name`` (read from its checkpoint
    on first use, then cached); ``ctx.input`` is the input given to ``start()``; in a fan-out
    child ``ctx.chunk`` is its slice of the list and ``ctx.chunk_index`` its position.
    """

    def __init__(
        self,
        *,
        instance_id: uuid.UUID,
        input: Any = None,
        chunk: Any = None,
        chunk_index: int | None = None,
        step_id: int | None = None,
        attempt: int = 1,
    ) -> None:
        self.instance_id = instance_id
        self.input = input
        self.chunk = chunk
        self.chunk_index = chunk_index
        self.step_id = step_id
        self.attempt = attempt
        self._cache: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            # A missing name is a definition mistake (a typo, or a parallel branch read too
            # early): no retry can fix it.
            raise PermanentError(f"no completed step of this workflow is named {name!r}")
        return value

    def __contains__(self, name: str) -> bool:
        return self.get(name, _MISSING) is not _MISSING

    def get(self, name: str, default: Any = None) -> Any:
        if name in self._cache:
            return self._cache[name]
        with connection.cursor() as cursor:
            # Served by the durable_step_named index; the latest wins (loops repeat names).
            cursor.execute(statements.NAMED_OUTPUT, [self.instance_id, name])
            row = cursor.fetchone()
        if row is None:
            return default
        value = decode_json(row[0])
        self._cache[name] = value
        return value

    def stopped(self) -> bool:
        """True when this step no longer runs under this attempt's claim (its instance was
        cancelled or failed, or its lease recovered): long work may give up then. One
        primary-key read, on the worker's connection."""
        if self.step_id is None:
            return False
        with connection.cursor() as cursor:
            cursor.execute(statements.STEP_CLAIM_HELD, [self.step_id, self.attempt])
            return cursor.fetchone() is None

    def __repr__(self) -> str:
        return f"<Context instance={self.instance_id} chunk_index={self.chunk_index}>"


def to_json(value: Any) -> str:
    """Serialise a step's output; data that JSON cannot hold is a permanent error."""
    try:
        return json.dumps(value, cls=DjangoJSONEncoder)
    except (TypeError, ValueError) as exc:
        raise PermanentError(f"step returned data that is not JSON-serialisable: {exc}") from exc
