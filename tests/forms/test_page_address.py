"""The address a page asks the browser to show: without the parameter that carried a one-time
notice, and, after a form post, the page the form belongs to (app/templating.page_address)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import browser_login, make_project, make_user


def _address(page: str) -> str | None:
    found = re.search(r'<meta name="page-address" content="([^"]*)">', page)
    return found.group(1) if found else None


@pytest.fixture
def admin(client, session_factory) -> str:  # type: ignore[no-untyped-def]
    make_user(session_factory, "boss", "admin")
    return browser_login(client, "boss")


def test_a_notice_shows_once_and_leaves_the_address(client, session_factory, admin) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    page = client.get(f"/admin/users?password_set={ann.id}").text
    assert "New password set for ann" in page
    assert _address(page) == "/admin/users"
    assert 'src="/static/js/page_address.js"' in page
    project = make_project(session_factory, "algebra")
    kept = client.get(f"/manage/projects/{project.id}/labels/1?gold=made&via=reports").text
    assert _address(kept) == f"/manage/projects/{project.id}/labels/1?via=reports"


def test_a_page_without_a_notice_keeps_its_address(client, admin) -> None:  # type: ignore[no-untyped-def]
    page = client.get("/admin/users?page=2").text
    assert _address(page) is None and "page_address.js" not in page


@pytest.mark.parametrize(
    ("path", "form", "address"),
    [
        ("/admin/users/{ann}/role", {"role": "superuser"}, "/admin/users"),
        ("/admin/users", {"username": "x", "role": "labeler", "password": "short"}, "/admin/users"),
        ("/account/password", {"current_password": "wrong", "new_password": "nine quiet herons",
                               "repeat_password": "nine quiet herons"}, "/account"),
    ],
)
def test_a_refused_form_shows_the_address_of_its_page(client, session_factory, admin, path, form, address) -> None:  # type: ignore[no-untyped-def]
    ann = make_user(session_factory, "ann", "labeler")
    refused = client.post(path.format(ann=ann.id), data={"csrf_token": admin, **form})
    assert 400 <= refused.status_code < 500
    assert _address(refused.text) == address
    assert client.get(address).status_code == 200


def test_a_refused_login_keeps_where_it_was_going(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ann", "labeler")
    page = client.get("/login?next=/label/stats")
    token = re.search(r'name="login_csrf" value="([^"]+)"', page.text).group(1)
    refused = client.post("/login", data={"username": "ann", "password": "wrong password",
                                          "login_csrf": token, "next": "/label/stats"})
    assert refused.status_code == 401
    assert _address(refused.text) == "/login?next=%2Flabel%2Fstats"


def test_an_address_the_browser_would_read_as_another_host_is_left_alone(client, admin) -> None:  # type: ignore[no-untyped-def]
    page = client.get("/%2F%2Fexample.org?saved=1")
    assert _address(page.text) is None
