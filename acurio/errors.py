"""Turn configuration and connection failures into one clear line instead of a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def friendly_errors() -> Iterator[None]:
    """Print one line for an unreachable database or a bad configuration, exit 1."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db.utils import OperationalError

    try:
        yield
    except OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.stderr.write(f"acurio: cannot reach the database: {first}\n")
        raise SystemExit(1) from None
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"acurio: configuration error: {exc}\n")
        raise SystemExit(1) from None
