"""Every hand-written SQL statement of the jobs app, named, in one place.

The ORM writes the rest. These are the statements it cannot say (an ``INSERT ... ON CONFLICT``
whose guard is the precedence table, an ``UPDATE ... FROM jsonb_to_recordset``, a trim bounded
per statement) or says too slowly (one index range count per chart bucket). Table names come
from the models' ``_meta.db_table``; each statement says who runs it and which index serves
it. The durable engine keeps its own statements (``jobs.durable``).
"""

from __future__ import annotations

from jobs.models import AnalysisJob, AnalysisRun

JOB = AnalysisJob._meta.db_table
RUN = AnalysisRun._meta.db_table

# --- the single run writer (jobs.runs.writer.save_run) ----------------------------------------

# Body columns: on a claim each keeps the stored value (and with it the stored TOAST pointer).
_BODY_COLUMNS = ("owner_id", "document", "status", "doc_html", "report", "error")
_SET_BODY = ",\n        ".join(
    f"{col} = CASE WHEN EXCLUDED.job_id = r.job_id THEN r.{col} ELSE EXCLUDED.{col} END"
    for col in _BODY_COLUMNS
)

# The precedence table of DESIGN.md as one guard (r = stored, EXCLUDED = incoming):
#   newer job  -> write, whoever writes, except that a failed job never replaces a complete one;
#   same job   -> claim only for a client save over a worker row (NULL counts as client);
#   otherwise  -> no-op (an older job, or a repeat save).
# Row "nothing" of the table is the INSERT itself. Planning it costs several times its
# execution, so save_run runs it as a server-side prepared statement.
SAVE_RUN = f"""
WITH job AS (
    -- Lock the job first, always: every writer takes the job row before the run row, so a tab
    -- and a sweeper saving the same job queue here instead of deadlocking on each other.
    SELECT id, run_id, owner_id, filename, status, doc_html, results, error, deleted_at,
           run_saved_at
    FROM {JOB}
    WHERE id = %(job_id)s
    FOR NO KEY UPDATE
),
stored AS (
    -- The run row as this statement's snapshot sees it: names the action, and after a no-op
    -- tells which older jobs the stored row supersedes (a stale snapshot only marks fewer).
    SELECT r.job_id, r.saved_by FROM {RUN} r JOIN job ON r.id = job.run_id
),
up AS (
    INSERT INTO {RUN} AS r (id, owner_id, job_id, document, status, doc_html, report, error,
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
    UPDATE {JOB} SET run_saved_at = %(now)s
    WHERE id IN (
        SELECT o.id FROM {JOB} o, job
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

# --- the judge (jobs.runs.judge) ----------------------------------------------------------------

# Stores many judgments in one statement; each lands only if the run still holds the job that
# was judged (a newer job's content is judged on its own turn). Runs by primary key. Returns
# the runs stored, whose judged events the caller writes in the same transaction.
STORE_JUDGMENTS = f"""
UPDATE {RUN} AS r
SET judgment = v.judgment, judged_job_id = v.job_id, judged_at = %s
FROM jsonb_to_recordset(%s::jsonb) AS v(id uuid, job_id bigint, judgment jsonb)
WHERE r.id = v.id AND r.job_id = v.job_id
RETURNING r.id, r.job_id
"""

# --- the sweeper's trim (jobs.sweeper.Sweeper.trim) ---------------------------------------------

TRIM_DOC_HTML = f"""
UPDATE {JOB} SET doc_html = NULL
WHERE id IN (
    -- Served by job_trim_idx (doc_html IS NOT NULL AND run_saved_at IS NOT NULL, finished_at).
    -- SKIP LOCKED: a job a sweeper or a tab is saving right now is trimmed on a later tick.
    SELECT j.id FROM {JOB} j
    WHERE j.doc_html IS NOT NULL
      AND j.run_saved_at IS NOT NULL
      AND j.status IN ('complete', 'failed')
      AND j.finished_at <= %(cutoff)s
      AND EXISTS (SELECT 1 FROM {RUN} r WHERE r.id = j.run_id)
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR NO KEY UPDATE SKIP LOCKED
)
"""

# --- the admin (jobs.admin_tools) ---------------------------------------------------------------

# The "failed reason" filter's choices: the error text up to its first colon, counted over the
# failed jobs of a recent period. Served by job_failed_idx (partial: failed jobs, finished_at).
FAILED_REASONS = f"""
SELECT left(split_part(error, ':', 1), 80) AS reason, count(*) AS n
FROM {JOB}
WHERE finished_at >= %(since)s AND status = %(failed)s AND error <> ''
GROUP BY 1 ORDER BY n DESC, reason LIMIT %(limit)s
"""


def explain_json(query: str) -> str:
    """The planner's estimate of ``query`` (the cheap paginator's count): no rows are read."""
    return "EXPLAIN (FORMAT JSON) " + query


# --- the dashboard (jobs.dashboard) -------------------------------------------------------------


def range_counts(table: str, column: str) -> str:
    """``count(*)`` of rows with ``lo <= column < hi`` per bucket of two parallel arrays.

    One index-only range count per bucket: cheaper than grouping by an expression
    (``date_trunc``) computed for every row when the rows are many. ``table`` and ``column``
    are the caller's own identifiers (``_meta.db_table`` and a column name), never user input.
    """
    return f"""
SELECT b.lo, (SELECT count(*) FROM {table} t WHERE t.{column} >= b.lo AND t.{column} < b.hi)
FROM unnest(%s::timestamptz[], %s::timestamptz[]) AS b(lo, hi)
"""


# --- /healthz ----------------------------------------------------------------------------------

PING = "SELECT 1"
