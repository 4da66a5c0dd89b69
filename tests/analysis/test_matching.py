"""Verdicts, reasons, worst-of-keys, and that matching is indexed (linear)."""

from __future__ import annotations

from jobs.analysis import analyze, verify
from jobs.analysis.references import Reference


def _refs(*entries):
    return [
        Reference(index=i, text=f"{a} ({y})", paragraph=i, authors=[a], year=y, number=n).to_dict()
        for i, (a, y, n) in enumerate(entries)
    ]


REFS = _refs(
    ("Smith", "2020", None),
    ("Jones", "2018", None),
    ("Lee", "2019", None),
    ("Lee", "2019", None),
    ("Park", "2021a", None),
    ("Park", "2021b", None),
)


def _verdict(*keys):
    return verify(
        [{"text": "x", "keys": [{"author": a, "year": y} for a, y in keys]}], REFS, "apa"
    )[0]


def test_each_verdict_with_reason():
    assert _verdict(("Smith", "2020"))["verdict"] == "verified"
    v = _verdict(("Brown", "2020"))
    assert v["verdict"] == "missing_reference"
    assert "no entry by Brown" in v["reason"]
    v = _verdict(("Smith", "2021"))
    assert v["verdict"] == "year_mismatch"
    assert "2020" in v["reason"]
    v = _verdict(("Smyth", "2020"))
    assert v["verdict"] == "author_mismatch"
    assert "closest: Smith 2020" in v["reason"]
    v = _verdict(("Lee", "2019"))
    assert v["verdict"] == "ambiguous"
    assert v["references"] == [2, 3]
    assert _verdict(("Park", "2021b"))["references"] == [5]
    assert _verdict(("Park", "2021"))["verdict"] == "ambiguous"


def test_worst_key_wins_in_contract_order():
    assert _verdict(("Smith", "2020"), ("Smyth", "2020"))["verdict"] == "author_mismatch"
    assert _verdict(("Smyth", "2020"), ("Smith", "2021"))["verdict"] == "year_mismatch"
    assert _verdict(("Smith", "2021"), ("Lee", "2019"))["verdict"] == "ambiguous"
    assert _verdict(("Lee", "2019"), ("Nobody", "2000"))["verdict"] == "missing_reference"


def test_two_typos_is_not_a_misspelling():
    assert _verdict(("Smoth", "2020"))["verdict"] == "author_mismatch"
    assert _verdict(("Smythe", "2020"))["verdict"] == "missing_reference"


def test_numeric_keys():
    refs = _refs(("A", "2020", 1), ("B", "2020", 2), ("C", "2020", 4))
    out = verify(
        [{"text": "[1\u20133]", "keys": [{"number": 1}, {"number": 2}, {"number": 3}]}],
        refs,
        "ieee",
    )[0]
    assert out["verdict"] == "missing_reference"
    assert "[3]" in out["reason"]
    assert out["references"] == [0, 1]


def test_chunks_give_the_same_result_as_the_whole():
    cites = [
        {"text": str(i), "keys": [{"author": a, "year": y}]}
        for i, (a, y) in enumerate([("Smith", "2020"), ("Lee", "2019"), ("X", "1")] * 10)
    ]
    whole = verify(cites, REFS, "apa")
    chunks = verify(cites[:7], REFS, "apa") + verify(cites[7:], REFS, "apa")
    assert whole == chunks


def test_matching_a_listed_author_never_scans_the_reference_list(monkeypatch):
    # Linear matching, checked structurally rather than by the clock (timings belong in
    # bench/analysis_bench.py): a key whose author/year is in the index is a dictionary
    # lookup; only a key with no entry for its author may look at other entries.
    from jobs.analysis import matching

    scans = {"close_enough": 0, "closest": 0}
    real_close, real_closest = matching.close_enough, matching.Index.closest

    def counting_close(a, b):
        scans["close_enough"] += 1
        return real_close(a, b)

    def counting_closest(self, author, base=""):
        scans["closest"] += 1
        return real_closest(self, author, base)

    monkeypatch.setattr(matching, "close_enough", counting_close)
    monkeypatch.setattr(matching.Index, "closest", counting_closest)
    n = 3000
    refs = _refs(*[(f"Author{i}", str(1950 + i % 70), None) for i in range(n)])
    cites = [
        {
            "text": "x",
            "keys": [{"author": f"Author{i * 7 % n}", "year": str(1950 + i * 7 % n % 70)}],
        }
        for i in range(4 * n)
    ]
    verdicts = verify(cites, refs, "apa")
    assert {v["verdict"] for v in verdicts} == {"verified"}
    assert scans == {"close_enough": 0, "closest": 0}

    # A missing author is compared only with the entries of its year, not the whole list.
    verify([{"text": "x", "keys": [{"author": "Nobody", "year": "1950"}]}], refs, "apa")
    assert scans["close_enough"] <= n // 70 + 1
    assert scans["closest"] == 1


