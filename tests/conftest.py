"""Shared fixtures: users, clients, job factories. Tests run on real PostgreSQL.

Each folder's conftest adds its own fixtures and imports no other conftest; helpers that tests
import live in plain modules (``tests/processes.py``, ``tests/runs/helpers.py``).
"""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from jobs.models import AnalysisJob, JobStatus


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # The user fixtures hash a password per test; PBKDF2's deliberate slowness (about 1 s per
    # user on a loaded machine) is not under test anywhere. Autouse fixtures run first, so the
    # users below are made with MD5.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        "olivia", password="pw-olivia-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def user_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def make_job(user):
    """Create an AnalysisJob; terminal statuses get a finished_at and a small report."""

    def make(
        *,
        owner=None,
        status: str = JobStatus.COMPLETE,
        run_id: uuid.UUID | None = None,
        doc_html: str | None = "<p>Body (Smith, 2020).</p>",
        results: dict | None = None,
        filename: str = "thesis.md",
        **fields,
    ) -> AnalysisJob:
        terminal = status in (JobStatus.COMPLETE, JobStatus.FAILED)
        if results is None and terminal:
            results = {
                "document": filename,
                "style": "apa",
                "citations": [
                    {
                        "text": "(Smith, 2020)",
                        "keys": [{"author": "Smith", "year": "2020"}],
                        "verdict": "verified",
                        "references": [0],
                    }
                ],
                "references": [
                    {
                        "text": "Smith, J. (2020). A study.",
                        "verdict": "cited",
                        "doi": None,
                        "doi_valid": None,
                        "library": "unchecked",
                    }
                ],
                "summary": {
                    "verified": 1,
                    "missing_reference": 0,
                    "year_mismatch": 0,
                    "author_mismatch": 0,
                    "ambiguous": 0,
                    "uncited": 0,
                },
            }
        fields.setdefault("finished_at", timezone.now() if terminal else None)
        return AnalysisJob.objects.create(
            owner=owner or user,
            filename=filename,
            upload=b"# Thesis\n\nBody (Smith, 2020).\n",
            status=status,
            run_id=run_id or uuid.uuid4(),
            doc_html=doc_html,
            results=results,
            **fields,
        )

    return make
