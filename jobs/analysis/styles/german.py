"""German author-date forms: ``(Müller 2019, S. 12)``, ``(vgl. Müller/Weber 2020)``, ``u. a.``,
``o. J.``; entries ``Bauer, Wolfgang; Ek, Jing (2023): Title. In: ...``."""

from __future__ import annotations

import re

from .apa import parse_entry
from .base import Style

# Words and locators only German texts use: "u. a. 2019", "(vgl. ...", ", S. 12".
MARKER_CUES = re.compile(r"\bu\.\s?a\.\s+(?:\(?\d{4})|\(vgl\.|\bvgl\.\s|,\s+S\.\s+\d")

STYLE = Style(
    name="german",
    numeric=False,
    description="German author-date: (Müller 2019, S. 12); Müller, Hans (2019): Titel.",
    parse_entry=parse_entry,
    entry_priority=10,
)
