"""The Crossref resolver against a local HTTP server serving Crossref-shaped JSON."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from jobs.analysis import analyze
from jobs.analysis.references import Reference
from jobs.analysis.resolver import Resolver

WORKS = {
    "10.1234/good": {
        "DOI": "10.1234/good",
        "title": ["A study of things"],
        "author": [{"family": "Smith"}],
        "issued": {"date-parts": [[2020]]},
    },
    "10.1234/retracted": {
        "DOI": "10.1234/retracted",
        "title": ["Faked results"],
        "author": [{"family": "Fraud"}],
        "issued": {"date-parts": [[2019]]},
        "updated-by": [{"type": "retraction", "DOI": "10.1234/notice"}],
    },
    "10.1234/other": {
        "DOI": "10.1234/other",
        "title": ["Something entirely unrelated"],
        "author": [{"family": "Else"}],
        "issued": {"date-parts": [[2015]]},
    },
}


class Handler(BaseHTTPRequestHandler):
    calls: list[tuple[str, dict, str]] = []
    flaky: dict[str, int] = {}

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status, payload=None, headers=None):
        body = (
            json.dumps({"status": "ok", "message": payload}).encode()
            if payload is not None
            else b"{}"
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        Handler.calls.append((url.path, query, self.headers.get("User-Agent", "")))
        if url.path.startswith("/works/"):
            doi = unquote(url.path[len("/works/") :])
            if Handler.flaky.get(doi, 0) > 0:
                Handler.flaky[doi] -= 1
                return self._send(429, headers={"Retry-After": "0"})
            if doi == "10.1234/down":
                return self._send(503)
            work = WORKS.get(doi)
            return self._send(200, work) if work else self._send(404)
        if url.path == "/works":
            q = query.get("query.bibliographic", [""])[0].lower()
            items = [w for w in WORKS.values() if w["title"][0].lower().split()[0] in q]
            items.append(
                {"DOI": "10.9/noise", "title": ["Noise paper"], "author": [{"family": "Noise"}]}
            )
            return self._send(200, {"items": items})
        self._send(404)


@pytest.fixture
def server():
    Handler.calls = []
    Handler.flaky = {}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _ref(**kw):
    base = {
        "index": 0,
        "text": "x",
        "paragraph": 0,
        "authors": ["Smith"],
        "year": "2020",
        "title": "A study of things",
    }
    base.update(kw)
    if base.get("doi"):
        base["doi_valid"] = True
    return Reference(**base)


def test_doi_lookup_found_with_polite_headers(server):
    r = Resolver(server, mailto="ops@example.org", backoff=0)
    assert r.check(_ref(doi="10.1234/good")) == {
        "status": "found",
        "doi": "10.1234/good",
        "title": "A study of things",
        "retracted": False,
    }
    path, query, agent = Handler.calls[-1]
    assert path == "/works/10.1234/good"
    assert "mailto:ops@example.org" in agent and query["mailto"] == ["ops@example.org"]


def test_retraction_is_flagged(server):
    out = Resolver(server, backoff=0).check(
        _ref(doi="10.1234/retracted", authors=["Fraud"], year="2019", title="Faked results")
    )
    assert out["retracted"] is True


def test_doi_pointing_to_another_work(server):
    out = Resolver(server, backoff=0).check(_ref(doi="10.1234/other"))
    assert out["status"] == "doi_mismatch"
    assert "another work" in out["reason"]


def test_unknown_doi(server):
    assert (
        Resolver(server, backoff=0).check(_ref(doi="10.1234/missing"))["status"] == "doi_not_found"
    )


def test_retries_on_429_then_succeeds(server):
    Handler.flaky["10.1234/good"] = 2
    out = Resolver(server, backoff=0, retries=3).check(_ref(doi="10.1234/good"))
    assert out["status"] == "found"
    assert sum(1 for c in Handler.calls if c[0] == "/works/10.1234/good") == 3


def test_persistent_5xx_is_reported_not_raised(server):
    out = Resolver(server, backoff=0, retries=2).check(_ref(doi="10.1234/down"))
    assert out["status"] == "error"
    assert sum(1 for c in Handler.calls if c[0] == "/works/10.1234/down") == 3


def test_search_then_validate(server):
    resolver = Resolver(server, backoff=0)
    found = resolver.check(_ref())
    assert found["status"] == "found" and found["doi"] == "10.1234/good"
    # A candidate with a similar title but another author and year does not validate.
    assert (
        resolver.check(_ref(authors=["Nobody"], year="1990", title="A study of cats"))["status"]
        == "not_found"
    )


def test_analyze_with_resolver_url(server):
    html = (
        b"<p>Text (Smith, 2020).</p><h2>References</h2>"
        b"<p>Smith, J. (2020). A study of things. Journal, 1, 2. https://doi.org/10.1234/good</p>"
    )
    report = analyze(html, "t.html", resolver_url=server)
    assert report["references"][0]["resolver"]["status"] == "found"
