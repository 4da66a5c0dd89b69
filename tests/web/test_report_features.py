"""The report's features: exports, the library warning, the calibrated score, one set of
counts on every page, what changed between versions, and My reports (grouping, unsaved work,
delete)."""

from __future__ import annotations

import copy
import csv
import io
import re

import bibtexparser
import pytest
import rispy
from django.urls import reverse
from docx import Document
from docx.oxml.ns import qn

from jobs import exports
from jobs.analysis.judging import builtin_judgment, problem_counts
from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.reporting import accessible_document, problem_groups, style_name, what_changed
from jobs.runs import save_run
from tests.reports import analysed, corpus_file, saved_report

pytestmark = pytest.mark.django_db

PROBLEMS = ("missing_reference", "year_mismatch", "author_mismatch", "ambiguous")


def norm(text: str) -> str:
    return " ".join(text.split())


def commented_texts(data: bytes) -> list[tuple[str, str]]:
    """(anchored text, comment text) of every comment of a DOCX, in document order."""
    doc = Document(io.BytesIO(data))
    comments = {str(c.comment_id): c.text for c in doc.comments}
    open_ranges: dict[str, list[str]] = {}
    found: list[tuple[str, str]] = []
    for el in doc.element.body.iter():
        if el.tag == qn("w:commentRangeStart"):
            open_ranges[el.get(qn("w:id"))] = []
        elif el.tag == qn("w:t"):
            for texts in open_ranges.values():
                texts.append(el.text or "")
        elif el.tag == qn("w:commentRangeEnd"):
            cid = el.get(qn("w:id"))
            found.append((norm("".join(open_ranges.pop(cid))), comments[cid]))
    return found


# --- exports ------------------------------------------------------------------------------


def test_annotated_docx_has_one_comment_per_problem_citation_at_its_text(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_000.docx"))
    problems = [c for c in run.report["citations"] if c["verdict"] in PROBLEMS]
    assert problems
    resp = user_client.get(reverse("run_export", args=[run.pk, "annotated.docx"]))
    assert resp.status_code == 200
    assert resp["Content-Type"] == exports.DOCX_MIME
    assert "thesis_1_000-annotated.docx" in resp["Content-Disposition"]
    found = commented_texts(resp.content)
    # Exactly one comment per problem citation, in document order, anchored at the citation's
    # own text (the runs are cut to it), saying its verdict and reason.
    assert [text for text, _ in found] == [norm(c["text"]) for c in problems]
    for (_, comment), citation in zip(found, problems, strict=True):
        assert citation["reason"] in comment
        assert comment.split(":")[0] in {
            "Missing reference",
            "Year mismatch",
            "Author mismatch",
            "Ambiguous",
        }
    # The student's own file: its text is all still there.
    original = Document(str(corpus_file("thesis_1_000.docx")))
    annotated = Document(io.BytesIO(resp.content))
    assert [p.text for p in annotated.paragraphs] == [p.text for p in original.paragraphs]


@pytest.mark.parametrize("name", ["thesis_1_001.md", "thesis_1_003.pdf", "thesis_1_002.html"])
def test_other_formats_get_a_generated_docx_with_the_same_comments(name):
    path = corpus_file(name)
    doc_html, report = analysed(path)
    result = exports.annotated_docx(
        report, upload=path.read_bytes(), document=name, doc_html=doc_html
    )
    assert result.generated
    problems = [c for c in report["citations"] if c["verdict"] in PROBLEMS]
    found = commented_texts(result.data)
    placed = [text for text, comment in found if "could not be placed" not in comment]
    assert result.placed == len(placed) and result.placed + result.unplaced == len(problems)
    assert result.unplaced == 0, "every problem citation of a corpus thesis is found"
    assert placed == [norm(c["text"]) for c in problems]


def test_a_citation_not_in_the_text_gets_a_note_instead_of_a_wrong_place():
    path = corpus_file("thesis_1_001.md")
    doc_html, report = analysed(path)
    report = copy.deepcopy(report)
    ghost = {"text": "(Nowhere, 1901)", "verdict": "missing_reference", "reason": "invented"}
    report["citations"].append(ghost)
    result = exports.annotated_docx(report, upload=None, document=path.name, doc_html=doc_html)
    assert result.unplaced == 1
    notes = [c for _, c in commented_texts(result.data) if "could not be placed" in c]
    assert len(notes) == 1 and "(Nowhere, 1901)" in notes[0]


def test_csv_exports(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_001.md"))
    resp = user_client.get(reverse("run_export", args=[run.pk, "citations.csv"]))
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(resp.content.decode("utf-8-sig"))))
    assert rows[0][:3] == ["number", "citation", "verdict"]
    assert len(rows) - 1 == len(run.report["citations"])
    assert [r[1] for r in rows[1:]] == [c["text"] for c in run.report["citations"]]
    problems = sum(1 for r in rows[1:] if r[2] != "Verified")
    assert problems == problem_counts(run.report)["citation_problems"]
    resp = user_client.get(reverse("run_export", args=[run.pk, "references.csv"]))
    rows = list(csv.reader(io.StringIO(resp.content.decode("utf-8-sig"))))
    assert len(rows) - 1 == len(run.report["references"])
    assert sum(1 for r in rows[1:] if r[2] == "no") == problem_counts(run.report)["uncited"]


