"""Step functions and conditions used by the part-2 engine tests (and CLI subprocesses)."""

from __future__ import annotations

from jobs.durable import Break
from tests.engine.steps import record_row


def tagged(tag: str):
    """A task that records one ``engine_rows`` row with ``tag`` and returns the tag."""

    def step(ctx):
        record_row(ctx, tag)
        return tag

    step.__name__ = step.__qualname__ = tag
    return step


fast = tagged("fast")
slow_a = tagged("slow_a")
slow_b = tagged("slow_b")
after = tagged("after")
yes = tagged("yes")
no = tagged("no")


def flag(ctx):
    return ctx.input["flag"]


def input_flag(ctx):
    """A condition: the start input's ``flag``."""
    return bool(ctx.input["flag"])


def broken_condition(ctx):
    raise ValueError("cannot decide")


def count(ctx):
    """Counts iterations through its own named result; breaks at ``input["stop"]``."""
    n = ctx.get("n", 0) + 1
    record_row(ctx, "count")
    if n >= ctx.input["stop"]:
        raise Break({"stopped_at": n})
    return n


def count_up(ctx):
    """Counts without breaking (the loop's ``while_`` decides)."""
    return ctx.get("n", 0) + 1


def below_three(ctx):
    return ctx["n"] < 3


def break_outside(ctx):
    raise Break("nowhere to go")


def echo_signal(ctx):
    return ctx["approval"]


def items(ctx):
    return ctx.input["items"]


def square_chunk(ctx):
    return [x * x for x in ctx.chunk]
