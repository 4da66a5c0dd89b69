"""Tasks of the resume and fork tests: a step with a bug the test fixes between runs."""

from __future__ import annotations

from jobs.durable import PermanentError
from tests.durable.steps import record_row

# The "bug": while True, the step fails permanently. A test flips it, as a deploy would.
BROKEN = {"buggy": True}


def buggy(ctx):
    if BROKEN["buggy"]:
        raise PermanentError("a bug in buggy()")
    record_row(ctx, "buggy")
    return "fixed"


def first(ctx):
    record_row(ctx, "first")
    return {"made": ctx.input}


def second(ctx):
    record_row(ctx, "second")
    return [ctx["made"], "second"]


def third(ctx):
    record_row(ctx, "third")
    return "third"


def sum_input(ctx):
    """A child workflow's first step: the sum of its input (a fan-out chunk's items)."""
    return sum(ctx.input)


def s_plus_one(ctx):
    return ctx["s"] + 1
