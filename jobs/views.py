"""Views of the jobs app: the user's pages and the JSON API."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.utils import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from .models import AnalysisRun, SweeperHeartbeat


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    """Every run of the signed-in user, whichever writer saved it."""
    runs = (
        AnalysisRun.objects.owned_by(request.user)
        .only("id", "document", "status", "saved_by", "saved_at", "report")
        .order_by("-saved_at")[:200]
    )
    return render(request, "jobs/runs_list.html", {"runs": runs})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Database reachable, and the age of the last sweeper tick (seconds, or null)."""
    body: dict = {"database": False, "sweeper_last_tick_age": None}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        body["database"] = True
        last = (
            SweeperHeartbeat.objects.filter(last_tick_at__isnull=False)
            .order_by("-last_tick_at")
            .values_list("last_tick_at", flat=True)
            .first()
        )
        if last is not None:
            body["sweeper_last_tick_age"] = round((timezone.now() - last).total_seconds(), 1)
    except DatabaseError as exc:
        body["error"] = str(exc).strip().splitlines()[0] if str(exc).strip() else "database error"
        return JsonResponse(body, status=503)
    return JsonResponse(body)


@login_required
@require_GET
def run_report(request: HttpRequest, run_id) -> HttpResponse:
    """The HTML report of one run (the full report page arrives with the pipeline)."""
    from django.shortcuts import get_object_or_404

    run = get_object_or_404(AnalysisRun.objects.owned_by(request.user), pk=run_id)
    return render(request, "jobs/run_report.html", {"run": run})
