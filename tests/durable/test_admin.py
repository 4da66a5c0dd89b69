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
