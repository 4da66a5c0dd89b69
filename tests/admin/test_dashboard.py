"""The operations dashboard: who may see it, and every panel's numbers against prepared data."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from jobs import charts, dashboard
from jobs.models import AnalysisJob, AnalysisRun, JobStatus, RunEvent, RunEventKind, SavedBy
from jobs.runs import record_jobs, save_and_judge

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:jobs_analysisjob_dashboard"
WINDOW = timedelta(minutes=60)
GRACE = timedelta(seconds=120)


@pytest.fixture(autouse=True)
def _defaults(settings):
    settings.ACURIO_SWEEP_GRACE_SECONDS = 120
    settings.ACURIO_INFLIGHT_WINDOW_MINUTES = 60


# --- access --------------------------------------------------------------------------------


def test_staff_see_the_dashboard(staff_client):
    response = staff_client.get(reverse(DASHBOARD))
    assert response.status_code == 200
    assert b"Operations dashboard" in response.content
    # It extends the admin's base: the admin header and breadcrumbs are there.
    assert b'id="header"' in response.content
    assert b'class="breadcrumbs"' in response.content


def test_anonymous_is_sent_to_the_admin_login(client):
    response = client.get(reverse(DASHBOARD))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_non_staff_user_is_sent_to_the_admin_login(user_client):
    response = user_client.get(reverse(DASHBOARD))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_staff_without_job_permissions_get_403(client, django_user_model):
    clerk = django_user_model.objects.create_user("clerk", password="pw-clerk-123", is_staff=True)
    client.force_login(clerk)
    assert client.get(reverse(DASHBOARD)).status_code == 403


def test_view_only_staff_see_numbers_but_no_record_button(
    client, django_user_model, place_job, now
):
    viewer = django_user_model.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_analysisjob"))
    place_job(finished=now - timedelta(minutes=10))  # a ghost past grace
    client.force_login(viewer)
    response = client.get(reverse(DASHBOARD))
    assert response.status_code == 200
    assert b'id="card-ghosts-past">1<' in response.content
    assert b"record-form" not in response.content
    post = client.post(reverse("admin:jobs_analysisjob_dashboard_record"), {"all_past_grace": "1"})
    assert post.status_code == 403


def test_admin_index_links_the_dashboard(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert reverse(DASHBOARD).encode() in response.content


# --- in-flight window --------------------------------------------------------------------


def test_in_flight_window_lists_active_and_recently_finished_jobs(place_job, now):
    place_job(status=JobStatus.QUEUED, created=now - timedelta(minutes=5))
    place_job(
        status=JobStatus.RUNNING,
        created=now - timedelta(minutes=10),
        progress_step="verify",
        progress_done=3,
        progress_total=9,
    )
    # Active for longer than the window: still in flight.
    place_job(status=JobStatus.RUNNING, created=now - timedelta(hours=5))
    place_job(created=now - timedelta(minutes=40), finished=now - timedelta(minutes=30))
    place_job(
        status=JobStatus.FAILED,
        created=now - timedelta(minutes=70),
        finished=now - timedelta(minutes=59),
        error="Could not read the file",
    )
    place_job(created=now - timedelta(hours=3), finished=now - timedelta(hours=2))  # outside
    place_job(status=JobStatus.RUNNING, created=now, deleted_at=now)  # soft-deleted

    panel = dashboard.in_flight(now, WINDOW)

    assert panel["counts"] == {"queued": 1, "running": 2, "complete": 1, "failed": 1}
    assert panel["total"] == 5
    assert panel["window_minutes"] == 60
    rows = {(r["status"], r["age"]) for r in panel["rows"]}
    assert rows == {
        ("queued", "5 min"),
        ("running", "10 min"),
        ("running", "5 h 00 min"),
        ("complete", "30 min"),  # terminal jobs: age since they finished
        ("failed", "59 min"),
    }
    running = next(r for r in panel["rows"] if r["progress_step"])
    assert (running["progress_step"], running["progress_done"], running["progress_total"]) == (
        "verify",
        3,
        9,
    )
    assert not panel["truncated"]


def test_the_cards_count_queued_running_and_the_windows_finished_and_failed(
    staff_client, place_job, now
):
    """The "In flight now" card counts queued and running jobs only: finished jobs have their
    own cards, for the window."""
    place_job(status=JobStatus.QUEUED, created=now - timedelta(minutes=2))
    place_job(status=JobStatus.QUEUED, created=now - timedelta(hours=3))
    place_job(status=JobStatus.RUNNING, created=now - timedelta(minutes=1))
    for minutes in (5, 10, 15):
        place_job(
            created=now - timedelta(minutes=minutes + 1), finished=now - timedelta(minutes=minutes)
        )
    place_job(created=now - timedelta(hours=4), finished=now - timedelta(hours=3))  # outside
    place_job(
        status=JobStatus.FAILED,
        finished=now - timedelta(minutes=4),
        error="Could not read the file: it is encrypted",
        failure_kind="input",
    )

    panel = dashboard.in_flight(now, WINDOW)
    assert panel["active"] == 3
    assert panel["counts"] == {"queued": 2, "running": 1, "complete": 3, "failed": 1}

    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="card-inflight-n">3<' in content
    assert 'id="card-queued-n">2<' in content
    assert 'id="card-running-n">1<' in content
    assert 'id="card-finished-n">3<' in content
    assert 'id="card-failed-n">1<' in content


def test_the_failed_card_lists_the_top_reasons_with_whose_failure_it_was(
    staff_client, place_job, now
):
    def failed(error, kind, minutes=5, **fields):
        return place_job(
            status=JobStatus.FAILED,
            finished=now - timedelta(minutes=minutes),
            error=error,
            failure_kind=kind,
            **fields,
        )

    for name in ("a", "b", "c"):
        failed(f"Could not read the file: {name}.pdf is encrypted", "input")
    failed("The analysis stopped because of an internal error", "internal")
    failed("The analysis stopped because of an internal error", "internal")
    failed("The analysis was cancelled by an operator. Use Re-analyse", "cancelled")
    failed("Could not read the file: old", "input", minutes=90)  # outside the window
    failed("Could not read the file: gone", "input", deleted_at=now)  # soft-deleted

    panel = dashboard.failure_reasons(now, WINDOW, limit=2)

    assert panel["total"] == 6
    assert [(r["reason"], r["failure_kind"], r["n"]) for r in panel["rows"]] == [
        ("Could not read the file", "input", 3),
        ("The analysis stopped because of an internal error", "internal", 2),
    ]
    assert panel["rows"][0]["kind_label"] == "Unusable input"
    assert panel["more"] == 1

    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="card-failed-n">6<' in content
    assert 'id="failed-reasons"' in content
    assert "Cancelled by an operator" in content
    # Each reason links to the failed jobs it counts.
    link = re.search(r'href="([^"]*reason=Could%20not%20read%20the%20file[^"]*)"', content)
    listed = staff_client.get(link.group(1).replace("&amp;", "&")).context["cl"]
    assert listed.result_count == 3


def test_the_panels_endpoint_returns_the_panels_alone(staff_client, place_job, now):
    place_job(status=JobStatus.RUNNING, created=now - timedelta(minutes=1))
    response = staff_client.get(reverse("admin:jobs_analysisjob_dashboard_panels"))
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]
    content = response.content.decode()
    assert 'id="card-inflight-n">1<' in content
    assert "<html" not in content and "<body" not in content  # a fragment, not a page
    assert 'id="dash-rendered"' in content


def test_the_panels_endpoint_needs_the_dashboards_permission(client, user_client):
    url = reverse("admin:jobs_analysisjob_dashboard_panels")
    assert client.get(url).status_code == 302  # to the admin's sign-in
    assert user_client.get(url).status_code == 302


def test_the_page_links_its_controls_and_script(staff_client):
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="dash-pause"' in content and 'id="dash-interval"' in content
    assert "acurio/dashboard.js" in content
    assert reverse("admin:jobs_analysisjob_dashboard_panels") in content


def test_in_flight_list_is_limited_and_says_so(place_job, now):
    for _ in range(4):
        place_job(status=JobStatus.QUEUED, created=now)
    panel = dashboard.in_flight(now, WINDOW, limit=3)
    assert panel["total"] == 4
    assert len(panel["rows"]) == 3
    assert panel["truncated"]


# --- ghosts --------------------------------------------------------------------------------


@pytest.fixture
def ghost_world(place_job, make_run, now):
    """Three ghosts (one within grace, two past it, one of those outside the window) and
    five jobs that look similar but are not ghosts."""
    g_within = place_job(finished=now - timedelta(seconds=30))
    g_past = place_job(status=JobStatus.FAILED, finished=now - timedelta(minutes=10))
    g_old = place_job(finished=now - timedelta(days=3))
    saved = place_job(finished=now - timedelta(hours=1))
    make_run(saved)
    place_job(finished=now - timedelta(hours=4), doc_html=None)  # trimmed: nothing to record
    place_job(finished=now - timedelta(hours=4), results={})  # no verdicts
    place_job(finished=now - timedelta(hours=4), deleted_at=now)  # soft-deleted
    place_job(status=JobStatus.RUNNING, created=now - timedelta(hours=4))
    return g_within, g_past, g_old


def test_ghosts_at_any_age_split_within_and_past_grace(ghost_world, now):
    g_within, g_past, g_old = ghost_world
    panel = dashboard.ghosts(now, GRACE, WINDOW)

    assert panel["total"] == 3
    assert panel["within_grace"] == 1
    assert panel["past_grace"] == 2
    assert panel["outside_window"] == 1
    assert panel["oldest_within_seconds"] == 30
    assert panel["oldest_within"] == "30 s"
    assert panel["oldest_past_seconds"] == 3 * 86400
    assert panel["oldest_past"] == "3 d 0 h"
    # Oldest first, flagged like the backstop would judge them.
    assert [r["id"] for r in panel["rows"]] == [g_old.pk, g_past.pk, g_within.pk]
    flags = {r["id"]: (r["past_grace"], r["in_window"]) for r in panel["rows"]}
    assert flags == {
        g_old.pk: (True, False),
        g_past.pk: (True, True),
        g_within.pk: (False, True),
    }


def test_grace_is_judged_by_updated_at_like_the_backstop(place_job, now):
    # Finished long ago but touched 30 s ago: a tab may still save it.
    place_job(finished=now - timedelta(hours=2), updated=now - timedelta(seconds=30))
    panel = dashboard.ghosts(now, GRACE, WINDOW)
    assert (panel["within_grace"], panel["past_grace"]) == (1, 0)
    assert panel["oldest_within"] == "2 h 00 min"  # the age is since it finished


def test_no_ghosts_gives_zeros_and_dashes(now):
    panel = dashboard.ghosts(now, GRACE, WINDOW)
    assert (panel["total"], panel["within_grace"], panel["past_grace"]) == (0, 0, 0)
    assert panel["oldest_past"] == "—"


def test_dashboard_page_shows_the_ghost_split(staff_client, ghost_world, now):
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="card-ghosts-within">1<' in content
    assert 'id="card-ghosts-past">2<' in content
    for job in ghost_world:
        assert f'name="job_ids" value="{job.pk}"' in content
    assert "3 d 0 h" in content


# --- sweeper health ------------------------------------------------------------------------


def test_sweeper_states_and_backstop_in_flight(heartbeat, now):
    heartbeat("a:1", tick_age=20, now=now, backstop_in_flight=True)
    heartbeat("b:2", tick_age=100, now=now)  # missed 3 ticks of 30 s: gone (killed?)
    heartbeat("c:3", tick_age=3600, now=now, stopped_at=now - timedelta(hours=1))
    heartbeat("d:4", tick_age=9 * 86400, now=now, stopped_at=now - timedelta(days=3))  # gone
    heartbeat("e:5", tick_age=90, now=now)  # exactly 3 ticks: still alive

    panel = dashboard.sweepers(now)

    states = {r["name"]: r["state"] for r in panel["rows"]}
    assert states == {"a:1": "alive", "b:2": "gone", "c:3": "stopped", "e:5": "alive"}
    # A gone row is deleted by the sweepers after EXPIRY_TICKS (20) of its ticks of silence.
    b = next(r for r in panel["rows"] if r["name"] == "b:2")
    assert b["expires_in"] == "8 min"  # 20 ticks of 30 s, less the 100 s gone: 500 s
    assert b["overdue"] is False
    assert panel["alive"] == 2
    assert panel["banner"] is False
    assert panel["backstop_in_flight"] is True
    a = next(r for r in panel["rows"] if r["name"] == "a:1")
    assert a["last_tick_age"] == "20 s"


def test_a_stale_heartbeat_raises_the_red_banner(staff_client, heartbeat, now):
    # Its own tick is 5 s: 16 s without a tick is more than 3 missed ticks.
    heartbeat("host:7", tick_age=16, now=now, tick=5, backstop_in_flight=True)
    panel = dashboard.sweepers(now)
    assert panel["banner"] is True
    assert panel["backstop_in_flight"] is False  # a dead sweeper's flag means nothing
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="sweeper-banner"' in content
    assert "No sweeper has ticked for 3 ticks" in content
    assert "16 s ago" in content


def test_no_banner_while_a_sweeper_ticks(staff_client, heartbeat, now):
    heartbeat("host:8", tick_age=5, now=now)
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert 'id="sweeper-banner"' not in content


def test_banner_when_no_sweeper_ever_reported(staff_client, now):
    assert dashboard.sweepers(now)["banner"] is True
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert "No sweeper has ever reported a heartbeat" in content


def test_banner_when_every_sweeper_has_stopped(heartbeat, now):
    heartbeat("host:9", tick_age=1, now=now, stopped_at=now)
    assert dashboard.sweepers(now)["banner"] is True


# --- sweeper work: counts and lag -------------------------------------------------------


@pytest.fixture
def events_world(event, now):
    for minutes, lag in ((10, 10), (20, 20), (30, 30), (50, 100)):
        event(RunEventKind.RECORDED, now - timedelta(minutes=minutes), lag=lag)
    event(RunEventKind.RECORDED, now - timedelta(hours=5), lag=500)
    event(RunEventKind.RECORDED, now - timedelta(days=2), lag=9999)  # older than a day
    event(RunEventKind.JUDGED, now - timedelta(minutes=1))
    event(RunEventKind.JUDGED, now - timedelta(minutes=59))
    event(RunEventKind.JUDGED, now - timedelta(hours=10))
    event(RunEventKind.TRIMMED, now - timedelta(hours=3))


def test_recorded_judged_trimmed_last_hour_and_day(events_world, now):
    counts = dashboard.event_counts(now)
    assert {k: (v["hour"], v["day"]) for k, v in counts.items()} == {
        "recorded": (4, 5),
        "judged": (2, 3),
        "trimmed": (0, 1),
    }


def test_lag_median_and_max_come_from_sql(events_world, now):
    lag = dashboard.recording_lag(now)
    assert lag["median_hour"] == pytest.approx(25)  # of 10, 20, 30, 100
    assert lag["max_hour"] == 100
    assert lag["median_day"] == pytest.approx(30)  # of 10, 20, 30, 100, 500
    assert lag["max_day"] == 500
    assert (lag["n_hour"], lag["n_day"]) == (4, 5)
    assert lag["max_day_text"] == "8 min"


def test_lag_without_events_is_a_dash(now):
    lag = dashboard.recording_lag(now)
    assert lag["median_day"] is None
    assert lag["median_day_text"] == "—"


def test_dashboard_page_shows_the_counts(staff_client, events_world, now):
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert re.search(r'id="events-recorded-hour" href="[^"]*">4<', content)
    assert re.search(r'id="events-recorded-day" href="[^"]*">5<', content)
    assert re.search(r'id="events-judged-day" href="[^"]*">3<', content)
    assert 'id="card-lag">30 s<' in content


def test_each_counter_links_to_a_list_of_the_same_number(
    staff_client, event, now, django_user_model
):
    """The sweeper-work counters and the events list they link to count the same rows."""
    for minutes in (10, 70, 200):
        event(RunEventKind.JUDGED, now - timedelta(minutes=minutes), sweeper="")
    event(RunEventKind.RECORDED, now - timedelta(minutes=5), operator="olivia", sweeper="")
    # A manual record from before RunEvent.operator: the operator was named as the sweeper.
    event(RunEventKind.RECORDED, now - timedelta(minutes=7), sweeper="admin:oskar")
    event(RunEventKind.RECORDED, now - timedelta(minutes=6))
    event(RunEventKind.RECORDED, now - timedelta(hours=30))  # older than a day
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    checked = 0
    for key in (
        "judged-hour",
        "judged-day",
        "recorded-hour",
        "recorded-day",
        "manual-hour",
        "manual-day",
    ):
        href, shown = re.search(rf'id="events-{key}" href="([^"]*)">(\d+)<', content).groups()
        listed = staff_client.get(href.replace("&amp;", "&")).context["cl"]
        assert listed.result_count == int(shown), key
        checked += 1
    assert checked == 6
    counts = dashboard.event_counts(now)
    assert (counts["judged"]["hour"], counts["judged"]["day"]) == (1, 3)
    assert (counts["recorded"]["manual_hour"], counts["recorded"]["manual_day"]) == (2, 2)
    assert (counts["recorded"]["hour"], counts["recorded"]["day"]) == (3, 3)


def test_percentile_rejects_a_fraction_outside_0_1():
    with pytest.raises(ValueError, match="fraction"):
        dashboard.PercentileCont("lag_seconds", 1.5)


# --- writers -------------------------------------------------------------------------------


def test_writers_per_day_count_client_worker_and_legacy_null(place_job, make_run, now):
    today = now - timedelta(hours=1)
    for saved_by in ("client", "client", "worker", None):
        make_run(place_job(finished=today), saved_by=saved_by, saved_at=today)
    yesterday = now.replace(hour=0) - timedelta(hours=1)  # 23:20 the day before
    for _ in range(2):
        make_run(place_job(finished=yesterday), saved_by="worker", saved_at=yesterday)
    first_day = now.replace(hour=0, minute=30) - timedelta(days=6)
    make_run(place_job(finished=first_day), saved_by=None, saved_at=first_day)
    too_old = now.replace(hour=0, minute=0) - timedelta(days=6, minutes=1)
    make_run(place_job(finished=too_old), saved_by="client", saved_at=too_old)

    rows = dashboard.writers_per_day(now)

    assert len(rows) == 7
    by_day = {r["day"]: (r["client"], r["worker"], r["legacy"], r["total"]) for r in rows}
    assert rows[0]["day"] == date(2026, 6, 10)  # newest first
    assert by_day[date(2026, 6, 10)] == (2, 1, 1, 4)
    assert by_day[date(2026, 6, 9)] == (0, 2, 0, 2)
    assert by_day[date(2026, 6, 4)] == (0, 0, 1, 1)
    assert by_day[date(2026, 6, 5)] == (0, 0, 0, 0)
    assert date(2026, 6, 3) not in by_day


# --- hourly charts -------------------------------------------------------------------------


def test_hourly_series_over_48_hours(place_job, make_run, event, now):
    at = now.replace(minute=0)  # 12:00 today
    ghost = place_job(finished=at - timedelta(minutes=50))  # 11:10, never saved
    for minutes in (40, 30):
        make_run(place_job(finished=at - timedelta(minutes=minutes)))
    make_run(place_job(finished=at + timedelta(minutes=5)))
    first_hour = at - timedelta(hours=47)
    make_run(place_job(finished=first_hour + timedelta(minutes=10)))
    make_run(place_job(finished=first_hour - timedelta(minutes=10)))  # one hour too old
    event(RunEventKind.RECORDED, at - timedelta(minutes=20), lag=5)
    event(RunEventKind.RECORDED, at - timedelta(minutes=15), lag=5, sweeper="admin:olivia")
    event(RunEventKind.RECORDED, at - timedelta(minutes=115), lag=5)

    series = dashboard.hourly_series(now)

    for points in series.values():
        assert len(points) == 48
        assert points[0][0] == first_hour
        assert points[-1][0] == at
    finished = dict(series["finished"])
    assert finished[at - timedelta(hours=1)] == 3
    assert finished[at] == 1
    assert finished[first_hour] == 1
    assert sum(finished.values()) == 5
    assert dict(series["ghosts"]) == {
        h: (1 if h == at - timedelta(hours=1) else 0) for h, _ in series["ghosts"]
    }
    assert ghost.pk in AnalysisJob.objects.ghosts().values_list("pk", flat=True)
    recorded = dict(series["recorded"])
    # The admin's own "record now" is not the sweeper's work.
    assert recorded[at - timedelta(hours=1)] == 1
    assert recorded[at - timedelta(hours=2)] == 1
    assert sum(recorded.values()) == 2


@pytest.mark.parametrize(
    ("peak", "axis"), [(0, 1), (1, 1), (3, 5), (7, 10), (11, 20), (250, 500), (1000, 1000)]
)
def test_axis_maximum_is_a_round_number(peak, axis):
    assert charts._nice_ceiling(peak) == axis


def test_bar_chart_geometry(now):
    hours = [now.replace(hour=h, minute=0) for h in range(4, 8)]
    chart = charts.bar_chart("t", list(zip(hours, [0, 7, 3, 5], strict=True)), css_class="x")
    plot_h = chart.plot_bottom - chart.plot_top
    heights = [b["h"] for b in chart.bars]
    assert heights == [
        0,
        pytest.approx(plot_h * 0.7, abs=0.01),
        pytest.approx(plot_h * 0.3, abs=0.01),
        pytest.approx(plot_h * 0.5, abs=0.01),
    ]
    assert all(b["y"] + b["h"] == pytest.approx(chart.plot_bottom, abs=0.02) for b in chart.bars)
    assert [t["label"] for t in chart.ticks] == ["06:00"]
    assert [g["label"] for g in chart.gridlines] == ["0", "5", "10"]
    assert (chart.total, chart.peak) == (15, 7)


def test_dashboard_page_draws_three_svg_charts(staff_client, place_job, now):
    place_job(finished=now - timedelta(minutes=5))
    page = staff_client.get(reverse(DASHBOARD)).content.decode()
    # The admin's own icons are SVG too: look inside the dashboard's content only.
    content = page.split('id="content-main"')[1].split("<!-- END SVGs -->")[0]
    assert content.count("<svg viewBox") == 3
    assert len(re.findall(r"<rect ", content)) == 3 * 48
    assert "<script" not in content  # no chart library
    # One finished job this hour; its bar fills the chart (axis max 1).
    assert "Finished jobs per hour" in content
    assert "1 in 48 h" in content


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (-3, "0 s"),
        (59, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h 00 min"),
        (90061, "1 d 1 h"),
    ],
)
def test_format_age(seconds, text):
    assert dashboard.format_age(seconds) == text


# --- every query has an index to use --------------------------------------------------------

BIG_TABLES = ("jobs_analysisjob", "jobs_analysisrun", "jobs_runevent")


def test_every_dashboard_query_on_a_big_table_can_be_served_by_an_index(
    staff_client, ghost_world, events_world, heartbeat, now
):
    """With sequential scans priced out, no dashboard query on the big tables may still need
    one: each has an index that serves it. (bench/dashboard_bench.py --explain shows the
    plans PostgreSQL actually picks on 1,000,000 jobs.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    heartbeat("host:1", tick_age=5, now=now)
    with CaptureQueriesContext(connection) as ctx:
        assert staff_client.get(reverse(DASHBOARD)).status_code == 200
    checked = 0
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for query in ctx.captured_queries:
            sql = query["sql"].strip()
            if not sql.startswith("SELECT") or not any(t in sql for t in BIG_TABLES):
                continue
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            for table in BIG_TABLES:
                assert f"Seq Scan on {table}" not in plan, f"{sql}\n{plan}"
            checked += 1
    # finished/ghosts/recorded per hour, in-flight counts + rows, failure reasons, ghost
    # split + rows, events, lag, writers' totals + non-client rows
    assert checked == 12


def test_small_axes_draw_only_whole_number_gridlines(now):
    hours = [now.replace(hour=h, minute=0) for h in range(4, 6)]
    chart = charts.bar_chart("t", list(zip(hours, [1, 0], strict=True)), css_class="x")
    assert [g["label"] for g in chart.gridlines] == ["0", "1"]


def test_the_page_follows_the_window_and_grace_settings(settings, place_job, now):
    settings.ACURIO_INFLIGHT_WINDOW_MINUTES = 10
    settings.ACURIO_SWEEP_GRACE_SECONDS = 900
    place_job(finished=now - timedelta(minutes=5))  # in the window, within grace
    place_job(finished=now - timedelta(minutes=12))  # outside the window, within grace
    place_job(finished=now - timedelta(minutes=20))  # outside the window, past grace

    data = dashboard.build_dashboard(now)

    assert data["in_flight"]["window_minutes"] == 10
    assert data["in_flight"]["total"] == 1
    assert (data["ghosts"]["within_grace"], data["ghosts"]["past_grace"]) == (2, 1)
    assert data["ghosts"]["outside_window"] == 2


def test_the_heartbeat_list_says_which_sweepers_are_gone(staff_client, heartbeat, now):
    heartbeat("alive:1", tick_age=10, now=now)
    heartbeat("killed:2", tick_age=400, now=now)
    heartbeat("long-dead:3", tick_age=900, now=now)  # past its 20 ticks: due for deletion
    dash = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert "row removed in 3 min" in dash
    assert "row removed at a sweeper's next tick" in dash
    page = staff_client.get(reverse("admin:jobs_sweeperheartbeat_changelist")).content.decode()
    assert re.search(r"alive:1</a></th><td class=\"field-state\">alive<", page)
    assert re.search(r"killed:2</a></th><td class=\"field-state\">gone<", page)


def test_every_judgment_counts_as_judged_whoever_saved_the_run(staff_client, make_job):
    """A tab's save is judged at once, not by the judge backstop: its judgment is counted too
    (the dashboard used to say "judged 0/0" while every run was judged)."""
    tab = make_job()
    save_and_judge(AnalysisJob.objects.filter(pk=tab.pk), SavedBy.CLIENT)
    closed = make_job()
    record_jobs([closed.pk], sweeper_name="host:1")
    assert not AnalysisRun.objects.unjudged().exists()

    counts = dashboard.event_counts(timezone.now())
    assert (counts["judged"]["hour"], counts["recorded"]["hour"]) == (2, 1)
    judged = RunEvent.objects.filter(kind=RunEventKind.JUDGED)
    assert {e.details["source"] for e in judged} == {"save", "sweeper"}
    content = staff_client.get(reverse(DASHBOARD)).content.decode()
    assert re.search(r'id="card-judged">judged 2/2 ', content)
