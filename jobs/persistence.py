"""The single writer of ``AnalysisRun``: ``save_run``.

Both writers of DESIGN.md's "The two writers of AnalysisRun" come through here: the browser tab
(``POST /api/analysis-runs``, ``saved_by='client'``) and the sweeper's backstop
(``saved_by='worker'``). The precedence table is applied by PostgreSQL inside one statement, an
``INSERT ... SELECT`` from the job with ``ON CONFLICT (id) DO UPDATE ... WHERE <guard>``, so two
writers racing each other (a tab and a sweeper, or two sweepers of a rolling deploy) can never
both win, and no read-then-write window exists in Python.

The three outcomes, and what each costs PostgreSQL:

* **write** — the whole row from the job: a new heap tuple plus its TOAST chunks (the body is
  several MB for a long thesis).
* **claim** — the tab saves the job the sweeper already recorded: only ``saved_by`` and
  ``saved_at`` change. Every body column is assigned *from the stored row*, so the new tuple
  carries the same TOAST pointers and PostgreSQL writes no chunk (it reuses an unchanged
  external value; a value taken from the job would be a different pointer and be copied).
* **no-op** — the guard is false: no tuple at all, no TOAST, no index entry. (The conflicting
  row is still locked for the rest of the transaction, which only touches its header.)

The same statement also sets ``AnalysisJob.run_saved_at`` on the job it covers and on older jobs
of the run that the stored row now supersedes; the backstop's partial index contains only jobs
where it is NULL, so it stays as small as the set of true ghosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from django.utils import timezone

from jobs.durable.db import execute_prepared
from jobs.models import AnalysisJob, AnalysisRun, JobStatus, SavedBy

Action = Literal["write", "claim", "noop"]


class SaveRunError(ValueError):
    """A job that cannot be saved as a run; the message says why, and nothing was written."""


class JobNotFound(SaveRunError):
    pass


class JobNotTerminal(SaveRunError):
    pass


class JobDeleted(SaveRunError):
    pass


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What ``save_run`` did, and what the run row holds after the call."""

    action: Action
    run_id: UUID
    saved_by: str  # stored after the call ("client" for a legacy NULL row)
    job_id: int  # the job whose content the row holds after the call

    @property
    def written(self) -> bool:
        """True when a tuple was written (a write or a claim): the API answers 201."""
        return self.action != "noop"


# Body columns: on a claim each keeps the stored value (and with it the stored TOAST pointer).
_BODY_COLUMNS = ("owner_id", "document", "status", "doc_html", "report", "error")

_RUN = AnalysisRun._meta.db_table
_JOB = AnalysisJob._meta.db_table

_SET_BODY = ",\n        ".join(
    f"{col} = CASE WHEN EXCLUDED.job_id = r.job_id THEN r.{col} ELSE EXCLUDED.{col} END"
    for col in _BODY_COLUMNS
)

