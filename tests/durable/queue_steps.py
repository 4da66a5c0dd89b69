"""Tasks of the queue tests: a step that counts its queue's running steps while it runs."""

from __future__ import annotations

import time

from django.db import connection

from tests.durable.steps import record_row


def hold(ctx):
    """Count the leaf steps of this queue running now (committed claims, as any worker sees
    them), record the count, and stay running a moment so that claims overlap."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM durable_step WHERE queue = %s AND status = 'running'"
            " AND lease_expires_at IS NOT NULL",
            [ctx.input["queue"]],
        )
        running = cursor.fetchone()[0]
    record_row(ctx, "hold", str(running))
    time.sleep(ctx.input.get("hold", 0.1))
    return running


def write_then_fail(ctx):
    """Write a row, then fail: the row must vanish with the step's savepoint."""
    record_row(ctx, "doomed")
    raise ValueError("fails after writing")


def write(ctx):
    record_row(ctx, "kept")
    return ctx.step_id
