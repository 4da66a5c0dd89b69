"""Composition: the operators build the graph start() stores, malformed workflows fail early,
and the data-flow operators run (sequence, join, fan-out, SQL steps, named results)."""

from __future__ import annotations

import pytest

from jobs.durable import DefinitionError, Worker, fan_out, result, sql, start, status, task
from jobs.durable.graph import compile_graph
from jobs.durable.models import Instance, Step
from tests.durable.support import rows

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(instance_id) -> list[Step]:
    return list(Step.objects.filter(instance_id=instance_id).order_by("id"))


# The compile tests need no database; the run tests do, and count effects in engine_rows.
run = pytest.mark.usefixtures("db", "rows_table")


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
        (lambda: fan_out(task("a.b.c"), over="not a name"), "must name an earlier result"),
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


# --- the operators at run time ------------------------------------------------------------------------------
@run
def test_sequence_runs_in_order_and_named_results_flow(worker):
    flow = t("number").as_("n") >> t("plus_one").as_("n1") >> t("record")
    iid = start(flow, input={"n": 41})
    assert status(iid) == "pending"
    assert worker.drain() == 3
    assert status(iid) == "completed"
    named = {s.name: s.output for s in steps_of(iid) if s.name}
    assert named == {"n": 41, "n1": 42}
    # result() is the last step's output
    last = [s for s in steps_of(iid) if s.kind == "task"][-1]
    assert result(iid) == last.id


@run
def test_join_runs_branches_in_parallel_and_lists_their_outputs(worker):
    flow = (t("number").as_("n") & t("items")) >> t("plus_one")
    iid = start(flow, input={"n": 1, "count": 2})
    claimed = worker.claim(limit=10)
    assert len(claimed) == 2, "both branches are ready at once"
    for step in claimed:
        assert worker.execute(step) == "completed"
    join = Step.objects.get(instance_id=iid, kind="all")
    assert join.status == "completed" and join.output == [1, [0, 1]]
    worker.drain()
    assert result(iid) == 2


@run
def test_fan_out_runs_one_child_per_chunk_and_joins_in_order(worker):
    flow = (
        t("items").as_("xs")
        >> fan_out(t("double_chunk"), over="xs", chunk=3).as_("doubled")
        >> sql("SELECT %(doubled)s::int[] AS doubled")
    )
    iid = start(flow, input={"count": 10})
    worker.run_one()  # items
    children = Step.objects.filter(instance_id=iid, chunk_index__isnull=False).order_by(
        "chunk_index"
    )
    assert [c.chunk for c in children] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert {c.status for c in children} == {"ready"}
    # any worker may take any chunk; run them out of order
    other = Worker(worker_id="other")
    claimed = worker.claim(limit=2) + other.claim(limit=2)
    for step in reversed(claimed):
        (other if step in claimed[2:] else worker).execute(step)
    worker.drain()
    assert result(iid) == [{"doubled": [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]}]


@run
def test_fan_out_appends_non_list_outputs_in_chunk_order(worker):
    flow = t("items").as_("xs") >> fan_out(t("chunk_sum"), over="xs", chunk=2)
    iid = start(flow, input={"count": 5})
    worker.drain()
    assert result(iid) == [1, 5, 4]


@run
def test_fan_out_over_an_empty_list_completes_with_an_empty_list(worker):
    iid = start(t("items").as_("xs") >> fan_out(t("chunk_sum"), over="xs"), input={"count": 0})
    worker.drain()
    assert status(iid) == "completed" and result(iid) == []


@run
def test_fan_out_over_a_non_list_fails_the_instance_clearly(worker):
    iid = start(t("not_a_list").as_("xs") >> fan_out(t("chunk_sum"), over="xs"))
    worker.drain()
    assert status(iid) == "failed"
    assert Instance.objects.get(pk=iid).error == "fan_out over 'xs' needs a list result, got dict"


@run
def test_sql_step_binds_named_results_and_returns_rows_or_rowcount(worker):
    flow = (
        t("number").as_("n")
        >> sql("SELECT %(n)s::int * 2 AS twice, %(input)s::jsonb ->> 'who' AS who").as_("rows")
        >> sql(
            "INSERT INTO engine_rows (instance_id, tag) SELECT %(instance_id)s, 'sql'"
            " FROM generate_series(1, %(n)s)"
        )
    )
    iid = start(flow, input={"n": 3, "who": "ada"})
    worker.drain()
    rows_step = Step.objects.get(instance_id=iid, name="rows")
    assert rows_step.output == [{"twice": 6, "who": "ada"}]
    assert result(iid) == 3
    assert len(rows("sql")) == 3


@run
def test_sql_error_is_retried_then_fails_with_the_database_message(worker):
    iid = start(sql("SELECT * FROM no_such_table", max_attempts=1))
    worker.drain()
    assert status(iid) == "failed"
    assert 'relation "no_such_table" does not exist' in Instance.objects.get(pk=iid).error


@run
def test_step_reading_an_unknown_name_fails_permanently(worker):
    iid = start(t("read_missing"))
    worker.drain()
    assert (
        Instance.objects.get(pk=iid).error
        == "no completed step of this workflow is named 'nowhere'"
    )


@run
def test_non_json_output_fails_permanently(worker):
    iid = start(t("bad_output"))
    worker.drain()
    assert "not JSON-serialisable" in Instance.objects.get(pk=iid).error
