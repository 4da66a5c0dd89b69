"""http() steps against a local server the test starts on 127.0.0.1 (never the network)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection

from jobs.durable import DefinitionError, PermanentError, Worker, http, result, start, status, task
from jobs.durable.hostpatterns import PatternError, parse_pattern
from jobs.durable.kinds.http import HttpKind, host_allowed, idempotency_key, retry_after
from jobs.durable.models import Instance, Step
from tests.durable.support import T0, run_manage

pytestmark = pytest.mark.django_db


def http_step(iid) -> Step:
    return Step.objects.get(instance_id=iid, kind="http")


def test_2xx_returns_status_headers_json_body_and_duration(worker, clock, server):
    iid = start(http(server.base + "/ok", method="POST", body={"thesis": 7}))
    assert worker.drain() == 1
    out = result(iid)
    assert out["status"] == 200
    assert out["body"] == {"ok": True, "got": {"thesis": 7}}
    assert out["headers"]["x-trace"] == "t-1"
    assert isinstance(out["duration"], float) and out["duration"] >= 0
    sent = server.requests[0]
    assert sent["method"] == "POST" and sent["headers"]["Content-Type"] == "application/json"
    assert sent["headers"]["Idempotency-Key"] == idempotency_key(iid, http_step(iid).key)


def test_url_placeholders_and_body_from_read_named_results(worker, clock, server):
    flow = task("tests.durable.steps.flag").as_("doc") >> http(
        server.base + "/ok?doc=%(doc)s", method="POST", body_from="input"
    )
    iid = start(flow, input={"flag": "a b/c"})
    worker.drain()
    assert server.requests[0]["path"] == "/ok?doc=a%20b%2Fc"
    assert result(iid)["body"]["got"] == {"flag": "a b/c"}


def test_4xx_is_a_result_not_an_error(worker, clock, server):
    iid = start(http(server.base + "/missing"))
    worker.drain()
    assert status(iid) == "completed"
    assert result(iid)["status"] == 404 and result(iid)["body"] == "no such thesis"
    assert server.hits["/missing"] == 1, "no retry for a 4xx"


def test_5xx_then_2xx_retries_under_the_step_policy_with_the_same_idempotency_key(
    worker, clock, server
):
    iid = start(http(server.base + "/flaky", backoff=2, max_attempts=3))
    worker.drain()
    step = http_step(iid)
    assert step.status == "ready" and step.attempts == 1
    assert "answered 500" in step.error
    assert T0 + timedelta(seconds=1) <= step.run_at <= T0 + timedelta(seconds=2)
    clock.shift(2)
    worker.drain()
    assert result(iid)["body"] == {"second": True} and http_step(iid).attempts == 2
    keys = {r["headers"]["Idempotency-Key"] for r in server.requests}
    assert len(keys) == 1, "the same key on every retry of one activation"


def test_429_honours_retry_after(worker, clock, server):
    iid = start(http(server.base + "/busy", backoff=100))
    worker.drain()
    step = http_step(iid)
    assert step.run_at == T0 + timedelta(seconds=7), "Retry-After, not the 100s backoff"
    assert "Retry-After" in step.error
    clock.shift(6)
    assert worker.drain() == 0
    clock.shift(1)
    worker.drain()
    assert result(iid)["status"] == 200 and result(iid)["body"] == []


def test_5xx_every_time_fails_after_max_attempts(worker, clock, server):
    iid = start(http(server.base + "/down", max_attempts=2, backoff=1))
    worker.drain()
    clock.shift(1)
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed"
    assert "failed after 2 attempt(s)" in instance.error and "answered 503" in instance.error


def test_a_hanging_server_hits_the_timeout_and_retries(worker, clock, server):
    iid = start(http(server.base + "/hang", timeout=0.3, max_attempts=2, backoff=1))
    worker.drain()
    step = http_step(iid)
    assert step.status == "ready" and "timed out after 0.3s" in step.error
    clock.shift(1)
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed" and "timed out after 0.3s" in instance.error
    assert server.hits["/hang"] == 2


def test_a_refused_connection_is_a_network_error_that_retries(worker, clock, server):
    server.shutdown()
    server.server_close()  # nothing listens on that port any more
    iid = start(http(server.base + "/ok", max_attempts=2, backoff=1))
    worker.drain()
    assert http_step(iid).status == "ready" and "failed" in http_step(iid).error


def test_a_disallowed_host_fails_permanently_without_a_request(worker, clock, server, settings):
    settings.ACURIO_HTTP_ALLOW = ["api.example.org"]
    iid = start(http(server.base + "/ok", max_attempts=5))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed" and http_step(iid).attempts == 1
    assert "host '127.0.0.1' is not allowed" in instance.error
    assert "ACURIO_HTTP_ALLOW" in instance.error
    assert server.requests == []


def test_a_response_too_large_for_a_step_result_fails_permanently(worker, clock, server):
    iid = start(http(server.base + "/big"))
    worker.drain()
    instance = Instance.objects.get(pk=iid)
    assert instance.status == "failed" and "larger than 1024 KiB" in instance.error
    assert server.hits["/big"] == 1


def test_a_body_that_claims_json_but_is_not_is_kept_as_text(worker, clock, server):
    iid = start(http(server.base + "/fake-json"))
    worker.drain()
    assert result(iid)["body"] == "not json"


def test_placeholders_must_name_results_of_the_workflow():
    with pytest.raises(DefinitionError, match="no step of this workflow is named 'doc'"):
        start(http("http://x/%(doc)s"))
    with pytest.raises(DefinitionError, match="no step of this workflow is named 'payload'"):
        start(http("http://x/", body_from="payload"))


def test_nothing_is_allowed_by_default(settings):
    settings.ACURIO_HTTP_ALLOW = []
    assert not host_allowed("https://api.example.org/x")


@pytest.mark.parametrize(
    ("url", "patterns", "allowed"),
    [
        ("https://api.example.org/x", ["api.example.org"], True),
        ("https://a.b.example.org/x", ["*.example.org"], True),
        ("https://example.org.evil.net/", ["*.example.org"], False),
        ("http://127.0.0.1:8080/", ["127.0.0.1:8080"], True),
        ("http://127.0.0.1:8081/", ["127.0.0.1:8080"], False),
        ("https://API.Example.org/", ["api.example.org"], True),
        # a host alone: its default ports only
        ("http://api.example.org/", ["api.example.org"], True),
        ("http://api.example.org:8080/", ["api.example.org"], False),
        ("http://127.0.0.1:9999/", ["127.0.0.1:*"], True),
        # IPv6 in brackets
        ("http://[::1]:8765/", ["[::1]:8765"], True),
        ("http://[::1]:8766/", ["[::1]:8765"], False),
        ("https://[2001:db8::1]/", ["[2001:db8::*]"], True),
        ("http://[::1]/", ["api.example.org", "[::1]"], True),
    ],
)
def test_host_patterns(url, patterns, allowed):
    assert host_allowed(url, patterns) is allowed


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("https://api.example.org", "no scheme, path or spaces"),
        ("api.example.org/v1", "no scheme, path or spaces"),
        ("::1", "write an IPv6 address in brackets"),
        ("[::1", "opens '[' without closing it"),
        ("[::1]8765", "only ':port' may follow ']'"),
        ("host:http", "the port must be 1..65535"),
        ("host:70000", "the port must be 1..65535"),
        ("", "an empty host pattern"),
    ],
)
def test_malformed_patterns_are_named(pattern, message):
    with pytest.raises(PatternError, match=re.escape(message)):
        parse_pattern(pattern)
    with pytest.raises(PermanentError, match="ACURIO_HTTP_ALLOW"):
        host_allowed("https://api.example.org/", [pattern])


def test_a_malformed_pattern_stops_the_process_at_start_with_one_line():
    done = run_manage("check", ACURIO_HTTP_ALLOW="api.example.org,https://x.org/")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "acurio: ACURIO_HTTP_ALLOW: host pattern 'https://x.org/' must be a host or host:port"
        " (no scheme, path or spaces)"
    )


def test_retry_after_forms():
    assert retry_after("7") == 7.0
    assert retry_after("999999") == 3600.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after("soon") is None and retry_after(None) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "ftp://x/y"}, "absolute http"),
        ({"url": "/relative"}, "absolute http"),
        ({"url": "http://x/", "method": "BREW"}, "method"),
        ({"url": "http://x/", "headers": {"a": 1}}, "dict of strings"),
        ({"url": "http://x/", "timeout": 0}, "timeout"),
        ({"url": "http://x/", "body": 5}, "body"),
        ({"url": "http://x/", "retries": 5}, "unknown step option"),
        ({"url": "http://%(host)s/"}, "path and query only"),
        ({"url": "http://x/", "body": "b", "body_from": "doc"}, "not both"),
        ({"url": "http://x/", "body_from": "not a name"}, "must name a result"),
    ],
)
def test_bad_http_definitions_fail_where_written(kwargs, message):
    with pytest.raises(DefinitionError, match=message):
        http(**kwargs)


@pytest.mark.django_db(transaction=True)
def test_the_request_is_made_outside_any_transaction(server, monkeypatch):
    seen = []
    original = HttpKind.execute

    def spy(self, ctx, node):
        seen.append(connection.in_atomic_block)
        return original(self, ctx, node)

    monkeypatch.setattr(HttpKind, "execute", spy)
    iid = start(http(server.base + "/ok"))
    Worker(worker_id="tx-check").drain()
    assert seen == [False] and status(iid) == "completed"
