"""The verbs driven in-process: start (joins the caller's transaction, checks its input),
status, result, instances, explain, current_step, and cancel."""

from __future__ import annotations

import uuid

import pytest
import time_machine
from django.db import transaction

from jobs.durable import (
    DefinitionError,
    InstanceNotFound,
    WorkflowNotFinished,
    cancel,
    current_step,
    explain,
    fan_out,
    instances,
    result,
    start,
    status,
    task,
)
from jobs.durable.models import Instance, Step
from tests.durable.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(instance_id) -> list[Step]:
    return list(Step.objects.filter(instance_id=instance_id).order_by("id"))


# --- start and the verbs ----------------------------------------------------------------------
def test_start_joins_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        iid = start(t("record"))
        assert Instance.objects.filter(pk=iid).exists()
        raise RuntimeError("the view failed after starting")
    assert not Instance.objects.filter(pk=iid).exists()
    assert not Step.objects.filter(instance_id=iid).exists()


def test_start_stores_label_owner_input_and_graph(user):
    iid = start(t("record"), label="analysis", owner=user, input={"job": 7})
    instance = Instance.objects.get(pk=iid)
    assert isinstance(iid, uuid.UUID)
    assert (instance.label, instance.owner, instance.input) == ("analysis", user, {"job": 7})
    assert instance.graph["path"] == S + "record"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workflow": task("tests.durable.steps.nope")}, "cannot be imported"),
        ({"workflow": task("tests.durable.steps.ROWS_DDL")}, "is not callable"),
        ({"input": {"when": object()}}, "must be JSON-serialisable"),
        ({"on_failure": "tests.durable.steps.nope"}, "on_failure 'tests.durable.steps.nope'"),
        ({"label": "x" * 201}, "at most 200 characters"),
    ],
)
def test_start_rejects_bad_input_with_a_clear_error(kwargs, message):
    workflow = kwargs.pop("workflow", t("record"))
    with pytest.raises(DefinitionError, match=message):
        start(workflow, **kwargs)
    assert not Instance.objects.exists()


def test_verbs_reject_unknown_and_malformed_ids():
    for verb in (status, result, cancel, explain):
        with pytest.raises(InstanceNotFound, match="no workflow instance"):
            verb(uuid.uuid4())
        with pytest.raises(InstanceNotFound, match="no workflow instance"):
            verb("not-a-uuid")  # a workflow id no start used
        with pytest.raises(InstanceNotFound, match="is not a workflow instance id"):
            verb("")


def test_result_raises_until_completed(worker):
    iid = start(t("number"), input={"n": 5})
    with pytest.raises(WorkflowNotFinished):
        result(iid)
    worker.drain()
    assert result(str(iid)) == 5


def test_instances_filters_by_owner_status_and_label(user, other_user, worker):
    a = start(t("number"), label="x", owner=user, input={"n": 1})
    b = start(t("number"), label="y", owner=other_user, input={"n": 1})
    worker.drain()
    c = start(t("number"), label="x", owner=user, input={"n": 1})
    assert [i.id for i in instances(owner=user)] == [c, a]
    assert [i.id for i in instances(status="completed")] == [b, a]
    assert [i.id for i in instances(label="x", status="pending")] == [c]
    assert [i.id for i in instances(user=other_user)] == [b]
    with pytest.raises(ValueError, match="unknown status 'done'"):
        instances(status="done")


def test_explain_gives_states_attempts_timings_as_data_and_text(worker):
    flow = t("items").as_("xs") >> fan_out(t("double_chunk"), over="xs", chunk=2) >> t("record")
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(flow, input={"count": 3})
        worker.run_one()
        clock.shift(2)
        worker.run_one()
    data = explain(iid)
    seq = data["graph"]
    assert data["status"] == "running"
    assert [c["state"] for c in seq["children"]] == ["completed", "running", "not started"]
    assert seq["children"][0]["attempts"] == 1 and seq["children"][0]["seconds"] == 0
    body = seq["children"][1]["children"][0]
    assert body["chunks"] == {"completed": 1, "ready": 1}
    assert "xs (items): completed" in data["text"]
    assert "1 completed, 1 ready" in data["text"]
    assert "record: not started" in data["text"]


def test_current_step_reports_fan_out_progress(worker):
    flow = (
        t("items").as_("xs") >> fan_out(t("double_chunk"), over="xs").as_("verify") >> t("record")
    )
    iid = start(flow, input={"count": 3})
    assert current_step(iid) == {
        "step": "xs",
        "kind": "task",
        "state": "ready",
        "done": 0,
        "total": 2,
    }
    worker.run_one()
    worker.run_one()
    assert current_step(iid) == {
        "step": "verify",
        "kind": "task",
        "state": "ready",
        "done": 1,
        "total": 3,
    }
    worker.drain()
    assert current_step(iid)["state"] == "completed"
    assert current_step(uuid.uuid4()) is None


# --- cancellation -------------------------------------------------------------------------------
def test_cancel_stops_pending_steps_and_calls_the_hook(worker):
    iid = start(t("record") >> t("record"), on_failure=S + "on_failure")
    worker.run_one()
    assert cancel(iid) is True
    assert status(iid) == "cancelled"
    assert [s.status for s in steps_of(iid)] == ["cancelled", "completed", "cancelled"]
    assert worker.drain() == 0
    assert cancel(iid) is False, "already finished"
    assert len(rows("on_failure")) == 1


def test_a_step_running_when_cancelled_never_checkpoints(worker):
    iid = start(t("record") >> t("record"))
    step = worker.claim()[0]
    cancel(iid)
    assert worker.execute(step) == "fenced"
    assert rows() == [], "its writes rolled back with the refused checkpoint"
    assert Step.objects.filter(instance_id=iid, status="completed").count() == 0
