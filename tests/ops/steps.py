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


def session_settings(ctx: Any) -> dict[str, Any]:
    """What the step's own transaction sees of its session: the backend, its name and the
    worker's bounds (tests/ops/test_pooler.py)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_backend_pid(), current_setting('application_name'),"
            " current_setting('lock_timeout'),"
            " current_setting('idle_in_transaction_session_timeout'),"
            " current_setting('acurio.code_version', true)"
        )
        pid, name, lock, idle, version = cursor.fetchone()
    return {
        "pid": pid,
        "application_name": name,
        "lock_timeout": lock,
        "idle_in_transaction_session_timeout": idle,
        "code_version": version,
    }
