"""Composition: operators build the graph start() stores; malformed workflows fail early."""

from __future__ import annotations

import pytest

from jobs.durable import DefinitionError, fan_out, sql, task
from jobs.durable.graph import compile_graph


def test_sequence_flattens_and_numbers_nodes_in_preorder():
    flow = task("a.b.one") >> task("a.b.two").as_("two") >> task("a.b.three")
    spec = compile_graph(flow)
    assert spec["kind"] == "seq"
    assert [c["path"] for c in spec["children"]] == ["a.b.one", "a.b.two", "a.b.three"]
    assert [c["id"] for c in spec["children"]] == [1, 2, 3]
    assert spec["children"][1]["name"] == "two"


def test_named_group_keeps_its_own_node():
    inner = (task("a.b.one") >> task("a.b.two")).as_("pair")
    spec = compile_graph(inner >> task("a.b.three"))
    assert [c["kind"] for c in spec["children"]] == ["seq", "task"]
    assert spec["children"][0]["name"] == "pair"


def test_join_and_fan_out_compile():
    flow = (task("a.b.one") & sql("SELECT 1")).as_("both") >> fan_out(
        task("a.b.each"), over="both", chunk=5
    )
    spec = compile_graph(flow)
    join, fan = spec["children"]
    assert join["kind"] == "all" and len(join["children"]) == 2
    assert fan["kind"] == "fan_out" and fan["chunk"] == 5 and fan["over"] == "both"


def test_as_does_not_mutate_the_original():
    step = task("a.b.one")
    named = step.as_("x")
    assert step.name == "" and named.name == "x"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: task("nodots"), "dotted path"),
        (lambda: task("a.b.c", retries=3), "unknown step option(s) retries"),
        (lambda: task("a.b.c", max_attempts=0), "max_attempts must be a positive integer"),
        (lambda: task("a.b.c", timeout=-1), "timeout must be a positive number"),
        (lambda: task("a.b.c").as_("not a name"), "must be a Python identifier"),
        (lambda: task("a.b.c").as_("input"), "is reserved"),
        (lambda: sql("  "), "non-empty SQL"),
        (lambda: fan_out(task("a.b.c"), over="x", chunk=0), "positive integer"),
        (lambda: fan_out(task("a.b") >> task("a.c"), over="x"), "single task or sql"),
        (lambda: task("a.b.c") >> "text", "cannot compose"),
        (
            lambda: compile_graph(task("a.b.c").as_("x") >> task("a.b.d").as_("x")),
            "is used twice",
        ),
        (
            lambda: compile_graph(task("a.b.c") >> fan_out(task("a.b.d"), over="missing")),
            "no step of this workflow is named 'missing'",
        ),
    ],
)
def test_malformed_workflows_fail_with_a_clear_message(build, message):
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()
