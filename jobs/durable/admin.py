"""Admin of the durable engine: the instance list and an instance page that draws its graph.

The list filters by status, label and owner and never counts the whole table
(``show_full_result_count = False``); it defers the JSON columns (graph, input, result), which
may be large, since no list column needs them.

The instance page leads with what an operator came for: its controls (*Cancel*, *Send a
signal*, and *Resume* / *Retry* when the engine offers them — ``jobs.durable`` exports the
verb), then the stored graph as nested boxes coloured by each node's state (``explain()``'s
data: one query for the instance, one for its steps), the steps' errors, and the open waits
(``inspection.waits()``); the instance's fields follow. Server-rendered, no JavaScript, its
stylesheet in ``static/durable/admin.css`` (the site's Content-Security-Policy allows no
inline style). *Delete* is offered only for finished instances: deleting a running one would
pull its steps from under a worker.

The controls post to ``<id>/control/``; list actions do the same for a selection (the signal
action asks for the name and JSON data on an intermediate page). They need the
``durable.change_instance`` permission (the fields stay read-only) and act only on instances
the user may see (staff: all).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

import jobs.durable as durable_api
from jobs.durable import lifecycle
from jobs.durable.api import cancel, signal
from jobs.durable.errors import DurableError
from jobs.durable.graph import NAME_RE, iter_spec
from jobs.durable.inspection import explain, waits
from jobs.durable.models import INSTANCE_FINISHED, Instance, InstanceStatus, Step
from jobs.durable.permissions import can_see

# Verbs the instance page offers when the engine exports them (``jobs.durable.<verb>(id)``):
# the button, what the message says after it, the statuses they apply to.
OPTIONAL_VERBS = {
    "resume": ("Resume", "Resumed", (InstanceStatus.FAILED, InstanceStatus.CANCELLED)),
    "retry": ("Retry", "Retried", (InstanceStatus.FAILED,)),
}


def offered_verbs() -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """The optional verbs this engine offers: the ones ``jobs.durable`` exports."""
    return {verb: spec for verb, spec in OPTIONAL_VERBS.items() if verb in durable_api.__all__}


def step_errors(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of an explained graph that carries an error (or logged failed attempts and
    lost leases), in graph order."""
    found = []
    if node.get("error") or node.get("attempt_log"):
        found.append(node)
    for child in node.get("children", ()):
        found.extend(step_errors(child))
    return found


def versions_in_flight() -> list[dict[str, Any]]:
    """The code versions of unfinished instances (the version that started them) with their
    counts, most first: more than one means a deploy is mixing versions (two small queries on
    indexed columns of unfinished rows)."""
    counts = (
        Instance.objects.unfinished()
        .values("code_version")
        .annotate(instances=Count("id"))
        .order_by("-instances")
    )
    running = dict(
        Step.objects.filter(status="running", lease_expires_at__isnull=False)
        .values_list("code_version")
        .annotate(n=Count("id"))
    )
    rows = [
        {"version": row["code_version"] or "(unknown)", "instances": row["instances"],
         "running_steps": running.pop(row["code_version"], 0)}
        for row in counts
    ]  # fmt: skip
    rows += [
        {"version": v or "(unknown)", "instances": 0, "running_steps": n}
        for v, n in running.items()
    ]
    return rows


class SignalForm(forms.Form):
    name = forms.RegexField(
        regex=NAME_RE,
        max_length=100,
        help_text="the name a wait_for_signal() step waits for",
    )
    data = forms.JSONField(required=False, help_text='JSON, e.g. {"approved": true}')


