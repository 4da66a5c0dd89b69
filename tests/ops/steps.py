"""Step functions of the operations tests, named by dotted path in their workflows."""

from __future__ import annotations

from typing import Any


def noop(ctx: Any) -> int:
    return ctx.step_id


def fail_once(ctx: Any) -> int:
    """Fail the first attempt (a retry is scheduled), succeed after."""
    if ctx.attempt == 1:
        raise RuntimeError("transient failure on the first attempt")
    return ctx.attempt
