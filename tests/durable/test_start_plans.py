"""What start() caches (jobs.durable.launch, jobs.durable.graph): the compiled spec per
distinct tree, the kinds' checks, and the first activation of a spec whose kinds say it is
fixed; and that none of it is served where it would be wrong — a changed workflow object, an
activation that reads the input or the time, changed settings. Also the statement's shape:
start() settles on PostgreSQL's generic plan, start_many() gives every instance its own rows
with the right parents."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs.durable import DefinitionError, loop, sleep, sql, start, start_many, task, when
from jobs.durable.graph import compile_graph, compile_graph_text
from jobs.durable.launch import compiled
from jobs.durable.models import Instance, Step
from jobs.durable.statements import START_INSTANCES, START_NEW_INSTANCES

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(handle) -> list[Step]:
    return list(Step.objects.filter(instance_id=handle).order_by("id"))


def test_a_changed_workflow_object_is_not_served_its_old_spec():
    flow = t("number", max_attempts=2)
    first = start(flow, input={"n": 1})
    flow.opts["max_attempts"] = 7  # the same object, changed in place
    flow.path = S + "plus_one"
    second = start(flow, input={"n": 1})
    stored = Instance.objects.get(pk=second).graph
    assert stored["path"] == S + "plus_one" and stored["opts"] == {"max_attempts": 7}
    assert [s.max_attempts for s in steps_of(second)] == [7]
    assert Instance.objects.get(pk=first).graph["path"] == S + "number"
    assert [s.max_attempts for s in steps_of(first)] == [2]
    flow.path = S + "no_such_step"  # the checks run again for what it is now
    with pytest.raises(DefinitionError, match="cannot be imported"):
        start(flow, input={"n": 1})


def test_compile_graph_returns_a_new_dict_each_time_and_keeps_refusing_bad_trees():
    flow = t("number").as_("x") >> t("plus_one")
    one, two = compile_graph(flow), compile_graph(flow)
    assert one == two and one is not two
    one["children"].clear()  # a caller changing its copy changes nothing cached
    assert compile_graph(flow) == two
    assert compile_graph_text(flow) == compile_graph_text(flow)
    bad = t("number").as_("x") >> t("plus_one").as_("x")
    for _ in range(2):
        with pytest.raises(Exception, match="used twice"):
            compile_graph(bad)


def test_a_fixed_first_activation_is_planned_once_and_gives_each_instance_its_own_rows():
    flow = (t("number") & t("plus_one")) >> t("record")
    a = start(flow, input={"n": 1})
    assert compiled(flow).plan  # seq and all over tasks: fixed
    b = start(flow, input={"n": 2})
    for handle in (a, b):
        rows = steps_of(handle)
        assert [(s.kind, s.status, s.key) for s in rows] == [
            ("seq", "running", "0"),
            ("all", "running", "0/1"),
            ("task", "ready", "0/1/2"),
            ("task", "ready", "0/1/3"),
        ]
        root, join, left, right = rows
        assert (root.parent_id, join.parent_id) == (None, root.id)
        assert left.parent_id == right.parent_id == join.id
        assert join.remaining == 2
    assert steps_of(a)[-1].id < steps_of(b)[0].id


def test_a_plan_is_never_reused_for_an_activation_that_reads_the_input(worker):
    flow = when(S + "input_flag", t("yes"), otherwise=t("no"))
    yes = start(flow, input={"flag": True})
    assert compiled(flow).plan is False
    no = start(flow, input={"flag": False})
    assert [s.node_id for s in steps_of(yes)] == [0, 1]
    assert [s.node_id for s in steps_of(no)] == [0, 2]
    many = start_many(flow, [{"flag": False}, {"flag": True}, {"flag": False}])
    assert [[s.node_id for s in steps_of(h)] for h in many] == [[0, 2], [0, 1], [0, 2]]
    for handle in many:
        root, branch = steps_of(handle)
        assert branch.parent_id == root.id


def test_a_plan_is_never_reused_for_an_activation_that_reads_the_time(clock):
    flow = sleep(30) >> t("record")
    first = start(flow)
    assert compiled(flow).plan is False
    clock.shift(100)
    second = start(flow)
    for handle in (first, second):
        created = Instance.objects.get(pk=handle).created_at
        timer = Step.objects.get(instance_id=handle, kind="sleep")
        assert timer.run_at == created + timedelta(seconds=30)


def test_a_planned_start_follows_the_start_time_the_delay_and_the_settings(clock, settings):
    flow = loop(t("count_up").as_("n"), while_=S + "below_three")
    start(flow)
    assert compiled(flow).plan
    clock.shift(50)
    now = timezone.now()
    delayed = start(flow, delay=60)
    body = Step.objects.get(instance_id=delayed, kind="task")
    assert body.run_at == now + timedelta(seconds=60) and body.key == "0/1[0]"
    settings.ACURIO_MAX_ATTEMPTS = 9
    later = start(flow)
    assert Step.objects.get(instance_id=later, kind="task").max_attempts == 9
    assert Step.objects.get(instance_id=later, kind="task").run_at == now


def test_start_many_with_a_plan_draws_step_ids_in_input_order():
    flow = t("number") >> t("record")
    handles = start_many(flow, [{"n": n} for n in range(30)])
    rows = [steps_of(h) for h in handles]
    assert all(child.parent_id == root.id for root, child in rows)
    ids = [s.id for pair in rows for s in pair]
    assert ids == sorted(ids)


def prepared_plans(statement: str) -> tuple[int, int]:
    """``(generic, custom)`` plans of this session's prepared statement with this text."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE regexp_replace(statement, '\\$\\d+', '', 'g') = %s",
            [re.sub(r"%\(\w+\)s", "", statement).replace("%%", "%")],
        )
        row = cursor.fetchone()
    assert row is not None, "the statement was not prepared"
    return row


