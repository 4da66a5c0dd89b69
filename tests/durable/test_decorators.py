"""@step and @workflow: functions by reference in task(), start() and the CLI; dotted strings
keep working; what cannot be stored is refused where it is written."""

from __future__ import annotations

import pytest

from jobs.durable import DefinitionError, result, start, start_many, step, task, workflow
from jobs.durable.graph import STEPS, WORKFLOWS, compile_graph
from tests.durable import decorated

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]


def test_task_takes_a_decorated_function_and_its_options():
    node = compile_graph(task(decorated.double))
    assert node["path"] == "tests.durable.decorated.double"
    assert node["opts"] == {"max_attempts": 2}
    assert compile_graph(task(decorated.double, max_attempts=5))["opts"] == {"max_attempts": 5}
    assert STEPS["tests.durable.decorated.double"] is decorated.double
    # The decorated function is still the plain function.
    assert decorated.double.__name__ == "double"


def test_a_plain_module_level_function_works_too_and_dotted_strings_keep_working():
    from tests.durable import steps

    assert compile_graph(task(steps.number))["path"] == "tests.durable.steps.number"
    assert compile_graph(task("tests.durable.steps.number"))["path"] == "tests.durable.steps.number"


def test_a_workflow_function_is_started_by_reference(worker):
    assert WORKFLOWS["tests.durable.decorated.doubling"] is decorated.doubling
    handle = start(decorated.doubling, input={"n": 4})
    many = start_many(decorated.doubling, [{"n": 1}, {"n": 2}])
    worker.drain()
    assert result(handle) == 9
    assert [result(h) for h in many] == [3, 5]


def test_what_cannot_be_stored_is_refused_where_it_is_written():
    def nested(ctx):
        return 1

    with pytest.raises(DefinitionError, match="module-level function"):
        task(nested)
    with pytest.raises(DefinitionError, match="module-level function"):
        task(lambda ctx: 1)
    with pytest.raises(DefinitionError, match="module-level function"):
        step(nested)
    with pytest.raises(DefinitionError, match="unknown step option"):
        step(retries=3)(decorated.double)
    with pytest.raises(DefinitionError, match="not a workflow"):
        start(decorated.double)  # a step, not a workflow
    with pytest.raises(DefinitionError, match="decorates a function"):
        workflow(42)
