"""A JSON body's bad values are named in the words the forms and the CLI use, not pydantic's."""

from __future__ import annotations

from tests.conftest import api_headers, make_user


def test_wrong_types_in_a_body_read_as_the_forms_say_them(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    response = client.post("/api/v1/projects", headers=api_headers(client, "max"),
                           json={"name": 5, "overlap": "two", "open_to_all": []})
    assert response.status_code == 422
    words = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert words == {"name": "must be text", "overlap": "must be a whole number",
                     "open_to_all": "must be true or false"}

    make_user(session_factory, "root", "admin")
    renamed = client.patch("/api/v1/users/1", headers=api_headers(client, "root"), json={"username": "other"})
    assert renamed.status_code == 422
    assert {"field": "username", "message": "is not a field here"} in renamed.json()["errors"]
