"""The judge: the built-in assessment (jobs.analysis.judging), storing it (jobs.runs.judge),
and the remote chat-completions judge."""

from __future__ import annotations

import pytest

from jobs.analysis.judging import JudgeError, builtin_judgment
from jobs.models import AnalysisRun, JobStatus
from jobs.runs import judge as judge_module
from jobs.runs import judge_run

from .helpers import FakeJudge, saved

pytestmark = pytest.mark.django_db


def cite(text: str, verdict: str, author: str = "Smith", year: str = "2020") -> dict:
    return {"text": text, "keys": [{"author": author, "year": year}], "verdict": verdict}


def report(citations: list[dict], references: list[dict] | None = None) -> dict:
    return {
        "document": "t.md",
        "style": "apa",
        "citations": citations,
        "references": references or [],
    }


# --- the built-in judge -------------------------------------------------------------------


def test_builtin_score_follows_the_documented_formula():
    citations = [
        cite("(A, 2001)", "verified"),
        cite("(B, 2002)", "verified"),
        cite("(C, 2003)", "missing_reference", "C", "2003"),
        cite("(D, 2004)", "year_mismatch", "D", "2004"),
    ]
    references = [{"text": "A", "verdict": "cited"}, {"text": "Z", "verdict": "uncited"}]
    result = builtin_judgment(report(citations, references))
    # citations: 2 of 4 with a problem -> max(0, 1 - 3 * 0.5) = 0; references: 1 - 1/2 = 0.5
    assert result["score"] == round(100 * (0.9 * 0 + 0.1 * 0.5)) == 5
    assert result["rating"] == "poor"
    assert result["counts"] == {
        "verified": 2,
        "author_mismatch": 0,
        "year_mismatch": 1,
        "ambiguous": 0,
        "missing_reference": 1,
        "citation_problems": 2,
        "uncited": 1,
        "invalid_doi": 0,
        "not_in_library": 0,
        "total": 3,
        "citations": 4,
        "references": 2,
    }
    assert result["summary"] == (
        "2 of 4 citations verified (50%); 1 missing reference, 1 year mismatch, "
        "1 uncited reference. Score 5/100."
    )


def test_builtin_lists_worst_problems_first_with_reasons():
    citations = [
        cite("(E, 2005)", "author_mismatch", "Smyth", "2005"),
        cite("(F, 2006)", "ambiguous", "F", "2006"),
        cite("(G, 2007)", "missing_reference", "G", "2007"),
        cite("[3]", "missing_reference") | {"keys": [{"number": 3}]},
        cite("(H, 2008)", "verified"),
        cite("(I, 2009)", "year_mismatch", "I", "2009"),
    ]
    references = [{"text": "Unused, U. (1999).", "verdict": "uncited"}]
    problems = builtin_judgment(report(citations, references))["problems"]
    assert [(p["text"], p["verdict"]) for p in problems] == [
        ("(G, 2007)", "missing_reference"),
        ("[3]", "missing_reference"),
        ("(F, 2006)", "ambiguous"),
        ("(I, 2009)", "year_mismatch"),
        ("(E, 2005)", "author_mismatch"),
    ]  # the uncited reference ranks sixth: cut by MAX_PROBLEMS
    reasons = [p["reason"] for p in problems]
    assert reasons[0] == "No reference-list entry matches G 2007."
    assert reasons[1] == "No reference-list entry matches [3]."
    assert "several reference entries" in reasons[2]
    assert reasons[3] == "I is in the reference list, but not with the year 2009."
    assert "Smyth" in reasons[4] and "similarly spelled" in reasons[4]


def test_builtin_keeps_a_reason_the_checker_gave():
    c = cite("(J, 2010)", "year_mismatch") | {"reason": "J has only a 2011 entry."}
    assert builtin_judgment(report([c]))["problems"][0]["reason"] == "J has only a 2011 entry."


def test_builtin_perfect_report():
    result = builtin_judgment(report([cite("(A, 2001)", "verified")], [{"verdict": "cited"}]))
    assert (result["score"], result["rating"], result["problems"]) == (100, "good", [])
    assert result["summary"] == "1 of 1 citation verified (100%); no problems found. Score 100/100."


def test_builtin_report_without_citations_has_no_score():
    result = builtin_judgment(report([], [{"text": "X", "verdict": "uncited"}]))
    assert (result["score"], result["rating"]) == (None, "none")
    assert result["summary"].startswith("No citations found")


def test_builtin_failed_run_has_no_score():
    result = builtin_judgment({}, status=JobStatus.FAILED, error="The PDF has no text layer.")
    assert result["score"] is None and result["rating"] == "failed"
    assert result["summary"].endswith("The PDF has no text layer.")


# --- storing ------------------------------------------------------------------------------


def test_judge_run_stores_judgment_and_judged_job(make_job):
    job = make_job()
    saved(job, "client")
    assert AnalysisRun.objects.unjudged().filter(pk=job.run_id).exists()
    judgment = judge_run(job.run_id)
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert run.judged_job_id == job.pk and run.judged_at is not None
    assert run.judgment == judgment and judgment["score"] == 100 and judgment["job_id"] == job.pk
    assert not AnalysisRun.objects.unjudged().filter(pk=job.run_id).exists()


def test_newer_job_makes_run_unjudged_again(make_job):
    first = make_job()
    second = make_job(run_id=first.run_id)
    saved(first, "client")
    judge_run(first.run_id)
    saved(second, "worker")
    assert AnalysisRun.objects.unjudged().filter(pk=first.run_id).exists()
    judge_run(first.run_id)
    assert AnalysisRun.objects.get(pk=first.run_id).judged_job_id == second.pk