# The precedence table of DESIGN.md as one guard (r = stored, EXCLUDED = incoming):
#   newer job  -> write, whoever writes, except that a failed job never replaces a complete one;
#   same job   -> claim only for a client save over a worker row (NULL counts as client);
#   otherwise  -> no-op (an older job, or a repeat save).
# Row "nothing" of the table is the INSERT itself.
_SAVE_SQL = f"""
WITH job AS (
    -- Lock the job first, always: every writer takes the job row before the run row, so a tab
    -- and a sweeper saving the same job queue here instead of deadlocking on each other.
    SELECT id, run_id, owner_id, filename, status, doc_html, results, error, deleted_at,
           run_saved_at
    FROM {_JOB}
    WHERE id = %(job_id)s
    FOR NO KEY UPDATE
),
stored AS (
    -- The run row as this statement's snapshot sees it: names the action, and after a no-op
    -- tells which older jobs the stored row supersedes (a stale snapshot only marks fewer).
    SELECT r.job_id, r.saved_by FROM {_RUN} r JOIN job ON r.id = job.run_id
),
up AS (
    INSERT INTO {_RUN} AS r (id, owner_id, job_id, document, status, doc_html, report, error,
                             saved_by, saved_at, created_at)
    SELECT run_id, owner_id, id, filename, status, COALESCE(doc_html, ''),
           COALESCE(results, '{{}}'::jsonb), error, %(saved_by)s, %(now)s, %(now)s
    FROM job
    WHERE status IN ('complete', 'failed') AND deleted_at IS NULL
    ON CONFLICT (id) DO UPDATE SET
        {_SET_BODY},
        job_id = EXCLUDED.job_id,
        saved_by = EXCLUDED.saved_by,
        saved_at = EXCLUDED.saved_at
    WHERE (EXCLUDED.job_id > r.job_id
           AND NOT (EXCLUDED.status = 'failed' AND r.status = 'complete'))
       OR (EXCLUDED.job_id = r.job_id
           AND EXCLUDED.saved_by = 'client' AND r.saved_by = 'worker')
    -- A fresh insert has no xmax; a row updated through ON CONFLICT carries our lock's xid.
    RETURNING r.job_id, r.saved_by, (r.xmax = 0) AS inserted
),
mark AS (
    -- The job is covered now whatever the outcome (its content is stored, or a newer job's, or
    -- it is a failed job that may not replace the stored complete one); older jobs of the run
    -- are superseded by the stored row. SKIP LOCKED: a sweeper holding an older job marks it
    -- itself when it saves it, and waiting here for it could deadlock against that sweeper.
    UPDATE {_JOB} SET run_saved_at = %(now)s
    WHERE id IN (
        SELECT o.id FROM {_JOB} o, job
        WHERE o.run_id = job.run_id
          AND o.run_saved_at IS NULL
          AND job.status IN ('complete', 'failed') AND job.deleted_at IS NULL
          AND (o.id = job.id
               OR o.id < COALESCE((SELECT job_id FROM up), (SELECT job_id FROM stored)))
        FOR NO KEY UPDATE OF o SKIP LOCKED
    )
    RETURNING id
)
SELECT job.run_id, job.status, job.deleted_at IS NOT NULL, job.run_saved_at IS NOT NULL,
       (SELECT job_id FROM stored), (SELECT saved_by FROM stored),
       up.job_id, up.saved_by, up.inserted,
       (SELECT count(*) FROM mark)
FROM job LEFT JOIN up ON true
"""


# Planning this statement costs several times its execution: it runs as a server-side
# prepared statement (jobs.prepared), planned once per database session, about 3x faster per
# save on the benchmark machine.


def save_run(job_id: int, saved_by: str) -> SaveResult:
    """Save the run of terminal job ``job_id`` as ``saved_by`` ('client' or 'worker').

    Applies DESIGN.md's precedence table in one SQL statement and returns what it did. Raises
    ``JobNotFound``, ``JobDeleted`` or ``JobNotTerminal`` (nothing written) for a job that cannot
    be saved. Safe to call inside or outside a transaction, from any number of processes.
    """
    if saved_by not in SavedBy.values:
        raise ValueError(f"saved_by must be one of {SavedBy.values}, not {saved_by!r}")
    rows = execute_prepared(
        _SAVE_SQL, {"job_id": job_id, "saved_by": saved_by, "now": timezone.now()}
    )
    row = rows[0] if rows else None
    if row is None:
        raise JobNotFound(f"analysis job {job_id} does not exist")
    (
        run_id,
        status,
        deleted,
        was_saved,
        snap_job_id,
        snap_saved_by,
        new_job_id,
        new_saved_by,
        inserted,
        _marked,
    ) = row
    if deleted:
        raise JobDeleted(f"analysis job {job_id} was deleted; its run cannot be saved")
    if status not in (JobStatus.COMPLETE, JobStatus.FAILED):
        raise JobNotTerminal(
            f"analysis job {job_id} is {status}; only a complete or failed job can be saved"
        )

    if new_job_id is None:
        # No tuple. The snapshot may predate a concurrent writer we queued behind, so read the
        # row as it stands now (a plain read: the decision was already taken under the lock).
        stored = AnalysisRun.objects.filter(pk=run_id).values_list("job_id", "saved_by").first()
        stored_job, stored_by = stored if stored else (snap_job_id, snap_saved_by)
        return SaveResult("noop", run_id, stored_by or SavedBy.CLIENT, stored_job)

    if inserted:
        action: Action = "write"
    elif new_job_id == job_id and (snap_job_id == job_id or was_saved):
        # The stored row already held this job: either this statement's snapshot shows it, or
        # (when we queued behind another save of this job, after our snapshot was taken) the
        # job's own run_saved_at, read from its latest version under our lock, says so.
        action = "claim"
    else:
        action = "write"
    return SaveResult(action, run_id, new_saved_by, new_job_id)
