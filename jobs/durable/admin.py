"""Admin of the durable engine: the instance list and an instance page that draws its graph.

The list filters by status, label and owner and never counts the whole table
(``show_full_result_count = False``); it defers the JSON columns (graph, input, result), which
may be large, since no list column needs them. The instance page draws the stored graph as
nested boxes coloured by each node's state (``explain()``'s data: one query for the instance,
one for its steps), server-rendered, no JavaScript, and lists the instance's open waits (until
when, for which signal: ``inspection.waits()``, one query).

Actions: *cancel* and *signal* (an intermediate page asks for the signal's name and JSON data).
They need the ``durable.change_instance`` permission (the page itself stays read-only) and act
only on instances the user may see (staff: all).
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.durable.api import cancel, signal
from jobs.durable.errors import DurableError
from jobs.durable.graph import NAME_RE, iter_spec
from jobs.durable.inspection import explain, waits
from jobs.durable.models import Instance
from jobs.durable.permissions import can_see


class SignalForm(forms.Form):
    name = forms.RegexField(
        regex=NAME_RE,
        max_length=100,
        help_text="the name a wait_for_signal() step waits for",
    )
    data = forms.JSONField(required=False, help_text='JSON, e.g. {"approved": true}')


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
        "waits_view",
        "graph_view",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Instance]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("graph", "input", "result")
        return qs

    actions = ["cancel_instances", "signal_instances"]

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

    @admin.display(description="waits")
    def waits_view(self, obj: Instance) -> SafeString:
        open_waits = waits(obj.id)
        if not open_waits:
            return format_html("<span>{}</span>", "none")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    w["label"],
                    w["signal"] or "its time",
                    w["until"].isoformat(sep=" ", timespec="seconds")
                    if w["until"]
                    else "no timeout",
                    "received, waiting for a worker" if w["signalled"] else "",
                )
                for w in open_waits
            ),
        )
        return format_html(
            "<table><thead><tr><th>step</th><th>waits for</th><th>until</th><th>signal</th>"
            "</tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    # --- actions --------------------------------------------------------------------------------
    def has_control_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("durable.change_instance")

    def _controllable(self, request: HttpRequest, queryset: QuerySet[Instance]) -> list[Instance]:
        return [
            i
            for i in queryset.defer("graph", "input", "result")
            if can_see(request.user, i.owner_id)
        ]

    @admin.action(description="Cancel selected instances", permissions=["control"])
    def cancel_instances(self, request: HttpRequest, queryset: QuerySet[Instance]) -> None:
        done = skipped = 0
        for instance in self._controllable(request, queryset):
            # One transaction per instance (cancel() opens its own): one cannot undo another.
            if cancel(instance.id):
                done += 1
            else:
                skipped += 1
        self.message_user(request, f"Cancelled {done} instance(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request, f"{skipped} had already finished; left as they were.", messages.WARNING
            )

    @admin.action(description="Send a signal to selected instances", permissions=["control"])
    def signal_instances(self, request: HttpRequest, queryset: QuerySet[Instance]):
        instances = self._controllable(request, queryset)
        if "apply" in request.POST:
            form = SignalForm(request.POST)
            if form.is_valid():
                self._send_signals(request, instances, form.cleaned_data)
                return None  # back to the change list, with the messages
        else:
            form = SignalForm(initial={"name": self._awaited_name(queryset)})
        context = {
            **self.admin_site.each_context(request),
            "title": "Send a signal",
            "opts": self.model._meta,
            "form": form,
            "instances": instances,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "durable/signal_action.html", context)

    def _send_signals(self, request: HttpRequest, instances: list[Instance], data: dict) -> None:
        delivered = kept = 0
        for instance in instances:
            try:
                if signal(instance.id, data["name"], data["data"]):
                    delivered += 1
                else:
                    kept += 1
            except DurableError as exc:
                self.message_user(request, str(exc), messages.ERROR)
        if delivered or kept:
            self.message_user(
                request,
                f"Signal {data['name']!r}: delivered to {delivered} waiting step(s),"
                f" kept for {kept} instance(s) not waiting yet.",
                messages.SUCCESS,
            )

    @staticmethod
    def _awaited_name(queryset: QuerySet[Instance]) -> str:
        """The first signal name the selected workflows wait for (a helpful default)."""
        for graph in queryset.values_list("graph", flat=True)[:20]:
            for node in iter_spec(graph):
                if node["kind"] == "wait_for_signal":
                    return node["signal"]
        return ""