def test_judge_unknown_run(db):
    import uuid

    with pytest.raises(AnalysisRun.DoesNotExist):
        judge_run(uuid.uuid4())


# --- the remote judge ---------------------------------------------------------------------


@pytest.fixture
def remote(settings, fake_judge, monkeypatch):
    settings.ACURIO_JUDGE_URL = fake_judge.url
    settings.ACURIO_JUDGE_MODEL = "judge-test-model"
    settings.ACURIO_JUDGE_API_KEY = "sk-test-123"
    settings.ACURIO_JUDGE_TIMEOUT_SECONDS = 2.0
    sleeps: list[float] = []
    monkeypatch.setattr(judge_module, "_sleep", sleeps.append)
    fake_judge.sleeps = sleeps
    return fake_judge


@pytest.fixture
def run(make_job):
    job = make_job(doc_html="<p>A very long body that the judge never needs.</p>")
    saved(job, "worker")
    return AnalysisRun.objects.get(pk=job.run_id)


def test_remote_judge_is_called_and_stored(remote: FakeJudge, run):
    judgment = judge_run(run.pk)
    assert (judgment["score"], judgment["judge"], judgment["rating"]) == (
        64,
        "judge-test-model",
        "poor",
    )
    assert judgment["summary"] == "Several citations lack references."
    assert judgment["problems"] == [{"text": "(Doe, 2019)", "reason": "Not in the reference list."}]
    path, headers, body = remote.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert headers["Idempotency-Key"] == f"acurio-judge-{run.pk}-{run.job_id}"
    assert body["model"] == "judge-test-model"
    assert "never needs" not in str(body)  # the document body is not sent
    stored = AnalysisRun.objects.get(pk=run.pk)
    assert stored.judgment == judgment and stored.judged_job_id == run.job_id


def test_remote_judge_retries_429_and_5xx_with_the_same_key(remote: FakeJudge, run):
    remote.replies = [
        (429, {"error": "slow down"}, {"Retry-After": "3"}),
        (503, {"error": "busy"}, {}),
        (200, FakeJudge.reply(), {}),
    ]
    assert judge_run(run.pk)["score"] == 64
    assert len(remote.requests) == 3
    assert len({r[1]["Idempotency-Key"] for r in remote.requests}) == 1
    assert remote.sleeps[0] == 3.0  # Retry-After honoured
    assert 0 <= remote.sleeps[1] <= judge_module.BACKOFF_BASE_SECONDS * 2


def test_remote_judge_gives_up_after_max_attempts(remote: FakeJudge, run, settings):
    settings.ACURIO_JUDGE_MAX_ATTEMPTS = 3
    remote.replies = [(500, {"error": "down"}, {})]
    with pytest.raises(JudgeError, match="failed after 3 attempts: HTTP 500"):
        judge_run(run.pk)
    assert len(remote.requests) == 3
    assert AnalysisRun.objects.get(pk=run.pk).judgment is None


def test_remote_judge_times_out_and_retries(remote: FakeJudge, run, settings):
    settings.ACURIO_JUDGE_TIMEOUT_SECONDS = 0.2
    settings.ACURIO_JUDGE_MAX_ATTEMPTS = 2
    remote.delay = 1.0
    with pytest.raises(JudgeError, match="failed after 2 attempts: ReadTimeout"):
        judge_run(run.pk)
    assert AnalysisRun.objects.get(pk=run.pk).judged_job_id is None


def test_remote_judge_client_error_is_not_retried(remote: FakeJudge, run):
    remote.replies = [(401, {"error": "bad key"}, {})]
    with pytest.raises(JudgeError, match="refused the request: HTTP 401"):
        judge_run(run.pk)
    assert len(remote.requests) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("I think it is fine.", "content is not JSON"),
        ([1, 2], "not a JSON object"),
        ({"score": 101, "summary": "x"}, "score must be an integer 0-100, got 101"),
        ({"score": True, "summary": "x"}, "score must be an integer 0-100"),
        ({"score": 50, "summary": ""}, "summary must be a non-empty string"),
        ({"score": 50, "summary": "ok", "problems": [{"text": 1}]}, "problems must be a list"),
    ],
)
def test_remote_judge_rejects_malformed_reply(remote: FakeJudge, run, content, message):
    remote.replies = [(200, FakeJudge.reply(content), {})]
    with pytest.raises(JudgeError, match=message):
        judge_run(run.pk)
    assert AnalysisRun.objects.get(pk=run.pk).judgment is None


@pytest.mark.parametrize("body", [b"not json", {"choices": []}, {"choices": [{"message": {}}]}])
def test_remote_judge_rejects_reply_without_content(remote: FakeJudge, run, body):
    remote.replies = [(200, body, {})]
    with pytest.raises(JudgeError, match="judge reply"):
        judge_run(run.pk)


def test_remote_judge_unreachable(settings, run, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.ACURIO_JUDGE_URL = f"http://127.0.0.1:{port}/v1/chat/completions"
    settings.ACURIO_JUDGE_MAX_ATTEMPTS = 2
    monkeypatch.setattr(judge_module, "_sleep", lambda s: None)
    with pytest.raises(JudgeError, match="failed after 2 attempts: ConnectError"):
        judge_run(run.pk)


def test_failed_run_is_judged_offline_even_with_a_remote_judge(remote: FakeJudge, make_job):
    job = make_job(status=JobStatus.FAILED, error="Unreadable file.")
    saved(job, "client")
    assert judge_run(job.run_id)["score"] is None
    assert remote.requests == []
