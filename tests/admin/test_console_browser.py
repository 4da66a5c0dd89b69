"""The operator console in Chromium (Playwright + Debian's Chromium, live server): the
dashboard refreshes itself without a reload (pausable, adjustable), its cards, a workflow
instance's page and its buttons, and the runs list at 1366 px. Every page is also watched for
Content-Security-Policy violations.

Workflow steps are run by a real ``Worker`` in the test thread, one drain at a time, so each
test decides when a job finishes and watches the page follow.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import pipeline
from jobs.durable import Worker, start, status, task, wait_for_signal
from jobs.models import AnalysisJob, AnalysisRun, JobStatus
from tests.chromium import launched_chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 15_000
THESIS = b"""# Reading

Shared reading improves vocabulary (Smith, 2020).

## References

Smith, J. (2020). Shared reading and vocabulary. Journal of Early Literacy, 12(3), 45-67.
"""
RECORD_VIOLATIONS = """
window.__csp = window.__csp || [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


def echo(ctx):
    return ctx["approval"]


@pytest.fixture
def browser():
    with launched_chromium() as chromium:
        yield chromium


@pytest.fixture
def operator(browser, live_server, django_user_model, settings):
    """A signed-in operator's page at 1366 x 768 (a common laptop screen)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    user = django_user_model.objects.create_user(
        "olga", password="pw-olga-123", is_staff=True, is_superuser=True
    )
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1366, "height": 768})
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "olga")
    page.fill("#id_password", "pw-olga-123")
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    page.user = user
    yield page
    context.close()


def no_csp_violation(page) -> None:
    assert page.evaluate("window.__csp || []") == []


def card(page, name: str) -> str:
    return page.locator(f"#card-{name}-n").inner_text()


def test_the_dashboard_follows_a_job_finishing_without_a_reload(operator, django_user_model):
    from playwright.sync_api import expect

    page = operator
    student = django_user_model.objects.create_user("carla", password="x")
    job = pipeline.submit_analysis(student, "reading.md", THESIS)

    page.goto("/admin/jobs/analysisjob/dashboard/")
    page.select_option("#dash-interval", "2")
    assert card(page, "queued") == "1" and card(page, "finished") == "0"
    assert card(page, "inflight") == "1"
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads

    Worker(once=True).drain()
    job.refresh_from_db()
    assert job.status == JobStatus.COMPLETE, job.error

    expect(page.locator("#card-finished-n")).to_have_text("1", timeout=WAIT_MS)
    expect(page.locator("#card-inflight-n")).to_have_text("0", timeout=WAIT_MS)
    assert card(page, "queued") == "0"
    # The finished job is a ghost within grace until a tab or the sweeper saves its run.
    expect(page.locator("#card-ghosts-within")).to_have_text("1")
    assert page.evaluate("window.__sameDocument") is True
    expect(page.locator("#dash-status")).to_contain_text("updated")
    no_csp_violation(page)


def test_pause_stops_the_refresh_and_is_kept_across_a_reload(operator, make_job):
    from playwright.sync_api import expect

    page = operator
    page.goto("/admin/jobs/analysisjob/dashboard/")
    page.select_option("#dash-interval", "2")
    page.click("#dash-pause")
    expect(page.locator("#dash-pause")).to_have_text("Resume")
    expect(page.locator("#dash-status")).to_have_text("Paused")
    rendered = page.locator("#dash-rendered").get_attribute("data-rendered")

    make_job(
        status=JobStatus.FAILED, error="Could not read the file: encrypted", failure_kind="input"
    )
    page.wait_for_timeout(5_000)  # two and a half intervals: nothing may change
    assert card(page, "failed") == "0"
    assert page.locator("#dash-rendered").get_attribute("data-rendered") == rendered

    # The pause and the interval survive a reload (localStorage).
    page.reload()
    expect(page.locator("#dash-pause")).to_have_text("Resume")
    assert page.locator("#dash-interval").input_value() == "2"
    assert card(page, "failed") == "1"  # the reload itself rendered it
    make_job(status=JobStatus.FAILED, error="Could not read the file: empty", failure_kind="input")
    page.wait_for_timeout(3_000)
    assert card(page, "failed") == "1"

    page.click("#dash-pause")  # resume: fetches at once
    expect(page.locator("#card-failed-n")).to_have_text("2", timeout=WAIT_MS)
    reasons = page.locator("#failed-reasons li")
    expect(reasons).to_have_count(1)
    expect(reasons.first).to_contain_text("Could not read the file")
    expect(reasons.first).to_contain_text("Unusable input")
    expect(reasons.first).to_contain_text("\N{MULTIPLICATION SIGN}2")
    no_csp_violation(page)


def test_ticked_ghosts_stay_ticked_across_refreshes_and_record_as_manual(operator, make_job):
    from playwright.sync_api import expect

    page = operator
    ghost = make_job(filename="closed-tab.md")
    old = timezone.now() - timedelta(minutes=30)
    AnalysisJob.objects.filter(pk=ghost.pk).update(updated_at=old, finished_at=old)
    page.goto("/admin/jobs/analysisjob/dashboard/")
    page.select_option("#dash-interval", "2")
    box = page.locator(f'input[name="job_ids"][value="{ghost.pk}"]')
    box.check()
    rendered = page.locator("#dash-rendered").get_attribute("data-rendered")
    expect(page.locator("#dash-rendered")).not_to_have_attribute(
        "data-rendered", rendered, timeout=WAIT_MS
    )
    expect(box).to_be_checked()  # a refresh happened, the tick stayed
    page.click("text=Record selected now")
    expect(page.locator(".messagelist")).to_contain_text("Record now: 1 written.")
    assert AnalysisRun.objects.get(pk=ghost.run_id).saved_by == "worker"
    expect(page.locator("#events-manual-hour")).to_have_text("1")
    page.click("#events-manual-hour")
    expect(page.locator("#result_list")).to_contain_text("manual: olga")
    no_csp_violation(page)


def test_the_instance_page_sends_a_signal_and_cancels(operator, live_server):
    from playwright.sync_api import expect

    page = operator
    flow = wait_for_signal("approval", timeout=3600).as_("approval") >> task(
        "tests.admin.test_console_browser.echo"
    )
    signalled, cancelled = start(flow, label="approval"), start(flow, label="approval")
    Worker(once=True).drain()

    page.goto(f"/admin/durable/instance/{signalled}/change/")
    controls = page.locator("#durable-controls").bounding_box()
    graph = page.locator("#durable-graph").bounding_box()
    assert controls["y"] < graph["y"] < page.locator(".field-input_json").bounding_box()["y"]
    assert page.locator("a.deletelink").count() == 0  # not finished: no Delete
    assert page.locator("#signal_name").input_value() == "approval"
    page.fill("#signal_data", '{"approved": true}')
    page.click("#durable-signal input[type=submit]")
    expect(page.locator(".messagelist")).to_contain_text("delivered to 1 waiting step")
    Worker(once=True).drain()
    assert status(signalled) == "completed"
    page.reload()
    expect(page.locator("#durable-controls")).to_contain_text("nothing left to control")
    expect(page.locator("a.deletelink")).to_be_visible()
    no_csp_violation(page)

    page.goto(f"/admin/durable/instance/{cancelled}/change/")
    page.click("#durable-cancel input[type=submit]")
    expect(page.locator(".messagelist")).to_contain_text("Cancelled")
    assert status(cancelled) == "cancelled"
    expect(page.locator("#instance-page")).to_have_attribute("data-status", "cancelled")
    # Its graph draws the wait as cancelled, and the styles apply (a static file, no inline style).
    node = page.locator('#durable-graph .durable-node[data-state="cancelled"]').first
    assert node.evaluate("e => getComputedStyle(e).borderLeftWidth") == "5px"
    no_csp_violation(page)


def test_the_runs_and_events_lists_read_at_1366_px(operator, make_job, make_run):
    page = operator
    for i in range(8):
        job = make_job(filename=f"a-rather-long-thesis-file-name-number-{i:02d}-final-v3.docx")
        make_run(job)
    for url in ("/admin/jobs/analysisrun/", "/admin/jobs/runevent/"):
        page.goto(url)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1366, f"{url} scrolls sideways: {width} px"
        no_csp_violation(page)
    page.goto("/admin/jobs/analysisrun/")
    ids = page.locator("#result_list td.field-short_id, #result_list th.field-short_id")
    assert ids.count() == 8
    for i in range(8):
        assert len(ids.nth(i).inner_text().strip()) == 8
    heights = page.evaluate(
        "[...document.querySelectorAll('#result_list tbody tr')].map(r => r.getBoundingClientRect().height)"
    )
    assert len(heights) == 8 and max(heights) < 40, heights  # one line each
