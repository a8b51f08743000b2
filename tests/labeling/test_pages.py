"""The labeler's pages over HTTP: login, the page's hand-over to its script, own stats."""

from __future__ import annotations

import json
import re

from app.labeling import pages as labeling_pages
from app.models import Role
from tests.browser.conftest import add_solution
from tests.conftest import api_headers, browser_login, make_project, make_user


def _meta_csrf(html: str) -> str:
    return re.search(r'<meta name="csrf-token" content="([^"]+)">', html).group(1)  # type: ignore[union-attr]


def _config(html: str) -> dict:
    raw = re.search(
        r'<script type="application/json" id="labeler-config">(.*?)</script>', html, re.S
    ).group(1)  # type: ignore[union-attr]
    return json.loads(raw)


def test_label_page_needs_a_login(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    response = client.get(f"/label/{project.id}", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/login?next=/label/{project.id}"


def test_label_page_hands_its_script_json_and_the_csrf_token(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, labeling_mode="full", lease_minutes=45)
    make_user(session_factory, "lena", Role.labeler)
    csrf = browser_login(client, "lena")
    response = client.get(f"/label/{project.id}")
    assert response.status_code == 200
    html = response.text
    assert _meta_csrf(html) == csrf
    assert _config(html) == {
        "project": {
            "id": project.id,
            "name": "algebra",
            "labeling_mode": "full",
            "lease_minutes": 45,
        },
        "username": "lena",
        # STEPWISE_SESSION_IDLE_MINUTES: the page renews a long lease before the session would end.
        "session_idle_minutes": 120,
        "guidelines": None,
    }
    # Every script is a file from our own /static (the CSP allows nothing else) or inert JSON.
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'src="/static/' in tag or 'type="application/json"' in tag, tag
    assert "/static/vendor/katex/katex.min.css" in html
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "Full mode" in html


def test_label_page_for_a_missing_project_is_a_404_page(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", Role.labeler)
    browser_login(client, "lena")
    response = client.get("/label/9999")
    assert response.status_code == 404
    assert "no project with id 9999" in response.text
    assert "text/html" in response.headers["content-type"]


def test_the_page_token_lets_the_page_call_the_api(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solution(session_factory, project, ["$a$", "$b$"])
    make_user(session_factory, "lena", Role.labeler)
    browser_login(client, "lena")
    csrf = _meta_csrf(client.get(f"/label/{project.id}").text)
    url = f"/api/v1/projects/{project.id}/tasks/next"
    assert client.post(url).status_code == 403
    assert client.post(url, headers={"X-CSRF-Token": "forged"}).status_code == 403
    task = client.post(url, headers={"X-CSRF-Token": csrf}).json()["task"]
    assert task["solution"]["steps"] == ["$a$", "$b$"]


def test_stats_show_only_the_labelers_own_labels(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    add_solution(session_factory, project, ["$a$", "$b$", "$c$"])
    make_user(session_factory, "lena", Role.labeler)
    make_user(session_factory, "omar", Role.labeler)
    for name, ratings, flags, reason in (
        ("lena", [1, -1], [False, True], "found_error"),
        ("omar", [1, 1, 1], [False, False, False], "solution"),
    ):
        headers = api_headers(client, name)
        task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
        body = {
            "idempotency_key": f"key-of-{name}",
            "ratings": [{"rating": r, "flagged": f} for r, f in zip(ratings, flags)],
            "finish_reason": reason,
            "total_time_ms": 65000,
        }
        submitted = client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=body)
        assert submitted.status_code == 200, submitted.text

    stats = client.get("/api/v1/me/stats", headers=api_headers(client, "lena")).json()
    assert stats["labels"] == 1 and stats["steps_rated"] == 2 and stats["flagged_steps"] == 1
    assert stats["by_finish_reason"] == {"found_error": 1}
    assert [(r["project_name"], r["finish_reason"], r["steps_rated"]) for r in stats["recent"]] == [
        ("algebra", "found_error", 2)
    ]

    browser_login(client, "lena")
    html = client.get("/label/stats").text
    assert re.search(r"<dt>Labels</dt><dd>1</dd>", html)
    assert re.search(r"<dt>Steps flagged</dt><dd>1</dd>", html)
    assert "1 min 5 s" in html
    assert "found error" in html and "no error</span>" not in html


def test_project_list_links_to_the_labeling_page(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    add_solution(session_factory, project, ["$a$"])
    empty = make_project(session_factory, name="geometry")
    make_user(session_factory, "lena", Role.labeler)
    browser_login(client, "lena")
    html = client.get("/label").text
    assert f'href="/label/{project.id}"' in html
    assert f'href="/label/{empty.id}"' not in html


def test_project_list_counts_waiting_slots_only_up_to_the_limit(client, session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Counting every slot of each project on every visit is the slow case for a large queue.
    monkeypatch.setattr(labeling_pages, "WAITING_COUNT_LIMIT", 3)
    large = make_project(session_factory, name="large")
    for n in range(5):
        add_solution(session_factory, large, [f"${n}$"])
    small = make_project(session_factory, name="small")
    add_solution(session_factory, small, ["$a$"])
    make_user(session_factory, "lena", Role.labeler)
    browser_login(client, "lena")
    cells = re.findall(r'<td class="num" data-label="For you">([^<]*)</td>', client.get("/label").text)
    assert sorted(cells) == ["1", "3+"]
