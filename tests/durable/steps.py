"""Step functions, conditions and hooks of the engine tests, named by dotted path in their
workflows (worker subprocesses import them too).

``engine_rows`` (created by the ``rows_table`` fixture) records every effect a step commits,
so tests can count them: a row per committed execution.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from django.db import connection

from jobs.durable import Break, PermanentError

ROWS_DDL = """
CREATE TABLE IF NOT EXISTS engine_rows (
    id bigserial PRIMARY KEY,
    instance_id uuid NOT NULL,
    tag text NOT NULL,
    chunk_index int,
    attempt int,
    pid int,
    note text NOT NULL DEFAULT ''
)
"""


def record_row(ctx: Any, tag: str, note: str = "") -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_rows (instance_id, tag, chunk_index, attempt, pid, note)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            [ctx.instance_id, tag, ctx.chunk_index, ctx.attempt, os.getpid(), note],
        )


def record(ctx):
    record_row(ctx, f"step{ctx.step_id}")
    return ctx.step_id


def record_slowly(ctx):
    """Insert a row, then linger inside the transaction, so SIGKILLs land mid-step."""
    record_row(ctx, f"step{ctx.step_id}")
    time.sleep(random.uniform(0, 0.04))
    return ctx.step_id


def number(ctx):
    return ctx.input["n"]


def plus_one(ctx):
    return ctx["n"] + 1


def items(ctx):
    return list(range(ctx.input["count"]))


def double_chunk(ctx):
    return [x * 2 for x in ctx.chunk]


def chunk_sum(ctx):
    # a non-list output: the join appends it
    return sum(ctx.chunk)


def not_a_list(ctx):
    return {"not": "a list"}


def fail_first(ctx):
    """Fail until attempt ``input["fail_times"] + 1``."""
    if ctx.attempt <= ctx.input["fail_times"]:
        raise RuntimeError(f"transient failure on attempt {ctx.attempt}")
    record_row(ctx, "fail_first")
    return ctx.attempt


def always_fail(ctx):
    record_row(ctx, "always_fail")  # rolled back with the failed attempt
    raise RuntimeError("the resolver is down")


def permanent(ctx):
    record_row(ctx, "permanent")
    raise PermanentError("the thesis file is empty")


def bad_output(ctx):
    return object()


def read_missing(ctx):
    return ctx["nowhere"]


def version_a(ctx):
    record_row(ctx, "a")
    return "a"


def version_b(ctx):
    record_row(ctx, "b")
    return "b"


def version_c(ctx):
    record_row(ctx, "c")
    return "c"


def sleep_long(ctx):
    time.sleep(ctx.input.get("seconds", 30))
    record_row(ctx, "slept")
    return "slept"


def on_failure(instance_id, error):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_rows (instance_id, tag, note) VALUES (%s, 'on_failure', %s)",
            [instance_id, error],
        )


def broken_hook(instance_id, error):
    raise RuntimeError("hook exploded")


# --- control flow, timers, CLI ----------------------------------------------------------------
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


def input_items(ctx):
    return ctx.input["items"]


def square_chunk(ctx):
    return [x * x for x in ctx.chunk]


def echo_named(ctx):
    """Return the named result ``input["name"]`` as the step read it."""
    return ctx[ctx.input["name"]]


def lock_and_linger(ctx):
    """Update the shared row (its lock is held until this step's transaction ends), record the
    attempt, and on the first claim linger inside the transaction (a worker frozen mid-step)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE engine_rows SET note = note || 'x' WHERE tag = 'shared'")
    record_row(ctx, "lingered")
    if ctx.attempt == 1:
        time.sleep(ctx.input.get("seconds", 60))
    return ctx.attempt


def hog_memory(ctx):
    """Allocate ``input["mb"]`` megabytes and touch them (an isolated step over its budget)."""
    block = bytearray(ctx.input["mb"] * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    return len(block)


def compute_square(ctx):
    """Pure computation, fit for isolation."""
    return ctx.input["n"] ** 2


def spin(ctx):
    """Compute until killed (an isolated step that a cancel or its timeout must stop)."""
    deadline = time.monotonic() + ctx.input.get("seconds", 60)
    n = 0
    while time.monotonic() < deadline:
        n += 1
    return n
