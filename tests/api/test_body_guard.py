"""A NUL character is refused wherever a request carries it, on SQLite as PostgreSQL refuses it;
a body larger than any route takes is refused before it is read whole."""

from __future__ import annotations

from sqlalchemy import select

from app.db import session_scope
from app.models import Project
from tests.conftest import api_headers, browser_login, make_project, make_user

MESSAGE = "the request holds a NUL character (\\u0000), which no field may contain"


def test_json_and_form_bodies_with_a_nul_change_nothing(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, description="As it was.")
    make_user(session_factory, "max", "manager")
    headers = {**api_headers(client, "max"), "content-type": "application/json"}
    url = f"/api/v1/projects/{project.id}"
    for body in ('{"description": "a\\u0000b"}', '{"guidelines": "x", "description": "\\\\\\u0000"}'):
        refused = client.patch(url, content=body, headers=headers)
        assert refused.status_code == 422 and refused.json()["detail"] == MESSAGE, body
    # An escaped backslash before "u0000" is text, not a NUL.
    kept = client.patch(url, content='{"description": "C:\\\\u0000"}', headers=headers)
    assert kept.status_code == 200 and kept.json()["description"] == "C:\\u0000"

    csrf = browser_login(client, "max")
    page = client.post(f"/manage/projects/{project.id}/settings",
                       data={"csrf_token": csrf, "description": "a\x00b", "overlap": "1"})
    assert page.status_code == 422 and "NUL character" in page.text
    # The same form sent as multipart, which the door does not read, meets the database's refusal.
    fields = {"csrf_token": (None, csrf), "description": (None, "a\x00b"), "overlap": (None, "1")}
    page = client.post(f"/manage/projects/{project.id}/settings", files=fields)
    assert page.status_code == 422 and "NUL" in page.text and "Log out" in page.text
    # A second Content-Type does not hide a JSON body from the check.
    twice = client.patch(url, content='{"description": "a\\u0000b"}',
                         headers=[*headers.items(), ("content-type", "text/plain")])
    assert twice.status_code == 422 and twice.json()["detail"] == MESSAGE
    with session_scope(session_factory) as session:
        assert session.scalar(select(Project.description)) == "C:\\u0000"


def test_an_import_separator_with_a_nul_is_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    make_user(session_factory, "max", "manager")
    response = client.post(
        f"/api/v1/projects/{project.id}/imports",
        headers=api_headers(client, "max"),
        data={"format": "solutions", "separator": "\x00"},
        files={"file": ("c.jsonl", b'{"problem_id": 1, "text": "a"}\n', "application/json")},
    )
    assert response.status_code == 422, response.text
    assert "must not contain a NUL character" in response.json()["detail"]


def test_a_body_larger_than_any_route_takes_is_refused_unread(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, description="As it was.")
    make_user(session_factory, "max", "manager")
    token = api_headers(client, "max")
    url = f"/api/v1/projects/{project.id}"
    big = '{"description": "' + "x" * (16 * 1024 * 1024) + '"}'
    # JSON, a body without a Content-Type (which FastAPI parses as JSON), and one sent in chunks
    # without a declared length.
    for headers, content in (({"content-type": "application/json"}, big), ({}, big),
                             ({"content-type": "application/json"}, iter([big[:1000].encode(), big[1000:].encode()]))):
        refused = client.patch(url, content=content, headers={**token, **headers})
        assert refused.status_code == 413, refused.text[:200]
        assert refused.json()["detail"] == "the request body is larger than 16 MB, more than any field here takes"
    # Called multipart, a body a route reads whole is bounded as well: only the file upload
    # routes read theirs as it comes.
    multipart = {"content-type": "multipart/form-data; boundary=zz"}
    refused = client.post("/api/v1/auth/tokens", content=big, headers=multipart)
    assert refused.status_code == 413
    upload = client.post(f"/api/v1/projects/{project.id}/imports", headers=token,
                         files={"file": ("big.jsonl", b"x" * (17 * 1024 * 1024))}, data={"format": "math"})
    assert upload.status_code == 422 and "line longer than 10 MB" in upload.text, upload.text[:300]
    # Refused as the route would refuse the caller first.
    assert client.patch(url, content=big, headers={"content-type": "application/json"}).status_code == 401
    with session_scope(session_factory) as session:
        assert session.scalar(select(Project.description)) == "As it was."


def test_a_utf16_body_is_said_to_be_not_utf8_rather_than_to_hold_a_nul(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "widened", description="kept")
    make_user(session_factory, "max", "manager")
    headers = {**api_headers(client, "max"), "Content-Type": "application/json"}
    for encoding in ("utf-16", "utf-16-le", "utf-32"):
        response = client.patch(f"/api/v1/projects/{project.id}", headers=headers,
                                content='{"description": "changed"}'.encode(encoding))
        assert response.status_code == 422, encoding
        assert response.json()["detail"].startswith("the body is not UTF-8"), (encoding, response.text)
    # A NUL escaped in UTF-8 JSON is still named as such.
    nul = client.patch(f"/api/v1/projects/{project.id}", headers=headers, content=b'{"description": "a\\u0000b"}')
    assert "NUL character" in nul.json()["detail"]
    with session_scope(session_factory) as session:
        assert session.scalars(select(Project.description).where(Project.id == project.id)).one() == "kept"
