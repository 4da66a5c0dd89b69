"""Extraction keeps the garbage collector off the caller's heap, and leaves no garbage behind.

``extract`` freezes the objects that existed before it (so that mammoth's and pypdf's full
collections do not walk a forked worker's heap) and hands them back afterwards. Two ways that
could go wrong: an extraction's cyclic garbage left uncollected, which the next extraction
would freeze (a process extracting many documents, such as ``scripts/accuracy.py``, grew by a
million objects in 15 rounds), and a process's own frozen heap unfrozen by an extraction.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from jobs.analysis import extract

HELDOUT = Path(__file__).resolve().parent / "heldout"


@pytest.mark.parametrize(
    "name", ["apa_nursing.docx", "german_lehrkraefte.docx", "apa_remote_work.pdf"]
)
def test_extraction_leaves_no_cyclic_garbage(name):
    data = (HELDOUT / name).read_bytes()
    gc.collect()
    extract(data, name)
    # mammoth's XML tree and pypdf's objects hold cycles: found here, they were left behind.
    assert gc.collect() == 0


def test_a_heap_frozen_by_the_process_stays_frozen():
    data = (HELDOUT / "apa_nursing.docx").read_bytes()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        extract(data, "apa_nursing.docx")
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
