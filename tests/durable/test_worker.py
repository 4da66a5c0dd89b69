"""The worker driven in-process: leases, recovery and the fence, the heartbeat, graphs that
outlive a deploy, chaining, prepared statements, unknown kinds and deleted instances."""

from __future__ import annotations

import inspect
import subprocess
import sys
import uuid
from datetime import timedelta

import psycopg
import pytest
import time_machine
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from jobs.durable import Worker, explain, recover_expired_leases, result, start, status, task
from jobs.durable.engine import Txn
from jobs.durable.models import Instance, Step
from jobs.durable.state import Graph, Transitions
from jobs.durable.statements import claim_sql
from jobs.durable.worker import HANDBACK_DELAY, Heartbeat
from tests.durable import steps as steps_module
from tests.durable.support import rows
from tests.pgbouncer import server_connections
from tests.processes import ROOT, child_env, database_url

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("rows_table")]

S = "tests.durable.steps."


def t(name: str, **options) -> object:
    return task(S + name, **options)


def steps_of(instance_id) -> list[Step]:
    return list(Step.objects.filter(instance_id=instance_id).order_by("id"))


# --- leases, recovery and the fence ---------------------------------------------------------
def test_expired_lease_is_recovered_and_resumes_from_the_last_checkpoint():
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record") >> t("record"))
        first = Worker(worker_id="w1", lease_seconds=10, chain=False)
        first.run_one()  # step 1 checkpointed
        lost = first.claim()[0]  # step 2 claimed, then the worker "dies"
        clock.shift(9)
        assert recover_expired_leases() == 0, "lease still valid"
        clock.shift(2)
        assert recover_expired_leases() == 1
        step = Step.objects.get(pk=lost.id)
        assert (step.status, step.lease_owner) == ("ready", "")
        assert "lease expired" in step.error
        second = Worker(worker_id="w2", lease_seconds=10)
        assert second.drain() == 1
    assert status(iid) == "completed"
    assert len(rows()) == 2, "step 1 did not run again"


def test_lost_leases_count_as_crashes_not_attempts(settings):
    settings.ACURIO_MAX_ATTEMPTS = 2
    settings.ACURIO_MAX_CRASHES = 3
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record"), on_failure=S + "on_failure")
        for _ in range(3):  # more crashes than attempts: the instance lives on
            Worker(worker_id="doomed", lease_seconds=5).claim()
            clock.shift(6)
            assert recover_expired_leases() == 1
        step = Step.objects.get(instance_id=iid, kind="task")
        assert (step.status, step.crashes, step.attempts) == ("ready", 3, 3)
        assert step.attempts - step.crashes < 2, "no attempt of the retry budget spent"
        assert [e["kind"] for e in step.attempt_log] == ["crash"] * 3
        assert "crash 3 of at most 3, no attempt spent" in step.error
        assert status(iid) == "running"
        Worker(worker_id="doomed", lease_seconds=5).claim()
        clock.shift(6)
        assert recover_expired_leases() == 1  # the fourth crash passes the bound
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "its worker was lost 4 times (the bound is ACURIO_MAX_CRASHES = 3)" in instance.error
    assert len(rows("on_failure")) == 1


def test_a_step_survives_crashes_then_completes_with_its_errors_still_counted(settings):
    settings.ACURIO_MAX_ATTEMPTS = 2
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        # ctx.attempt counts claims: the two lost ones, then one that raises
        iid = start(t("fail_first"), input={"fail_times": 3})
        for _ in range(2):
            Worker(worker_id="doomed", lease_seconds=5).claim()
            clock.shift(6)
            recover_expired_leases()
        worker = Worker(worker_id="steady", lease_seconds=5, chain=False)
        assert worker.run_one()  # an error: a retry after its backoff
        clock.shift(60)
        assert worker.run_one()  # the last attempt of two succeeds
    step = Step.objects.get(instance_id=iid, kind="task")
    assert (step.status, step.crashes, step.attempts) == ("completed", 2, 4)
    kinds = [e["kind"] for e in step.attempt_log]
    assert kinds == ["crash", "crash", "error"]
    error = step.attempt_log[-1]
    assert "transient failure on attempt 3" in error["error"] and error["attempt"] == 3
    assert "Traceback" in error["traceback"] and "fail_first" in error["traceback"]
    node = explain(iid)["graph"]
    assert (node["attempts"], node["crashes"], len(node["attempt_log"])) == (2, 2, 3)
    text = explain(iid)["text"]
    assert "attempts 2 · crashes 2" in text
    assert "! crash on attempt 1" in text and "! error on attempt 3" in text
    assert "RuntimeError: transient failure on attempt 3" in text  # the traceback's last line


