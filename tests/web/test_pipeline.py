"""The analysis workflow end to end on the durable engine, with a real worker.

A corpus thesis goes in through ``submit_analysis``; ``manage.py worker --once`` runs every
step; the job ends complete with its citations and report, and no AnalysisRun exists until the
client saves it. Failures end as a failed job with a message for the user.
"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db import connection

from jobs import pipeline
from jobs.durable import Worker, status
from jobs.models import AnalysisJob, AnalysisRun, FailureKind, JobCitation, JobStatus

pytestmark = pytest.mark.django_db(transaction=True)


def run_worker() -> int:
    """Run ready steps until none is left (the worker's --once mode, in this process)."""
    return Worker(once=True).drain()


def step_outputs(instance_id) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(output::text, '') || coalesce(chunk::text, '')"
            " FROM durable_step WHERE instance_id = %s",
            [instance_id],
        )
        return [row[0] for row in cursor.fetchall()]


def test_corpus_thesis_runs_to_a_complete_job_without_a_run(corpus, user, user_client):
    source = corpus / "thesis_1_001.md"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    assert job.status == JobStatus.QUEUED
    assert job.workflow_id is not None

    call_command("worker", once=True)

    job.refresh_from_db()
    truth = json.loads((corpus / "thesis_1_001.truth.json").read_text())
    assert job.status == JobStatus.COMPLETE, job.error
    assert job.finished_at is not None
    assert status(job.workflow_id) == "completed"
    assert job.doc_html and "<p>" in job.doc_html
    report = job.results
    assert report["document"] == "thesis_1_001.md"
    assert report["style"] == truth["style"]
    assert len(report["citations"]) == len(truth["citations"])
    assert len(report["references"]) == len(truth["references"])
    assert sum(report["summary"][v] for v in report["summary"] if v != "uncited") == len(
        report["citations"]
    )
    rows = list(JobCitation.objects.filter(job=job).order_by("index"))
    assert [r.text for r in rows] == [c["text"] for c in report["citations"]]
    assert [r.verdict for r in rows] == [c["verdict"] for c in report["citations"]]
    assert all(r.reason for r in rows)
    assert (job.progress_step, job.progress_done, job.progress_total) == (
        "complete",
        len(rows),
        len(rows),
    )
    # The worker never writes the run: the tab (or later the sweeper) does.
    assert not AnalysisRun.objects.exists()

    resp = user_client.post(
        "/api/analysis-runs", {"job_id": job.pk}, content_type="application/json"
    )
    assert resp.status_code == 201
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert (run.saved_by, run.job_id, run.report) == ("client", job.pk, report)

    page = user_client.get(f"/runs/{job.run_id}/")
    assert page.status_code == 200
    # The marked document is its own request (the page fetches it after its first screen).
    document = user_client.get(f"/runs/{job.run_id}/document")
    assert document.content.decode().count('<mark class="cite cite-') >= len(rows)


def test_checkpoints_never_carry_the_document_body(corpus, user):
    source = corpus / "thesis_1_002.html"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    outputs = step_outputs(job.workflow_id)
    assert len(outputs) >= 6  # root, extract, parse, plan, fan-out (+ children), finalize
    largest = max(len(o) for o in outputs)
    # The parsed citations/references are the largest checkpoint; no step holds doc_html.
    assert largest < len(job.doc_html)
    assert not any(job.doc_html[:2000] in o for o in outputs)
    # The verdicts carry only what verify adds, not the citations again.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, length(output::text) FROM durable_step"
            " WHERE instance_id = %s AND name IN ('parsed', 'verdicts')",
            [job.workflow_id],
        )
        sizes = dict(cursor.fetchall())
    assert sizes["verdicts"] < sizes["parsed"] / 2, sizes
    first = job.results["citations"][0]
    assert {"text", "keys", "verdict", "references", "reason"} <= set(first)
    assert "context" not in first  # pieces of the body stay out of checkpoints


