"""Tasks of the child-workflow cancel tests (worker subprocesses import them too).

Each records its effect in ``engine_rows`` inside the step's transaction, so a row exists only
for a checkpoint that committed.
"""

from __future__ import annotations

import time

from tests.durable.steps import record_row


def linger(ctx):
    """Record a row, then stay inside the step's transaction for ``input["linger"]`` seconds
    (a child step that is running when its parent is cancelled)."""
    record_row(ctx, "lingered")
    time.sleep(ctx.input.get("linger", 3))
    return "lingered"


def done(ctx):
    """Record a row; the last step of a child."""
    record_row(ctx, "done")
    return "done"