def test_recovered_then_reclaimed_step_never_takes_the_stale_checkpoint():
    """River #1302: a slow worker finishing after its lease was recovered and the step
    reclaimed must not overwrite the newer claim's outcome."""
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record"))
        slow, fast = (
            Worker(worker_id="slow", lease_seconds=5),
            Worker(worker_id="fast", lease_seconds=5),
        )
        stale = slow.claim()[0]
        clock.shift(6)
        assert recover_expired_leases() == 1
        fresh = fast.claim()[0]
        assert (stale.id, stale.attempts, fresh.attempts) == (fresh.id, 1, 2)
        assert slow.execute(stale) == "fenced"
        assert rows() == [], "the stale attempt's writes were rolled back"
        assert Step.objects.get(pk=fresh.id).status == "running"
        assert fast.execute(fresh) == "completed"
        # and the other order: the stale worker cannot fail the step either
        assert (
            slow._record_failure(stale, Instance.objects.get(pk=iid).graph, RuntimeError("x"))
            == "fenced"
        )
    step = Step.objects.get(pk=fresh.id)
    assert (step.status, step.attempts, step.output) == ("completed", 2, fresh.id)
    assert [r[3] for r in rows()] == [2]


def test_running_tasks_of_an_instance_are_the_claimed_ones(worker):
    iid = start(t("record") >> t("record"))
    other = start(t("record"))
    assert not Step.objects.of_instance(iid).running_tasks().exists(), "the sequence only"
    claimed = worker.claim(limit=2)
    assert {s.instance_id for s in claimed} == {iid, other}
    running = Step.objects.of_instance(iid).running_tasks()
    assert [s.id for s in running] == [s.id for s in claimed if s.instance_id == iid]


def test_heartbeat_renews_running_leases_until_the_timeout():
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        start(t("record", timeout=20))
        w = Worker(worker_id="hb", lease_seconds=10)
        step = w.claim()[0]
        w._active[step.id] = timezone.now() + timedelta(seconds=20)
        beat = Heartbeat(w)
        clock.shift(8)
        assert beat.beat() == 1
        assert Step.objects.get(pk=step.id).lease_expires_at == timezone.now() + timedelta(
            seconds=10
        )
        clock.shift(13)  # past the step's timeout: no more renewals
        assert beat.beat() == 0


# --- upgrade safety ---------------------------------------------------------------------------
def test_instance_finishes_on_its_stored_graph_after_the_definition_changes(worker):
    flows = {"analysis": t("version_a") >> t("version_b")}
    iid = start(flows["analysis"])
    worker.run_one()
    # a deploy: the workflow gains a step and drops one; the function bodies change too
    flows["analysis"] = t("version_a") >> t("version_c") >> t("version_c")
    original = steps_module.version_a
    steps_module.version_a = lambda ctx: "new a"
    try:
        worker.drain()
    finally:
        steps_module.version_a = original
    assert status(iid) == "completed" and result(iid) == "b"
    assert sorted(r[1] for r in rows()) == ["a", "b"]


# --- chaining ---------------------------------------------------------------------------------
def test_worker_chains_into_the_next_step_of_a_sequence_without_claiming_it():
    iid = start(t("record") >> t("record") >> t("record"))
    worker = Worker(worker_id="chainer")
    assert worker.run_one()
    assert status(iid) == "completed", "one claim ran the whole sequence"
    assert {s.attempts for s in steps_of(iid) if s.kind == "task"} == {1}
    assert len(rows()) == 3


def test_a_chained_step_is_an_ordinary_leased_claim():
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False) as clock:
        iid = start(t("record") >> t("record"))
        worker = Worker(worker_id="chainer", lease_seconds=10)
        first = worker.claim()[0]
        assert worker.execute(first, chain=True) == "completed"
        chained = worker._local.chained
        step = Step.objects.get(pk=chained.id)
        assert (step.status, step.attempts, step.lease_owner) == ("running", 1, "chainer")
        # the worker dies before running it: lease recovery hands it to another worker
        clock.shift(11)
        assert recover_expired_leases() == 1
        assert Worker(worker_id="other").drain() == 1
    assert status(iid) == "completed" and len(rows()) == 2


