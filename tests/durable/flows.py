"""Workflow objects named by dotted path in the CLI tests (``manage.py durable start``)."""

from __future__ import annotations

from jobs.durable import fan_out, sql, task, wait_for_signal

S = "tests.durable.steps."

approval = wait_for_signal("approval", timeout=3600).as_("approval") >> task(S + "echo_signal")

squares = task(S + "input_items").as_("xs") >> fan_out(task(S + "square_chunk"), over="xs", chunk=2)


def one_sql():
    """A factory: ``start`` calls a function of no arguments to get the workflow."""
    return sql("SELECT 1 AS one")


not_a_workflow = 42
