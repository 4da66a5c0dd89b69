"""Every error of the JSON API is JSON with a clear ``error``: malformed multipart bodies, file
names past the limit, nesting too deep, CSRF, unknown endpoints and methods; the fairness
limits answer 429 (with ``Retry-After`` for the rate); texts in UTF-16/32 with a byte-order
mark are accepted."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.analysis import AnalysisInputError, load_library
from jobs.analysis.library import JsonTooDeep, json_depth, load_json
from jobs.durable.models import Instance
from jobs.forms import THESIS_EXTENSIONS, check_content, decode_bom
from jobs.models import AnalysisJob, JobStatus
from jobs.pipeline import priority_of

pytestmark = pytest.mark.django_db

THESIS = (
    "Findings were reported before (Smith, 2020).\n\nReferences\n\n"
    "Smith, J. (2020). A study of things. Journal of Studies, 1(2), 3-4.\n"
)
CREATE = "/api/analysis-jobs"
SAVE = "/api/analysis-runs"


def upload(client, name="thesis.txt", data: bytes | None = None, **extra):
    data = THESIS.encode() if data is None else data
    return client.post(CREATE, {"file": SimpleUploadedFile(name, data)}, **extra)


def assert_json_error(resp, status: int) -> str:
    assert resp.status_code == status, resp.content[:300]
    assert resp["Content-Type"].startswith("application/json")
    error = resp.json()["error"]
    assert isinstance(error, str) and len(error) > 10
    return error


@pytest.fixture(autouse=True)
def roomy_limits(settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 3
    settings.ACURIO_UPLOAD_RATE_LIMIT = 20
    settings.ACURIO_UPLOAD_RATE_WINDOW_SECONDS = 600


# --- Malformed requests -------------------------------------------------------------------


def test_multipart_without_a_boundary_is_a_json_400(user_client):
    resp = user_client.generic(
        "POST", CREATE, b"--x\r\n\r\nhello", content_type="multipart/form-data"
    )
    error = assert_json_error(resp, 400)
    assert "multipart" in error.lower() and "boundary" in error.lower()


def test_multipart_with_a_broken_boundary_is_a_json_400(user_client):
    resp = user_client.generic(
        "POST", CREATE, b"garbage", content_type="multipart/form-data; boundary=\x00"
    )
    assert_json_error(resp, 400)


def test_a_10000_character_file_name_ends_in_json(user_client):
    """Django's parser cuts an uploaded file's name to 255 characters (keeping the extension),
    or refuses the part's header: either way the answer is JSON and the stored name fits."""
    resp = upload(user_client, name="a" * 9_996 + ".txt")
    if resp.status_code == 201:
        job = AnalysisJob.objects.get()
        assert len(job.filename) <= 255 and job.filename.endswith(".txt")
    else:
        assert_json_error(resp, 400)


