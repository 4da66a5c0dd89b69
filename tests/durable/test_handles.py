"""start() returns a WorkflowHandle: status(), result(timeout=...) that waits on NOTIFY and
raises for a failed, cancelled or unfinished instance; get_handle(id); result() without
waiting tells "not finished" from a finished None."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from jobs.durable import (
    InstanceNotFound,
    Worker,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowHandle,
    WorkflowNotFinished,
    cancel,
    get_handle,
    result,
    start,
    status,
    task,
)
from jobs.durable.models import Instance

S = "tests.durable.steps."


@pytest.mark.django_db
def test_start_returns_a_handle_usable_as_an_id(rows_table):
    handle = start(task(S + "number"), input={"n": 5})
    assert isinstance(handle, WorkflowHandle) and isinstance(handle, uuid.UUID)
    assert type(handle.id) is uuid.UUID and handle.id == handle and str(handle) == str(handle.id)
    assert Instance.objects.get(pk=handle).id == handle.id
    assert handle.status() == "pending" == status(handle)
    assert get_handle(str(handle)) == handle and isinstance(get_handle(handle), WorkflowHandle)
    with pytest.raises(InstanceNotFound):
        get_handle(uuid.uuid4())


@pytest.mark.django_db
def test_result_raises_until_finished_and_tells_a_none_result_apart(rows_table, worker):
    iid = start(task(S + "number"), input={"n": None})
    with pytest.raises(WorkflowNotFinished, match="is pending: no result yet"):
        result(iid)
    worker.drain()
    assert status(iid) == "completed" and result(iid) is None


@pytest.mark.django_db
def test_result_of_a_failed_or_cancelled_instance_raises(rows_table, worker):
    failed = start(task(S + "permanent"))
    worker.drain()
    with pytest.raises(WorkflowFailed, match="the thesis file is empty") as info:
        result(failed)
    assert info.value.error == "the thesis file is empty"
    with pytest.raises(WorkflowFailed):
        failed.result(timeout=1)
    cancelled = start(task(S + "number"), input={"n": 1})
    cancel(cancelled)
    with pytest.raises(WorkflowCancelled):
        cancelled.result(timeout=1)


@pytest.mark.django_db(transaction=True)
def test_result_waits_for_the_finish_and_wakes_on_its_notify(rows_table):
    handle = start(task(S + "number"), input={"n": 7})
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.3s"):
        handle.result(timeout=0.3)
    finished_at: list[float] = []

    def run_later() -> None:
        time.sleep(0.5)
        Worker(worker_id="late", lease_seconds=30).drain()
        finished_at.append(time.monotonic())

    thread = threading.Thread(target=run_later)
    thread.start()
    try:
        assert handle.result(timeout=30) == 7
        woke = time.monotonic()
    finally:
        thread.join()
    # Woken by the NOTIFY, not by its 5 s safety-net re-read.
    assert woke - finished_at[0] < 1.0
    assert get_handle(handle).result(timeout=0) == 7
