"""The user's pages: runs list, job page, report (HTML and JSON), re-analyse; ownership."""

from __future__ import annotations

import copy
import uuid

import pytest
from django.urls import reverse

from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.runs import save_run

pytestmark = pytest.mark.django_db

REPORT = {
    "document": "thesis.md",
    "style": "apa",
    "citations": [
        {
            "text": "(Smith, 2020)",
            "keys": [{"author": "Smith", "year": "2020"}],
            "verdict": "verified",
            "references": [0],
            "reason": "matches Smith 2020",
            "paragraph": 0,
            "start": 5,
            "end": 18,
        },
        {
            "text": "(Jones, 2019)",
            "keys": [{"author": "Jones", "year": "2019"}],
            "verdict": "missing_reference",
            "references": [],
            "reason": "no entry by Jones for 2019",
            "paragraph": 0,
            "start": 23,
            "end": 36,
        },
    ],
    "references": [
        {
            "text": "Smith, J. (2020). A study.",
            "verdict": "cited",
            "doi": "10.1000/xyz",
            "doi_valid": True,
            "library": "found",
        },
        {
            "text": "Brown <b>onclick</b> (2018). Never cited.",
            "verdict": "uncited",
            "doi": "10.1000/bad doi",
            "doi_valid": False,
            "library": "not_found",
        },
    ],
    "summary": {
        "verified": 1,
        "missing_reference": 1,
        "year_mismatch": 0,
        "author_mismatch": 0,
        "ambiguous": 0,
        "uncited": 1,
    },
}
DOC = "<p>Body (Smith, 2020) and (Jones, 2019).</p>"


@pytest.fixture
def run_of(make_job):
    def make(saved_by="client", **fields) -> AnalysisRun:
        fields.setdefault("results", copy.deepcopy(REPORT))
        fields.setdefault("doc_html", DOC)
        job = make_job(**fields)
        return AnalysisRun.objects.get(pk=save_run(job.pk, saved_by).run_id)

    return make


def test_runs_list_shows_runs_from_both_writers_with_counts(user_client, run_of, other_user):
    by_client = run_of("client", filename="client.md")
    by_worker = run_of("worker", filename="worker.md")
    run_of("client", owner=other_user, filename="someone-else.md")
    resp = user_client.get(reverse("runs"))
    assert resp.status_code == 200
    theses = {t.filename: t for t in resp.context["theses"]}
    assert set(theses) == {"client.md", "worker.md"}
    for thesis in theses.values():
        counts = thesis.latest.counts
        # problem_counts: a missing reference, an uncited entry, a malformed DOI
        assert (counts["citations"], counts["citation_problems"], counts["total"]) == (2, 1, 3)
    body = resp.content.decode()
    assert f'href="/runs/{by_client.pk}/"' in body
    assert f'href="/runs/{by_worker.pk}/"' in body
    assert "someone-else.md" not in body
    assert 'href="/upload/"' in body


def test_runs_list_shows_work_in_progress_and_recent_failures(user_client, make_job):
    running = make_job(status=JobStatus.RUNNING, doc_html=None, filename="busy.md")
    failed = make_job(
        status=JobStatus.FAILED, doc_html=None, results=None, filename="bad.pdf", error="Damaged."
    )
    body = user_client.get(reverse("runs")).content.decode()
    assert f'href="/jobs/{running.pk}/"' in body
    assert f'href="/jobs/{failed.pk}/"' in body
    assert "Damaged." in body


def test_runs_list_needs_login(client):
    resp = client.get(reverse("runs"))
    assert resp.status_code == 302


def test_report_page_shows_counts_problems_references_and_marks(user_client, run_of):
    run = run_of()
    resp = user_client.get(reverse("run_report", args=[run.pk]))
    assert resp.status_code == 200
    body = resp.content.decode()
    assert "no entry by Jones for 2019" in body  # the problem's reason
    assert "Never cited." in body
    assert "not in your library" in body
    assert "malformed DOI" in body
    # Report text is escaped outside the sanitised document.
    assert "Brown &lt;b&gt;onclick&lt;/b&gt;" in body
    assert "<b>onclick</b>" not in body
    ctx = resp.context
    groups = {g.kind: [p["text"] for p in g.items] for g in ctx["groups"]}
    assert groups["missing_reference"] == ["(Jones, 2019)"]
    assert ctx["counts"]["total"] == 3  # a missing reference, an uncited entry, a bad DOI
    # The marked document comes from its own URL, fetched by the page after its first screen.
    assert f'data-src="/runs/{run.pk}/document"' in body
    doc = user_client.get(f"/runs/{run.pk}/document").content.decode()
    assert '<mark class="cite cite-verified" data-index="0"' in doc
    assert '<mark class="cite cite-missing_reference" data-index="1"' in doc
    # ?document=inline puts it in the page, for a reader without script.
    inline = user_client.get(reverse("run_report", args=[run.pk]) + "?document=inline")
    assert '<mark class="cite cite-missing_reference" data-index="1"' in inline.content.decode()


