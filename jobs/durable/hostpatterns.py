"""The host patterns of ``ACURIO_HTTP_ALLOW``: which destinations ``http()`` steps may call.

Pure Python (no Django), so the settings module validates the list when it loads: a malformed
pattern stops every process at start with one line, instead of failing steps at run time.

A pattern is ``host`` or ``host:port``; ``host`` may hold fnmatch wildcards (``*.example.org``)
and an IPv6 address is written in brackets (``[::1]``, ``[::1]:8765``); ``port`` is a number
or ``*``. A host alone allows its default ports only, 80 and 443 (``api.example.org`` does not
allow ``api.example.org:8080``); ``host:*`` allows every port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

DEFAULT_PORTS = frozenset({80, 443})
_HOST = re.compile(r"^[a-z0-9*?.\-_\[\]]+$")
_V6 = re.compile(r"^[0-9a-f:.*?]+$")


class PatternError(ValueError):
    """A malformed host pattern; the message names it and says what is wrong."""


@dataclass(frozen=True)
class HostPattern:
    host: str  # lower case, without IPv6 brackets
    port: str | None  # digits, '*', or None: the default ports

    def matches(self, host: str, port: int) -> bool:
        if not fnmatchcase(host.lower(), self.host):
            return False
        if self.port is None:
            return port in DEFAULT_PORTS
        return self.port == "*" or int(self.port) == port


def parse_pattern(text: str) -> HostPattern:
    """One pattern, checked; PatternError when it is malformed."""
    raw = text.strip().lower()
    if not raw:
        raise PatternError("an empty host pattern")
    if "/" in raw or "@" in raw or any(c.isspace() for c in raw):
        raise PatternError(
            f"host pattern {text!r} must be a host or host:port (no scheme, path or spaces)"
        )
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise PatternError(f"host pattern {text!r} opens '[' without closing it")
        host, rest = raw[1:end], raw[end + 1 :]
        if not host or not _V6.match(host) or ":" not in host:
            raise PatternError(f"host pattern {text!r}: {host!r} is not an IPv6 address")
        if rest and not rest.startswith(":"):
            raise PatternError(f"host pattern {text!r}: only ':port' may follow ']'")
        port = rest[1:] if rest else None
    else:
        if raw.count(":") > 1:
            raise PatternError(f"host pattern {text!r}: write an IPv6 address in brackets ([::1])")
        host, _, port = raw.partition(":")
        port = port if ":" in raw else None
        if not host or not _HOST.match(host) or "[" in host or "]" in host:
            raise PatternError(f"host pattern {text!r}: {host!r} is not a host name or address")
    if port not in (None, "*") and (not port.isdigit() or not 0 < int(port) < 65536):
        raise PatternError(f"host pattern {text!r}: the port must be 1..65535 or '*'")
    return HostPattern(host, port)


def parse_patterns(texts: list[str]) -> list[HostPattern]:
    """Every pattern of the list, checked (the first malformed one raises PatternError)."""
    return [parse_pattern(text) for text in texts]


def url_allowed(url: str, patterns: list[HostPattern]) -> bool:
    """Whether ``url``'s host and port (the scheme's default when absent) match a pattern."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False  # a port out of range
    return bool(host) and any(p.matches(host, port) for p in patterns)
