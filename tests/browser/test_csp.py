"""The Content-Security-Policy in Chromium: the site works under it, with no violation.

Every page of the flow is loaded with the policy on (Playwright does not bypass it): sign-in,
runs list, upload, the job page while the analysis runs and when it ends, the report with the
user's document (uploaded as HTML full of inline script, style and event handlers, which the
sanitiser must have removed), and the admin. Two detectors run in each page: the
``securitypolicyviolation`` DOM event (recorded by an init script) and Chromium's console
("Refused to … Content Security Policy"). A control test injects an inline style and an
inline handler and checks that both detectors see it, so a silent detector cannot pass.
"""

from __future__ import annotations

import re

import pytest

from jobs.durable import Worker
from jobs.models import AnalysisJob, AnalysisRun, JobStatus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 20_000

RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' ' + e.sourceFile);
});
"""

HOSTILE_THESIS = """<!doctype html>
<html><head><title>Thesis</title>
<style>body { background: red }</style>
<script>document.title = 'owned'</script>
<link rel="stylesheet" href="https://evil.example/x.css">
</head><body>
<h1 id="document" class="topbar" style="color:red">Reading in the early years</h1>
<p style="font-size:40px" onclick="alert(1)" onmouseover="alert(2)">Shared reading improves
vocabulary (Smith, 2020). Phonics matters as well (Jones, 2019).</p>
<p>Later work agrees (Smith, 2020).<img src="x" onerror="alert(3)"></p>
<script>alert(4)</script>
<a href="javascript:alert(5)">a link</a>
<h2>References</h2>
<p>Smith, J. (2020). Shared reading and vocabulary. Journal of Early Literacy, 12(3), 45-67.</p>
</body></html>
"""


class Violations:
    """Both detectors of one browser context."""

    def __init__(self, context) -> None:
        self.console: list[str] = []
        self.pages = []
        context.add_init_script(RECORD_VIOLATIONS)
        context.on("page", self.watch)

    def watch(self, page) -> None:
        self.pages.append(page)
        page.on("console", self._console)

    def _console(self, message) -> None:
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.console.append(text)

    def in_page(self, page) -> list[str]:
        return page.evaluate("window.__csp || []")

    def assert_none(self, page, where: str) -> None:
        events = self.in_page(page)
        assert events == [], f"{where}: CSP violations {events}"
        assert self.console == [], f"{where}: CSP console messages {self.console}"


@pytest.fixture
def browser_context(chromium, live_server):
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}
    )
    violations = Violations(context)
    yield context, violations
    context.close()


def csp_header(response) -> str:
    return response.headers.get("content-security-policy", "")


def test_the_flow_runs_under_the_csp_without_violations(
    browser_context, live_server, browser_user, tmp_path
):
    from playwright.sync_api import expect

    context, violations = browser_context
    page = context.new_page()

    response = page.goto("/accounts/login/")
    assert "script-src 'self'" in csp_header(response)
    violations.assert_none(page, "login")
    page.fill("#id_username", "carla")
    page.fill("#id_password", "pw-carla-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    violations.assert_none(page, "runs list")

    response = page.goto("/upload/")
    assert "style-src 'self'" in csp_header(response)
    violations.assert_none(page, "upload")
    thesis = tmp_path / "thesis.html"
    thesis.write_text(HOSTILE_THESIS)
    page.set_input_files("#id_file", str(thesis))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job = AnalysisJob.objects.get(pk=int(re.search(r"/jobs/(\d+)/$", page.url).group(1)))
    # job.js runs: it draws the bar (a CSSOM width, which the policy allows) and polls.
    expect(page.locator("#progress-label")).to_have_text("Waiting for a worker…", timeout=WAIT_MS)
    violations.assert_none(page, "job page")

    Worker(once=True).drain()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error
    # The tab saves the run through the JSON API (connect-src) and opens the report.
    page.wait_for_url(f"**/runs/{job.run_id}/", timeout=WAIT_MS)
    assert AnalysisRun.objects.get(pk=job.run_id).saved_by == "client"
    expect(page.locator("#document .doc mark.cite").first).to_be_visible()
    violations.assert_none(page, "report")

    # The hostile markup is gone, the text is there, and the page's own ids are intact.
    doc = page.locator("#document .doc")
    expect(doc).to_contain_text("Shared reading improves")
    assert page.title() != "owned"
    html = doc.inner_html()
    for gone in ("<script", "<style", "onclick", "onerror", "style=", "javascript:", "<img"):
        assert gone not in html, gone
    assert page.locator("[id=document]").count() == 1
    # report.js works: a problem's link scrolls to its mark and flashes it.
    page.locator("#problems a[data-cite]").first.click()
    expect(page.locator("#document mark.flash")).to_have_count(1, timeout=WAIT_MS)
    page.click("#references summary")
    expect(page.locator("#references table")).to_be_visible()
    violations.assert_none(page, "report after interaction")


def test_the_admin_runs_under_the_csp_without_violations(
    browser_context, live_server, django_user_model, settings, make_job
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    django_user_model.objects.create_user(
        "olga", password="pw-olga-123", is_staff=True, is_superuser=True
    )
    make_job(status=JobStatus.COMPLETE)
    context, violations = browser_context
    page = context.new_page()
    page.goto("/admin/login/")
    violations.assert_none(page, "admin sign-in")
    page.fill("#id_username", "olga")
    page.fill("#id_password", "pw-olga-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    violations.assert_none(page, "admin index")
    for url in (
        "/admin/jobs/analysisjob/",
        "/admin/jobs/analysisjob/dashboard/",
        "/admin/auth/user/",
        "/admin/auth/user/add/",
        "/admin/axes/accessattempt/",
        "/admin/axes/accesslog/",
    ):
        response = page.goto(url)
        assert response.status == 200, url
        violations.assert_none(page, url)
    # The change list's own stylesheet applies (it used to be an inline <style>).
    page.goto("/admin/jobs/analysisjob/")
    pill = page.locator(".acurio-status").first
    assert pill.evaluate("e => getComputedStyle(e).borderRadius") == "10px"


def test_the_detectors_see_a_violation(browser_context, live_server):
    context, violations = browser_context
    page = context.new_page()
    page.goto("/accounts/login/")
    page.evaluate(
        """() => {
        document.body.insertAdjacentHTML('beforeend',
          '<div id="probe" style="color: rgb(255, 0, 0)">x</div>' +
          '<img src="data:," onerror="window.__ran = 1">' +
          '<img src="data:," onload="window.__ran = 1">');
    }"""
    )
    page.wait_for_function("window.__csp.length >= 2")
    events = violations.in_page(page)
    assert any(e.startswith("style-src") for e in events), events
    assert any(e.startswith("script-src") for e in events), events
    assert page.evaluate("window.__ran === undefined")  # the handler did not run
    assert page.locator("#probe").evaluate("e => getComputedStyle(e).color") != "rgb(255, 0, 0)"
    page.wait_for_timeout(200)
    assert violations.console, "Chromium's console reported nothing"