def test_entries_not_in_the_library_as_bibtex_and_ris(user, user_client):
    path = corpus_file("thesis_1_001.md")
    run = saved_report(user, path)
    report = copy.deepcopy(run.report)
    for ref in report["references"][:3]:
        ref["library"] = "not_found"
    missing = report["references"][:3]
    job = AnalysisJob.objects.get(pk=run.job_id)
    AnalysisJob.objects.filter(pk=job.pk).update(results=report)
    AnalysisRun.objects.filter(pk=run.pk).update(report=report)
    body = user_client.get(reverse("run_report", args=[run.pk])).content.decode()
    assert "3 entries not in your library" in body
    bib = user_client.get(reverse("run_export", args=[run.pk, "not-in-library.bib"]))
    library = bibtexparser.parse_string(bib.content.decode())
    assert not library.failed_blocks
    assert len(library.entries) == 3
    assert [e.fields_dict["title"].value for e in library.entries] == [r["title"] for r in missing]
    assert len({e.key for e in library.entries}) == 3
    ris = user_client.get(reverse("run_export", args=[run.pk, "not-in-library.ris"]))
    records = rispy.loads(ris.content.decode())
    assert [r["title"] for r in records] == [r["title"] for r in missing]
    assert records[0]["authors"] == missing[0]["authors"]


def test_exports_are_the_owners_only(user_client, make_job, other_user):
    job = make_job(owner=other_user)
    run_id = save_run(job.pk, "client").run_id
    for name in ("citations.csv", "references.csv", "annotated.docx", "not-in-library.bib"):
        assert user_client.get(reverse("run_export", args=[run_id, name])).status_code == 404
    assert user_client.get(f"/runs/{run_id}/document").status_code == 404


def test_an_unknown_export_is_404(user_client, make_job):
    run_id = save_run(make_job().pk, "client").run_id
    assert user_client.get(f"/runs/{run_id}/export/everything.zip").status_code == 404


# --- the library warning --------------------------------------------------------------------


def test_the_library_warning_is_on_the_report(user_client, make_job):
    warning = (
        "refs.bib could not be read: the library file is empty; the library check was skipped."
    )
    job = make_job()
    job.results["warnings"] = [warning]
    job.save(update_fields=["results"])
    run_id = save_run(job.pk, "client").run_id
    body = user_client.get(reverse("run_report", args=[run_id])).content.decode()
    assert warning in body


# --- the score ----------------------------------------------------------------------------


