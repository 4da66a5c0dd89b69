"""What every citation style module provides, and the grammar pieces they share.

A style module (``apa.py``, ``ieee.py``...) holds one style's marker forms, the grammar of its
reference entries and the cues that tell it apart; it exports ``STYLE``, a :class:`Style`. The
package's ``__init__`` lists the modules, so adding a style is adding a module and its line
there. Nothing here imports from the rest of the analysis package except ``text`` and
``blocks``, so ``references`` and ``citations`` can build on the styles without an import
cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

# A publication year: 1500-2099.
YEAR = r"(?:1[5-9]\d\d|20\d\d)"
# A surname as the text cites it: a letter, then letters, apostrophes and hyphens (no digits:
# "SS3" is a program's name). An underscore joins the words of a name known to be one
# ("R_Core_Team", "van_Sebille"; see ``citations._protect``).
NAME = r"[^\W\d_](?:[^\W\d]|['\u2019\-])*"
# Any year in running text, with an optional suffix letter ("2020a"), not inside a number,
# a DOI or a date such as "2020/21".
ANY_YEAR = re.compile(rf"(?<![\d/.\-])({YEAR})([a-z]?)(?![\d/])")


@dataclass
class Entry:
    """What an entry grammar reads from one reference entry (its number already removed)."""

    authors: list[str] = field(default_factory=list)
    year: str | None = None
    title: str | None = None
    venue: str | None = None
    # Other names the text cites the first author by (a group author's abbreviation).
    aliases: list[str] = field(default_factory=list)


class EntryLike(Protocol):
    """The fields of a parsed reference that style detection looks at."""

    text: str
    authors: list[str]
    number: int | None


@dataclass(frozen=True)
class Style:
    """One citation style.

    ``parse_entry(body, label)`` reads an entry of this style's shape (``body`` is the entry
    without its printed number, ``label`` that number as printed: ``[4]``, ``4.`` or ``""``),
    or returns None when the entry does not have that shape (the next style's grammar is tried; see ``styles.parse_entry``).
    Grammars are tried in ascending ``entry_priority``; styles that share one grammar name the
    same function and it runs once.
    """

    name: str
    numeric: bool
    description: str
    parse_entry: Callable[[str, str], Entry | None]
    entry_priority: int = 50
