"""Every hand-written SQL statement of the engine, named in one place.

The hot paths (claim, checkpoint, the next step's insert) are hand-written because the ORM
cannot say them in one round trip (CTEs, ``FOR UPDATE SKIP LOCKED``, ``RETURNING`` from an
``UPDATE ... FROM``); the rest are written by hand where they run inside those same
transactions. Rare reads and writes use the ORM and are not here.

Each statement says what it does and which index serves it (the indexes are declared, with
their users, in :mod:`jobs.durable.models`). Table names come from the models'
``_meta.db_table`` and the step columns from :data:`jobs.durable.state.STEP_FIELDS`, so a
renamed table or a new column is changed in one place. Placeholders are psycopg's (``%s`` or
``%(name)s``); the statements the worker sends for every step go through
:func:`jobs.durable.db.execute_prepared`, the others through Django cursors.
"""

from __future__ import annotations

import functools
from typing import Any

from psycopg import sql as pg_sql

from jobs.durable.models import Instance, QueueState, Schedule, Signal, Step
from jobs.durable.state import STEP_FIELDS

STEP = Step._meta.db_table
INSTANCE = Instance._meta.db_table
SIGNAL = Signal._meta.db_table
QUEUE = QueueState._meta.db_table
SCHEDULE = Schedule._meta.db_table

# The channel idle workers LISTEN on; a transaction that made a step ready NOTIFYs it.
NOTIFY_CHANNEL = "durable_ready"
# The channel WorkflowHandle.result() LISTENs on; the statement that finishes an instance
# (completed, failed, cancelled) NOTIFYs it with the instance id as payload.
FINISHED_CHANNEL = "durable_finished"
_NOTIFY_FINISHED = f"pg_notify('{FINISHED_CHANNEL}', fin.id::text)"


