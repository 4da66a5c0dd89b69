"""The report pages in Chromium as a student uses them (Playwright, live server).

Filters, search and next/previous on the problems; the reason card by keyboard; no horizontal
scrolling at 360 and 390 px on any student page; printing to PDF keeps every problem; axe-core
finds no serious or critical violation; My reports shows a job whose tab was closed as soon as
it finishes, and opening it saves the run through the tab's writer.
"""

from __future__ import annotations

import io
import os
import re
import time
import unicodedata
from pathlib import Path

import pytest

from jobs.analysis.judging import problem_counts
from jobs.durable import Worker
from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from jobs.reporting import problem_groups
from tests.reports import corpus_file, saved_report

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs"
WAIT_MS = 20_000
SMALL = "thesis_1_000.docx"
LARGE = "large/apa_300p.docx"
PHONES = (360, 390)


def open_report(page, run) -> None:
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("#doc[data-loaded]", timeout=WAIT_MS)


def visible_problems(page) -> int:
    return page.locator("#problems li.problem:visible").count()


# --- filters, search, next/previous, the reason card ----------------------------------------


def test_chips_cards_search_and_next_previous(signed_in, browser_user):
    from playwright.sync_api import expect

    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(LARGE))
    groups = {g.kind: g.items for g in problem_groups(run.report)}
    counts = problem_counts(run.report)
    open_report(page, run)
    expect(page.locator("#problem-total")).to_have_text(str(counts["total"]))
    # The first screen shows the first 20 of each group; "Show all" reveals the rest.
    shown = sum(min(20, len(items)) for items in groups.values())
    assert visible_problems(page) == shown
    page.click('#problems .show-more[data-kind="missing_reference"]')
    assert visible_problems(page) == shown - 20 + len(groups["missing_reference"])

    # A chip shows one kind only, every one of them.
    page.click('#problem-tools .chip[data-filter="year_mismatch"]')
    expect(page.locator('#problem-tools .chip[data-filter="year_mismatch"]')).to_have_attribute(
        "aria-pressed", "true"
    )
    assert visible_problems(page) == len(groups["year_mismatch"])
    kinds = set(
        page.locator("#problems li.problem:visible").evaluate_all(
            "items => items.map(i => i.dataset.kind)"
        )
    )
    assert kinds == {"year_mismatch"}

    # A summary card filters the same way and brings the list into view.
    page.click('#summary button.stat[data-filter="author_mismatch"]')
    assert visible_problems(page) == len(groups["author_mismatch"])
    assert page.evaluate("document.getElementById('problems').getBoundingClientRect().top") < 200

    # Search narrows across every kind.
    page.click('#summary button.stat[data-filter="all"]')
    needle = groups["ambiguous"][-1]["text"]  # beyond the first 20: found all the same
    page.fill("#problem-search", needle)
    matching = [
        i
        for items in groups.values()
        for i in items
        if needle.lower() in (i["text"] + " " + i["reason"]).lower()
    ]
    expect(page.locator("#problems li.problem:visible")).to_have_count(len(matching))
    page.fill("#problem-search", "no such text anywhere 123")
    expect(page.locator("#no-match")).to_be_visible()
    page.fill("#problem-search", "")

    # Next/previous step through the filtered problems and scroll the document to each.
    page.click('#problem-tools .chip[data-filter="missing_reference"]')
    page.click("#next-problem")
    first = groups["missing_reference"][0]
    expect(page.locator("#problem-position")).to_have_text(
        f"1 of {len(groups['missing_reference'])}"
    )
    mark = page.locator(f'#doc mark[data-index="{first["index"]}"][tabindex]')
    expect(mark).to_be_focused()
    expect(mark).to_be_in_viewport()
    expect(page.locator("#reason-card")).to_be_visible()
    expect(page.locator("#reason-card .reason-text")).to_have_text(first["reason"])
    page.click("#next-problem")
    second = groups["missing_reference"][1]
    expect(page.locator(f'#doc mark[data-index="{second["index"]}"][tabindex]')).to_be_focused()
    page.click("#prev-problem")
    expect(mark).to_be_focused()
    page.click("#prev-problem")  # wraps around to the last one
    last = groups["missing_reference"][-1]
    expect(page.locator(f'#doc mark[data-index="{last["index"]}"][tabindex]')).to_be_focused()
    expect(page.locator("#problem-position")).to_have_text(
        f"{len(groups['missing_reference'])} of {len(groups['missing_reference'])}"
    )


