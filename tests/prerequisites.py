"""One rule for tests whose prerequisite is missing (Chromium, the sample corpus).

On a developer's machine such a test is skipped with the reason. Under CI (``CI`` set, as
``.ci/run`` is run) it fails instead: CI installs Chromium and has the corpus beside the clone,
so a missing prerequisite there means a broken set-up, never a reason to pass quietly.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip locally, fail under CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run this test, not skip it)", pytrace=False)
    pytest.skip(reason)


def import_playwright():
    """``playwright.sync_api``, or :func:`missing` when the package is not installed."""
    try:
        from playwright import sync_api
    except ImportError:
        missing("the playwright package is not installed")
    return sync_api
