"""Admin registrations for the jobs app (the operator dashboard lives in jobs.dashboard)."""

from __future__ import annotations

from django.contrib import admin

from .models import AnalysisJob, AnalysisRun, JobCitation, RunEvent, SweeperHeartbeat


@admin.register(AnalysisJob)
class AnalysisJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "filename",
        "owner",
        "status",
        "progress_step",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status"]
    search_fields = ["filename", "owner__username"]
    exclude = ["upload", "library", "doc_html"]
    readonly_fields = ["run_id", "workflow_id", "results", "run_saved_at"]
    show_full_result_count = False


@admin.register(AnalysisRun)
class AnalysisRunAdmin(admin.ModelAdmin):
    list_display = ["id", "document", "owner", "status", "saved_by", "saved_at"]
    list_filter = ["saved_by", "status"]
    search_fields = ["document", "owner__username"]
    exclude = ["doc_html"]
    show_full_result_count = False


@admin.register(JobCitation)
class JobCitationAdmin(admin.ModelAdmin):
    list_display = ["job", "index", "text", "verdict"]
    list_filter = ["verdict"]
    show_full_result_count = False


@admin.register(SweeperHeartbeat)
class SweeperHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["name", "started_at", "last_tick_at", "last_backstop_at", "backstop_in_flight"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "kind", "job", "run_id", "writer", "lag_seconds", "sweeper"]
    list_filter = ["kind", "writer"]
    show_full_result_count = False
