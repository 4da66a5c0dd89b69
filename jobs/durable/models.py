"""Storage of the durable engine: workflow instances and their step checkpoints.

``Instance`` holds the stored graph (``graph``, compiled at ``start()``), the caller's input, the
status and the final result. ``Step`` is one activation of one graph node: leaves (``task``,
``sql``) are the units workers claim; composite nodes (``seq``, ``all``, ``fan_out``) get a row too,
which tracks their progress (``remaining`` children) and keeps their output. A step row's
``(instance, key)`` is unique, so a node is never activated twice: the key is the parent's key
plus this node's id (``"0/3"``), with ``[i]`` for fan-out child *i*.

Step life cycle::

    ready --claim--> running --checkpoint--> completed
      ^                 |  \\--error, attempts left--> ready (run_at = now + backoff)
      |                 |   \\--permanent error / attempts used up--> failed (instance fails)
      +--lease expired--+   (recover_expired_leases)
    any unfinished step --instance failed or cancelled--> cancelled

``attempts`` is incremented by every claim and doubles as the claim token: a checkpoint only
lands ``WHERE status = 'running' AND attempts = <token>``, so a worker whose lease was recovered
(and whose step was claimed again) can never overwrite the newer claim's outcome.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Func, Q, Value
from django.db.models.functions import Coalesce

from jobs.durable.errors import InstanceNotFound


class InstanceStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


INSTANCE_FINISHED = (InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED)


class StepStatus(models.TextChoices):
    READY = "ready", "Ready"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


STEP_FINISHED = (StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.CANCELLED)


# Workflow ids given to start(id=...) map to primary keys in this namespace (UUID version 5).
WORKFLOW_ID_NAMESPACE = uuid.UUID("6f1d0c3e-8a4b-5e7c-9d2f-0a1b2c3d4e5f")


def instance_pk_for(workflow_id: str) -> uuid.UUID:
    """The primary key of the instance started with ``id=workflow_id``."""
    return uuid.uuid5(WORKFLOW_ID_NAMESPACE, workflow_id)


def parse_instance_id(value: uuid.UUID | str) -> uuid.UUID:
    """An instance id: a UUID, its text, or a workflow id given to ``start(id=...)``.

    InstanceNotFound for anything else (an empty or overlong text, another type)."""
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and value.strip():
        try:
            return uuid.UUID(value)
        except ValueError:
            if len(value) <= 200:
                return instance_pk_for(value)
    raise InstanceNotFound(
        f"{value!r} is not a workflow instance id (a UUID) nor a workflow id"
    ) from None


# Column defaults evaluated by the inserting session (see Step.code_version, lease_backend).
CURRENT_CODE_VERSION = Coalesce(
    Func(Value("acurio.code_version"), Value(True), function="current_setting"),
    Value(""),
    output_field=models.CharField(),
)
BACKEND_PID = Func(function="pg_backend_pid", output_field=models.IntegerField())


class InstanceQuerySet(models.QuerySet):
    def find(self, instance_id: uuid.UUID | str) -> Instance:
        """The instance with this id (a UUID or its text); InstanceNotFound otherwise."""
        pk = parse_instance_id(instance_id)
        try:
            return self.get(pk=pk)
        except Instance.DoesNotExist:
            raise InstanceNotFound(f"no workflow instance {pk}") from None

    def values_of(self, instance_id: uuid.UUID | str, *fields: str) -> tuple:
        """Only these columns of one instance, as a tuple; InstanceNotFound otherwise."""
        pk = parse_instance_id(instance_id)
        row = self.filter(pk=pk).values_list(*fields).first()
        if row is None:
            raise InstanceNotFound(f"no workflow instance {pk}")
        return row

    def unfinished(self) -> InstanceQuerySet:
        return self.exclude(status__in=INSTANCE_FINISHED)

    def visible_to(self, user) -> InstanceQuerySet:
        """Staff see every instance, other users their own."""
        if user.is_staff:
            return self
        return self.filter(owner=user)


class Instance(models.Model):
    """One run of a workflow: its stored graph, input, status and result."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    label = models.CharField(max_length=200, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        # In the database, like the instance's own foreign keys (Django requires one kind
        # per model): deleting a user keeps their instances, ownerless.
        on_delete=models.DB_SET_NULL,
        related_name="durable_instances",
        db_index=False,  # durable_inst_owner leads with owner
    )
    # The compiled workflow (jobs.durable.graph.compile_graph); never changes after start().
    graph = models.JSONField()
    input = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=InstanceStatus.choices, default=InstanceStatus.PENDING
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Dotted path of fn(instance_id, error), called in the transaction that fails or cancels it.
    on_failure = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # start(id="order-42"): the caller's id; the primary key is derived from it
    # (instance_pk_for), so a second start with the same id finds the same row.
    workflow_id = models.CharField(max_length=200, blank=True, default="", db_default="")
    # Steps inherit these (copied onto every step row, which the claim reads).
    queue = models.CharField(max_length=100, default="default", db_default="default")
    priority = models.SmallIntegerField(default=0, db_default=0)
    # A child workflow (call(), fan_out of a workflow): the step of the parent instance
    # waiting for it. Deleting the parent deletes its children (in the database).
    parent_instance = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DB_CASCADE,
        related_name="children",
        db_index=False,  # durable_inst_parent
    )
    parent_step_id = models.BigIntegerField(null=True, blank=True)
    # fork(): the instance whose checkpoints this one started from.
    forked_from = models.UUIDField(null=True, blank=True)
    # ACURIO_CODE_VERSION of the process that started it (a deploy's git commit): which code
    # its graph was compiled against; workers may be limited to compatible versions.
    code_version = models.CharField(max_length=64, blank=True, db_default=CURRENT_CODE_VERSION)

    objects = InstanceQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # instances() and the admin list, newest first, unfiltered.
            models.Index(fields=["-created_at"], name="durable_inst_created"),
            # instances(status=...) and the admin's status filter.
            models.Index(fields=["status", "-created_at"], name="durable_inst_status"),
            # instances(owner=...): "users see only their own instances".
            models.Index(fields=["owner", "-created_at"], name="durable_inst_owner"),
            # instances(label=...) and the admin's label filter.
            models.Index(fields=["label", "-created_at"], name="durable_inst_label"),
            # purge(older_than=...) and the retention sweep: finished root instances (a child
            # workflow goes with its root's tree, never alone), oldest first.
            models.Index(
                fields=["finished_at"],
                name="durable_inst_finished_root",
                condition=Q(finished_at__isnull=False, parent_instance__isnull=True),
            ),
            # A child workflow finishing finds its parent step; purge finds the children.
            models.Index(
                fields=["parent_instance"],
                name="durable_inst_parent",
                condition=Q(parent_instance__isnull=False),
            ),
        ]
        # Checked by start(user=...), `manage.py durable` and the admin (permissions.py).
        permissions = [
            ("start_workflow", "Can start workflows"),
            ("use_sql_steps", "Can start workflows with SQL steps"),
            ("use_http_steps", "Can start workflows with HTTP steps"),
        ]

    def __str__(self) -> str:
        return f"{self.label or 'workflow'} {self.id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in INSTANCE_FINISHED