def test_report_page_falls_back_to_the_verdict_explanation(user_client, run_of):
    report = copy.deepcopy(REPORT)
    for c in report["citations"]:
        c.pop("reason")
    run = run_of(results=report)
    body = user_client.get(reverse("run_report", args=[run.pk])).content.decode()
    assert "No entry of the reference list has this author and year" in body


def test_report_page_shows_the_judges_assessment(user_client, run_of):
    run = run_of()
    run.judgment = {"score": 72, "summary": "Mostly sound; one citation lacks its entry."}
    run.judged_job_id = run.job_id
    run.save(update_fields=["judgment", "judged_job"])
    body = user_client.get(reverse("run_report", args=[run.pk])).content.decode()
    assert 'id="judgment"' in body
    assert "Mostly sound; one citation lacks its entry." in body
    assert "72" in body


def test_report_json_is_the_stored_report(user_client, run_of):
    run = run_of()
    resp = user_client.get(f"/runs/{run.pk}.json")
    assert resp.status_code == 200
    assert resp["Content-Type"] == "application/json"
    body = resp.json()
    assert body.pop("problem_counts")["total"] == 3
    assert body == REPORT


def test_other_users_runs_and_jobs_are_404(user_client, run_of, make_job, other_user):
    run = run_of(owner=other_user)
    job = make_job(owner=other_user, status=JobStatus.RUNNING, doc_html=None)
    assert user_client.get(f"/runs/{run.pk}/").status_code == 404
    assert user_client.get(f"/runs/{run.pk}.json").status_code == 404
    assert user_client.post(f"/runs/{run.pk}/reanalyse").status_code == 404
    assert user_client.get(f"/jobs/{job.pk}/").status_code == 404
    assert user_client.get(f"/runs/{uuid.uuid4()}/").status_code == 404
    assert AnalysisJob.objects.count() == 2  # nothing was queued for the stranger's run


def test_report_pages_need_login(client, run_of):
    run = run_of()
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}.json", f"/jobs/{run.job_id}/"):
        resp = client.get(url)
        assert resp.status_code == 302
        assert resp["Location"].startswith("/accounts/login/")


def test_job_page_embeds_its_progress_and_endpoints(user_client, make_job):
    job = make_job(status=JobStatus.RUNNING, doc_html=None, progress_step="parse")
    resp = user_client.get(reverse("job_page", args=[job.pk]))
    assert resp.status_code == 200
    body = resp.content.decode()
    assert f'data-status-url="/api/analysis-jobs/{job.pk}"' in body
    assert 'data-save-url="/api/analysis-runs"' in body
    assert f'data-report-url="/runs/{job.run_id}/"' in body
    assert '"step": "parse"' in body
    assert "acurio/job.js" in body


def test_failed_run_shows_its_error(user_client, make_job):
    job = make_job(status=JobStatus.FAILED, error="The PDF is damaged.")
    run = AnalysisRun.objects.get(pk=save_run(job.pk, "client").run_id)
    body = user_client.get(f"/runs/{run.pk}/").content.decode()
    assert "The analysis failed" in body


def test_marked_document_is_cached_per_run_and_job(user_client, run_of, make_job, monkeypatch):
    from jobs import analysis

    calls = []
    real = analysis.annotate_html

    def counting(html, citations):
        calls.append(html)
        return real(html, citations)

    monkeypatch.setattr(analysis, "annotate_html", counting)
    run = run_of()
    url = reverse("run_document", args=[run.pk])
    first = user_client.get(url).content
    second = user_client.get(url).content
    assert len(calls) == 1
    assert b"cite-missing_reference" in first
    assert b"cite-missing_reference" in second

    # A newer job's content replaces the row: its document is marked afresh.
    newer = make_job(run_id=run.pk, results=copy.deepcopy(REPORT), doc_html=DOC + "<p>v2</p>")
    save_run(newer.pk, "client")
    body = user_client.get(url).content.decode()
    assert len(calls) == 2
    assert "v2" in body


def test_report_page_shows_reference_lookups_when_a_resolver_ran(user_client, run_of):
    report = copy.deepcopy(REPORT)
    report["references"][0]["resolver"] = {"status": "found", "title": "A study", "retracted": True}
    report["references"][1]["resolver"] = {"status": "doi_not_found", "doi": "10.1000/bad"}
    run = run_of(results=report)
    body = user_client.get(reverse("run_report", args=[run.pk])).content.decode()
    assert "found online" in body
    assert "retracted" in body
    assert "DOI not found" in body


def test_report_page_has_no_lookup_column_without_a_resolver(user_client, run_of):
    body = user_client.get(reverse("run_report", args=[run_of().pk])).content.decode()
    assert "found online" not in body and "lookup failed" not in body


def test_runs_list_shows_a_failed_runs_error_instead_of_counts(user_client, make_job):
    job = make_job(status=JobStatus.FAILED, error="The PDF is damaged and cannot be read.")
    save_run(job.pk, "client")
    body = user_client.get(reverse("runs")).content.decode()
    assert "The PDF is damaged and cannot be read." in body
