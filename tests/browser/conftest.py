"""Playwright + Debian's Chromium against pytest-django's live server.

The browser runs in this test's thread (Playwright's sync API drives an event loop there, so
Django's async-safety check is relaxed for these tests: the ORM calls are still synchronous and
in the test thread). Workflow steps are run by a real ``Worker`` in the test thread, one call at
a time, so each test decides when the analysis moves on and can watch the page follow.
"""

from __future__ import annotations

import pytest

from tests.chromium import launched_chromium


@pytest.fixture(scope="module")
def chromium():
    """One Chromium per test module.

    Module scope, not session: while Playwright's sync API is alive, its event loop counts as
    running in this thread, which Django's async-safety check (relaxed here) and any other
    test's asyncio.run() would trip over. It is stopped before the next module's tests.
    """
    with launched_chromium() as browser:
        yield browser


@pytest.fixture
def browser_user(django_user_model, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return django_user_model.objects.create_user("carla", password="pw-carla-123")


@pytest.fixture
def signed_in(chromium, live_server, browser_user):
    """A fresh browser context, signed in through the login form; yields (context, page)."""
    context = chromium.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "carla")
    page.fill("#id_password", "pw-carla-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    yield context, page
    context.close()