def test_draining_worker_puts_its_chained_step_back():
    iid = start(t("record") >> t("record"))
    worker = Worker(worker_id="drainer")
    original = worker.execute

    def execute_then_signal(step, chain=False):
        outcome = original(step, chain=chain)
        worker.shutdown = True  # SIGTERM arrives during the first step
        return outcome

    worker.execute = execute_then_signal
    assert worker.run_one()
    second = Step.objects.get(instance_id=iid, node_id=2)
    assert (second.status, second.lease_owner) == ("ready", "")
    assert status(iid) == "running"


def test_the_last_checkpoint_of_a_workflow_claims_the_next_ready_step_in_its_transaction():
    first, second = start(t("record")), start(t("record"))
    worker = Worker(worker_id="claimer")
    assert worker.run_one()
    assert status(first) == "completed" and status(second) == "completed", (
        "one claim ran both: the first checkpoint's transaction claimed the second step"
    )
    assert [s.attempts for s in Step.objects.filter(kind="task")] == [1, 1]
    assert len(rows()) == 2


def test_a_bounded_drain_neither_chains_nor_claims_past_its_bound():
    first, second = start(t("record") >> t("record")), start(t("record"))
    assert Worker(worker_id="bounded").drain(max_steps=1) == 1
    assert status(first) == "running" and status(second) == "pending"
    # nothing was claimed ahead: no attempt used, no lease taken
    assert {(s.status, s.attempts, s.lease_owner) for s in steps_of(second)} == {("ready", 0, "")}
    assert Step.objects.filter(instance_id=first, node_id=2).first() is not None
    assert Step.objects.get(instance_id=first, node_id=2).status == "ready"


def test_a_draining_worker_claims_no_next_step():
    first, second = start(t("record")), start(t("record"))
    worker = Worker(worker_id="drainer")
    original = worker.execute

    def execute_then_signal(step, chain=False):
        worker.shutdown = True  # SIGTERM arrives during the step
        return original(step, chain=chain)

    worker.execute = execute_then_signal
    assert worker.run_one()
    assert status(first) == "completed" and status(second) == "pending"
    assert {(s.status, s.attempts) for s in steps_of(second)} == {("ready", 0)}


def test_a_checkpoint_whose_sequence_stopped_meanwhile_activates_nothing():
    iid = start(t("record") >> t("record") >> t("record"))
    worker = Worker(worker_id="w", chain=False)
    step = worker.claim()[0]
    Step.objects.filter(instance_id=iid, parent__isnull=True).update(status="failed")
    assert worker.execute(step, chain=True) == "completed"
    assert [(s.node_id, s.status) for s in steps_of(iid)] == [(0, "failed"), (1, "completed")]
    assert worker._local.chained is None


def prepared_on_the_server() -> list[tuple[str, str]]:
    """(name, text) of the protocol-level prepared statements on the server: this connection's
    backend's; through a transaction pooler, also those of every other server connection of
    its pool (each held at once by a client of its own in a transaction, so each is another)."""
    sql = "SELECT name, statement FROM pg_prepared_statements WHERE from_sql = false"
    with connection.cursor() as cursor:
        # In the test's transaction: through the pooler, the server connection it holds.
        cursor.execute(sql)
        prepared = cursor.fetchall()
    if django_settings.DATABASE_POOLER != "transaction":
        return prepared
    servers = len(server_connections())
    clients = []
    try:
        for _ in range(servers):
            client = psycopg.connect(database_url(), prepare_threshold=None)
            clients.append(client)
            prepared += client.execute(sql).fetchall()
    finally:
        for client in clients:
            client.close()
    return prepared


def test_the_workers_hot_statements_are_prepared_on_the_server():
    """Django connects with prepared statements off; the settings let the engine's explicit
    requests through, so PostgreSQL neither parses nor plans a claim or checkpoint twice.

    Through PgBouncer 1.21+ in transaction mode (``max_prepared_statements`` > 0; CI's
    prepared-statements-on PgBouncer stage) PgBouncer prepares each statement on the server
    connection that runs it, under a name of its own (``PGBOUNCER_<n>``), not psycopg's."""
    start(t("record") >> t("record") >> t("record"))
    Worker(worker_id="w").drain()
    named = prepared_on_the_server()
    prepared = [text for _, text in named]
    if django_settings.DATABASE_POOLER == "transaction":
        assert named and all(name.startswith("PGBOUNCER_") for name, _ in named), named
    else:
        assert all(name.startswith("_pg3_") for name, _ in named), named
    assert any("FOR UPDATE SKIP LOCKED" in text for text in prepared), prepared
    assert any(text.startswith("WITH done AS") for text in prepared), prepared
    # The claim's LIMIT is in its text: a parameter there makes PostgreSQL's generic plan
    # scan whole tables, so it would plan every claim afresh.
    assert "LIMIT 1\n" in claim_sql(1) and "LIMIT 5\n" in claim_sql(5)


