"""A workflow instance's admin page: controls first (cancel, signal, resume/retry when the
engine offers them), then the graph, the steps' errors and the waits; Delete only once the
instance has finished."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.urls import reverse

import jobs.durable
from jobs.durable import PermanentError, Worker, start, status, task, wait_for_signal

pytestmark = pytest.mark.django_db

HERE = "tests.admin.test_instance_page."


def echo(ctx):
    return ctx["approval"]


def refuse(ctx):
    raise PermanentError("the approval service said no")


def page_of(client, iid) -> str:
    response = client.get(reverse("admin:durable_instance_change", args=[iid]))
    assert response.status_code == 200
    return response.content.decode()


def control(client, iid, **data):
    return client.post(reverse("admin:durable_instance_control", args=[iid]), data, follow=True)


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def waiting():
    """An instance waiting for the signal "approval"."""
    iid = start(wait_for_signal("approval", timeout=3600).as_("approval") >> task(HERE + "echo"))
    Worker(once=True).drain()
    assert status(iid) in ("pending", "running")  # waiting: not finished
    return iid


@pytest.fixture
def failed():
    iid = start(task(HERE + "refuse"), label="refusal")
    Worker(once=True).drain()
    assert status(iid) == "failed"
    return iid


def test_the_controls_and_the_graph_come_before_the_fields(staff_client, waiting):
    page = page_of(staff_client, waiting)
    controls = page.index('id="durable-controls"')
    graph = page.index('id="durable-graph"')
    fields = page.index('class="form-row field-input_json')
    assert controls < graph < fields
    assert 'value="Cancel"' in page and 'value="Send a signal"' in page
    # The signal's name is filled in from the wait.
    assert 'name="name" value="approval"' in page
    assert 'id="durable-waits"' in page and "approval" in page
    assert "durable/admin.css" in page and "<style" not in page
    # Running: no Delete.
    assert reverse("admin:durable_instance_delete", args=[waiting]) not in page


def test_send_a_signal_from_the_page(staff_client, waiting):
    response = control(staff_client, waiting, verb="signal", name="approval", data='{"ok": 1}')
    assert response.redirect_chain[-1][0] == reverse(
        "admin:durable_instance_change", args=[waiting]
    )
    assert texts(response) == [
        "Signal 'approval': delivered to 1 waiting step(s), kept for 0 instance(s) not waiting yet."
    ]
    Worker(once=True).drain()
    assert status(waiting) == "completed"
    assert jobs.durable.result(waiting)["data"] == {"ok": 1}


def test_a_bad_signal_is_refused_with_the_reason(staff_client, waiting):
    response = control(staff_client, waiting, verb="signal", name="approval", data="{not json")
    [message] = texts(response)
    assert message.startswith("No signal sent: data:")
    assert status(waiting) in ("pending", "running")


def test_cancel_from_the_page_then_delete_is_offered(staff_client, waiting):
    delete_url = reverse("admin:durable_instance_delete", args=[waiting])
    assert staff_client.get(delete_url).status_code == 403  # running: not deletable
    response = control(staff_client, waiting, verb="cancel")
    assert texts(response)[0].startswith("Cancelled ")
    assert status(waiting) == "cancelled"
    page = page_of(staff_client, waiting)
    assert 'value="Cancel"' not in page and 'value="Send a signal"' not in page
    assert delete_url in page
    assert staff_client.get(delete_url).status_code == 200
    again = control(staff_client, waiting, verb="cancel")
    assert texts(again) == ["It had already finished; left as it was."]


def test_a_failed_instance_lists_its_step_errors(staff_client, failed):
    page = page_of(staff_client, failed)
    errors = page[page.index('id="durable-step-errors"') :]
    assert "the approval service said no" in errors
    assert 'value="Cancel"' not in page and 'value="Send a signal"' not in page


def test_resume_is_offered_only_when_the_engine_exports_it(staff_client, failed, monkeypatch):
    without = [name for name in jobs.durable.__all__ if name not in ("resume", "retry")]
    monkeypatch.setattr(jobs.durable, "__all__", without)
    page = page_of(staff_client, failed)
    assert 'id="durable-resume"' not in page
    assert "Failed: nothing left to control." in page
    assert texts(control(staff_client, failed, verb="resume")) == [
        "Unknown action 'resume': nothing done."
    ]
    assert status(failed) == "failed"

    monkeypatch.setattr(jobs.durable, "__all__", [*without, "resume"])
    page = page_of(staff_client, failed)
    assert 'id="durable-resume"' in page and 'value="Resume"' in page


def test_resume_from_the_page_runs_a_failed_instance_again(staff_client, failed):
    response = control(staff_client, failed, verb="resume")
    assert texts(response)[0].startswith("Resumed ")
    assert status(failed) in ("pending", "running")
    Worker(once=True).drain()
    assert status(failed) == "failed"  # the step refuses again, as it always will
    again = control(staff_client, failed, verb="resume")
    assert texts(again)[0].startswith("Resumed ")


def test_a_refused_resume_is_reported(staff_client, failed, monkeypatch):
    from jobs.durable.errors import DurableError

    def refuse_resume(iid):
        raise DurableError(f"workflow instance {iid} is running: only a failed one resumes")

    monkeypatch.setattr(jobs.durable, "__all__", [*jobs.durable.__all__, "resume"])
    monkeypatch.setattr(jobs.durable, "resume", refuse_resume, raising=False)
    [message] = texts(control(staff_client, failed, verb="resume"))
    assert message.startswith("Resume refused: workflow instance ")


def test_resume_is_not_offered_for_a_running_instance(staff_client, waiting, monkeypatch):
    monkeypatch.setattr(jobs.durable, "__all__", [*jobs.durable.__all__, "resume"])
    assert 'id="durable-resume"' not in page_of(staff_client, waiting)


def test_view_only_staff_see_the_graph_but_no_controls(client, django_user_model, waiting):
    viewer = django_user_model.objects.create_user("vera", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_instance"))
    client.force_login(viewer)
    page = page_of(client, waiting)
    assert 'id="durable-graph"' in page and 'id="durable-controls"' not in page
    response = client.post(
        reverse("admin:durable_instance_control", args=[waiting]), {"verb": "cancel"}
    )
    assert response.status_code == 403
    assert status(waiting) in ("pending", "running")


def test_the_control_url_refuses_get(staff_client, waiting):
    url = reverse("admin:durable_instance_control", args=[waiting])
    assert staff_client.get(url).status_code == 405


def test_the_list_offers_no_bulk_delete(staff_client, waiting):
    page = staff_client.get(reverse("admin:durable_instance_changelist")).content.decode()
    assert "delete_selected" not in page
