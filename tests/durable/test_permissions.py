"""Permissions (start, SQL steps, HTTP steps) and ownership, through the API and the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from jobs.durable import (
    InstanceNotFound,
    NotPermitted,
    http,
    instances,
    loop,
    signal,
    sleep,
    sql,
    start,
    status,
    task,
    wait_for_schedule,
    when,
)
from jobs.durable.models import Instance
from jobs.durable.permissions import required_permissions, visible_instance
from tests.durable import flows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

PLAIN = task("tests.durable.steps.fast")
SQL = sql("SELECT 1")
HTTP = http("https://api.example.org/approve", method="POST")


def grant(user, *codenames: str):
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    # has_perm caches per user object: read them again
    return type(user).objects.get(pk=user.pk)


def test_start_needs_the_start_permission(user):
    with pytest.raises(NotPermitted, match=r"missing permission durable\.start_workflow"):
        start(PLAIN, user=user)
    assert Instance.objects.count() == 0
    user = grant(user, "start_workflow")
    iid = start(PLAIN, user=user)
    assert Instance.objects.get(pk=iid).owner == user, "the starting user owns it"


def test_sql_steps_need_their_permission(user, settings):
    settings.ACURIO_SQL_STEP_ROLE = "acurio_sql_step"
    user = grant(user, "start_workflow")
    with pytest.raises(NotPermitted, match=r"missing permission durable\.use_sql_steps"):
        start(PLAIN >> SQL, user=user)
    user = grant(user, "use_sql_steps")
    assert start(PLAIN >> SQL, user=user)


def test_without_a_step_role_only_superusers_start_sql_steps(user, staff_user, settings):
    settings.ACURIO_SQL_STEP_ROLE = ""
    user = grant(user, "start_workflow", "use_sql_steps")
    with pytest.raises(NotPermitted, match="without ACURIO_SQL_STEP_ROLE"):
        start(PLAIN >> SQL, user=user)
    assert not Instance.objects.exists()
    assert start(SQL, user=staff_user)  # a superuser
    assert start(PLAIN, user=user)  # no sql step: the role does not matter


def test_http_steps_need_their_permission(user, settings):
    settings.ACURIO_SQL_STEP_ROLE = "acurio_sql_step"
    user = grant(user, "start_workflow", "use_sql_steps")
    with pytest.raises(NotPermitted, match=r"missing permission durable\.use_http_steps"):
        start(HTTP | SQL, user=user)
    user = grant(user, "use_http_steps")
    assert start(HTTP | SQL, user=user)


def test_all_missing_permissions_are_named_at_once(user):
    with pytest.raises(NotPermitted) as info:
        start(SQL >> HTTP, user=user)
    assert str(info.value).endswith(
        "missing permissions durable.start_workflow, durable.use_sql_steps, durable.use_http_steps"
    )
    assert required_permissions({"kind": "task", "name": "", "path": "a.b"}) == [
        "durable.start_workflow"
    ]


def test_superusers_hold_every_permission_and_owner_only_starts_are_trusted(staff_user, user):
    assert start(SQL >> HTTP, user=staff_user)
    # Application code starting its own workflow for a user (owner=) is not checked.
    assert Instance.objects.get(pk=start(SQL, owner=user)).owner == user


def test_users_see_and_control_only_their_own_instances(user, other_user, staff_user):
    mine = start(flows.approval, owner=user)
    theirs = start(flows.approval, owner=other_user)
    assert visible_instance(user, mine).pk == mine
    with pytest.raises(InstanceNotFound):
        visible_instance(user, theirs)
    with pytest.raises(InstanceNotFound):
        signal(theirs, "approval", user=user)
    assert signal(mine, "approval", user=user) is True
    assert list(instances(user=user).values_list("pk", flat=True)) == [mine]
    assert {i.pk for i in instances(user=staff_user)} == {mine, theirs}, "staff see all"
    assert visible_instance(staff_user, theirs).pk == theirs
    assert signal(theirs, "approval", user=staff_user) is True


# --- admin ----------------------------------------------------------------------------------------
def changelist() -> str:
    return reverse("admin:durable_instance_changelist")


def test_admin_cancel_action(staff_client):
    iid = start(flows.approval)
    done = start(PLAIN)
    Instance.objects.filter(pk=done).update(status="completed")
    response = staff_client.post(
        changelist(),
        {"action": "cancel_instances", "_selected_action": [str(iid), str(done)]},
        follow=True,
    )
    assert status(iid) == "cancelled" and status(done) == "completed"
    text = response.content.decode()
    assert "Cancelled 1 instance(s)." in text and "1 had already finished" in text


def test_admin_signal_action_asks_then_sends(staff_client):
    iid = start(flows.approval)
    first = staff_client.post(
        changelist(), {"action": "signal_instances", "_selected_action": [str(iid)]}
    )
    assert first.status_code == 200
    assert b'value="approval"' in first.content, "the awaited signal is proposed"
    response = staff_client.post(
        changelist(),
        {
            "action": "signal_instances",
            "_selected_action": [str(iid)],
            "apply": "1",
            "name": "approval",
            "data": '{"approved": true}',
        },
        follow=True,
    )
    assert "delivered to 1 waiting step(s)" in response.content.decode()
    assert Instance.objects.get(pk=iid).signals.get().data == {"approved": True}


def test_admin_signal_action_reports_bad_input_and_refusals(staff_client):
    iid = start(flows.approval)
    bad = staff_client.post(
        changelist(),
        {
            "action": "signal_instances",
            "_selected_action": [str(iid)],
            "apply": "1",
            "name": "approval",
            "data": "{not json",
        },
    )
    assert bad.status_code == 200 and b"Enter a valid JSON" in bad.content
    wrong = staff_client.post(
        changelist(),
        {
            "action": "signal_instances",
            "_selected_action": [str(iid)],
            "apply": "1",
            "name": "payment",
            "data": "",
        },
        follow=True,
    )
    assert "never waits for a signal named" in wrong.content.decode()
    assert not Instance.objects.get(pk=iid).signals.exists()


def test_admin_instance_page_shows_its_waits(staff_client):
    iid = start(flows.approval)
    page = staff_client.get(reverse("admin:durable_instance_change", args=[iid])).content.decode()
    assert "wait for signal &#x27;approval&#x27;, timeout 3600s" in page
    assert "<td>approval</td>" in page  # which signal
    signal(iid, "approval")
    page = staff_client.get(reverse("admin:durable_instance_change", args=[iid])).content.decode()
    assert "received, waiting for a worker" in page


def test_admin_actions_need_the_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("vera", password="pw-vera-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_instance"))
    client.force_login(viewer)
    iid = start(flows.approval)
    listing = client.get(changelist())
    assert listing.status_code == 200 and b"cancel_instances" not in listing.content
    client.post(changelist(), {"action": "cancel_instances", "_selected_action": [str(iid)]})
    assert status(iid) == "pending", "refused: the action is not offered to this user"


def test_admin_instance_page_draws_the_control_and_wait_operators(staff_client, worker, clock):
    flow = (
        (task("tests.durable.steps.fast") | sleep(60))
        >> loop(task("tests.durable.steps.count").as_("n"))
        >> when("n", wait_for_schedule("0 12 * * *"))
    )
    iid = start(flow, input={"stop": 2})
    worker.drain()
    page = staff_client.get(reverse("admin:durable_instance_change", args=[iid]))
    assert page.status_code == 200
    text = page.content.decode()
    for label in ("race (first wins)", "loop until Break", "when n", "sleep 60s"):
        assert label in text
    assert "wait for schedule &#x27;0 12 * * *&#x27;" in text and "2026-03-02 12:00:00" in text
