"""Every link a page shows its reader opens: no dead link, none to a page the role may not see."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import urlsplit

import pytest

from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user

HREF = re.compile(r'href="(/[^"#]*)')
# Links that act rather than show (logging out), or that are files rather than pages.
NOT_FOLLOWED = re.compile(r"^/(logout|static/)|/download")
PAGES_PER_ROLE = 60


def _label_one(client, project_id: int, username: str) -> None:  # type: ignore[no-untyped-def]
    headers = api_headers(client, username)
    task = client.post(f"/api/v1/projects/{project_id}/tasks/next", headers=headers).json()["task"]
    response = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json={
        "idempotency_key": "links-0001", "ratings": [{"rating": 1}, {"rating": -1}],
        "finish_reason": "found_error", "total_time_ms": 1000})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("role", ["labeler", "manager", "researcher", "admin"])
def test_every_link_a_role_is_shown_opens(client, session_factory, role: str) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "linked")
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "lena", "labeler")
    _label_one(client, project.id, "lena")
    if role != "labeler":
        make_user(session_factory, "reader", role)
    browser_login(client, "lena" if role == "labeler" else "reader")
    seen: set[str] = set()
    queue = ["/"]
    dead = []
    while queue and len(seen) < PAGES_PER_ROLE:
        address = queue.pop(0)
        if address in seen:
            continue
        seen.add(address)
        response = client.get(address)
        if response.status_code >= 400:
            dead.append((address, response.status_code))
            continue
        if "text/html" not in response.headers.get("content-type", ""):
            continue
        for link in HREF.findall(response.text):
            link = unescape(link)
            if not NOT_FOLLOWED.search(urlsplit(link).path) and link not in seen:
                queue.append(link)
    assert len(seen) > 5
    assert dead == [], f"links that do not open for a {role}: {dead}"
