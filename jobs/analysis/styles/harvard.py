"""Harvard (Cite Them Right): ``(Smith and Lee, 2020)``, ``Smith and Lee (2020)``; entries
``Smith, J. and Lee, B. (2020) 'Title', Venue``: APA's grammar without the full stop after the
year, article titles in quotes."""

from __future__ import annotations

from .apa import parse_entry
from .base import Style

STYLE = Style(
    name="harvard",
    numeric=False,
    description="Harvard author-date: (Smith and Lee, 2020); Smith, J. (2020) 'Title'.",
    parse_entry=parse_entry,
    entry_priority=10,
)
