"""Look reference entries up in a Crossref-compatible REST API.

With a DOI the work is fetched (``/works/{doi}``) and compared with the entry: a DOI that resolves
to a different title points to another work. Without one, Crossref's own advice is followed:
search (``/works?query.bibliographic=...``) and accept the best candidate only if it validates
by title similarity, surname and year. Retractions are read from ``updated-by`` notices of type
``retraction``. Requests are polite (a User-Agent with a mailto), bounded by timeouts, and
retried on 429 and 5xx with exponential backoff.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx
from rapidfuzz import fuzz

from .references import Reference
from .text import fold

USER_AGENT = "Acurio/0.1 (citation checker; mailto:{mailto})"
TITLE_MATCH = 85.0


def _title_of(work: dict) -> str:
    t = work.get("title") or []
    return t[0] if isinstance(t, list) and t else (t if isinstance(t, str) else "")


def _year_of(work: dict) -> str:
    for key in ("issued", "published-print", "published-online", "published", "created"):
        parts = (work.get(key) or {}).get("date-parts") or []
        if parts and parts[0] and parts[0][0]:
            return str(parts[0][0])
    return ""


def _surnames_of(work: dict) -> list[str]:
    return [a.get("family") or a.get("name") or "" for a in work.get("author") or []]


def _retracted(work: dict) -> bool:
    updates = work.get("updated-by") or []
    return any(
        str(u.get("type", "")).lower() == "retraction" for u in updates if isinstance(u, dict)
    )


class Resolver:
    """A small Crossref client; :meth:`check` returns a JSON-ready verdict for one entry."""

    def __init__(
        self,
        base_url: str,
        *,
        mailto: str = "support@acurio.invalid",
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.mailto = mailto
        self.retries = retries
        self.backoff = backoff
        self.client = client or httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"User-Agent": USER_AGENT.format(mailto=mailto), "Accept": "application/json"},
            follow_redirects=True,
        )
        self._cache: dict[str, dict | None] = {}

    def close(self) -> None:
        self.client.close()

    def _get(self, path: str, params: dict | None = None) -> dict | None:
        """GET a JSON message; None for 404; raises httpx.HTTPError when retries run out."""
        url = f"{self.base_url}{path}"
        params = {**(params or {}), "mailto": self.mailto}
        key = url + repr(sorted(params.items()))
        if key in self._cache:
            return self._cache[key]
        attempt = 0
        while True:
            resp: httpx.Response | None = None
            try:
                resp = self.client.get(url, params=params)
            except httpx.TransportError:
                if attempt >= self.retries:
                    raise
            else:
                if resp.status_code == 404:
                    self._cache[key] = None
                    return None
                if resp.status_code != 429 and resp.status_code < 500:
                    resp.raise_for_status()
                    data = resp.json().get("message")
                    self._cache[key] = data
                    return data
                if attempt >= self.retries:
                    resp.raise_for_status()
            delay = self.backoff * (2**attempt)
            retry_after = resp.headers.get("Retry-After", "") if resp is not None else ""
            if retry_after.isdigit():
                delay = max(delay, min(float(retry_after), 30.0))
            time.sleep(delay)
            attempt += 1

    def _matches(self, ref: Reference, work: dict) -> float:
        """Similarity of an entry and a Crossref work, 0-100; 0 if surname or year disagree."""
        title = _title_of(work)
        score = (
            fuzz.token_set_ratio((ref.title or "").casefold(), title.casefold())
            if ref.title
            else 0.0
        )
        surnames = {fold(s) for s in _surnames_of(work)}
        if ref.authors and surnames and fold(ref.authors[0]) not in surnames:
            score -= 30
        year = _year_of(work)
        if ref.year and year and not ref.year.startswith(year):
            score -= 15
        return score

    def check(self, ref: Reference) -> dict:
        """``{"status": ..., ...}``: found, not_found, doi_not_found, doi_mismatch or error."""
        try:
            if ref.doi and ref.doi_valid:
                work = self._get(f"/works/{quote(ref.doi, safe='/:;()._-')}")
                if work is None:
                    return {"status": "doi_not_found", "doi": ref.doi}
                result = {
                    "status": "found",
                    "doi": work.get("DOI", ref.doi),
                    "title": _title_of(work),
                    "retracted": _retracted(work),
                }
                if ref.title and self._matches(ref, work) < TITLE_MATCH:
                    result["status"] = "doi_mismatch"
                    result["reason"] = f"the DOI belongs to another work: {_title_of(work)!r}"
                return result
            query = " ".join(filter(None, [ref.title, ", ".join(ref.authors[:3]), ref.year]))
            if not query.strip():
                return {"status": "not_found"}
            message = self._get("/works", {"query.bibliographic": query, "rows": 5})
            items = (message or {}).get("items") or []
            best = max(items, key=lambda w: self._matches(ref, w), default=None)
            if best is None or self._matches(ref, best) < TITLE_MATCH:
                return {"status": "not_found"}
            return {
                "status": "found",
                "doi": best.get("DOI"),
                "title": _title_of(best),
                "retracted": _retracted(best),
            }
        except (httpx.HTTPError, ValueError) as exc:
            return {"status": "error", "reason": f"lookup failed: {exc.__class__.__name__}"}