def test_reason_card_by_keyboard(signed_in, browser_user):
    from playwright.sync_api import expect

    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(SMALL))
    open_report(page, run)
    problem = next(c for c in run.report["citations"] if c["verdict"] != "verified")
    index = run.report["citations"].index(problem)
    card = page.locator("#reason-card")
    expect(card).to_be_hidden()
    # Tab from the last control before the document reaches the first mark, then on.
    marks = page.locator("#doc mark[tabindex]")
    # One tab stop per citation, even when its marker spans several text runs.
    indices = marks.evaluate_all("ms => ms.map(m => m.dataset.index)")
    assert len(indices) == len(set(indices)) > 0
    page.locator("#doc").evaluate("d => d.previousElementSibling.setAttribute('tabindex', '-1')")
    page.locator("#doc").evaluate("d => d.previousElementSibling.focus()")
    page.keyboard.press("Tab")
    expect(marks.first).to_be_focused()
    expect(card).to_be_visible()
    for _ in range(500):
        focused = page.evaluate("document.activeElement.dataset.index")
        if focused == str(index):
            break
        page.keyboard.press("Tab")
    else:
        raise AssertionError("Tab never reached the problem's mark")
    expect(card.locator(".reason-text")).to_have_text(problem["reason"])
    expect(card.locator(".reason-cite")).to_have_text(problem["text"])
    page.keyboard.press("Escape")
    expect(card).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.index") == str(index)
    page.keyboard.press("Enter")  # Enter on the focused mark opens it again
    expect(card).to_be_visible()
    # A tap (click) opens the card as well.
    page.keyboard.press("Escape")
    page.locator(f'#doc mark[data-index="{index}"]').first.click()
    expect(card.locator(".reason-text")).to_have_text(problem["reason"])


# --- phones: no horizontal scrolling ----------------------------------------------------------


def overflow(page) -> int:
    return page.evaluate(
        "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
        " - window.innerWidth"
    )


def test_no_horizontal_overflow_on_phones(chromium, live_server, signed_in, browser_user):
    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(LARGE))
    running = AnalysisJob.objects.create(
        owner=browser_user,
        filename="a-rather-long-file-name-of-a-thesis-without-any-spaces-in-it-at-all.docx",
        upload=b"x",
        status=JobStatus.RUNNING,
        progress_step="verify",
        progress_total=1200,
        progress_done=300,
    )
    pages = ["/", "/upload/", f"/jobs/{running.pk}/", f"/runs/{run.pk}/"]
    for width in PHONES:
        context = chromium.new_context(
            base_url=live_server.url, viewport={"width": width, "height": 800}
        )
        anonymous = context.new_page()
        anonymous.goto("/accounts/login/")
        assert overflow(anonymous) <= 0, f"login overflows at {width}px"
        context.close()
        page.set_viewport_size({"width": width, "height": 800})
        for url in pages:
            page.goto(url)
            if url.startswith("/runs/"):
                page.wait_for_selector("#doc[data-loaded]", timeout=WAIT_MS)
                page.click("#next-problem")  # the reason card is open too
            assert overflow(page) <= 0, f"{url} overflows by {overflow(page)}px at {width}px"


# --- print --------------------------------------------------------------------------------


