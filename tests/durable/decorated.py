"""Steps and a workflow registered with the decorators (tests.durable.test_decorators)."""

from __future__ import annotations

from jobs.durable import step, task, workflow
from tests.durable.steps import record_row


@step(max_attempts=2)
def double(ctx):
    record_row(ctx, "double")
    return ctx.input["n"] * 2


@step
def add_one(ctx):
    return ctx["doubled"] + 1


@workflow
def doubling():
    return task(double).as_("doubled") >> task(add_one)