@pytest.mark.django_db(transaction=True)
def test_execute_prepared_keeps_one_cursor_per_connection_and_survives_errors_and_reconnects():
    """execute_prepared() sends through one psycopg cursor per open connection: a failed
    statement leaves it usable (and raises Django's exception), a closed connection's is
    replaced, and a statement still joins the caller's transaction."""
    from django.db import IntegrityError, connections, transaction

    from jobs.durable.db import execute_prepared

    db = connections["default"]  # the connection itself, not the proxy
    assert execute_prepared("SELECT %s::int + 1", [1]) == [(2,)]
    first = db.__dict__["_durable_cursor"]
    assert execute_prepared("SELECT %s::text", ["x"]) == [("x",)]
    assert db.__dict__["_durable_cursor"] is first
    with pytest.raises(IntegrityError), transaction.atomic():
        execute_prepared("CREATE TEMP TABLE prep_t (id int PRIMARY KEY)", [])
        execute_prepared("INSERT INTO prep_t VALUES (%s), (%s)", [1, 1])
    assert execute_prepared("SELECT %s::int", [3]) == [(3,)]  # after the rollback
    with pytest.raises(transaction.TransactionManagementError), transaction.atomic():
        execute_prepared("CREATE TEMP TABLE prep_u (id int)", [])
        execute_prepared("INSERT INTO prep_u VALUES (%s)", [1])
        raise transaction.TransactionManagementError("roll back")
    assert execute_prepared("SELECT count(*) FROM pg_class WHERE relname = 'prep_u'", []) == [(0,)]
    connection.close()
    assert execute_prepared("SELECT %s::int", [4]) == [(4,)]
    assert db.__dict__["_durable_cursor"] is not first
    assert first.connection.closed


@pytest.mark.parametrize(("value", "expected"), [(None, "2147483647"), ("0", "None")])
def test_prepared_statements_can_be_turned_off_for_a_pooler(value, expected):
    env = child_env(DEBUG="1")
    env.pop("DATABASE_PREPARED_STATEMENTS", None)
    if value is not None:
        env["DATABASE_PREPARED_STATEMENTS"] = value
    code = "from django.conf import settings as s; print(s.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected


# --- rolling deploys and odd states --------------------------------------------------------------
def test_step_of_an_unknown_kind_is_handed_back_without_using_an_attempt(worker):
    with time_machine.travel("2026-01-05 10:00:00Z", tick=False):
        iid = start(t("record"))
        Instance.objects.filter(pk=iid).update(
            graph={"id": 0, "kind": "teleport", "name": "", "opts": {}}
        )
        Step.objects.filter(instance_id=iid).update(kind="teleport")
        step = worker.claim()[0]
        assert worker.execute(step) == "handed back"
        row = Step.objects.get(pk=step.id)
        assert row.status == "ready" and row.max_attempts == step.max_attempts + 1
        assert "unknown node kind 'teleport'" in row.error
        assert (row.run_at - timezone.now()).total_seconds() == HANDBACK_DELAY
    assert status(iid) == "running"


def test_step_of_a_deleted_instance_is_dropped(worker):
    iid = start(t("record"))
    step = worker.claim()[0]
    Instance.objects.filter(pk=iid).delete()
    assert worker.execute(step) == "fenced"
    assert rows() == []


# --- the kinds' view of the engine --------------------------------------------------------------
def parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_the_engines_transaction_offers_everything_a_kind_may_call():
    """Kinds are typed against state.Transitions, not the engine: Txn must keep up with it."""
    methods = {
        name
        for name, member in vars(Transitions).items()
        if callable(member) and not name.startswith("_")
    }
    assert methods, "the protocol lists methods"
    for name in sorted(methods):
        offered = getattr(Txn, name, None)
        assert callable(offered), f"Txn lacks {name}()"
        expected = parameters(getattr(Transitions, name))
        assert parameters(offered) == expected, f"Txn.{name}() takes other parameters"
    txn = Txn(Graph.build(uuid.uuid4(), {"id": 0, "kind": "task"}, None, ""))
    for name in Transitions.__annotations__:
        assert hasattr(txn, name), f"Txn lacks the attribute {name}"
