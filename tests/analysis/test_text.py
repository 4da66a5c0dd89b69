"""Text normalisation: the fast path and the position-mapping path agree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobs.analysis.text import normalize, normalize_with_map

ALPHABET = st.sampled_from([*list("ab Zé-\n\t.\xad\u200b\xa0ﬁﬂ(2020)"), "-\n", " -\n  "])


def test_normalize_joins_line_end_hyphens_and_drops_invisible_characters():
    assert normalize("Morten-\nsen (2023)") == "Mortensen (2023)"
    assert normalize("Hayes\u00a0&\u00a0Mor\u00adtensen, 2023") == "Hayes & Mortensen, 2023"
    assert normalize("e\ufb03cient \ufb01ndings\u200b") == "efficient findings"
    assert normalize("  many   \n spaces ") == "many spaces"


def test_hyphen_between_digits_or_before_space_is_kept():
    assert normalize("pp. 12-\n15") == "pp. 12- 15"
    assert normalize("well- known") == "well- known"


@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_mapped_normalisation_matches_fast_path(raw):
    text, src = normalize_with_map(raw)
    assert text == normalize(raw)
    assert len(src) == len(text)
    assert src == sorted(src)
    assert all(0 <= i < len(raw) for i in src)