# --- entries sharing a first author and year, told apart by the marker's other authors -------
SHARED = """# Body

{body}

# References

Smith, J. (2020). A sole-author study. Journal of Effects, 1, 1-2.

Smith, J., & Lee, K. (2020). A joint study. Journal of Effects, 2, 3-4.

Smith, J., Park, A., & Cho, B. (2020). A team study. Journal of Effects, 3, 5-6.

Brown, T., & Green, P. (2019). One study. Review Journal, 4, 7-8.

Brown, T., & Gray, P. (2019). Another study. Review Journal, 5, 9-10.
"""


def _shared(body: str) -> dict:
    return analyze(SHARED.format(body=body).encode(), "thesis.md")


def test_co_authors_named_by_the_marker_pick_the_entry():
    report = _shared(
        "One (Smith, 2020). Two (Smith & Lee, 2020). Three (Smith et al., 2020). "
        "Smith and Lee (2020) agree."
    )
    found = [(c["text"], c["verdict"], c["references"]) for c in report["citations"]]
    assert found == [
        ("(Smith, 2020)", "verified", [0]),
        ("(Smith & Lee, 2020)", "verified", [1]),
        ("(Smith et al., 2020)", "verified", [2]),
        ("Smith and Lee (2020)", "verified", [1]),
    ]
    # the parser's hints stay out of the report: keys are the contract's shape
    assert all(set(k) == {"author", "year"} for c in report["citations"] for k in c["keys"])


def test_same_first_author_and_year_stays_ambiguous_when_the_marker_cannot_tell():
    report = _shared("Both (Brown et al., 2019) and (Smith & Kim, 2020). Or (Brown, 2019).")
    found = [(c["text"], c["verdict"], c["references"]) for c in report["citations"]]
    assert found == [
        # "et al." for two-author works fits neither; "Kim" is no co-author of any Smith 2020
        ("(Brown et al., 2019)", "ambiguous", [3, 4]),
        ("(Smith & Kim, 2020)", "ambiguous", [0, 1, 2]),
        # a bare "Brown" is a sole author: neither fits, so both stay candidates
        ("(Brown, 2019)", "ambiguous", [3, 4]),
    ]


def test_co_authors_tell_apart_two_entries_of_two_authors():
    report = _shared("First (Brown & Green, 2019); second (Brown & Gray, 2019).")
    assert [(c["verdict"], c["references"]) for c in report["citations"]] == [
        ("verified", [3]),
        ("verified", [4]),
    ]


def test_a_secondary_citation_needs_only_the_source_that_was_read():
    doc = (
        "# Body\n\nSmall (Brown, 2019, as cited in Green, 2021). Brown (2019, as cited in "
        "Green, 2021) said so. Auch (vgl. Weber 2001, zit. n. Green 2021). Or (Green, 2021; "
        "White, 2010, cited in Green, 2021). Not secondary: (Brown, 2019; see Green, 2021).\n\n"
        "# References\n\nGreen, P. (2021). Reviewing the effect. Review Journal, 3, 7-8.\n"
    )
    report = analyze(doc.encode(), "thesis.md")
    found = [
        (c["text"], [k["author"] for k in c["keys"]], c["verdict"]) for c in report["citations"]
    ]
    assert found == [
        ("(Brown, 2019, as cited in Green, 2021)", ["Green"], "verified"),
        ("Brown (2019, as cited in Green, 2021)", ["Green"], "verified"),
        ("(vgl. Weber 2001, zit. n. Green 2021)", ["Green"], "verified"),
        ("(Green, 2021; White, 2010, cited in Green, 2021)", ["Green", "Green"], "verified"),
        ("(Brown, 2019; see Green, 2021)", ["Brown", "Green"], "missing_reference"),
    ]
