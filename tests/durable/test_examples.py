"""The README's three examples (jobs/durable/examples.py) run as written."""

from __future__ import annotations

import copy

import pytest
from django.db import connection

from jobs.durable import examples, result, signal, start, status
from jobs.durable.models import Step

pytestmark = pytest.mark.django_db


def test_batch_update_of_unprocessed_documents(worker, clock):
    with connection.cursor() as cursor:
        cursor.execute(examples.DOCUMENTS_DDL)
        cursor.execute(
            "INSERT INTO documents (body, processed)"
            " SELECT 'doc ' || g, g % 10 = 0 FROM generate_series(1, 260) AS g"
        )
    iid = start(examples.process_documents)
    worker.drain()
    assert status(iid) == "completed"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM documents WHERE NOT processed")
        assert cursor.fetchone()[0] == 0
    updates = Step.objects.filter(instance_id=iid, name="updated").order_by("id")
    # 234 unprocessed, in batches; the empty last batch ends the loop
    assert [s.output for s in updates] == [100, 100, 34, 0]


def test_http_call_then_approval_signal(worker, clock, server):
    flow = copy.deepcopy(examples.request_approval)
    flow.children[0].url = server.base + "/ok"  # the same workflow, pointed at the test server
    iid = start(flow, input={"document": 42})
    worker.drain()
    assert server.requests[0]["method"] == "POST"
    assert signal(iid, "approval", {"approved": True, "by": "ada"}) is True
    worker.drain()
    assert result(iid) == {"document": 42, "decision": "approved", "by": "ada"}

    iid = start(flow, input={"document": 43})
    worker.drain()
    clock.shift(24 * 3600)
    worker.drain()
    assert result(iid) == {"document": 43, "decision": "timed out"}


def test_fan_out_over_a_list(worker, clock):
    iid = start(examples.squares, input={"numbers": [1, 2, 3, 4, 5, 6, 7]})
    worker.drain()
    assert result(iid) == {"squares": [1, 4, 9, 16, 25, 36, 49], "sum": 140}
    assert Step.objects.filter(instance_id=iid, kind="task", chunk_index__isnull=False).count() == 3