def test_verify_fans_out_in_chunks_and_counts_progress(corpus, user, monkeypatch):
    monkeypatch.setattr(pipeline, "VERIFY_CHUNK", 7)
    source = corpus / "thesis_1_005.md"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    worker = Worker(once=True)
    seen = []
    while worker.run_one(max_steps=1):
        seen.append(
            AnalysisJob.objects.values_list("progress_step", "progress_done", "progress_total").get(
                pk=job.pk
            )
        )
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    total = len(job.results["citations"])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM durable_step WHERE instance_id = %s AND chunk_index IS NOT NULL",
            [job.workflow_id],
        )
        (children,) = cursor.fetchone()
    assert children == -(-total // 7)
    verify_counts = [done for step, done, tot in seen if step == "verify"]
    assert verify_counts == sorted(verify_counts)
    assert any(0 < done < total for done in verify_counts)
    assert seen[-1] == ("complete", total, total)


def test_library_is_checked_against_the_references(corpus, user):
    source = corpus / "thesis_1_001.md"
    library = corpus / "thesis_1_001.bib"
    job = pipeline.submit_analysis(
        user, source.name, source.read_bytes(), library.read_bytes(), library.name
    )
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    statuses = {ref["library"] for ref in job.results["references"]}
    assert "found" in statuses
    assert "unchecked" not in statuses


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("thesis.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage, no xref, no pages"),
        ("thesis.docx", b"PK\x03\x04" + b"\x00" * 200),
    ],
)
def test_corrupt_upload_fails_the_job_with_the_analysis_message(user, user_client, name, data):
    job = pipeline.submit_analysis(user, name, data)
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.finished_at is not None
    assert job.error
    assert job.failure_kind == FailureKind.INPUT
    assert not job.error.startswith("Unusable upload")  # the engine's wording, not the user's
    assert job.error != pipeline.INTERNAL_ERROR
    assert status(job.workflow_id) == "failed"
    body = user_client.get(f"/api/analysis-jobs/{job.pk}").json()
    assert (body["status"], body["error"]) == ("failed", job.error)
    assert not AnalysisRun.objects.exists()


def test_upload_through_the_api_queues_a_job_the_worker_finishes(corpus, user_client):
    source = corpus / "thesis_1_009.md"
    with source.open("rb") as fh:
        resp = user_client.post("/api/analysis-jobs", {"file": fh})
    assert resp.status_code == 201
    body = resp.json()
    job = AnalysisJob.objects.get(pk=body["id"])
    assert body == {"id": job.pk, "run_id": str(job.run_id), "status": "queued"}
    assert bytes(job.upload) == source.read_bytes()
    run_worker()
    assert user_client.get(f"/api/analysis-jobs/{job.pk}").json()["status"] == "complete"


@pytest.mark.parametrize(
    ("library", "name", "reason"),
    [
        (b"   ", "refs.bib", "refs.bib could not be read: the library file is empty"),
        (
            b"@comment{nothing here}",
            "refs.bib",
            "refs.bib could not be read: it holds no BibTeX entries"
            " (expected BibTeX, CSL-JSON or RIS)",
        ),
        (b"[1, 2", "refs.json", "refs.json could not be read: the CSL-JSON library is not valid"),
    ],
)
def test_an_unreadable_library_is_a_warning_and_the_thesis_is_still_analysed(
    corpus, user, library, name, reason
):
    source = corpus / "thesis_1_001.md"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes(), library, name)
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    assert job.results["citations"], "the thesis itself was analysed"
    (warning,) = job.results["warnings"]
    assert warning.startswith(reason), warning
    assert warning.endswith("; the library check was skipped.")
    assert {r["library"] for r in job.results["references"]} == {"unchecked"}


def test_an_internal_error_after_retries_fails_the_job_with_a_plain_message(
    corpus, user, monkeypatch, settings, time_machine
):
    settings.ACURIO_MAX_ATTEMPTS = 2

    def broken(*args, **kwargs):
        raise KeyError("bug")

    monkeypatch.setattr(pipeline.analysis, "verify", broken)
    source = corpus / "thesis_1_009.md"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    time_machine.move_to("2030-01-01 00:00:00+00:00", tick=False)
    run_worker()
    time_machine.shift(3600)  # past the retry's backoff
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert (job.error, job.failure_kind) == (pipeline.INTERNAL_ERROR, FailureKind.INTERNAL)
    assert "KeyError" not in job.error


def test_cancelled_instance_fails_the_job_with_a_cancel_message(user):
    from jobs.durable import cancel

    job = pipeline.submit_analysis(user, "thesis.md", b"# T\n\nBody (Smith, 2020).\n")
    assert cancel(job.workflow_id)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert (job.error, job.failure_kind) == (pipeline.CANCELLED_ERROR, FailureKind.CANCELLED)


def test_a_rolled_back_submit_leaves_nothing_behind(user):
    from django.db import transaction

    from jobs.durable.models import Instance

    with pytest.raises(RuntimeError), transaction.atomic():
        pipeline.submit_analysis(user, "thesis.md", b"# T\n\nBody.\n")
        raise RuntimeError("the request failed after submitting")
    assert not AnalysisJob.objects.exists()
    assert not Instance.objects.exists()


