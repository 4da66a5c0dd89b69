"""In-text markers as citeproc and authors write them: the rules behind each verdict.

Each test is a small document in the shape of a rendered paper (Markdown with a reference
list), with invented names; the cases follow the style guides (APA 7 8.17-8.18 for et al. and
disambiguation, 9.41 for original dates; Chicago 15.9; DIN 1505-2) and citeproc's output.
"""

from __future__ import annotations

from jobs.analysis import analyze, parse


def _run(body: str, refs: str, name: str = "thesis.md") -> list[tuple]:
    report = analyze(f"# Body\n\n{body}\n\n# References\n\n{refs}\n".encode(), name)
    return [(c["text"], c["verdict"], c["references"]) for c in report["citations"]]


APA_REFS = """Hupmann, D., Rogel, J., Krieg, E., Kray, V., Lunn, G., & Ost, P. (2018). A scenario study. Nature Energy, 3, 1-2.

Hupmann, D., Rogel, J., Krieg, E., Mund, B., Pike, S., & Quist, R. (2018). Another scenario study. Nature Energy, 3, 3-4.

R Core Team. (2023). R: A language and environment for statistical computing. R Foundation.

Met Offyce. (n.d.). UK climate projections. https://example.org/ukcp

Warde, K. (2022). Republished classic (Original work published 2014). Press.

Mol, A., & Di Stefani, F. (2017). Two particles. Journal of Names, 1, 5-6.

van der Laan, M. (2019). Particles first. Journal of Names, 2, 7-8.

Sarrad, E., & Herrold, G. (2017). A two-author paper. Acoustics, 1, 1-2.

Sarrad, E., Herrold, G., Jekosc, T., & Zenk, A. (2017). A four-author paper. Acoustics, 2, 3-4."""


def test_apa_several_names_before_et_al_pick_the_entry():
    # APA 7 8.18 (citeproc's add-names): works sharing their first authors are told apart by
    # naming authors up to the first that differs, then "et al.".
    got = _run(
        "Scenarios (Hupmann, Rogel, Krieg, Kray, et al., 2018) differ from others "
        "(Hupmann, Rogel, Krieg, Mund, et al., 2018); Hupmann, Rogel, Krieg, Kray, et al. "
        "(2018) say so. Only (Hupmann et al., 2018) cannot tell.",
        APA_REFS,
    )
    assert got == [
        ("(Hupmann, Rogel, Krieg, Kray, et al., 2018)", "verified", [0]),
        ("(Hupmann, Rogel, Krieg, Mund, et al., 2018)", "verified", [1]),
        ("Hupmann, Rogel, Krieg, Kray, et al. (2018)", "verified", [0]),
        ("(Hupmann et al., 2018)", "ambiguous", [0, 1]),
    ]


def test_two_named_authors_are_not_an_entry_cut_short_with_et_al():
    refs = (
        "Sarrad, E., & Herrold, G. (2017) 'A two-author paper', Acoustics, 1, pp. 1-2.\n\n"
        "Sarrad, E. et al. (2017) 'A four-author paper', Acoustics, 2, pp. 3-4."
    )
    got = _run("Both (Sarrad and Herrold, 2017) and (Sarrad et al., 2017).", refs)
    assert got == [
        ("(Sarrad and Herrold, 2017)", "verified", [0]),
        ("(Sarrad et al., 2017)", "verified", [1]),
    ]


def test_group_authors_no_date_original_dates_and_particles():
    got = _run(
        "Computed in R (R Core Team, 2023). Projections (Met Offyce, n.d.). A classic "
        "(Warde, 2014/2022). Names (Mol & Di Stefani, 2017); Mol & Di Stefani (2017) agree. "
        "A misspelt particle name (van der Laon, 2019).",
        APA_REFS,
    )
    assert got == [
        ("(R Core Team, 2023)", "verified", [2]),
        ("(Met Offyce, n.d.)", "verified", [3]),
        ("(Warde, 2014/2022)", "verified", [4]),
        ("(Mol & Di Stefani, 2017)", "verified", [5]),
        ("Mol & Di Stefani (2017)", "verified", [5]),
        ("(van der Laon, 2019)", "author_mismatch", [6]),
    ]


def test_a_title_or_a_standard_in_the_author_position():
    # APA 9.12: a work with no author is listed, and cited, by its title.
    got = _run(
        "Quality (ISO 9001, 2015) and (Quality Management Principles, 2019).",
        "ISO 9001. (2015). Quality management systems: Requirements. ISO.\n\n"
        "Quality management principles. (2019). ISO Central Secretariat.",
    )
    assert [g[1:] for g in got] == [("verified", [0]), ("verified", [1])]


