"""save_run under random interleavings of client and worker saves across the jobs of one run.

Each save commits on its own (as the API and the sweeper do), so a tuple it writes gets a new
xmin: a no-op must leave the row's xmin and ctid exactly as they were.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.runs import save_run

from .helpers import run_version

statuses = st.lists(st.sampled_from([JobStatus.COMPLETE, JobStatus.FAILED]), min_size=1, max_size=4)
op = st.one_of(
    st.tuples(st.just("save"), st.integers(0, 3), st.sampled_from(["client", "worker"])),
    st.just(("legacy",)),  # the stored row becomes a pre-saved_by row (NULL)
)


def expected_action(stored, j: int, writer: str, job_statuses: list[str]) -> str:
    """DESIGN.md's table, written the obvious way, as the oracle."""
    if stored is None:
        return "write"
    stored_job, stored_by = stored
    if j > stored_job and not (
        job_statuses[j] == JobStatus.FAILED and job_statuses[stored_job] == JobStatus.COMPLETE
    ):
        return "write"
    if j == stored_job and writer == "client" and stored_by == "worker":
        return "claim"
    return "noop"


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(job_statuses=statuses, ops=st.lists(op, min_size=1, max_size=10))
def test_random_interleavings_follow_the_table(user, job_statuses, ops):
    run_id = uuid.uuid4()
    jobs = [
        AnalysisJob.objects.create(
            owner=user,
            filename=f"v{i}.md",
            upload=b"x",
            status=status,
            run_id=run_id,
            doc_html=f"<p>version {i}</p>",
            results={"citations": [], "n": i},
            error="failed" if status == JobStatus.FAILED else "",
            finished_at="2026-01-01T00:00:00Z",
        )
        for i, status in enumerate(job_statuses)
    ]
    stored: tuple[int, str | None] | None = None  # (job index, saved_by) in the model
    covered: set[int] = set()
    for step in ops:
        if step[0] == "legacy":
            if stored is not None:
                AnalysisRun.objects.filter(pk=run_id).update(saved_by=None)
                stored = (stored[0], None)
            continue
        _, j, writer = step
        j %= len(jobs)
        expect = expected_action(stored, j, writer, job_statuses)
        before = run_version(run_id)
        result = save_run(jobs[j].pk, writer)
        after = run_version(run_id)
        assert result.action == expect, (step, stored)
        if expect == "noop":
            assert after == before  # no tuple: same xmin, same place
        else:
            assert after.xmin != (before.xmin if before else None)
            stored = (j, writer)
        covered |= {j} | {k for k in range(len(jobs)) if k < stored[0]}

        row = AnalysisRun.objects.get(pk=run_id)
        job = jobs[stored[0]]
        assert (row.job_id, row.saved_by) == (job.pk, stored[1])
        assert (row.doc_html, row.report, row.status) == (job.doc_html, job.results, job.status)
        assert (result.job_id, result.saved_by) == (job.pk, stored[1] or "client")

    marked = {
        i
        for i, job in enumerate(jobs)
        if AnalysisJob.objects.filter(pk=job.pk, run_saved_at__isnull=False).exists()
    }
    assert marked == covered
