"""Template filters of the durable admin's graph drawing."""

from __future__ import annotations

from django import template

register = template.Library()

# Kinds whose children run side by side are drawn in a row; the rest in a column.
_PARALLEL = {"all", "race"}


@register.filter
def children_layout(kind: str) -> str:
    """``all`` (a row of boxes) for parallel kinds, ``seq`` (a column) otherwise."""
    return "all" if kind in _PARALLEL else "seq"
