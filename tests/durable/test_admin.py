"""The durable admin: the instance list with its filters, the instance page's graph."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.durable import Worker, fan_out, start, task

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


@pytest.fixture
def flows(user, other_user):
    a = start(task(S + "record"), label="analysis", owner=user)
    Worker().drain()
    b = start(task(S + "record"), label="import", owner=other_user)
    return a, b


def test_instance_list_filters_by_status_label_and_owner(staff_client, flows, user):
    done, pending = flows
    url = reverse("admin:durable_instance_changelist")
    page = staff_client.get(url).content.decode()
    assert str(done)[:8] in page and str(pending)[:8] in page
    page = staff_client.get(url, {"status__exact": "completed"}).content.decode()
    assert str(done)[:8] in page and str(pending)[:8] not in page
    page = staff_client.get(url, {"label": "import"}).content.decode()
    assert str(pending)[:8] in page and str(done)[:8] not in page
    page = staff_client.get(url, {"owner__id__exact": user.pk}).content.decode()
    assert str(done)[:8] in page and str(pending)[:8] not in page


def test_instance_page_draws_the_graph_with_node_states(staff_client):
    flow = (
        task(S + "items").as_("xs")
        >> fan_out(task(S + "double_chunk"), over="xs")
        >> (task(S + "record") & task(S + "permanent"))
    )
    iid = start(flow, input={"count": 2})
    worker = Worker()
    worker.drain()
    page = staff_client.get(reverse("admin:durable_instance_change", args=[iid])).content.decode()
    assert 'data-node="1" data-state="completed"' in page  # items
    assert "chunks: 2 completed" in page
    assert 'data-state="failed"' in page and "the thesis file is empty" in page
    assert 'data-state="cancelled"' in page or 'data-state="completed"' in page
    assert "durable-kids-all" in page, "the join's branches are drawn side by side"


def test_admin_refuses_adding_instances_by_hand(staff_client):
    assert staff_client.get(reverse("admin:durable_instance_add")).status_code == 403


def test_admin_needs_staff(user_client):
    response = user_client.get(reverse("admin:durable_instance_changelist"))
    assert response.status_code == 302


def test_instance_page_shows_crashes_and_every_attempts_traceback(staff_client, settings):
    import time_machine

    from jobs.durable import recover_expired_leases

    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(task(S + "fail_first", max_attempts=3), input={"fail_times": 2})
        Worker(worker_id="doomed", lease_seconds=5).claim()
        clock.shift(6)
        recover_expired_leases()
        Worker(chain=False).run_one()  # attempt 2 raises
    page = staff_client.get(reverse("admin:durable_instance_change", args=[iid])).content.decode()
    assert "<span>crashes 1</span>" in page
    assert "crash on attempt 1" in page and "error on attempt 2" in page
    assert "RuntimeError: transient failure on attempt 2" in page  # the traceback
    assert "Started by code version" in page


def test_instance_list_shows_mixed_code_versions(staff_client, flows):
    from jobs.durable.models import Instance

    url = reverse("admin:durable_instance_changelist")
    assert "Mixed code versions" not in staff_client.get(url).content.decode()
    newer = start(task(S + "record"))
    Instance.objects.filter(pk=newer).update(code_version="rel-2")
    page = staff_client.get(url).content.decode()
    assert "Mixed code versions in flight" in page and "rel-2 (1 unfinished instance" in page
