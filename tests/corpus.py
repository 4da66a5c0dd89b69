"""Where the sample corpus of theses is: ``ACURIO_CORPUS``, else ``../shared/corpus``.

A plain module (not a conftest) so that tests of any folder can import it.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus_dir() -> Path:
    return Path(os.environ.get("ACURIO_CORPUS") or ROOT.parent / "shared" / "corpus")