def test_print_to_pdf_contains_every_problem(signed_in, browser_user, monkeypatch):
    from pypdf import PdfReader

    from jobs import views

    monkeypatch.setattr(views, "PROBLEMS_SHOWN", 5)  # so this thesis has problems folded away
    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(SMALL))
    open_report(page, run)
    assert page.locator("#problems li.problem[hidden]").count() > 0
    page.emulate_media(media="print")
    pdf = page.pdf(format="A4", print_background=True)
    # NFKC: the PDF's text spells ligatures as one glyph ("ﬀ" in "differently").
    text = unicodedata.normalize(
        "NFKC",
        " ".join(
            " ".join((p.extract_text() or "").split()) for p in PdfReader(io.BytesIO(pdf)).pages
        ),
    )
    items = [i for g in problem_groups(run.report) for i in g.items]
    assert len(items) == problem_counts(run.report)["total"] > 20  # more than the first screen
    # Every problem prints with its reason: each reason as often as problems carry it.
    reasons: dict[str, int] = {}
    for item in items:
        reason = unicodedata.normalize("NFKC", " ".join(item["reason"].split()))
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, times in reasons.items():
        assert text.count(reason) >= times, f"{reason!r} printed {text.count(reason)}x of {times}"
    # The document and the references are in it too.
    last_ref = " ".join(run.report["references"][-1]["text"].split())[:40]
    assert last_ref in text
    assert "Document" in text and "References" in text


# --- accessibility ------------------------------------------------------------------------


def serious(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {len(v['nodes'])} nodes, e.g. {v['nodes'][0]['target']}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_axe_finds_no_serious_violation(chromium, live_server, signed_in, browser_user):
    anonymous = chromium.new_context(base_url=live_server.url)
    login = anonymous.new_page()
    login.goto("/accounts/login/")
    assert serious(login) == [], "login"
    anonymous.close()

    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(LARGE))
    running = AnalysisJob.objects.create(
        owner=browser_user, filename="draft.docx", upload=b"x", status=JobStatus.QUEUED
    )
    for url in ("/upload/", f"/jobs/{running.pk}/", "/"):
        page.goto(url)
        assert serious(page) == [], url
    open_report(page, run)
    assert serious(page) == [], "the 300-page report"


# --- My reports after a closed tab --------------------------------------------------------


def test_closed_tab_job_is_in_my_reports_as_soon_as_it_finishes(signed_in):
    from playwright.sync_api import expect

    context, page = signed_in
    thesis = corpus_file("thesis_1_001.md")
    page.goto("/upload/")
    page.set_input_files("#id_file", str(thesis))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job = AnalysisJob.objects.get(pk=int(re.search(r"/jobs/(\d+)/$", page.url).group(1)))
    page.close()  # the tab is gone before the analysis finishes

    other = context.new_page()
    other.goto("/")
    expect(other.locator(f'.version[data-job="{job.pk}"]')).to_have_attribute(
        "data-state", "running"
    )
    Worker(once=True).drain()
    finished = time.monotonic()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    assert not AnalysisRun.objects.exists()  # no tab saved it, no sweeper ran

    other.goto("/")
    entry = other.locator(f'.version[data-job="{job.pk}"]')
    expect(entry).to_have_attribute("data-state", "finished", timeout=2000)
    assert time.monotonic() - finished < 2.0
    link = entry.locator("a.version-link")
    expect(link).to_have_attribute("href", f"/jobs/{job.pk}/")
    link.click()  # the job page saves the run through the client writer and opens it
    other.wait_for_url(f"**/runs/{job.run_id}/", timeout=WAIT_MS)
    run = AnalysisRun.objects.get(pk=job.run_id)
    assert (run.saved_by, run.job_id) == ("client", job.pk)
    other.goto("/")
    expect(other.locator(f'.version[data-job="{job.pk}"]')).to_have_attribute(
        "data-state", "complete"
    )


# --- screenshots for the README -------------------------------------------------------------


@pytest.mark.skipif(
    not os.environ.get("ACURIO_SCREENSHOT"), reason="ACURIO_SCREENSHOT=1 to refresh"
)
def test_report_screenshots(signed_in, browser_user):
    _context, page = signed_in
    run = saved_report(browser_user, corpus_file(LARGE))
    SCREENSHOTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    open_report(page, run)
    page.screenshot(path=str(SCREENSHOTS / "report-desktop.png"))
    page.click("#next-problem")
    page.screenshot(path=str(SCREENSHOTS / "report-desktop-document.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("#doc[data-loaded]", timeout=WAIT_MS)
    page.screenshot(path=str(SCREENSHOTS / "report-phone.png"))
    page.click('#problem-tools .chip[data-filter="year_mismatch"]')
    page.click("#next-problem")
    page.screenshot(path=str(SCREENSHOTS / "report-phone-reason.png"))