class ForkForm(forms.Form):
    from_step = forms.CharField(
        max_length=100, help_text="a result name (given with .as_()) or a task's function name"
    )


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
    )
    readonly_fields = fields
    # The controls, the graph and the waits come first (durable/instance_change_form.html).
    change_form_template = "durable/instance_change_form.html"
    change_list_template = "durable/instance_change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Instance]:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("graph", "input", "result")
        return qs

    actions = [
        "cancel_instances",
        "signal_instances",
        "resume_instances",
        "fork_instances",
        "cancel_in_bulk",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # instances are started by code (start()), never typed in

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Read-only page: viewing needs the view permission only.
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        # Only a finished instance may be deleted: a running one's steps may be in a worker's
        # hands. Without an object (the list's bulk delete) nothing is offered: purge() is the
        # tool for many.
        if obj is None or not obj.finished:
            return False
        return super().has_delete_permission(request, obj)

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

    # --- the instance page -----------------------------------------------------------------

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        instance = self.get_object(request, unquote(object_id))
        if instance is not None and self.has_view_permission(request, instance):
            extra_context = {**(extra_context or {}), **self.page_context(request, instance)}
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        extra_context = {**(extra_context or {}), "versions_in_flight": versions_in_flight()}
        return super().changelist_view(request, extra_context)

    def page_context(self, request: HttpRequest, instance: Instance) -> dict[str, Any]:
        """The page's controls, graph, step errors and waits (three small queries)."""
        explained = explain(instance.id)
        open_waits = waits(instance.id)
        awaited = next((w["signal"] for w in open_waits if w["signal"]), "")
        control = self.has_control_permission(request) and can_see(request.user, instance.owner_id)
        finished = instance.status in INSTANCE_FINISHED
        verbs = [
            {"verb": verb, "label": label}
            for verb, (label, _done, statuses) in offered_verbs().items()
            if instance.status in statuses
        ]
        return {
            "explained": explained,
            "step_errors": step_errors(explained["graph"]),
            "code_version": instance.code_version,
            "open_waits": open_waits,
            "control": control,
            "can_cancel": control and not finished,
            "can_signal": control and not finished,
            "verbs": verbs if control else [],
            "signal_form": SignalForm(initial={"name": awaited}, auto_id="signal_%s"),
            "control_url": reverse("admin:durable_instance_control", args=[quote(instance.pk)]),
        }

    def get_urls(self):
        return [
            path(
                "<path:object_id>/control/",
                self.admin_site.admin_view(self.control_view),
                name="durable_instance_control",
            ),
            *super().get_urls(),
        ]

    def control_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The instance page's buttons: cancel, signal, or an optional verb; back to the page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        instance = self.get_object(request, unquote(object_id))
        if instance is None:
            raise Http404("no such workflow instance")
        if not (self.has_control_permission(request) and can_see(request.user, instance.owner_id)):
            raise PermissionDenied
        verb = request.POST.get("verb", "")
        optional = offered_verbs()
        if verb == "cancel":
            if cancel(instance.id):
                self.message_user(request, f"Cancelled {instance}.", messages.SUCCESS)
            else:
                self.message_user(
                    request, "It had already finished; left as it was.", messages.WARNING
                )
        elif verb == "signal":
            form = SignalForm(request.POST)
            if form.is_valid():
                self._send_signals(request, [instance], form.cleaned_data)
            else:
                problems = "; ".join(
                    f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()
                )
                self.message_user(request, f"No signal sent: {problems}", messages.ERROR)
        elif verb in optional:
            label, done, _statuses = optional[verb]
            try:
                getattr(durable_api, verb)(instance.id)
            except DurableError as exc:
                self.message_user(request, f"{label} refused: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{done} {instance}.", messages.SUCCESS)
        else:
            self.message_user(request, f"Unknown action {verb!r}: nothing done.", messages.ERROR)
        return redirect("admin:durable_instance_change", quote(instance.pk))

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

    @admin.action(
        description="Resume selected failed or cancelled instances", permissions=["control"]
    )
    def resume_instances(self, request: HttpRequest, queryset: QuerySet[Instance]) -> None:
        resumed, refused = 0, []
        for instance in self._controllable(request, queryset):
            try:
                lifecycle.resume(instance.id)
                resumed += 1
            except DurableError as exc:
                refused.append(str(exc))
        self.message_user(request, f"Resumed {resumed} instance(s).", messages.SUCCESS)
        for message in refused[:10]:
            self.message_user(request, message, messages.WARNING)

    @admin.action(description="Fork selected instances from a step", permissions=["control"])
    def fork_instances(self, request: HttpRequest, queryset: QuerySet[Instance]):
        instances = self._controllable(request, queryset)
        form = ForkForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            forked, refused = 0, []
            for instance in instances:
                try:
                    lifecycle.fork(instance.id, from_step=form.cleaned_data["from_step"])
                    forked += 1
                except DurableError as exc:
                    refused.append(str(exc))
            self.message_user(request, f"Forked {forked} instance(s).", messages.SUCCESS)
            for message in refused[:10]:
                self.message_user(request, message, messages.WARNING)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Fork from a step",
            "opts": self.model._meta,
            "form": form,
            "instances": instances,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "durable/fork_action.html", context)

    @admin.action(
        description="Cancel selected instances in bulk (every match, in batches)",
        permissions=["control"],
    )
    def cancel_in_bulk(self, request: HttpRequest, queryset: QuerySet[Instance]) -> None:
        # "Select all N" hands over the whole filtered queryset: cancelled batch by batch,
        # a statement per batch, not one transaction per instance.
        count = lifecycle.cancel_where(queryset=queryset, user=request.user)
        self.message_user(request, f"Cancelled {count} instance(s).", messages.SUCCESS)

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