def step_columns(alias: str = "") -> str:
    """The columns a :class:`~jobs.durable.state.StepRow` is built from, in its order."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in STEP_FIELDS)


# --- waking workers ---------------------------------------------------------------------------
# Wake idle workers; delivered at commit, dropped on rollback. No table, no index.
NOTIFY = f"NOTIFY {NOTIFY_CHANNEL}"
# A worker's connection subscribes to the wake-ups (again after every reconnect).
LISTEN = f"LISTEN {NOTIFY_CHANNEL}"
# A waiting handle's own connection subscribes to instances finishing. No table.
LISTEN_FINISHED = f"LISTEN {FINISHED_CHANNEL}"

# --- claiming (worker) ------------------------------------------------------------------------
# Claim up to {limit} due ready steps, mark their pending instances running, and return each
# step's row with its instance's status (before this statement), graph, input, hook, whether
# this statement started it, its queue and priority, and the step's crashes (lost leases: a
# worker runs a step that crashed before alone, Worker._isolate_suspect).
# The SELECT walks durable_step_ready (partial: status = 'ready', ordered by priority DESC,
# run_at: the most urgent due step first) and skips rows another transaction has locked; the
# instance rows are read by primary key. Steps of limited queues (a concurrency or a rate,
# %(limited)s) are left to CLAIM_LIMITED; {queues} narrows to the queues a worker serves.
# It never waits for an instance's row lock (SKIP LOCKED): a claim holding its step's lock
# while waiting for the instance's would take the locks in the reverse of cancel()'s order
# (instance, then its steps) and could deadlock. An instance it skipped is marked running by
# MARK_INSTANCE_RUNNING afterwards, with no lock of the claim held.
# A claim takes steps of one priority only, the most urgent it found: a group of steps runs
# and commits together (Worker.execute_group), so a priority-9 step claimed with nine others
# would wait for them. The others it picked stay ready; their row locks go with the claim's
# transaction (the statement in autocommit, or the group's commit right after it).
# The LIMIT is written into the text (claim_sql): with a ``LIMIT $n`` parameter PostgreSQL's
# generic plan of the prepared statement assumes many rows and scans both tables whole, so it
# would re-plan the statement at every claim instead.
# The claimed step records the worker's code version (%(version)s), a parameter rather than
# the session's acurio.code_version: a claim runs in autocommit, where a transaction pooler
# without DATABASE_DIRECT_URL leaves no setting (jobs.durable.sessions).
_CLAIM_PICK = f"""
WITH picked AS (
    SELECT id, instance_id, priority FROM {STEP}
    WHERE status = 'ready' AND run_at <= %(now)s {{queues}}
    ORDER BY priority DESC, run_at, id
    LIMIT {{limit:d}}
    FOR UPDATE SKIP LOCKED
"""
_CLAIM_REST = f"""), claimed AS (
    UPDATE {STEP} AS s
    SET status = 'running', attempts = s.attempts + 1, lease_owner = %(owner)s,
        lease_backend = pg_backend_pid(),
        code_version = %(version)s,
        lease_expires_at = %(expires)s, started_at = COALESCE(s.started_at, %(now)s)
    FROM picked
    WHERE s.id = picked.id AND picked.priority = (SELECT max(priority) FROM picked)
    RETURNING {step_columns("s")}, s.crashes
), started AS (
    UPDATE {INSTANCE}
    SET status = 'running', started_at = %(now)s
    WHERE id IN (
        SELECT id FROM {INSTANCE}
        WHERE id IN (SELECT instance_id FROM claimed) AND status = 'pending'
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id
)
SELECT {step_columns("c")}, i.status, i.graph, i.input, i.on_failure,
    EXISTS (SELECT 1 FROM started WHERE started.id = c.instance_id), i.queue, i.priority,
    c.crashes
"""
_CLAIM = (
    _CLAIM_PICK
    + _CLAIM_REST
    + (f"FROM claimed AS c LEFT JOIN {INSTANCE} AS i ON i.id = c.instance_id\n")
)

# The plain claim of a worker that serves limited queues too (priorities across every queue):
# first the limited queues it serves whose most urgent due step could start now (under the
# queue's concurrency and rate, read without its lock: CLAIM_LIMITED decides), then only the
# plain steps more urgent than all of those (priority above theirs; at the same priority the
# limited queue's step goes first). The statement always returns one row at least: its last
# two columns name those limited queues and their steps' priorities, most urgent first
# (empty arrays: none), and a row with a NULL step id stands for "no step claimed". Each
# queue's most urgent step is one probe of durable_step_queue_ready, its running steps a count
# on durable_step_queue_running; the queue rows by primary key.
_CLAIM_URGENT = f"""
WITH startable AS (
    SELECT q.name, r.priority FROM {QUEUE} AS q
    CROSS JOIN LATERAL (
        SELECT priority FROM {STEP}
        WHERE status = 'ready' AND queue = q.name AND run_at <= %(now)s
        ORDER BY priority DESC, run_at, id LIMIT 1
    ) AS r
    WHERE q.name = ANY(%(limited)s) {{served}}
        AND (q.concurrency IS NULL OR q.concurrency > (
            SELECT count(*) FROM {STEP} WHERE queue = q.name AND status = 'running'
            AND lease_expires_at IS NOT NULL))
        AND (q.rate_count IS NULL OR q.tokens + q.rate_count / q.rate_seconds
            * GREATEST(0, COALESCE(extract(epoch FROM %(now)s - q.refilled_at), 0)) >= 1)
), urgent AS (
    SELECT max(priority) AS priority,
        COALESCE(array_agg(name ORDER BY priority DESC, name), '{{{{}}}}') AS names,
        COALESCE(array_agg(priority ORDER BY priority DESC, name), '{{{{}}}}') AS priorities
    FROM startable
), picked AS (
    SELECT id, instance_id, priority FROM {STEP}
    WHERE status = 'ready' AND run_at <= %(now)s {{queues}}
        AND priority > COALESCE((SELECT priority FROM urgent), -1)
    ORDER BY priority DESC, run_at, id
    LIMIT {{limit:d}}
    FOR UPDATE SKIP LOCKED
{_CLAIM_REST}, u.names, u.priorities
FROM urgent AS u LEFT JOIN claimed AS c ON true
LEFT JOIN {INSTANCE} AS i ON i.id = c.instance_id
"""

# The queue filters of the claim: every queue but the limited ones; only the queues a worker
# serves (``--queues``); exactly one limited queue (CLAIM_LIMITED, under its QueueState lock).
_QUEUE_FILTERS = {
    "unlimited": "AND queue <> ALL(%(limited)s)",
    "served": "AND queue = ANY(%(queues)s) AND queue <> ALL(%(limited)s)",
    "one": "AND queue = %(queue)s",
}


# A fair queue's claim (Queue(fair=True)): within a priority, the steps of the owner with the
# fewest steps of this queue running come first, so one owner's thousand starts do not hold
# back another's one. The running counts walk durable_step_queue_running; the candidates
# durable_step_queue_ready; instance rows by primary key.
_FAIR_PICK = f"""
WITH running AS (
    SELECT i.owner_id, count(*) AS n FROM {STEP} AS r
    JOIN {INSTANCE} AS i ON i.id = r.instance_id
    WHERE r.queue = %(queue)s AND r.status = 'running' AND r.lease_expires_at IS NOT NULL
    GROUP BY i.owner_id
), picked AS (
    SELECT s.id, s.instance_id, s.priority FROM {STEP} AS s
    JOIN {INSTANCE} AS o ON o.id = s.instance_id
    LEFT JOIN running ON running.owner_id IS NOT DISTINCT FROM o.owner_id
    WHERE s.status = 'ready' AND s.run_at <= %(now)s AND s.queue = %(queue)s
    ORDER BY s.priority DESC, COALESCE(running.n, 0), s.run_at, s.id
    LIMIT {{limit:d}}
    FOR UPDATE OF s SKIP LOCKED
"""


@functools.cache
def claim_sql(limit: int, queues: str = "unlimited", urgent: bool = False) -> str:
    """The claim statement for up to ``limit`` steps (one prepared statement per variant);
    ``queues="fair"``: one fair queue's, owners in turn; ``urgent``: the plain claim of a
    worker that serves limited queues too (``_CLAIM_URGENT``: it returns them as well)."""
    if queues == "fair":
        rest = _CLAIM[_CLAIM.index("), claimed AS (") :]
        return (_FAIR_PICK + rest).format(limit=int(limit), queues="")
    if urgent:
        served = "AND q.name = ANY(%(queues)s)" if queues == "served" else ""
        return _CLAIM_URGENT.format(limit=int(limit), queues=_QUEUE_FILTERS[queues], served=served)
    return _CLAIM.format(limit=int(limit), queues=_QUEUE_FILTERS[queues])


# --- limited queues (jobs.durable.queues) -----------------------------------------------------
# Write a declared queue's limits (a worker knowing the declaration, at start). Primary key.
UPSERT_QUEUE = (
    f"INSERT INTO {QUEUE} (name, concurrency, rate_count, rate_seconds, fair, tokens,"
    " refilled_at) VALUES (%s, %s, %s, %s, %s, COALESCE(%s, 0), %s)"
    " ON CONFLICT (name) DO UPDATE SET concurrency = EXCLUDED.concurrency,"
    " rate_count = EXCLUDED.rate_count, rate_seconds = EXCLUDED.rate_seconds,"
    " fair = EXCLUDED.fair"
)

# The queues with a limit (or fair), which the plain claim leaves alone. Sequential scan
# of a tiny table.
LIMITED_QUEUES = (
    f"SELECT name FROM {QUEUE} WHERE concurrency IS NOT NULL OR rate_count IS NOT NULL"
    " OR fair ORDER BY name"
)

# Lock one limited queue's row for a claim; a row locked by another worker's claim is
# skipped (that worker is claiming from it right now). Primary key.
LOCK_QUEUE = (
    f"SELECT concurrency, rate_count, rate_seconds, tokens, refilled_at, fair FROM {QUEUE}"
    " WHERE name = %s FOR UPDATE SKIP LOCKED"
)

# Leaf steps of a queue running now (leased): durable_step_queue_running.
QUEUE_RUNNING = (
    f"SELECT count(*) FROM {STEP} WHERE queue = %s AND status = 'running'"
    " AND lease_expires_at IS NOT NULL"
)

# The rate limiter's bucket after a claim. Primary key.
SET_QUEUE_TOKENS = f"UPDATE {QUEUE} SET tokens = %s, refilled_at = %s WHERE name = %s"

# Mark a pending instance running (its row was locked during the claim). Primary key.
MARK_INSTANCE_RUNNING = (
    f"UPDATE {INSTANCE} SET status = 'running', started_at = %s"
    " WHERE id = %s AND status = 'pending'"
)

# A step claimed while its instance was being cancelled: cancel it, never run it. Primary key.
CANCEL_CLAIMED_STEP = (
    f"UPDATE {STEP} SET status = 'cancelled', finished_at = %s,"
    " lease_owner = '', lease_expires_at = NULL WHERE id = %s"
)

# The heartbeat: push forward the leases of this worker's running steps (ids = ANY), by
# primary key. SKIP LOCKED: a row locked right now is being checkpointed by its own worker.
RENEW_LEASES = (
    f"UPDATE {STEP} SET lease_expires_at = %s WHERE id IN ("
    f" SELECT id FROM {STEP} WHERE id = ANY(%s) AND lease_owner = %s"
    " AND status = 'running' FOR UPDATE SKIP LOCKED)"
)

# Put back a step this worker claimed but could not finish (drain, lost connection), fenced
# by its claim token. Primary key.
RELEASE_STEP = (
    f"UPDATE {STEP} SET status = 'ready', run_at = %s, lease_owner = '',"
    " lease_expires_at = NULL WHERE id = %s AND status = 'running' AND attempts = %s"
)

# Hand back claimed steps this worker will not run (a claim that took a step lost to a crash
# before runs that one alone: Worker._isolate_suspect), and wake the workers. Each step is
# fenced by its claim (running, this claim's token, this worker), and gets back the attempt
# its claim charged: it never started, so its attempts keep counting only the claims that
# ran it or were lost with their worker. Giving the token back is safe because this worker,
# its only holder, never uses it; and a later claim that takes the same token again can only
# follow this statement (a lease recovery in between leaves the step at this token, so the
# next claim takes the one above). run_at stays: the steps keep their place, the most urgent
# ready work, for any worker at once; started_at is cleared when no claim ran them before.
# Primary key.
HAND_BACK_STEPS = (
    f"WITH back AS (UPDATE {STEP} AS s SET status = 'ready', attempts = s.attempts - 1,"
    " lease_owner = '', lease_expires_at = NULL,"
    " started_at = CASE WHEN s.attempts = 1 THEN NULL ELSE s.started_at END"
    " FROM unnest(%s::bigint[], %s::int[]) AS h(id, token)"
    " WHERE s.id = h.id AND s.status = 'running' AND s.attempts = h.token"
    " AND s.lease_owner = %s RETURNING s.id)"
    f" SELECT count(*), pg_notify('{NOTIFY_CHANNEL}', '') FROM back HAVING count(*) > 0"
)

# A step's timeout bounds its statements too, for this transaction only. No table.
SET_STATEMENT_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"

# --- reading an instance's state --------------------------------------------------------------
# An instance's status (a waiting handle's check). Primary key.
INSTANCE_STATUS = f"SELECT status FROM {INSTANCE} WHERE id = %s"

# The stored graph of an instance (cached by the engine: it never changes). Primary key.
LOAD_GRAPH = f"SELECT graph, input, on_failure, queue, priority FROM {INSTANCE} WHERE id = %s"

# One step as a StepRow. Primary key.
LOAD_STEP = f"SELECT {step_columns()} FROM {STEP} WHERE id = %s"

# The output of the latest completed step of an instance with this name (ctx["name"],
# %(name)s, conditions); loops repeat names, so the latest wins. durable_step_named.
NAMED_OUTPUT = (
    f"SELECT output FROM {STEP} WHERE instance_id = %s AND name = %s"
    " AND status = 'completed' ORDER BY finished_at DESC, id DESC LIMIT 1"
)

# Outputs of a step's children: fan-out chunks in order, join branches in node order.
# durable_step_children (parent, chunk_index).
CHILDREN_OUTPUTS = (
    f"SELECT output FROM {STEP} WHERE parent_id = %s ORDER BY chunk_index NULLS FIRST, node_id"
)

# Whether a step still runs (a race's branch may win while the race activates). Primary key.
STEP_STATUS = f"SELECT status FROM {STEP} WHERE id = %s"

# A step's key (an HTTP step's idempotency key is derived from it). Primary key.
STEP_KEY = f"SELECT key FROM {STEP} WHERE id = %s"

# When a step was created (a wait's due time counts from it). Primary key.
STEP_CREATED_AT = f"SELECT created_at FROM {STEP} WHERE id = %s"

# --- starting instances (jobs.durable.launch) -------------------------------------------------
# Create instances and the step rows of their first activation in one statement, and wake the
# workers: start() and start_many(). The instances come as a uuid[] of ids, a JSON array of
# inputs and (start(id=...)) a JSON array of workflow ids, zipped by ROWS FROM; an id already
# taken is skipped by ON CONFLICT on the primary key, and so are its steps. The step rows come
# as one array per column (s_*, zipped): each names its instance, its number within it (ord)
# and its parent's, and is due at %(due)s (the start's time) or at its own run_at. Their ids
# are drawn from the step table's identity sequence in the order given (the sequence is looked
# up once, an InitPlan), and a row's parent id is read off its instance's rows by ord
# (nth_value): no join whose cost depends on the row estimates, which are guesses in start()'s
# generic plan and must not turn twenty thousand rows into a nested loop. Only the started
# instances' ids are returned. The NOTIFY CTE runs only when it is read (the final SELECT),
# and then only if a step is due and an instance was created. Primary keys; durable_step_key.
# START_NEW_INSTANCES is the same without ON CONFLICT, for ids just drawn at random: the
# speculative insertions cost some 7% of a 20,000-instance start's server time, and a
# collision is then an error, not a silent skip. The instance records the starter's code
# version (%(version)s), a parameter like the claim's: a start outside a transaction gets no
# session setting through a transaction pooler.
START_INSTANCES = f"""
WITH inst AS (
    INSERT INTO {INSTANCE} (id, label, owner_id, graph, input, status, error, on_failure,
        created_at, workflow_id, queue, priority, parent_instance_id, parent_step_id,
        forked_from, code_version)
    SELECT i.id, %(label)s, %(owner)s, %(graph)s::jsonb, i.input, 'pending', '',
        %(on_failure)s, %(now)s, coalesce(i.wid, ''), %(queue)s, %(priority)s, %(parent)s,
        %(parent_step)s, %(forked_from)s, %(version)s
    FROM ROWS FROM (unnest(%(ids)s::uuid[]), jsonb_array_elements(%(inputs)s::jsonb),
        jsonb_array_elements_text(%(wids)s::jsonb)) AS i(id, input, wid)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), planned AS MATERIALIZED (
    SELECT nextval((SELECT pg_get_serial_sequence('{STEP}', 'id')::regclass)) AS id, r.*
    FROM (
        SELECT r.*
        FROM unnest(%(s_instance)s::uuid[], %(s_ord)s::int[], %(s_parent)s::int[],
            %(s_key)s::text[], %(s_node)s::int[], %(s_kind)s::text[], %(s_name)s::text[],
            %(s_status)s::text[], %(s_max_attempts)s::int[], %(s_due)s::boolean[],
            %(s_run_at)s::timestamptz[], %(s_remaining)s::int[], %(s_chunk_index)s::int[],
            %(s_chunk)s::text[]) WITH ORDINALITY
            AS r(instance, ord, parent, key, node, kind, name, status, max_attempts, due,
                 run_at, remaining, chunk_index, chunk, n)
        WHERE r.instance IN (SELECT id FROM inst)
        ORDER BY r.n
    ) AS r
), steps AS (
    INSERT INTO {STEP} (id, instance_id, parent_id, key, node_id, kind, name, status,
        attempts, max_attempts, run_at, lease_owner, remaining, chunk_index, chunk, error,
        created_at, started_at, queue, priority)
    SELECT s.id, s.instance,
        nth_value(s.id, s.parent) OVER (PARTITION BY s.instance ORDER BY s.ord), s.key,
        s.node, s.kind, s.name, s.status, 0, s.max_attempts,
        CASE WHEN s.due THEN %(due)s::timestamptz ELSE s.run_at END, '', s.remaining,
        s.chunk_index, s.chunk::jsonb, '', %(now)s,
        CASE WHEN s.status = 'running' THEN %(now)s END, %(queue)s, %(priority)s
    FROM planned AS s
), wake AS (
    SELECT pg_notify('{NOTIFY_CHANNEL}', '') WHERE %(notify)s
)
SELECT id, (SELECT count(*) FROM wake) FROM inst
"""
START_NEW_INSTANCES = START_INSTANCES.replace("    ON CONFLICT (id) DO NOTHING\n", "", 1)

# start() of one instance whose first activation is planned (jobs.durable.launch.Plan): a
# statement of its own per plan, made by start_one_sql, and prepared. The instance is one
# VALUES row; each planned step row is an INSERT ... SELECT of its own (s1, s2, ...) with the
# plan's values and the workflow's graph written into the text as literals (they are the
# same for every start of the spec: nothing to send, nothing to parse per start), reading
# its parent's id from that row's RETURNING and the row before it (so their ids are drawn in
# plan order, as START_INSTANCES draws them). Compared with START_INSTANCES (arrays zipped,
# ids numbered, parents found by a window function) it is a plain insert per row: some
# 30-40% less CPU on the server (the backend's CPU time per start, measured), and fewer
# parameters to send. An id already taken (``conflict``: start(id=...)) inserts no instance
# and so no steps. The NOTIFY runs only if the instance was created and a step is due
# (%(notify)s). Primary keys; durable_step_key.
_START_ONE = f"""
WITH inst AS (
    INSERT INTO {INSTANCE} (id, label, owner_id, graph, input, status, error, on_failure,
        created_at, workflow_id, parent_instance_id, parent_step_id, forked_from, queue,
        priority, code_version)
    VALUES (%(id)s, %(label)s, %(owner)s, {{graph}}::jsonb, %(input)s::jsonb, 'pending', '',
        %(on_failure)s, %(now)s, {{lineage}}, %(queue)s, %(priority)s, %(version)s){{conflict}}
    RETURNING id
){{steps}}
SELECT id, (SELECT count(*) FROM (SELECT pg_notify('{NOTIFY_CHANNEL}', '') WHERE %(notify)s)
    AS wake) FROM inst
"""
_START_ONE_STEP = f""", s{{n}} AS (
    INSERT INTO {STEP} (instance_id, parent_id, key, node_id, kind, name, status, attempts,
        max_attempts, run_at, lease_owner, remaining, chunk_index, chunk, error, created_at,
        started_at, queue, priority, code_version)
    SELECT inst.id, {{parent}}, {{key}}, {{node}}, {{kind}}, {{name}}, {{status}}, 0,
        {{max_attempts}}, {{run_at}}, '', {{remaining}}, {{chunk_index}}, {{chunk}}::jsonb, '',
        %(now)s, {{started}}, %(queue)s, %(priority)s, %(version)s
    FROM {{sources}}
    RETURNING id
)"""


# The workflow id and where the instance comes from (a parent's step, a fork), as parameters
# (start(id=...), a child, a fork) or, for a plain start, as constants: four parameters fewer.
_START_ONE_LINEAGE = "%(wid)s, %(parent)s, %(parent_step)s, %(forked_from)s"
_START_ONE_PLAIN = "'', NULL, NULL, NULL"


def start_one_sql(
    graph: str, rows: list[dict[str, Any]], *, conflict: bool, lineage: bool = True
) -> str:
    """The start statement of one instance of a planned spec (see _START_ONE): ``graph`` its
    JSON text, ``rows`` the plan's step rows (``launch._ROW_FIELDS``; ``parent`` the ``ord`` of
    an earlier row, or None); ``conflict``: skip an id already taken (start(id=...));
    ``lineage``: with the parameters ``wid``, ``parent``, ``parent_step`` and ``forked_from``
    (without: no workflow id, parent or fork)."""

    def literal(value: Any) -> str:
        # psycopg's quoting; a % in the text is not a placeholder.
        return pg_sql.Literal(value).as_string(None).replace("%", "%%")

    steps = []
    for row in rows:
        n, parent = row["ord"], row["parent"]
        sources = ["inst"] + [f"s{i}" for i in sorted({n - 1, parent or 0} - {0})]
        if row["due"]:
            run_at = "%(due)s::timestamptz"
        elif row["run_at"] is None:
            run_at = "NULL::timestamptz"
        else:
            run_at = literal(row["run_at"]) + "::timestamptz"
        steps.append(
            _START_ONE_STEP.format(
                n=int(n),
                parent=f"s{int(parent)}.id" if parent else "NULL::bigint",
                key=literal(row["key"]),
                node=int(row["node"]),
                kind=literal(row["kind"]),
                name=literal(row["name"]),
                status=literal(row["status"]),
                max_attempts=int(row["max_attempts"]),
                run_at=run_at,
                remaining=int(row["remaining"]),
                chunk_index="NULL::int" if row["chunk_index"] is None else int(row["chunk_index"]),
                chunk=literal(row["chunk"]),
                started="%(now)s::timestamptz" if row["status"] == "running" else "NULL",
                sources=", ".join(sources),
            )
        )
    return _START_ONE.format(
        graph=literal(graph),
        lineage=_START_ONE_LINEAGE if lineage else _START_ONE_PLAIN,
        conflict="\n    ON CONFLICT (id) DO NOTHING" if conflict else "",
        steps="".join(steps),
    )


# --- creating steps ---------------------------------------------------------------------------
# One step row (a node activated). The unique (instance, key) index durable_step_key rules
# out a second activation of the same node.
INSERT_STEP = (
    f"INSERT INTO {STEP} (instance_id, parent_id, key, node_id, kind, name,"
    " status, attempts, max_attempts, run_at, lease_owner, lease_expires_at, remaining,"
    " chunk_index, chunk, error, created_at, started_at, queue, priority)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, '', %s, %s,"
    " %s, %s) RETURNING id"
)

# Many ready leaf steps of one node (a fan-out's chunks), sent with executemany.
# durable_step_key as above.
INSERT_READY_CHILD = (
    f"INSERT INTO {STEP} (instance_id, parent_id, key, node_id, kind, name,"
    " status, attempts, max_attempts, run_at, lease_owner, remaining, chunk_index,"
    " chunk, error, created_at, queue, priority)"
    " VALUES (%s, %s, %s, %s, %s, %s, 'ready', 0, %s, %s, '', 0, %s, %s::jsonb, '', %s,"
    " %s, %s)"
)

# --- finishing steps --------------------------------------------------------------------------
# Complete a claimed leaf step, fenced by its claim token (status and attempts), and read its
# parent's row, which the graph advances through. Primary keys.
CHECKPOINT = (
    f"WITH done AS (UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %s AND status = 'running' AND attempts = %s RETURNING parent_id)"
    f" SELECT {step_columns('p')}"
    f" FROM done LEFT JOIN {STEP} AS p ON p.id = done.parent_id"
)

# A leaf step's checkpoint that also completes its parent, the root step, and the instance:
# the parent and the instance only if the fenced leaf UPDATE found its row. Primary keys.
CHECKPOINT_LAST = (
    f"WITH done AS (UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %s AND status = 'running' AND attempts = %s RETURNING parent_id),"
    f" root AS (UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s WHERE id = (SELECT parent_id FROM done) AND status = 'running'"
    " RETURNING id),"
    f" fin AS (UPDATE {INSTANCE} SET status = 'completed', result = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status IN ('pending', 'running')"
    " AND EXISTS (SELECT 1 FROM root) RETURNING id)"
    f" SELECT (SELECT count(*) FROM fin, {_NOTIFY_FINISHED}) FROM done"
)

# A leaf step's checkpoint that also activates the next step of its parent sequence,
# inserted ready or already claimed by this worker (chaining): one round trip per step of a
# sequence. The insert happens only if the fenced UPDATE found the step and the parent step
# is still running as the expected node; the caller tells apart "fenced" (no ``done`` row)
# and "nothing inserted". Primary keys; durable_step_key checks the new row.
CHECKPOINT_AND_INSERT_NEXT = (
    f"WITH done AS (UPDATE {STEP} SET status = 'completed', output = %(output)s::jsonb,"
    " finished_at = %(now)s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %(id)s AND status = 'running' AND attempts = %(attempts)s"
    " RETURNING parent_id),"
    f" nxt AS (INSERT INTO {STEP} (instance_id, parent_id, key, node_id, kind, name,"
    " status, attempts, max_attempts, run_at, lease_owner, lease_expires_at, remaining,"
    " chunk_index, chunk, error, created_at, started_at, queue, priority)"
    " SELECT p.instance_id, p.id, p.key || %(suffix)s, %(node_id)s, %(kind)s, %(name)s,"
    " %(status)s, %(new_attempts)s, %(max_attempts)s, %(run_at)s, %(owner)s, %(expires)s, 0,"
    " NULL, NULL, '', %(now)s, %(started)s, p.queue, p.priority"
    f" FROM {STEP} AS p WHERE p.id = (SELECT parent_id FROM done)"
    " AND p.status = 'running' AND p.node_id = %(parent_node)s"
    " RETURNING id, key)"
    " SELECT EXISTS (SELECT 1 FROM done), (SELECT id FROM nxt), (SELECT key FROM nxt)"
)

# The checkpoints of a group's steps (Worker.execute_group) in one statement, each row one of
# the two shapes above: the last step of a top-level sequence (``last``: the step, its root
# step and the instance, as CHECKPOINT_LAST), or a step whose sequence runs a task/sql step next
# (as CHECKPOINT_AND_INSERT_NEXT: inserted ready, or already claimed by this worker when its
# status is 'running'). Each step is fenced by its claim token; the caller tells a fenced step
# (no row of its own) from one whose next step was not inserted (the parent stopped). The
# steps come as arrays (unnest). Primary keys; durable_step_key checks the new rows.
CHECKPOINT_GROUP = f"""
WITH t AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(outputs)s::text[],
        %(last)s::boolean[], %(suffix)s::text[], %(node)s::int[], %(kind)s::text[],
        %(name)s::text[], %(max_attempts)s::int[], %(parent_node)s::int[], %(status)s::text[])
        AS t(id, attempts, output, last, suffix, node, kind, name, max_attempts, parent_node,
             status)
), done AS (
    UPDATE {STEP} AS s SET status = 'completed', output = t.output::jsonb,
        finished_at = %(now)s, lease_owner = '', lease_expires_at = NULL, error = ''
    FROM t WHERE s.id = t.id AND s.status = 'running' AND s.attempts = t.attempts
    RETURNING s.id, s.parent_id, t.output, t.last, t.suffix, t.node, t.kind, t.name,
        t.max_attempts, t.parent_node, t.status
), nxt AS (
    INSERT INTO {STEP} (instance_id, parent_id, key, node_id, kind, name, status, attempts,
        max_attempts, run_at, lease_owner, lease_expires_at, remaining, chunk_index, chunk,
        error, created_at, started_at, queue, priority)
    SELECT p.instance_id, p.id, p.key || d.suffix, d.node, d.kind, d.name, d.status,
        CASE WHEN d.status = 'running' THEN 1 ELSE 0 END, d.max_attempts, %(now)s,
        CASE WHEN d.status = 'running' THEN %(owner)s ELSE '' END,
        CASE WHEN d.status = 'running' THEN %(expires)s::timestamptz END, 0, NULL, NULL, '',
        %(now)s, CASE WHEN d.status = 'running' THEN %(now)s::timestamptz END,
        p.queue, p.priority
    FROM done AS d JOIN {STEP} AS p ON p.id = d.parent_id
    WHERE NOT d.last AND p.status = 'running' AND p.node_id = d.parent_node
    RETURNING id, key, parent_id
), root AS (
    UPDATE {STEP} AS r SET status = 'completed', output = d.output::jsonb,
        finished_at = %(now)s
    FROM done AS d WHERE d.last AND r.id = d.parent_id AND r.status = 'running'
    RETURNING r.instance_id, d.output
), fin AS (
    UPDATE {INSTANCE} AS i SET status = 'completed', result = root.output::jsonb,
        finished_at = %(now)s
    FROM root WHERE i.id = root.instance_id AND i.status IN ('pending', 'running')
    RETURNING i.id
)
SELECT d.id, n.id, n.key, (SELECT count(*) FROM fin, {_NOTIFY_FINISHED})
FROM done AS d LEFT JOIN nxt AS n ON n.parent_id = d.parent_id AND NOT d.last
"""

# Complete a claimed leaf step with a Break's value, fenced as CHECKPOINT; its enclosing
# loop is then ended by the loop's kind. Primary key.
CHECKPOINT_BREAK = (
    f"UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s, lease_owner = '', lease_expires_at = NULL, error = ''"
    " WHERE id = %s AND status = 'running' AND attempts = %s"
)

# Complete a composite step (no claim to fence). Primary key.
COMPLETE_STEP = (
    f"UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status = 'running' RETURNING id"
)

# Complete the root step and its instance in one statement, in that order (and wake the
# instance's waiting handles). Primary keys.
COMPLETE_ROOT = (
    f"WITH done AS (UPDATE {STEP} SET status = 'completed', output = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status = 'running' RETURNING id),"
    f" fin AS (UPDATE {INSTANCE} SET status = 'completed', result = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status IN ('pending', 'running')"
    " AND EXISTS (SELECT 1 FROM done) RETURNING id)"
    f" SELECT {_NOTIFY_FINISHED} FROM fin"
)

# Complete an unfinished instance with its result (and wake its waiting handles). Primary key.
COMPLETE_INSTANCE = (
    f"WITH fin AS (UPDATE {INSTANCE} SET status = 'completed', result = %s::jsonb,"
    " finished_at = %s WHERE id = %s AND status IN ('pending', 'running') RETURNING id)"
    f" SELECT {_NOTIFY_FINISHED} FROM fin"
)

# One child of a join finished: count it down and return what is left. The UPDATE locks the
# parent row, so siblings finishing at once count down one by one. Primary key.
DECREMENT = (
    f"UPDATE {STEP} SET remaining = remaining - 1"
    " WHERE id = %s AND status = 'running' RETURNING remaining"
)

# Set a composite step's counter (a loop's iterations started). Primary key.
SET_REMAINING = f"UPDATE {STEP} SET remaining = %s WHERE id = %s"

# --- failing, retrying, cancelling ------------------------------------------------------------
# Fail a running step (FAIL_STEP_FENCED adds the claim token). Primary key.
FAIL_STEP = (
    f"UPDATE {STEP} SET status = 'failed', error = %s, finished_at = %s,"
    " lease_owner = '', lease_expires_at = NULL WHERE id = %s AND status = 'running'"
)
FAIL_STEP_FENCED = FAIL_STEP + " AND attempts = %s"

# Put a claimed step back to ready at run_at after an error (an attempt used). Primary key.
RETRY_STEP = (
    f"UPDATE {STEP} SET status = 'ready', error = %s, run_at = %s,"
    " lease_owner = '', lease_expires_at = NULL"
    " WHERE id = %s AND status = 'running' AND attempts = %s"
)

# Put a claimed step back to ready at run_at without using up an attempt: max_attempts grows
# with attempts, which must keep rising because it is the claim token. Primary key.
RESCHEDULE_STEP = (
    f"UPDATE {STEP} SET status = 'ready', run_at = %s, error = %s,"
    " max_attempts = max_attempts + 1, lease_owner = '', lease_expires_at = NULL"
    " WHERE id = %s AND status = 'running' AND attempts = %s"
)

# Fail or cancel an unfinished instance; of two transactions doing so, one wins. Primary key.
# Returns one row when it did (the NOTIFY that wakes the instance's waiting handles).
FINISH_INSTANCE = (
    f"WITH fin AS (UPDATE {INSTANCE} SET status = %s, error = %s, finished_at = %s"
    " WHERE id = %s AND status IN ('pending', 'running') RETURNING id)"
    f" SELECT {_NOTIFY_FINISHED} FROM fin"
)

# Cancel every unfinished step of an instance (it failed or was cancelled): their workers'
# checkpoints are fenced off. Walks this instance's part of durable_step_key.
CANCEL_INSTANCE_STEPS = (
    f"UPDATE {STEP} SET status = 'cancelled', finished_at = %s,"
    " lease_owner = '', lease_expires_at = NULL"
    " WHERE instance_id = %s AND status IN ('ready', 'running')"
)

# Cancel every unfinished step below a step (a race's losers, a broken loop's body), and
# return their ids and kinds (a call step's child is cancelled with it): the LIKE prefix
# (key || '/%') walks this instance's part of durable_step_key.
CANCEL_BELOW = (
    f"UPDATE {STEP} SET status = 'cancelled', finished_at = %s,"
    " lease_owner = '', lease_expires_at = NULL"
    " WHERE instance_id = %s AND key LIKE %s AND status IN ('ready', 'running')"
    " RETURNING id, kind"
)

# Delete one step and its subtree (a loop's iteration older than its history), by key and
# key prefix on durable_step_key; the rows' foreign keys are checked at commit.
DELETE_SUBTREE = f"DELETE FROM {STEP} WHERE instance_id = %s AND (key = %s OR key LIKE %s)"

# Note a failed on_failure hook in the instance's error. Primary key.
APPEND_INSTANCE_ERROR = f"UPDATE {INSTANCE} SET error = error || %s WHERE id = %s"

# --- signals and waits ------------------------------------------------------------------------
# Serialise signal() with the activation of a wait for the same signal: a transaction-scoped
# advisory lock on "signal/<instance>/<name>". No table.
LOCK_SIGNAL = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"

# Bind the oldest kept signal of this name to a wait step and return its data:
# durable_signal_kept (instance, name, id; only kept signals indexed).
TAKE_KEPT_SIGNAL = (
    f"UPDATE {SIGNAL} SET step_id = %s, consumed_at = %s WHERE id = ("
    f" SELECT id FROM {SIGNAL} WHERE instance_id = %s AND name = %s"
    " AND step_id IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
    " RETURNING data"
)

# The data of the signal a woken wait took: durable_signal_step.
SIGNAL_OF_STEP = f"SELECT data FROM {SIGNAL} WHERE step_id = %s ORDER BY id LIMIT 1"

# Make a waiting step due now (its signal arrived). Primary key.
WAKE_STEP = f"UPDATE {STEP} SET run_at = %s WHERE id = %s"

# Lock an instance row while a signal is delivered, ordering it against the transaction that
# finishes the instance. Primary key.
LOCK_INSTANCE_FOR_SIGNAL = f"SELECT status, owner_id FROM {INSTANCE} WHERE id = %s FOR UPDATE"

# The oldest ready wait step of these nodes that has no signal yet, locked: this instance's
# part of durable_step_key, then durable_signal_step for the NOT EXISTS.
WAITING_STEP = (
    f"SELECT s.id FROM {STEP} AS s WHERE s.instance_id = %s"
    " AND s.node_id = ANY(%s) AND s.status = 'ready'"
    f" AND NOT EXISTS (SELECT 1 FROM {SIGNAL} AS g WHERE g.step_id = s.id)"
    " ORDER BY s.id LIMIT 1 FOR UPDATE"
)

# The open waits of an instance (ready steps of the waiting kinds), with whether a signal
# arrived: this instance's part of durable_step_key, durable_signal_step for the EXISTS.
OPEN_WAITS = (
    "SELECT s.id, s.key, s.node_id, s.kind, s.created_at,"
    f" EXISTS (SELECT 1 FROM {SIGNAL} AS g WHERE g.step_id = s.id)"
    f" FROM {STEP} AS s WHERE s.instance_id = %s AND s.kind = ANY(%s)"
    " AND s.status = 'ready' ORDER BY s.id"
)

# --- progress (current_step) ------------------------------------------------------------------
# The running, else ready, else last finished leaf step of an instance (composite kinds
# excluded by name): this instance's part of durable_step_key.
CURRENT_LEAF = (
    f"SELECT id, node_id, kind, status, parent_id FROM {STEP}"
    " WHERE instance_id = %s AND kind <> ALL(%s)"
    " ORDER BY CASE status WHEN 'running' THEN 0 WHEN 'ready' THEN 1 ELSE 2 END,"
    " (CASE WHEN status IN ('running', 'ready') THEN id ELSE -id END) LIMIT 1"
)

# Chunks of one fan-out: completed and all. durable_step_children.
CHUNKS_DONE = (
    "SELECT count(*) FILTER (WHERE status = 'completed'), count(*)"
    f" FROM {STEP} WHERE parent_id = %s"
)

# Distinct graph nodes among these that completed (steps outside fan-outs): this instance's
# part of durable_step_key.
NODES_DONE = (
    f"SELECT count(DISTINCT node_id) FROM {STEP} WHERE instance_id = %s"
    " AND status = 'completed' AND node_id = ANY(%s)"
)


# --- resume, fork, purge, cancel by filter (jobs.durable.lifecycle) ---------------------------
# A failed or cancelled leaf step back to ready, due now, with a fresh retry budget on top of
# the attempts used (attempts stays: it is the claim token). Primary key.
REOPEN_LEAF = (
    f"UPDATE {STEP} SET status = 'ready', max_attempts = attempts + %s, run_at = %s,"
    " error = '', finished_at = NULL, lease_owner = '', lease_expires_at = NULL, crashes = 0"
    " WHERE id = %s AND status IN ('failed', 'cancelled')"
)

# Failed or cancelled composite steps back to running (their counters still count the
# children left). Primary keys.
REOPEN_COMPOSITES = (
    f"UPDATE {STEP} SET status = 'running', error = '', finished_at = NULL"
    " WHERE id = ANY(%s) AND status IN ('failed', 'cancelled')"
)

# A resumed instance runs again (``pending`` if it never started). Primary key.
REOPEN_INSTANCE = (
    f"UPDATE {INSTANCE} SET error = '', result = NULL, finished_at = NULL,"
    " status = CASE WHEN started_at IS NULL THEN 'pending' ELSE 'running' END"
    " WHERE id = %s AND status IN ('failed', 'cancelled')"
)

# A forked instance's ready leaf taken for a replayed checkpoint: claimed (the checkpoint's
# fence needs a claim token) by no worker. Primary key.
CLAIM_FOR_REPLAY = (
    f"UPDATE {STEP} SET status = 'running', attempts = attempts + 1, started_at = %s"
    " WHERE id = %s AND status = 'ready' RETURNING attempts"
)

# One batch of a purge's candidates, locked: root instances (no parent: a child workflow
# goes with its root's tree, never alone) that finished before a cutoff with one of the
# statuses, oldest first. Rows locked by another transaction (a purge running elsewhere) are
# skipped, and so are the roots this purge kept already (a tree with an unfinished instance).
# durable_inst_finished_root (partial: finished roots only, so child rows cost the walk
# nothing however many there are). The LIMIT is written into the text (purge_sql).
_PURGE_ROOTS = (
    f"SELECT id FROM {INSTANCE} WHERE finished_at < %s AND status = ANY(%s)"
    " AND parent_instance_id IS NULL AND id <> ALL(%s::uuid[]) ORDER BY finished_at"
    " LIMIT {limit:d} FOR UPDATE SKIP LOCKED"
)


@functools.cache
def purge_sql(batch: int) -> str:
    return _PURGE_ROOTS.format(limit=int(batch))


# Delete a batch of purged roots (locked by _PURGE_ROOTS); their steps, signals and
# descendants go by ON DELETE CASCADE. Primary keys; the cascades walk durable_step_key and
# durable_inst_parent.
PURGE = f"DELETE FROM {INSTANCE} WHERE id = ANY(%s::uuid[])"


# Cancel a batch of unfinished instances (locked by the caller) and return the ids and hooks
# of those it cancelled. Primary keys.
CANCEL_INSTANCES = (
    f"WITH fin AS (UPDATE {INSTANCE} SET status = 'cancelled', error = 'cancelled',"
    " finished_at = %s WHERE id = ANY(%s) AND status IN ('pending', 'running')"
    " RETURNING id, on_failure)"
    f" SELECT fin.id, fin.on_failure, {_NOTIFY_FINISHED} FROM fin"
)

# Cancel the unfinished steps of many instances: their workers' checkpoints are fenced off.
# durable_step_key (instance first).
CANCEL_STEPS_OF = (
    f"UPDATE {STEP} SET status = 'cancelled', finished_at = %s,"
    " lease_owner = '', lease_expires_at = NULL"
    " WHERE instance_id = ANY(%s) AND status IN ('ready', 'running')"
)


# --- safety: claims held, crashes, attempt logs, stalled sessions -----------------------------
# Whether a step still runs under this attempt's claim (an isolated step's child is killed
# when not: cancelled, failed, or its lease recovered). Primary key.
STEP_CLAIM_HELD = f"SELECT 1 FROM {STEP} WHERE id = %s AND status = 'running' AND attempts = %s"

# A worker's session, set once per connection (jobs.durable.sessions): its name (lease
# recovery matches it), its code version (steps it inserts claimed take it as their default),
# and the bounds that keep a frozen or cut-off worker from holding locks. No table.
WORKER_SESSION = (
    "SELECT set_config('application_name', %(name)s, false),"
    " set_config('acurio.code_version', %(version)s, false),"
    " set_config('lock_timeout', %(lock_timeout)s, false),"
    " set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, false),"
    " set_config('tcp_keepalives_idle', %(keepalive)s, false),"
    " set_config('tcp_keepalives_interval', %(keepalive)s, false),"
    " set_config('tcp_keepalives_count', '3', false)"
)

# A step with a timeout: its statements and its transaction's idle time are bounded by it,
# for this transaction only. No table.
SET_STEP_TIMEOUTS = (
    "SELECT set_config('statement_timeout', %s, true),"
    " set_config('idle_in_transaction_session_timeout', %s, true)"
)

# Lease recovery ends the database session of a step's stalled worker (frozen, cut off), so
# its open transaction releases the locks the next attempt needs: the backend that claimed
# the step, if it is still that worker's (its application_name) and inside a transaction.
# pg_stat_activity, by pid.
TERMINATE_STALLED = (
    "SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity"
    " WHERE pid = %s AND pid <> pg_backend_pid() AND application_name = left(%s, 63)"
    " AND state IN ('idle in transaction', 'idle in transaction (aborted)', 'active')"
)

# A lost lease: the step goes back to ready, counted as a crash, not an attempt
# (max_attempts rises with attempts, the claim token), with the loss in its attempt log
# (the latest %s entries kept). Fenced by the claim token. Primary key.
RECOVER_CRASHED = (
    f"UPDATE {STEP} SET status = 'ready', run_at = %s, error = %s, lease_owner = '',"
    " lease_expires_at = NULL, crashes = crashes + 1, max_attempts = max_attempts + 1,"
    " attempt_log = jsonb_path_query_array(attempt_log || %s::jsonb,"
    " ('$[last - ' || (%s - 1) || ' to last]')::jsonpath)"
    " WHERE id = %s AND status = 'running' AND attempts = %s"
)

# One failed attempt or lost lease added to a step's attempt log (the latest %s entries
# kept). Primary key.
APPEND_ATTEMPT_LOG = (
    f"UPDATE {STEP} SET attempt_log = jsonb_path_query_array(attempt_log || %s::jsonb,"
    " ('$[last - ' || (%s - 1) || ' to last]')::jsonpath) WHERE id = %s"
)

# The code version that started an instance (a version-limited worker's check). Primary key.
INSTANCE_VERSION = f"SELECT code_version FROM {INSTANCE} WHERE id = %s"

# Before an sql step's statement: the instance's owner as ``acurio.owner_id`` (row-level
# security policies read it) and the step role (SET LOCAL ROLE), for this transaction only.
# Primary key.
SQL_STEP_SESSION = (
    "SELECT set_config('acurio.owner_id',"
    f" COALESCE((SELECT owner_id::text FROM {INSTANCE} WHERE id = %s), ''), true),"
    " set_config('role', %s, true)"
)

# When an idle worker must wake: the earliest due time of a ready step not yet due at its
# last claim. durable_step_ready (ready rows only).
NEXT_DUE = f"SELECT min(run_at) FROM {STEP} WHERE status = 'ready' AND run_at > %s"


# --- child workflows: the cancel cascade and the start guard (engine, kinds.children) --------
# The child workflows of some instances (one level of a cancel's or a purge's walk down the
# tree), with their status and parent: durable_inst_parent, one index probe per parent, so a
# level costs what it holds whatever else the table holds. (A recursive CTE over the same
# index was planned as a merge join that reads the whole index at every level.)
CHILDREN_OF = (
    f"SELECT id, status, parent_instance_id FROM {INSTANCE}"
    " WHERE parent_instance_id = ANY(%s::uuid[])"
)

# A call step creates its child only while it still runs under this attempt's claim: the row
# is share-locked until the child's insert commits, so a cancel that reaches the step (its
# instance's or an ancestor's) either waits for the insert, and its cascade then finds the
# child, or came first, and no child starts (nor after the step lost a race). Primary key.
LOCK_CALLING_STEP = (
    f"SELECT 1 FROM {STEP} WHERE id = %s AND status = 'running' AND attempts = %s FOR SHARE"
)

# Lock the unfinished steps of the instances a cancel cascade is about to cancel, deepest
# first (a step's key extends its parent's, so a longer key is never an ancestor's): a
# worker checkpointing a child locks its leaf, then the leaf's ancestors, then the instance,
# so the cascade waits for that checkpoint without holding what it needs next. durable_step_key
# (instance first), then a sort of these rows.
LOCK_STEPS_DEEPEST_FIRST = (
    f"SELECT id FROM {STEP} WHERE instance_id = ANY(%s) AND status IN ('ready', 'running')"
    " ORDER BY length(key) DESC, id FOR UPDATE"
)

# The status of some instances (a cancelled call step's child, which may not exist).
# Primary keys.
INSTANCE_STATES = f"SELECT id, status FROM {INSTANCE} WHERE id = ANY(%s::uuid[])"

# CHILDREN_OF for a purge's walk of the trees it is about to delete: each child is
# share-locked, so a resume of it waits for the purge to end (and finds it gone), and one
# that committed first is read as it is now (running: its tree is kept).
CHILDREN_OF_SHARED = CHILDREN_OF + " FOR SHARE"
