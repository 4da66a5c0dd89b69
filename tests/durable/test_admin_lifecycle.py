"""The admin's actions for resume, fork and cancel in bulk."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.durable import start, start_many, status, task
from jobs.durable.models import Instance
from tests.durable import lifecycle_steps

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

L = "tests.durable.lifecycle_steps."


def changelist() -> str:
    return reverse("admin:durable_instance_changelist")


@pytest.fixture
def bug():
    lifecycle_steps.BROKEN["buggy"] = True
    yield lifecycle_steps.BROKEN
    lifecycle_steps.BROKEN["buggy"] = True


def test_admin_resume_action_reruns_failed_instances_and_refuses_others(staff_client, worker, bug):
    failed = start(task(L + "first").as_("made") >> task(L + "buggy"), input=1)
    worker.drain()
    pending = start(task(L + "first"), input=2)
    bug["buggy"] = False
    response = staff_client.post(
        changelist(),
        {"action": "resume_instances", "_selected_action": [str(failed), str(pending)]},
        follow=True,
    )
    text = response.content.decode()
    assert "Resumed 1 instance(s)." in text and "only a failed or cancelled one resumes" in text
    worker.drain()
    assert status(failed) == "completed"


def test_admin_fork_action_asks_for_the_step_then_forks(staff_client, worker):
    iid = start(task(L + "first").as_("made") >> task(L + "second"), input=3)
    worker.drain()
    asked = staff_client.post(
        changelist(), {"action": "fork_instances", "_selected_action": [str(iid)]}
    )
    assert asked.status_code == 200 and "from_step" in asked.content.decode()
    response = staff_client.post(
        changelist(),
        {"action": "fork_instances", "_selected_action": [str(iid)], "apply": "1",
         "from_step": "second"},
        follow=True,
    )  # fmt: skip
    assert "Forked 1 instance(s)." in response.content.decode()
    copy = Instance.objects.get(forked_from=iid)
    worker.drain()
    assert status(copy.pk) == "completed"


def test_admin_cancel_in_bulk_takes_every_selected_match(staff_client):
    handles = start_many(task(L + "first"), list(range(30)), label="bulk")
    other = start(task(L + "first"), input=0, label="other")
    response = staff_client.post(
        changelist() + "?label=bulk",
        {"action": "cancel_in_bulk", "select_across": "1", "index": "0",
         "_selected_action": [str(handles[0])]},
        follow=True,
    )  # fmt: skip
    assert "Cancelled 30 instance(s)." in response.content.decode()
    assert set(Instance.objects.filter(pk__in=handles).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert status(other) == "pending"