def report_with(problems: int, total: int = 100) -> dict:
    citations = [
        {"text": f"(A{i}, 2000)", "keys": [], "verdict": "missing_reference"}
        for i in range(problems)
    ] + [
        {"text": f"(B{i}, 2000)", "keys": [], "verdict": "verified"}
        for i in range(total - problems)
    ]
    return {"citations": citations, "references": [{"verdict": "cited"}]}


def test_the_score_is_dominated_by_the_share_of_citations_with_problems():
    scores = {share: builtin_judgment(report_with(share))["score"] for share in range(0, 40)}
    assert scores[0] == 100
    assert all(scores[a] > scores[a + 1] for a in range(0, 34))  # every wrong citation costs
    assert builtin_judgment(report_with(15))["rating"] == "poor"  # 15 %: never "good"
    assert builtin_judgment(report_with(5))["rating"] == "fair"
    assert builtin_judgment(report_with(2))["rating"] == "good"
    # The same 15 % in a thesis of 1,919 citations (the 300-page corpus thesis's 288).
    big = report_with(288, 1919)
    assert builtin_judgment(big)["rating"] == "poor"
    # Uncited entries weigh far less than wrong citations.
    clean = report_with(0)
    clean["references"] = [{"verdict": "uncited"}] * 5 + [{"verdict": "cited"}] * 5
    assert builtin_judgment(clean)["rating"] == "good"


def test_an_empty_document_says_no_citations_found_and_has_no_score(user_client, make_job):
    job = make_job(results={"document": "empty.md", "citations": [], "references": []})
    run_id = save_run(job.pk, "client").run_id
    from jobs.runs import judge_run

    assert judge_run(run_id)["score"] is None
    body = user_client.get(reverse("run_report", args=[run_id])).content.decode()
    assert "no citations found" in body.lower()
    assert "/ 100" not in body
    assert "No problems found" not in body


# --- one set of counts --------------------------------------------------------------------


