"""Admin of the durable engine: the instance list and an instance page that draws its graph.

The list filters by status, label and owner and never counts the whole table
(``show_full_result_count = False``); it defers the JSON columns (graph, input, result), which
may be large, since no list column needs them. The instance page draws the stored graph as
nested boxes coloured by each node's state (``explain()``'s data: one query for the instance,
one for its steps), server-rendered, no JavaScript.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs.durable.api import explain
from jobs.durable.models import Instance


class LabelFilter(admin.SimpleListFilter):
    title = "label"
    parameter_name = "label"

    def lookups(self, request, model_admin):
        # SELECT DISTINCT label: read from the durable_inst_label index, which leads with it.
        labels = Instance.objects.order_by("label").values_list("label", flat=True).distinct()[:100]
        return [(label, label or "(none)") for label in labels]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        return queryset.filter(label=self.value())


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ("short_id", "label", "owner", "status_badge", "created_at", "finished_at")
    list_filter = ("status", LabelFilter, ("owner", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("owner",)
    search_fields = ("=id", "label")
    ordering = ("-created_at",)
    show_full_result_count = False
    list_per_page = 50
    fields = (
        "id",
        "label",
        "owner",
        "status",
        "error",
        "on_failure",
        "created_at",
        "started_at",
        "finished_at",
        "input_json",
        "result_json",
        "graph_view",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Instance]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("graph", "input", "result")
        return qs

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # instances are started by code (start()), never typed in

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Read-only page: viewing needs the view permission only.
        return False

    @admin.display(description="id", ordering="id")
    def short_id(self, obj: Instance) -> str:
        return str(obj.id)[:8]

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Instance) -> SafeString:
        return format_html(
            '<span class="durable-state durable-{}">{}</span>', obj.status, obj.status
        )

    @admin.display(description="input")
    def input_json(self, obj: Instance) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(obj.input, indent=2, ensure_ascii=False))

    @admin.display(description="result")
    def result_json(self, obj: Instance) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(obj.result, indent=2, ensure_ascii=False))

    @admin.display(description="graph")
    def graph_view(self, obj: Instance) -> SafeString:
        return render_to_string("durable/graph.html", {"explained": explain(obj.id)})
