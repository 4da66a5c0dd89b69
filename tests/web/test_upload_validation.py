"""Upload checks: each bad input gets a clear error, and nothing is queued for it."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from jobs.models import AnalysisJob

pytestmark = pytest.mark.django_db

API = "/api/analysis-jobs"


def post_api(client, **files):
    return client.post(API, files)


def thesis(name="thesis.md", data=b"# Thesis\n\nBody (Smith, 2020).\n", **kw):
    return SimpleUploadedFile(name, data, **kw)


def assert_rejected(resp, *fragments: str):
    assert resp.status_code == 400, resp.content
    assert resp["Content-Type"] == "application/json"
    message = resp.json()["error"]
    for fragment in fragments:
        assert fragment in message, message
    assert AnalysisJob.objects.count() == 0


def test_too_big_is_refused_with_the_limit_in_the_message(user_client, settings):
    settings.ACURIO_MAX_UPLOAD_MB = 1
    resp = post_api(user_client, file=thesis(data=b"a" * (1024 * 1024 + 1)))
    assert_rejected(resp, "too large", "limit is 1 MB")


def test_declared_body_far_over_the_limit_is_refused_before_reading(user_client, settings):
    settings.ACURIO_MAX_UPLOAD_MB = 1
    resp = user_client.post(
        API,
        data=b"x",
        content_type="multipart/form-data; boundary=zzz",
        CONTENT_LENGTH=str(10 * 1024 * 1024),
    )
    assert_rejected(resp, "too large", "limit is 1 MB")


def test_library_over_the_limit_is_refused(user_client, settings):
    settings.ACURIO_MAX_UPLOAD_MB = 1
    resp = post_api(
        user_client,
        file=thesis(),
        library=SimpleUploadedFile("refs.bib", b"@article{" + b"a" * (1024 * 1024) + b"}"),
    )
    assert_rejected(resp, "too large")


def test_empty_file_is_refused(user_client):
    assert_rejected(post_api(user_client, file=thesis(data=b"")), "thesis.md is empty")


@pytest.mark.parametrize("name", ["thesis.exe", "thesis", "thesis.odt", "notes.bib"])
def test_unsupported_extension_is_refused(user_client, name):
    assert_rejected(
        post_api(user_client, file=thesis(name=name)), "not a supported thesis format", ".docx"
    )


def test_docx_that_is_not_a_zip_is_refused(user_client):
    resp = post_api(user_client, file=thesis("thesis.docx", b"Just some text, not a zip"))
    assert_rejected(resp, "not a Word document")


def test_pdf_without_a_pdf_header_is_refused(user_client):
    resp = post_api(user_client, file=thesis("thesis.pdf", b"GIF89a not a pdf"))
    assert_rejected(resp, "not a PDF file")


def test_binary_data_named_as_text_is_refused(user_client):
    resp = post_api(user_client, file=thesis("thesis.md", b"\x00\x01\x02\xff" * 100))
    assert_rejected(resp, "does not look like a text file")


def test_library_of_a_wrong_type_is_refused(user_client):
    resp = post_api(
        user_client, file=thesis(), library=SimpleUploadedFile("refs.docx", b"PK\x03\x04...")
    )
    assert_rejected(resp, "not a supported reference library format", ".bib")


def test_csl_json_library_that_is_not_json_is_refused(user_client):
    resp = post_api(
        user_client, file=thesis(), library=SimpleUploadedFile("refs.json", b"{not json")
    )
    assert_rejected(resp, "refs.json is not valid JSON")


def test_missing_file_field_is_explained(user_client):
    resp = user_client.post(API, {"other": thesis()})
    assert_rejected(resp, "a file is required", "'file'")


def test_a_body_that_is_not_multipart_is_explained(user_client):
    resp = user_client.post(API, data={"file": "x"}, content_type="application/json")
    assert_rejected(resp, "multipart/form-data")


def test_api_needs_a_signed_in_user(client):
    resp = post_api(client, file=thesis())
    assert resp.status_code == 401
    assert "sign in" in resp.json()["error"]
    assert AnalysisJob.objects.count() == 0


def test_upload_page_shows_the_error_and_keeps_the_form(user_client, settings):
    settings.ACURIO_MAX_UPLOAD_MB = 1
    resp = user_client.post(reverse("upload"), {"file": thesis(data=b"a" * (2 * 1024 * 1024))})
    assert resp.status_code == 400
    body = resp.content.decode()
    assert "The file is too large (this one is 2.0\xa0MB): the limit is 1 MB." in body
    assert 'id="upload-form"' in body
    assert AnalysisJob.objects.count() == 0


def test_upload_page_escapes_the_file_name_in_errors(user_client):
    resp = user_client.post(reverse("upload"), {"file": thesis(name="<b onclick=x>.exe")})
    assert resp.status_code == 400
    body = resp.content.decode()
    assert "<b onclick=x>" not in body
    assert "&lt;b onclick=x&gt;.exe" in body


def test_upload_page_needs_login(client):
    resp = client.get(reverse("upload"))
    assert resp.status_code == 302
    assert resp["Location"].startswith(reverse("login"))


def test_upload_page_renders_the_limit(user_client, settings):
    settings.ACURIO_MAX_UPLOAD_MB = 7
    resp = user_client.get(reverse("upload"))
    assert resp.status_code == 200
    assert "Files up to 7 MB" in resp.content.decode()
    assert f'data-max-bytes="{7 * 1024 * 1024}"' in resp.content.decode()