class StepQuerySet(models.QuerySet):
    # The claim is not here: it is one hand-written statement (jobs.durable.statements).
    def of_instance(self, instance_id: uuid.UUID) -> StepQuerySet:
        """The steps of one instance (durable_step_key leads with the instance)."""
        return self.filter(instance_id=instance_id)

    def running_tasks(self) -> StepQuerySet:
        """Task steps a worker is running now (composite steps are "running" from the start,
        so they are left out)."""
        return self.filter(status=StepStatus.RUNNING, kind="task")

    def expired(self, now: datetime) -> StepQuerySet:
        """Claimed steps whose worker stopped renewing its lease."""
        return self.filter(status=StepStatus.RUNNING, lease_expires_at__lt=now)

    def unfinished(self) -> StepQuerySet:
        return self.exclude(status__in=STEP_FINISHED)


class Step(models.Model):
    """The checkpoint of one activation of one graph node."""

    # Both foreign keys are covered by composite indexes below (durable_step_key leads with
    # instance, durable_step_children with parent), so they get no index of their own.
    # ON DELETE CASCADE in the database: deleting instances (purge) deletes their steps in
    # the same statement, without Django collecting them first.
    instance = models.ForeignKey(
        Instance, on_delete=models.DB_CASCADE, related_name="steps", db_index=False
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DB_CASCADE,
        related_name="children",
        db_index=False,
    )
    key = models.CharField(max_length=200)
    node_id = models.IntegerField()
    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=100, blank=True, default="")
    status = models.CharField(max_length=16, choices=StepStatus.choices)
    attempts = models.IntegerField(default=0)
    max_attempts = models.IntegerField(default=1)
    # When a ready step may be claimed (now, or the end of its retry backoff).
    run_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Composite steps: children still to finish (all, fan_out).
    remaining = models.IntegerField(default=0)
    chunk_index = models.IntegerField(null=True, blank=True)
    chunk = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The instance's queue and priority, copied at insert: the claim orders and filters by them.
    queue = models.CharField(max_length=100, default="default", db_default="default")
    priority = models.SmallIntegerField(default=0, db_default=0)
    # Lost leases (a crashed, frozen or cut-off worker), counted apart from ``attempts`` so a
    # crash does not spend the step's retry budget; bounded by ACURIO_MAX_CRASHES.
    crashes = models.IntegerField(default=0, db_default=0)
    # ACURIO_CODE_VERSION of the worker that last claimed it: the claim sets it, and a step a
    # worker inserts already claimed (chaining) takes it from the inserting session, whose
    # ``acurio.code_version`` the worker sets when it connects (jobs.durable.sessions).
    code_version = models.CharField(max_length=64, blank=True, db_default=CURRENT_CODE_VERSION)
    # The claiming worker's database backend (set by the claim, or the inserting session's):
    # lease recovery ends that session, so a frozen worker's open transaction cannot hold the
    # next attempt's locks (jobs.durable.recovery).
    lease_backend = models.IntegerField(null=True, blank=True, db_default=BACKEND_PID)
    # Every failed attempt and lost lease: [{"attempt", "kind", "error", "traceback", "at"}],
    # the latest ACURIO_ATTEMPT_LOG_SIZE of them, each traceback bounded in size.
    attempt_log = models.JSONField(default=list, db_default=[], blank=True)

    objects = StepQuerySet.as_manager()

    class Meta:
        constraints = [
            # A node is activated once per instance (and per fan-out chunk): a retried
            # checkpoint transaction cannot create a second copy of the next step. Its index
            # also serves every "steps of this instance" query (explain, cancel, current_step).
            models.UniqueConstraint(fields=["instance", "key"], name="durable_step_key"),
        ]
        indexes = [
            # The worker's claim: WHERE status = 'ready' AND run_at <= now ORDER BY priority
            # DESC, run_at ... FOR UPDATE SKIP LOCKED. Only ready rows are indexed, so it
            # stays small.
            models.Index(
                fields=["-priority", "run_at", "id"],
                name="durable_step_ready",
                condition=Q(status="ready"),
            ),
            # A limited queue's claim: its ready steps by priority, and its running leaves
            # counted against its concurrency.
            models.Index(
                fields=["queue", "-priority", "run_at", "id"],
                name="durable_step_queue_ready",
                condition=Q(status="ready"),
            ),
            models.Index(
                fields=["queue"],
                name="durable_step_queue_running",
                condition=Q(status="running", lease_expires_at__isnull=False),
            ),
            # recover_expired_leases(): WHERE status = 'running' AND lease_expires_at < now.
            # Composite steps run without a lease and stay out of this index.
            models.Index(
                fields=["lease_expires_at"],
                name="durable_step_lease",
                condition=Q(status="running", lease_expires_at__isnull=False),
            ),
            # ctx["name"] / %(name)s: the latest completed step of this instance with a name.
            models.Index(
                fields=["instance", "name"], name="durable_step_named", condition=~Q(name="")
            ),
            # A join's output: the children of one step in chunk order (fan_out) or node order.
            models.Index(
                fields=["parent", "chunk_index"],
                name="durable_step_children",
                condition=Q(parent__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key} ({self.status})"


class Signal(models.Model):
    """An external event sent to an instance with ``signal()``, kept until a wait takes it.

    ``step_id`` is the ``wait_for_signal`` step that took it (NULL while it waits for one: a
    signal sent before its wait starts is kept). It is a plain column, not a foreign key, so
    that a loop pruning its old iterations can delete their steps without touching signals.
    """

    instance = models.ForeignKey(
        Instance, on_delete=models.DB_CASCADE, related_name="signals", db_index=False
    )
    name = models.CharField(max_length=100)
    data = models.JSONField(null=True, blank=True)
    step_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # A wait taking the oldest kept signal of its name: WHERE instance_id = %s AND
            # name = %s AND step_id IS NULL ORDER BY id LIMIT 1 (only kept signals indexed).
            models.Index(
                fields=["instance", "name", "id"],
                name="durable_signal_kept",
                condition=Q(step_id__isnull=True),
            ),
            # A woken wait reading the signal it took: WHERE step_id = %s.
            models.Index(
                fields=["step_id"], name="durable_signal_step", condition=Q(step_id__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"signal {self.name} to {self.instance_id}"


class Schedule(models.Model):
    """A periodic workflow (``schedule()``): started once per cron slot, kept in the database.

    ``next_run_at`` is the next slot not yet started. Whoever sees it due (a sweeper tick, an
    idle worker) advances it in the same transaction that starts the instance, under the row's
    lock taken with SKIP LOCKED, so each slot starts once whatever the number of processes.
    """

    name = models.CharField(max_length=200, primary_key=True)
    # The compiled workflow, as start() stores it.
    graph = models.JSONField()
    input = models.JSONField(null=True, blank=True)
    cron = models.CharField(max_length=100)
    label = models.CharField(max_length=200, blank=True, default="")
    queue = models.CharField(max_length=100, default="default")
    priority = models.SmallIntegerField(default=0)
    on_failure = models.CharField(max_length=300, blank=True, default="")
    # Slots missed by more than this (all processes down) are skipped, not started late.
    catch_up_seconds = models.FloatField(default=3600)
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            # The due-schedule sweep: WHERE enabled AND next_run_at <= now.
            models.Index(
                fields=["next_run_at"], name="durable_sched_due", condition=Q(enabled=True)
            ),
        ]

    def __str__(self) -> str:
        return f"schedule {self.name} ({self.cron})"


class QueueState(models.Model):
    """A queue's limits as declared (``Queue(...)`` in code or settings, written here by the
    workers that know the declaration) and its rate limiter's bucket, shared by all workers.

    A claim from a limited queue locks this row, so claims of one queue are serialised: the
    running steps it counts and the tokens it takes cannot be raced by another worker.
    """

    name = models.CharField(max_length=100, primary_key=True)
    concurrency = models.IntegerField(null=True, blank=True)
    rate_count = models.IntegerField(null=True, blank=True)
    rate_seconds = models.FloatField(null=True, blank=True)
    # Claim by owner in turn (the owner with fewest running steps first).
    fair = models.BooleanField(default=False)
    tokens = models.FloatField(default=0)
    refilled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"queue {self.name}"