def test_start_settles_on_a_generic_plan():
    """Planning the statement costs more than running it: after PostgreSQL's five custom
    plans, start() must run on the prepared statement's generic plan (with an id or without),
    its plan's own statement (one instance), or START_INSTANCES (an unplanned spec)."""
    flow = sql("SELECT 'it''s 100%%' AS v") >> t("record")
    unplanned = when(S + "input_flag", t("yes"), otherwise=t("no"))
    for n in range(8):
        start(flow, input={"n": n})
        start(flow, input={"n": n}, id=f"generic-{n}")
        start(unplanned, input={"flag": True})
        start(unplanned, input={"flag": False}, id=f"unplanned-{n}")
    entry = compiled(flow)
    for conflict in (False, True):
        statement = entry.plan.start_one_sql(entry.text, conflict=conflict, lineage=conflict)
        generic, custom = prepared_plans(statement)
        assert custom <= 5 and generic >= 3
    for statement in (START_NEW_INSTANCES, START_INSTANCES):
        generic, custom = prepared_plans(statement)
        assert custom <= 5 and generic >= 3


def test_one_start_of_a_plan_writes_the_rows_start_many_writes(clock):
    """start()'s statement of a plan (one instance) and START_INSTANCES (start_many) agree
    row for row: ids, delays, parents, a graph with quotes and percent signs in its text."""
    flow = (sql("SELECT 'it''s 100%%' AS v").as_("v") & t("plus_one")) >> t("record")
    clock.shift(10)
    for options in ({}, {"delay": 30, "priority": 3, "queue": "other", "label": "50% off"}):
        one = start(flow, input={"n": "it's 100%"}, **options)
        [many, _] = start_many(flow, [{"n": "it's 100%"}, {"n": 2}], **options)

        def shape(handle):
            rows = steps_of(handle)
            ids = {s.id: i for i, s in enumerate(rows)}
            return [
                (ids.get(s.parent_id), s.key, s.node_id, s.kind, s.name, s.status,
                 s.max_attempts, s.run_at, s.remaining, s.started_at, s.queue, s.priority,
                 s.code_version)
                for s in rows
            ]  # fmt: skip

        assert shape(one) == shape(many) and len(shape(one)) == 4
        fields = ("label", "graph", "input", "status", "queue", "priority", "code_version")
        assert Instance.objects.values(*fields).get(pk=one) == Instance.objects.values(*fields).get(
            pk=many
        )
