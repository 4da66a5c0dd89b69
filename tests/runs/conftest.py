"""Fixtures of the run tests (the writer, the backstop, the judge, the sweeper)."""

from __future__ import annotations

import pytest

from tests.processes import child_env

from .helpers import FakeJudge


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    """The environment of a sweeper process on the test database."""
    return child_env(DEBUG="1")


@pytest.fixture
def fake_judge():
    judge = FakeJudge()
    yield judge
    judge.close()