def test_every_page_counts_the_same_problems(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_008.docx"))
    counts = problem_counts(run.report)
    assert (
        counts["total"] == counts["citation_problems"] + counts["uncited"] + counts["invalid_doi"]
    )
    assert counts["uncited"] and counts["invalid_doi"], "the corpus thesis has both"
    # The judge
    assert run.judgment["counts"] == counts
    # The report page: the heading, the groups, the list
    resp = user_client.get(reverse("run_report", args=[run.pk]))
    body = resp.content.decode()
    assert resp.context["counts"] == counts
    assert sum(len(g.items) for g in resp.context["groups"]) == counts["total"]
    assert len(re.findall(r'<li class="problem"', body)) == counts["total"]
    assert f'id="problem-total">{counts["total"]}<' in body
    # My reports
    runs = user_client.get(reverse("runs"))
    (thesis,) = runs.context["theses"]
    assert thesis.latest.counts == counts
    assert f'<strong class="problem-count">{counts["total"]}</strong>' in runs.content.decode()
    # The API
    api = user_client.get(reverse("run_report_json", args=[run.pk])).json()
    assert api["problem_counts"] == counts


def test_my_reports_counts_a_run_not_judged_yet_the_same(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_008.docx"))
    AnalysisRun.objects.filter(pk=run.pk).update(judgment=None, judged_job=None)
    (thesis,) = user_client.get(reverse("runs")).context["theses"]
    assert thesis.latest.counts == problem_counts(run.report)


# --- what changed ---------------------------------------------------------------------------


def test_what_changed_matches_problems_by_text():
    before = {
        "citations": [
            {"text": "(A, 2000)", "verdict": "missing_reference"},
            {"text": "(B, 2001)", "verdict": "year_mismatch"},
            {"text": "(B, 2001)", "verdict": "year_mismatch"},
            {"text": "(C, 2002)", "verdict": "verified"},
        ],
        "references": [{"text": "Z (1999)", "verdict": "uncited"}],
    }
    after = {
        "citations": [
            {"text": "(B, 2001)", "verdict": "author_mismatch"},  # still open, other verdict
            {"text": "(C, 2002)", "verdict": "ambiguous"},  # new
        ],
        "references": [{"text": "Z (1999)", "verdict": "cited"}],
    }
    change = what_changed(before, after)
    assert sorted(i["text"] for i in change.fixed) == ["(A, 2000)", "(B, 2001)", "Z (1999)"]
    assert [i["text"] for i in change.new] == ["(C, 2002)"]
    assert [i["text"] for i in change.still_open] == ["(B, 2001)"]


def _fix_first_problem(report: dict) -> tuple[dict, str]:
    fixed = copy.deepcopy(report)
    first = next(c for c in fixed["citations"] if c["verdict"] in PROBLEMS)
    first["verdict"] = "verified"
    return fixed, first["text"]


def test_reanalysis_shows_what_changed(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_001.md"))
    newer_report, fixed_text = _fix_first_problem(run.report)
    newer = AnalysisJob.objects.create(
        owner=user,
        filename=run.document,
        upload=b"x",
        status=JobStatus.COMPLETE,
        run_id=run.pk,
        doc_html=AnalysisRun.objects.get(pk=run.pk).doc_html,
        results=newer_report,
        finished_at=run.saved_at,
    )
    save_run(newer.pk, "client")
    resp = user_client.get(reverse("run_report", args=[run.pk]))
    change = resp.context["change"]
    assert change["what"] == "the previous analysis"
    before = problem_counts(run.report)["total"]
    assert [i["text"] for i in change["diff"].fixed] == [fixed_text]
    assert change["diff"].new == []
    assert len(change["diff"].still_open) == before - 1
    body = resp.content.decode()
    assert 'id="changes-fixed">1<' in body and 'id="changes-new">0<' in body


def test_reupload_shows_what_changed_against_the_previous_upload(user, user_client):
    first = saved_report(user, corpus_file("thesis_1_001.md"))
    second_report, fixed_text = _fix_first_problem(first.report)
    job = AnalysisJob.objects.create(
        owner=user,
        filename=first.document,
        upload=b"x",
        status=JobStatus.COMPLETE,
        doc_html="<p>v2</p>",
        results=second_report,
        finished_at=first.saved_at,
    )
    second = save_run(job.pk, "client").run_id
    change = user_client.get(reverse("run_report", args=[second])).context["change"]
    assert change["what"] == "the previous upload"
    assert [i["text"] for i in change["diff"].fixed] == [fixed_text]
    # The first upload has nothing before it.
    assert user_client.get(reverse("run_report", args=[first.pk])).context["change"] is None
    # Both are one thesis in My reports, the newer first.
    (thesis,) = user_client.get(reverse("runs")).context["theses"]
    assert [v.job.run_id for v in thesis.versions] == [second, first.pk]


# --- My reports: unsaved work and delete ------------------------------------------------------


def test_a_finished_job_no_tab_saved_is_listed_with_a_link_to_its_job_page(user_client, make_job):
    job = make_job(status=JobStatus.COMPLETE, filename="closed-tab.md")
    assert not AnalysisRun.objects.exists()
    resp = user_client.get(reverse("runs"))
    (thesis,) = resp.context["theses"]
    assert thesis.latest.state == "finished"
    assert f'href="/jobs/{job.pk}/"' in resp.content.decode()
    # Its job page saves the run through the client writer when opened (job.js): the page
    # starts from a terminal status.
    page = user_client.get(reverse("job_page", args=[job.pk])).content.decode()
    assert '"status": "complete"' in page and "acurio/job.js" in page


def test_a_reanalysis_finished_but_unsaved_links_to_its_job_page(user_client, make_job):
    old = make_job(filename="t.md")
    run_id = save_run(old.pk, "client").run_id
    newer = make_job(filename="t.md", run_id=run_id)
    (thesis,) = user_client.get(reverse("runs")).context["theses"]
    version = thesis.latest
    assert (version.job.pk, version.attempts, version.opens_job_page) == (newer.pk, 2, True)


def test_delete_hides_a_version_and_its_report(user_client, make_job):
    keep = make_job(filename="t.md")
    keep_run = save_run(keep.pk, "client").run_id
    gone = make_job(filename="t.md")
    gone_run = save_run(gone.pk, "client").run_id
    confirm = user_client.get(reverse("run_delete", args=[gone_run]))
    assert confirm.status_code == 200 and b"Delete this report?" in confirm.content
    assert user_client.post(reverse("run_delete", args=[gone_run])).status_code == 302
    gone.refresh_from_db()
    assert gone.deleted_at is not None  # soft: the row stays for the operators
    (thesis,) = user_client.get(reverse("runs")).context["theses"]
    assert [v.job.run_id for v in thesis.versions] == [keep_run]
    for url in (f"/runs/{gone_run}/", f"/runs/{gone_run}.json", f"/runs/{gone_run}/document"):
        assert user_client.get(url).status_code == 404
    assert user_client.get(f"/runs/{keep_run}/").status_code == 200


def test_nobody_deletes_anothers_report(user_client, make_job, other_user):
    job = make_job(owner=other_user)
    run_id = save_run(job.pk, "client").run_id
    assert user_client.get(reverse("run_delete", args=[run_id])).status_code == 404
    assert user_client.post(reverse("run_delete", args=[run_id])).status_code == 404
    job.refresh_from_db()
    assert job.deleted_at is None


# --- wording ----------------------------------------------------------------------------------


def test_student_pages_use_no_internal_terms(user, user_client):
    run = saved_report(user, corpus_file("thesis_1_000.docx"))
    pages = [reverse("run_report", args=[run.pk]), reverse("runs")]
    for url in pages:
        body = user_client.get(url).content.decode()
        text = re.sub(r"<[^>]+>", " ", body)
        for term in ("saved by", "by client", "by worker", "builtin", "GERMAN"):
            assert term not in text, (url, term)
    body = user_client.get(pages[0]).content.decode()
    assert "German author-year style" in body


def test_problem_groups_cover_every_problem_once():
    _html, report = analysed(corpus_file("large/apa_30p.docx"))
    groups = problem_groups(report)
    assert sum(len(g.items) for g in groups) == problem_counts(report)["total"]
    indices = [i["index"] for g in groups for i in g.items if "index" in i]
    assert len(indices) == len(set(indices)) == problem_counts(report)["citation_problems"]


def test_the_document_is_made_for_keyboards_and_its_headings_sit_below_the_pages():
    annotated = (
        '<h1>Thesis</h1><h2>Intro</h2><p>See <mark class="cite cite-year_mismatch" data-index="0"'
        ' title="Hodges is listed for 2024, not 2021">(Hodges, </mark><em><mark class="cite'
        ' cite-year_mismatch" data-index="0" title="Hodges is listed for 2024, not 2021">2021)'
        "</mark></em></p><h6>Deep</h6>"
    )
    html = accessible_document(annotated)
    assert "<h1" not in html and "<h2" not in html
    assert "<h3>Thesis</h3><h4>Intro</h4>" in html and "<h6>Deep</h6>" in html
    # One tab stop per citation, on its first mark, with its reason as data (no tooltip).
    assert html.count('tabindex="0"') == 1
    assert 'role="button"' in html and "title=" not in html
    assert 'data-reason="Hodges is listed for 2024, not 2021"' in html
    assert html.count('data-index="0"') == 2


def test_style_names_are_the_ones_students_know():
    assert style_name("german") == "German author-year"
    assert style_name("ieee") == "IEEE (numbered)"
    assert style_name("apa") == "APA"
    assert style_name("") == ""
