"""Hostile inputs end in a clear error or a bounded completion, within 1 GB of memory.

Every input of tests/hostile/inputs.py runs through the analysis as the pipeline runs it
(extract with the deployment's limits, parse with the citation and entry limits, verify, report,
marked document) in a process of its own under RLIMIT_AS of 1 GB: a memory regression fails
the test as a crash instead of exhausting the machine. Each case's process is forked from one of
two servers that imported Django and the analysis once (tests/hostile/runner.py), so the suite
pays the start-up twice, not once per case; two cases run at a time. A handful of the heaviest
go end to end through a real worker, which must survive them and then complete a normal job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from jobs.models import AnalysisJob, FailureKind, JobStatus
from tests.hostile.inputs import CASES, SMALL
from tests.hostile.runner import MEMORY_LIMIT_MB, ROOT, CasePool, CaseServer
from tests.processes import child_env

# A case's analysis (not the building of its input) must end within this; the slowest, the
# 60,000 markers and 20,000 entries, take about 30 s on a busy 2-core machine.
CASE_SECONDS = 120


@pytest.fixture(scope="module")
def servers() -> Iterator[CasePool]:
    with CasePool(child_env(), workers=2) as pool:
        yield pool


@pytest.fixture(scope="module")
def results(servers) -> dict[str, dict]:
    return {r["name"]: r for r in servers.map(case.name for case in CASES)}


def test_there_are_at_least_60_inputs():
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)


# Known to fail today, kept so that a fix shows (strict). Empty: the last one, the one-page PDF
# of 20,000 text lines, needed 4.8 GB in the parse (each marker's context ran to the end of its
# 490 KB paragraph), not in the PDF reader (about 40 MB); the context is bounded now.
KNOWN_OVER_BUDGET: set[str] = set()


def _marked(case):
    if case.name in KNOWN_OVER_BUDGET:
        return pytest.param(
            case,
            id=case.name,
            marks=pytest.mark.xfail(strict=True, reason="known to need more than 1 GB"),
        )
    return pytest.param(case, id=case.name)


@pytest.mark.parametrize("case", [_marked(case) for case in CASES])
def test_hostile_input_ends_clearly_and_bounded(results, case):
    result = results[case.name]
    assert result["outcome"] != "crash", result
    if case.expect == "error":
        assert result["outcome"] == "error", result
    elif case.expect == "ok":
        assert result["outcome"] == "ok", result
    if result["outcome"] == "error":
        message = result["message"]
        assert message.strip() and "Traceback" not in message, result
        assert case.match in message, result
    assert result["seconds"] <= CASE_SECONDS, result
    assert result["peak_rss_mb"] < MEMORY_LIMIT_MB, result


def test_the_memory_limit_catches_a_regression(servers):
    """The case's process really runs under the limit: an input the limits allow, analysed
    with 150 MB of address space, ends as a crash (MemoryError), not as a result."""
    result = servers.run("docx-8mb-xml", memory_mb=150)
    assert result["outcome"] == "crash", result
    assert "MemoryError" in result["message"], result


# --- The runner itself: probes (tests/hostile/probes.py) whose process dies or hangs ---------


def test_a_case_that_dies_or_hangs_is_a_crash_and_the_next_case_runs():
    """On one server: a segfault, an exit without an answer and a case over its time (killed)
    each end as a crash that says so, and the server then runs a case as usual."""
    with CaseServer(child_env()) as server:
        segfault = server.run("probe-segfault")
        assert segfault["outcome"] == "crash", segfault
        assert segfault["message"].startswith("exit -11 (SIGSEGV)"), segfault
        silent = server.run("probe-silent-exit")
        assert silent["outcome"] == "crash", silent
        assert silent["message"].startswith("exit 0:"), silent
        hang = server.run("probe-hang", timeout=1)
        assert hang["outcome"] == "crash", hang
        assert hang["message"] == "no answer within 1 s", hang
        with pytest.raises(ProcessLookupError):
            os.kill(hang["pid"], 0)  # killed and reaped
        after = server.run("some-control-characters")
        assert after["outcome"] == "ok", after


# --- End to end through a worker ---------------------------------------------------------

HEAVY = [case for case in CASES if case.heavy]


def _spawn_worker() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "worker", "--poll-interval", "0.2"],
        cwd=ROOT,
        env=child_env(LOG_LEVEL="WARNING"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_terminal(job_ids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = AnalysisJob.objects.filter(
            pk__in=job_ids, status__in=(JobStatus.COMPLETE, JobStatus.FAILED)
        ).count()
        if done == len(job_ids):
            return
        time.sleep(0.2)
    raise AssertionError(f"jobs {job_ids} not finished within {timeout:.0f} s")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_heaviest_inputs_through_a_worker_then_a_normal_job(django_user_model):
    from jobs.pipeline import submit_analysis

    assert len(HEAVY) >= 5
    user = django_user_model.objects.create_user("hostile", password="x")
    jobs = {}
    for case in HEAVY:
        filename, data = case.build()
        jobs[case.name] = submit_analysis(user, filename, data).pk
    worker = _spawn_worker()
    try:
        _wait_terminal(list(jobs.values()), timeout=300)
        assert worker.poll() is None, "the worker died on a hostile input"
        for case in HEAVY:
            job = AnalysisJob.objects.get(pk=jobs[case.name])
            assert job.status == JobStatus.FAILED, (case.name, job.status, job.error)
            assert job.failure_kind == FailureKind.INPUT, (case.name, job.error)
            assert case.match in job.error, (case.name, job.error)
        normal = submit_analysis(user, "normal.txt", SMALL.encode()).pk
        _wait_terminal([normal], timeout=120)
        job = AnalysisJob.objects.get(pk=normal)
        assert job.status == JobStatus.COMPLETE, job.error
        assert job.results["summary"]["verified"] > 0
        assert worker.poll() is None
    finally:
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out[-3000:]