def test_requeue_creates_a_newer_job_of_the_same_run(corpus, user, user_client):
    source = corpus / "thesis_1_009.md"
    first = pipeline.submit_analysis(user, source.name, source.read_bytes())
    run_worker()
    assert (
        user_client.post(
            "/api/analysis-runs", {"job_id": first.pk}, content_type="application/json"
        ).status_code
        == 201
    )

    resp = user_client.post(f"/runs/{first.run_id}/reanalyse")
    second = AnalysisJob.objects.exclude(pk=first.pk).get()
    assert resp.status_code == 302
    assert resp["Location"] == f"/jobs/{second.pk}/"
    assert second.run_id == first.run_id
    assert second.workflow_id not in (None, first.workflow_id)
    assert bytes(second.upload) == source.read_bytes()
    run_worker()
    second.refresh_from_db()
    assert second.status == JobStatus.COMPLETE
    resp = user_client.post(
        "/api/analysis-runs", {"job_id": second.pk}, content_type="application/json"
    )
    assert resp.status_code == 201
    assert AnalysisRun.objects.get(pk=first.run_id).job_id == second.pk


def test_progress_says_extract_while_the_first_step_runs(user, user_client):
    job = pipeline.submit_analysis(user, "thesis.md", b"# T\n\nBody (Smith, 2020).\n")
    url = f"/api/analysis-jobs/{job.pk}"
    assert user_client.get(url).json()["progress"]["step"] == "queued"
    worker = Worker(once=True)
    (step,) = worker.claim(1)  # claimed, not yet run: the job row still says queued
    body = user_client.get(url).json()
    assert (body["status"], body["progress"]["step"]) == ("queued", "extract")
    worker.execute(step)
    assert user_client.get(url).json()["progress"]["step"] == "parse"


def test_a_lost_worker_past_the_crash_bound_fails_the_job_via_lease_recovery(user, settings):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.durable import recover_expired_leases

    settings.ACURIO_MAX_CRASHES = 0  # lost leases count as crashes, not attempts
    job = pipeline.submit_analysis(user, "thesis.md", b"# T\n\nBody (Smith, 2020).\n")
    (_step,) = Worker(once=True).claim(1)  # the worker "dies" holding the extract step
    assert recover_expired_leases(now=timezone.now() + timedelta(hours=1)) == 1
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert (job.error, job.failure_kind) == (pipeline.INTERNAL_ERROR, FailureKind.INTERNAL)
    assert job.finished_at is not None


def test_the_chunk_that_completes_the_count_hands_over_to_finalize(make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None, progress_step="verify")
    AnalysisJob.objects.filter(pk=job.pk).update(progress_done=0, progress_total=10)
    chunks = AnalysisJob.objects.filter(pk=job.pk)
    chunks.add_verified(4, next_stage="finalize")
    chunks.add_verified(4, next_stage="finalize")
    job.refresh_from_db()
    assert (job.progress_step, job.progress_done) == ("verify", 8)
    chunks.add_verified(2, next_stage="finalize")
    job.refresh_from_db()
    assert (job.progress_step, job.progress_done) == ("finalize", 10)
    # With a resolver configured the lookups come first.
    AnalysisJob.objects.filter(pk=job.pk).update(progress_done=9, progress_step="verify")
    chunks.add_verified(1, next_stage="resolve")
    job.refresh_from_db()
    assert job.progress_step == "resolve"


def test_with_a_remote_judge_the_save_queues_the_judging_for_a_worker(
    make_job, user_client, settings, monkeypatch
):
    from jobs.runs import judge

    settings.ACURIO_JUDGE_URL = "http://127.0.0.1:9/v1"  # never called: judge_run is stubbed
    judged = []

    def fake_judge_run(run_id):
        judged.append(str(run_id))
        return {"score": 90}

    monkeypatch.setattr(judge, "judge_run", fake_judge_run)
    job = make_job()
    resp = user_client.post(
        "/api/analysis-runs", {"job_id": job.pk}, content_type="application/json"
    )
    assert resp.status_code == 201
    assert judged == []  # the tab did not wait for the remote judge
    run_worker()
    assert judged == [str(job.run_id)]


@pytest.fixture
def crossref_server():
    """A local Crossref-compatible API: one known DOI, every search comes back empty."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            if self.path.startswith("/works/"):
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"status": "ok", "message": {"items": []}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    thread.join()


def test_with_a_resolver_the_references_are_looked_up_in_their_own_step(
    corpus, user, settings, crossref_server
):
    url, seen = crossref_server
    settings.ACURIO_RESOLVER_URL = url
    source = corpus / "thesis_1_002.html"
    job = pipeline.submit_analysis(user, source.name, source.read_bytes())
    run_worker()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    references = job.results["references"]
    assert all("resolver" in ref for ref in references)
    assert {ref["resolver"]["status"] for ref in references} <= {"not_found", "doi_not_found"}
    assert len(seen) >= len(references)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM durable_step WHERE instance_id = %s AND name = 'resolved'",
            [job.workflow_id],
        )
        assert cursor.fetchone()[0] == 1
