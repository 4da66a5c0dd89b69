"""Cases that test the runner, not the analysis: their input never gets built.

``probe-segfault`` dies of SIGSEGV, ``probe-silent-exit`` exits 0 without an answer and
``probe-hang`` never ends. tests/hostile/child.py finds them beside the inputs of
tests/hostile/inputs.py; tests/hostile/test_hostile.py checks that each is reported as a crash
and that the next case runs as usual.
"""

from __future__ import annotations

import ctypes
import os
import time

from tests.hostile.inputs import Case


def _segfault() -> tuple[str, bytes]:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    raise AssertionError("unreachable")


def _silent_exit() -> tuple[str, bytes]:
    os._exit(0)


def _hang() -> tuple[str, bytes]:
    while True:
        time.sleep(60)


PROBES = {
    case.name: case
    for case in (
        Case("probe-segfault", _segfault),
        Case("probe-silent-exit", _silent_exit),
        Case("probe-hang", _hang),
    )
}
