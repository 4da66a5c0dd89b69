"""Debian's Chromium under Playwright: the one way browser tests launch a browser.

Never a downloaded browser build: ``/usr/bin/chromium`` (or ``ACURIO_CHROMIUM``), headless, with
the flags a container needs. A missing Chromium or Playwright skips locally and fails under CI
(:mod:`tests.prerequisites`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.prerequisites import import_playwright, missing

CHROMIUM = os.environ.get("ACURIO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def launched_chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright ``Browser``), closed on exit.

    Playwright's sync API runs an event loop in this thread, which Django's async-safety check
    would take for async code calling the ORM; the ORM calls stay synchronous, so the check is
    relaxed while the browser lives and restored afterwards (later tests' child processes must
    not inherit the switch).
    """
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        missing("Chromium is not installed (apt-get install -y chromium)")
    playwright_sync = import_playwright()
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