def test_a_raw_10000_character_file_name_ends_in_json(user_client):
    boundary = "b0undary"
    body = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{"c" * 10_000}.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
        f"{THESIS}\r\n--{boundary}--\r\n"
    ).encode()
    resp = user_client.generic(
        "POST", CREATE, body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    assert resp["Content-Type"].startswith("application/json")
    if resp.status_code == 201:
        assert len(AnalysisJob.objects.get().filename) <= 255
    else:
        assert_json_error(resp, 400)


def test_a_file_name_past_255_characters_is_refused_by_the_form():
    reason = check_content("d" * 9_996 + ".txt", THESIS.encode(), THESIS_EXTENSIONS, "thesis")
    assert reason.startswith("The file name has 10,000 characters; the limit is 255.")


def test_a_255_character_file_name_is_accepted(user_client):
    resp = upload(user_client, name="a" * 251 + ".txt")
    assert resp.status_code == 201, resp.content


def test_a_10000_character_file_name_on_the_upload_page(user_client):
    resp = user_client.post("/upload/", {"file": SimpleUploadedFile("b" * 10_000 + ".md", b"x")})
    assert resp.status_code in (302, 400)
    if resp.status_code == 302:
        assert len(AnalysisJob.objects.get().filename) <= 255


@pytest.mark.parametrize("depth", [65, 2_000, 200_000])
def test_deeply_nested_json_body_is_a_json_400(user_client, depth):
    body = "[" * depth + "]" * depth
    error = assert_json_error(user_client.post(SAVE, body, content_type="application/json"), 400)
    assert "the limit is 64" in error


def test_nested_json_object_in_the_job_id_is_a_json_400(user_client):
    body = '{"job_id": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}"
    error = assert_json_error(user_client.post(SAVE, body, content_type="application/json"), 400)
    assert "nests 101 levels deep; the limit is 64" in error


def test_json_within_the_depth_is_read(user_client, make_job):
    job = make_job()
    resp = user_client.post(SAVE, {"job_id": job.pk}, content_type="application/json")
    assert resp.status_code == 201


def test_invalid_utf8_json_body_is_a_json_400(user_client):
    resp = user_client.post(SAVE, b'{"job_id": "\xff\xfe"}', content_type="application/json")
    assert_json_error(resp, 400)


def test_wrong_method_is_a_json_405(user_client):
    resp = user_client.get(CREATE)
    assert "POST" in assert_json_error(resp, 405)
    assert resp["Allow"] == "POST"
    assert_json_error(user_client.put(SAVE, "{}", content_type="application/json"), 405)
    assert_json_error(user_client.post("/api/analysis-jobs/1"), 405)


def test_unknown_api_path_is_a_json_404(user_client):
    assert_json_error(user_client.get("/api/nothing-here"), 404)


def test_missing_csrf_token_is_a_json_403(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    error = assert_json_error(upload(client), 403)
    assert "X-CSRFToken" in error
    # The multipart parser error is JSON even where the CSRF check reads the body first.
    resp = client.generic("POST", CREATE, b"--x\r\n", content_type="multipart/form-data")
    assert resp.status_code in (400, 403)
    assert resp["Content-Type"].startswith("application/json")


def test_pages_keep_their_html_errors(user_client):
    resp = user_client.get("/no-such-page")
    assert resp.status_code == 404
    assert not resp["Content-Type"].startswith("application/json")


def test_too_many_fields_is_a_json_400(user_client, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    data = {f"f{i}": "x" for i in range(20)}
    data["file"] = SimpleUploadedFile("t.txt", THESIS.encode())
    assert_json_error(user_client.post(CREATE, data), 400)


# --- Byte-order marks ----------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_text_with_a_bom_is_accepted(user_client, encoding):
    data = THESIS.encode(encoding)
    if encoding == "utf-16-le":
        data = b"\xff\xfe" + data
    elif encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    resp = upload(user_client, data=data)
    assert resp.status_code == 201, resp.content
    assert decode_bom(data) == THESIS


def test_utf16_without_a_bom_is_still_refused(user_client):
    resp = upload(user_client, data=THESIS.encode("utf-16-le"))
    assert "does not look like a text file" in assert_json_error(resp, 400)


def test_a_bom_that_lies_is_refused(user_client):
    resp = upload(user_client, data=b"\xff\xfe\x00\xd8")  # a lone surrogate in UTF-16
    assert_json_error(resp, 400)


def test_utf16_csl_json_library_is_read():
    items = [
        {"title": "A study", "author": [{"family": "Smith"}], "issued": {"date-parts": [[2020]]}}
    ]
    library = load_library(json.dumps(items).encode("utf-16"), "lib.json")
    assert len(library.items) == 1 and library.items[0].year == "2020"


# --- CSL-JSON nesting ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deep_csl_json_library_is_a_clear_error(depth):
    data = ("[" * depth + "]" * depth).encode()
    with pytest.raises(AnalysisInputError, match="the limit is 64"):
        load_library(data, "lib.json")


def test_deep_csl_json_library_upload_is_a_json_400(user_client):
    deep = ("[" * 50_000 + "]" * 50_000).encode()
    resp = user_client.post(
        CREATE,
        {
            "file": SimpleUploadedFile("t.txt", THESIS.encode()),
            "library": SimpleUploadedFile("lib.json", deep),
        },
    )
    assert "the limit is 64" in assert_json_error(resp, 400)


def test_odd_shapes_in_a_csl_json_library_do_not_crash():
    items = [
        {"title": "A", "author": 5, "issued": {"date-parts": {"a": 1}}, "DOI": ["x"]},
        {"title": "B", "author": [{"family": 7}], "issued": {"date-parts": "2020"}},
        {"title": "C", "issued": {"date-parts": [[]]}},
        "not an item",
    ]
    library = load_library(json.dumps(items).encode(), "lib.json")
    assert [item.title for item in library.items] == ["A", "B", "C"]


def test_json_depth_and_load_json():
    assert json_depth(1) == 0
    assert json_depth([]) == 1
    assert json_depth({"a": [1, {"b": []}]}) == 4
    assert load_json("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(JsonTooDeep, match="nests 3 levels deep; the limit is 2"):
        load_json("[[[1]]]", max_depth=2)
    with pytest.raises(ValueError):
        load_json("{nope")


# --- Fairness: active jobs and the upload rate -----------------------------------------------


def test_active_job_limit_is_a_429_with_a_clear_error(user_client, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 2
    assert upload(user_client).status_code == 201
    assert upload(user_client).status_code == 201
    resp = upload(user_client)
    error = assert_json_error(resp, 429)
    assert error.startswith("You have 2 analyses queued or running; the limit is 2.")
    assert AnalysisJob.objects.count() == 2


def test_a_finished_job_makes_room_again(user_client, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 1
    assert upload(user_client).status_code == 201
    assert upload(user_client).status_code == 429
    AnalysisJob.objects.update(status=JobStatus.COMPLETE, finished_at="2026-01-01T00:00Z")
    assert upload(user_client).status_code == 201


def test_the_active_limit_is_per_user(user_client, other_user, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 1
    assert upload(user_client).status_code == 201
    other = Client()
    other.force_login(other_user)
    assert upload(other).status_code == 201
    assert upload(user_client).status_code == 429


def test_upload_rate_limit_is_a_429_with_retry_after(user_client, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 0
    settings.ACURIO_UPLOAD_RATE_LIMIT = 3
    settings.ACURIO_UPLOAD_RATE_WINDOW_SECONDS = 120
    for _ in range(3):
        assert upload(user_client).status_code == 201
    resp = upload(user_client)
    error = assert_json_error(resp, 429)
    assert "3 analyses in the last 2 minutes; the limit is 3" in error
    assert 1 <= int(resp["Retry-After"]) <= 120


def test_the_upload_page_shows_the_limit_message(user_client, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 1
    page = user_client.post("/upload/", {"file": SimpleUploadedFile("t.md", THESIS.encode())})
    assert page.status_code == 302
    page = user_client.post("/upload/", {"file": SimpleUploadedFile("t.md", THESIS.encode())})
    assert page.status_code == 429
    text = page.content.decode()
    assert "queued or running; the limit is 1." in text
    assert "<script>" not in text.split("queued or running")[0][-500:]  # the message is text


def test_limits_of_zero_are_off(user_client, settings):
    settings.ACURIO_MAX_ACTIVE_JOBS = 0
    settings.ACURIO_UPLOAD_RATE_LIMIT = 0
    for _ in range(5):
        assert upload(user_client).status_code == 201


def test_parallel_uploads_of_one_user_respect_the_limit(user, settings, transactional_db):
    """Ten uploads at once: the user-row lock counts them one after the other."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    settings.ACURIO_MAX_ACTIVE_JOBS = 3

    def one(_):
        client = Client()
        client.force_login(user)
        try:
            return upload(client).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(one, range(10)))
    assert sorted(codes) == [201] * 3 + [429] * 7
    assert AnalysisJob.objects.filter(owner=user).count() == 3


def test_small_uploads_get_a_higher_priority(user_client):
    assert priority_of(1_000) == 9
    assert priority_of(64 * 1024) == 9
    assert priority_of(1024 * 1024) == 5
    assert priority_of(50 * 1024 * 1024) == 0
    sizes = [priority_of(2**k) for k in range(10, 27)]
    assert sizes == sorted(sizes, reverse=True)
    upload(user_client, data=THESIS.encode())
    upload(user_client, name="big.txt", data=(THESIS * 20_000).encode())
    small, big = AnalysisJob.objects.order_by("pk")
    priorities = {
        i.id: i.priority
        for i in Instance.objects.filter(id__in=[small.workflow_id, big.workflow_id])
    }
    assert priorities[small.workflow_id] == 9
    assert priorities[big.workflow_id] < 9
