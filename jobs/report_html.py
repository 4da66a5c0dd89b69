"""The report page's two long lists as HTML, built in Python.

A 300-page thesis has hundreds of problems and entries; the template engine spends about
0.25 s on loops of that size, string building here a few milliseconds, which keeps the report
page's server time under its 300 ms budget. Every value is escaped (``escape``); the markup is
the same the template would write (``templates/jobs/run_report.html`` includes the result).
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from jobs.reporting import ProblemGroup

_TEXT_LIMIT = 160


def _truncate(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def problem_items(group: ProblemGroup, shown: int) -> SafeString:
    """The ``<li>`` items of one group; beyond the first ``shown``, hidden until revealed."""
    parts = []
    for number, item in enumerate(group.items, start=1):
        more = ' hidden data-more="1"' if number > shown else ""
        if "index" in item:
            where = f' data-cite="{item["index"]}"'
            link = (
                f'<a class="go" href="#doc" data-cite="{item["index"]}">{escape(item["text"])}</a>'
            )
        else:
            where = f' data-ref="{item["ref"]}"'
            link = f'<a class="go" href="#ref-{item["ref"]}">{escape(_truncate(item["text"]))}</a>'
        parts.append(
            f'<li class="problem" data-kind="{escape(item["kind"])}"{where}{more}>{link}'
            f' <span class="reason">{escape(item["reason"])}</span></li>'
        )
    return mark_safe("\n".join(parts))  # every value above is escaped


def _tag(kind: str, icon: str, text: str) -> str:
    css = f"tag k-{kind}" if kind else "tag"
    mark = f'<span aria-hidden="true">{icon}</span> ' if icon else ""
    return f'<span class="{css}">{mark}{text}</span>'


def _resolver_tags(ref: dict) -> str:
    res = ref.get("resolver")
    if not isinstance(res, dict) or not res:
        return ""
    status = res.get("status")
    if status == "found":
        tags = _tag("verified", "", "found online")
        if res.get("retracted"):
            tags += " " + _tag("missing_reference", "", "retracted")
        return tags
    if status == "error":
        return _tag("", "", "lookup failed")
    return _tag("missing_reference", "", escape(ref.get("lookup_label") or status or ""))


def reference_rows(references: list[dict], resolver_checked: bool) -> SafeString:
    """The ``<tr>`` rows of the reference table: the entry and its checks as labelled tags."""
    rows = []
    for ref in references:
        tags = []
        if ref.get("verdict") == "cited":
            tags.append(_tag("verified", "✓", "cited"))
        else:
            tags.append(_tag("uncited", "○", "never cited"))
        doi = ref.get("doi")
        if doi:
            code = f"<code>{escape(doi)}</code>"
            if ref.get("doi_valid") is False:
                tags.append(_tag("invalid_doi", "!", f"malformed DOI {code}"))
            else:
                tags.append(_tag("", "", f"DOI {code}"))
        library = ref.get("library")
        if library == "found":
            tags.append(_tag("verified", "", "in your library"))
        elif library == "not_found":
            tags.append(_tag("missing_reference", "✗", "not in your library"))
        if resolver_checked:
            tags.append(_resolver_tags(ref))
        number = ref["number"]
        rows.append(
            f'<tr id="ref-{number}"><td class="ref-no">{number + 1}</td>'
            f'<td class="ref-text">{escape(ref.get("text", ""))}</td>'
            f'<td class="ref-tags">{" ".join(t for t in tags if t)}</td></tr>'
        )
    return mark_safe("\n".join(rows))  # every value above is escaped