def test_particles_dropped_or_moved_behind_the_initials():
    refs = (
        "Delande, P., & Sebalt, E. van. (2019). Parcels v2. Model Development, 12, 1-2.\n\n"
        "Lanz, M., & Sebalt, E. van. (2017). Parcels v0.9. Model Development, 10, 3-4."
    )
    got = _run("Tools (Delande & van Sebalt, 2019; Lanz & van Sebalt, 2017).", refs)
    assert got == [("(Delande & van Sebalt, 2019; Lanz & van Sebalt, 2017)", "verified", [0, 1])]


def test_numbered_markers_with_words_inside():
    refs = "\n\n".join(f"{n}. Author{n} A. Title {n}. Journal. 2020;{n}:1-2." for n in range(1, 13))
    got = _run(
        "As shown (see 11). Following the algorithm (based on the algorithm proposed by 11). "
        "Tools (e.g., 6,8,9,12) and (7, cf. 3, 4-5). Not citations: (n = 12), (Figure 3), "
        "(step 2), (default is 10), (27 of 40).",
        refs,
    )
    assert got == [
        ("(see 11)", "verified", [10]),
        ("(based on the algorithm proposed by 11)", "verified", [10]),
        ("(e.g., 6,8,9,12)", "verified", [5, 7, 8, 11]),
        ("(7, cf. 3, 4-5)", "verified", [6, 2, 3, 4]),
    ]


def test_false_markers_dates_number_pairs_and_code():
    html = (
        "<h1>Body</h1><p>Accessed (15 January 2024) at a resolution of (3000,4000) pixels, "
        "as <code>f(Smith, 2020)</code> computes; but (Smith, 2020) is a citation.</p>"
        "<pre><code>model = fit(Lee, 2019)\nx = data[3]</code></pre>"
        "<h1>References</h1><p>Smith, J. (2020). A study. Journal, 1, 1-2.</p>"
        "<p>Lee, K. (2019). Another study. Journal, 2, 3-4.</p>"
    )
    parsed = parse(html)
    assert [c["text"] for c in parsed.citations] == ["(Smith, 2020)"]
    numbered = (
        "<h1>Body</h1><p>Resolution (3000,4000) and a year (2019); a source (2).</p>"
        "<h1>References</h1>"
        + "".join(f"<p>{n}. Author{n} A. Title. Journal. 2020;1:2.</p>" for n in range(1, 4))
    )
    assert [c["text"] for c in parse(numbered).citations] == ["(2)"]


def test_note_numbers_printed_after_the_reference_list_are_no_entries():
    txt = (
        "Body\n\nA claim [1] and another [2].[3]\n\nReferences\n\n"
        "[1] A. Author, “First,” Journal, 2020.\n\n"
        "[2] B. Author, “Second,” Journal, 2021.\n\n"
        "[1] https://example.org/a-footnote\n"
    )
    report = analyze(txt.encode(), "thesis.txt")
    assert [r["number"] for r in report["references"]] == [1, 2]
    assert [c["text"] for c in report["citations"]][:2] == ["[1]", "[2]"]


def test_both_marker_families_are_read_and_the_list_decides():
    # Many bracketed numbers (array indices, a numbered procedure) would make a numbered style
    # the first guess; the author-date list decides, so no author-date marker is lost.
    body = (
        "Steps [1], [2], [3] and [4] of the procedure use x [5] and y [6] from earlier work "
        "(Smith, 2020). Smith (2020) agrees."
    )
    refs = "Smith, J. (2020). A study. Journal, 1, 1-2."
    got = _run(body, refs)
    assert [g[:2] for g in got] == [("(Smith, 2020)", "verified"), ("Smith (2020)", "verified")]


def test_harvard_and_apa_forms_give_the_same_verdicts():
    apa = _run(
        "One (Smith & Lee, 2020). Two (Smith et al., 2021). Three (Brown, 2019).",
        "Smith, J., & Lee, K. (2020). A study. Journal, 1, 1-2.\n\n"
        "Smith, J., Lee, K., & Park, A. (2021). Another. Journal, 2, 3-4.",
    )
    harvard = _run(
        "One (Smith and Lee, 2020). Two (Smith et al., 2021). Three (Brown, 2019).",
        "Smith, J. and Lee, K. (2020) 'A study', Journal, 1, pp. 1-2.\n\n"
        "Smith, J., Lee, K. and Park, A. (2021) 'Another', Journal, 2, pp. 3-4.",
    )
    assert [g[1:] for g in apa] == [g[1:] for g in harvard]
    assert [g[1] for g in apa] == ["verified", "verified", "missing_reference"]


def test_closest_entry_is_suggested_only_when_close():
    refs = "Smith, J. (2020). A study. Journal, 1, 1-2."
    report = analyze(
        f"# Body\n\n(Smyth, 2021) and (Zzyzx, 2021).\n\n# References\n\n{refs}\n".encode(), "t.md"
    )
    near, far = report["citations"]
    assert near["verdict"] == "missing_reference" and "closest: Smith" in near["reason"]
    assert far["verdict"] == "missing_reference" and "closest" not in far["reason"]
