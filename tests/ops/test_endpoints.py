"""/healthz, /readyz and /metrics, in the app: answers, the 503s, what a scrape shows, who may scrape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.deps import SESSION_COOKIE
from app.main import create_app
from app.migrate import upgrade
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user

TOKEN = "scrape-me-0123456789"
LOOPBACK = ("127.0.0.1", 40000)


def _client(settings: Settings, client: tuple[str, int] = LOOPBACK) -> TestClient:
    return TestClient(create_app(settings), client=client)


@pytest.fixture
def scraper(database_url: str, engine) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    settings = Settings(database_url=database_url, STEPWISE_ENV="test", STEPWISE_METRICS_TOKEN=TOKEN)
    with _client(settings) as client:
        yield client


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _value(text: str, name: str, **labels: str) -> float:
    return _samples(text).get((name, frozenset(labels.items())), 0.0)


def test_healthz_answers_with_a_request_id(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert len(response.headers["x-request-id"]) == 32
    assert client.get("/healthz").headers["x-request-id"] != response.headers["x-request-id"]


def test_a_sane_incoming_request_id_is_kept_and_anything_else_replaced(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/healthz", headers={"X-Request-ID": "lb-1234.abc"}).headers["x-request-id"] == "lb-1234.abc"
    for forged in ("a b", "x" * 200, "line\\nbreak", "<script>"):
        echoed = client.get("/healthz", headers={"X-Request-ID": forged}).headers["x-request-id"]
        assert echoed != forged and len(echoed) == 32


def test_a_bug_is_answered_as_any_error_with_the_request_id_to_quote(client, session_factory, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("a bug")

    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    monkeypatch.setattr("app.projects.service.list_projects", broken)
    monkeypatch.setattr("app.labeling.service.list_projects", broken)
    answer = client.get("/api/v1/projects", headers={**headers, "X-Request-ID": "support-1234"})
    assert answer.status_code == 500 and answer.headers["x-request-id"] == "support-1234"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.json() == {"detail": "the server failed on this request (a bug, logged): quote request id "
                                       "support-1234 when you report it"}
    assert any(r.exc_info and "a bug" in str(r.exc_info[1]) for r in caplog.records)
    browser_login(client, "lena")
    page = client.get("/label", headers={"X-Request-ID": "support-5678"})
    assert page.status_code == 500 and "text/html" in page.headers["content-type"]
    assert "Something went wrong on our side" in page.text and "support-5678" in page.text
    assert "content-security-policy" in page.headers


def test_head_is_answered_as_get_without_the_body(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    # Monitors check /healthz and /readyz with HEAD: a 405 read as the service down.
    for path in ("/healthz", "/readyz", "/login"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"] and "x-request-id" in head.headers
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    assert client.head("/api/v1/projects", headers=headers).status_code == 200
    assert client.head("/api/v1/projects").status_code == 401
    assert client.head("/api/v1/projects/1/tasks/next", headers=headers).status_code == 405


def test_readyz_is_ready_on_a_migrated_database(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ready"}


def test_readyz_refuses_a_database_behind_on_migrations(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    with _client(Settings(database_url=url, STEPWISE_ENV="test")) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["status"] == "unavailable"
        assert "not at head" in body["reason"] and "0007" in body["reason"] and "stepwise db upgrade" in body["reason"]
        assert client.get("/healthz").status_code == 200, "liveness does not depend on the database"


def test_readyz_tells_why_only_to_whoever_may_read_the_metrics(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    settings = Settings(database_url=url, STEPWISE_ENV="test", STEPWISE_METRICS_TOKEN=TOKEN)
    with _client(settings, ("203.0.113.9", 40000)) as client:
        stranger = client.get("/readyz")
        holder = client.get("/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
    assert stranger.status_code == 503 and stranger.json()["status"] == "unavailable"
    assert "0007" not in stranger.text and "STEPWISE_METRICS_ALLOW" in stranger.json()["reason"]
    assert any("not at head" in record.getMessage() for record in caplog.records), "the log has it"
    assert holder.status_code == 503 and "0007" in holder.json()["reason"]


def test_a_request_while_migrations_are_behind_names_the_revisions_only_to_operators(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    settings = Settings(database_url=url, STEPWISE_ENV="test", STEPWISE_METRICS_TOKEN=TOKEN)
    login = {"username": "ann", "password": "whatever-it-is", "name": "x"}
    with _client(settings, ("203.0.113.9", 40000)) as client:
        stranger = client.post("/api/v1/auth/tokens", json=login)
        client.cookies.set(SESSION_COOKIE, "a-session")
        page = client.get("/")
    with _client(settings) as client:
        operator = client.post("/api/v1/auth/tokens", json=login)
    assert stranger.status_code == 503
    assert stranger.json()["detail"] == "migrations are not at head: run `stepwise db upgrade`"
    assert page.status_code == 503 and "migrations are not at head" in page.text and "0007" not in page.text
    assert operator.status_code == 503 and "database at 0007" in operator.json()["detail"]
    assert any("database at 0007" in record.getMessage() for record in caplog.records), "the log has it"


def test_readyz_refuses_a_database_that_does_not_answer() -> None:
    # Port 1 on loopback: refused at once, and the password never shows in the reason.
    url = "postgresql://stepwise:hunter2secret@127.0.0.1:1/none"
    with _client(Settings(database_url=url, STEPWISE_ENV="test")) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["reason"].startswith("the database does not answer")
    assert "hunter2secret" not in response.text


def test_metrics_count_requests_by_route_template_labels_and_the_queue(scraper, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "secret-project-name")
    add_solutions(session_factory, project, 3)
    make_user(session_factory, "annabelle", "labeler")
    headers = api_headers(scraper, "annabelle")
    before = scraper.get("/metrics").text
    task = scraper.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    label = {"idempotency_key": "metrics-1", "ratings": [{"rating": 1}] * 3, "finish_reason": "solution", "total_time_ms": 10}
    for _ in range(2):  # the second is the same key again: stored once, counted once
        assert scraper.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=label).status_code == 200
    scraper.get("/api/v1/projects/987654", headers=headers)
    # A monitor's HEAD counts by its route, not with the paths nothing matched.
    scraper.head("/healthz")
    after = scraper.get("/metrics")
    assert after.status_code == 200 and after.headers["content-type"].startswith("text/plain")
    text = after.text

    def grew(name: str, **labels: str) -> float:
        return _value(text, name, **labels) - _value(before, name, **labels)

    assert grew("stepwise_labels_submitted_total", finish_reason="solution") == 1
    route = "/api/v1/assignments/{assignment_id}/submit"
    assert grew("stepwise_http_requests_total", method="POST", route=route, status="200") == 2
    assert grew("stepwise_http_request_duration_seconds_count", method="POST", route=route) == 2
    assert grew("stepwise_http_requests_total", method="GET", route="/api/v1/projects/{project_id}", status="404") == 1
    assert grew("stepwise_http_requests_total", method="HEAD", route="/healthz", status="200") == 1
    # Three solutions, overlap 1: one leased and labeled, two waiting.
    assert _value(text, "stepwise_queue_waiting_slots", project_id=str(project.id)) == 2
    # An empty queue is a 0, not a series gone: an alert on `== 0` must see it.
    empty = make_project(session_factory, "empty")
    assert ("stepwise_queue_waiting_slots", frozenset({("project_id", str(empty.id))})) in _samples(
        scraper.get("/metrics").text)
    assert _value(text, "stepwise_leases", state="active") == 0
    assert _value(text, "stepwise_rounds", status="failed") == 0
    assert ("stepwise_rounds_stalled", frozenset()) in _samples(text) and _value(text, "stepwise_rounds_stalled") == 0
    # Sample values left out: a duration's long decimals may hold any six digits.
    names_and_labels = "\n".join(line.rsplit(" ", 1)[0] for line in text.splitlines())
    for private in ("annabelle", "secret-project-name", "987654", headers["Authorization"].split()[1]):
        assert private not in names_and_labels


def test_leases_held_and_run_out_are_counted(scraper, session_factory, db) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text as sql

    project = make_project(session_factory, "algebra")
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "bob", "labeler")
    for name in ("ann", "bob"):
        scraper.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(scraper, name))
    db.execute(sql("UPDATE assignments SET expires_at = :past WHERE user_id = (SELECT id FROM users WHERE username = 'bob')"),
               {"past": "2000-01-01 00:00:00"})
    db.commit()
    text = scraper.get("/metrics").text
    assert _value(text, "stepwise_leases", state="active") == 1
    assert _value(text, "stepwise_leases", state="expired") == 1


def test_a_round_whose_worker_stopped_renewing_its_lease_is_counted_stalled(scraper, session_factory) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    from app.db import session_scope
    from app.models import Round, RoundStage, RoundStatus

    now = datetime.now(UTC)
    # One round at a time runs in a project: two projects.
    for name, expires in (("lost", now - timedelta(minutes=5)), ("held", now + timedelta(minutes=1))):
        project = make_project(session_factory, name)
        with session_scope(session_factory) as session:
            session.add(Round(project_id=project.id, number=1, status=RoundStatus.running, stage=RoundStage.train,
                              attempts=1, lease_owner="w", lease_expires_at=expires))
    text = scraper.get("/metrics").text
    assert _value(text, "stepwise_rounds", status="running") == 2
    assert _value(text, "stepwise_rounds_stalled") == 1


@pytest.mark.parametrize(
    ("client_host", "headers", "allowed"),
    [
        ("127.0.0.1", {}, True),
        ("::1", {}, True),
        ("203.0.113.9", {}, False),
        ("203.0.113.9", {"Authorization": f"Bearer {TOKEN}"}, True),
        ("203.0.113.9", {"Authorization": "Bearer wrong"}, False),
        ("203.0.113.9", {"Authorization": f"Basic {TOKEN}"}, False),
        ("10.1.2.3", {}, True),
    ],
)
def test_metrics_are_for_allowed_networks_or_the_token(database_url, engine, client_host, headers, allowed) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(
        database_url=database_url, STEPWISE_ENV="test", STEPWISE_METRICS_TOKEN=TOKEN,
        STEPWISE_METRICS_ALLOW="127.0.0.1/32, ::1/128, 10.0.0.0/8",
    )
    with _client(settings, (client_host, 40000)) as client:
        response = client.get("/metrics", headers=headers)
    assert response.status_code == (200 if allowed else 403)
    if not allowed:
        assert "STEPWISE_METRICS_TOKEN" in response.json()["detail"]


def test_by_default_only_loopback_may_scrape(database_url, engine) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(database_url=database_url, STEPWISE_ENV="test")
    with _client(settings, ("192.168.1.5", 40000)) as client:
        assert client.get("/metrics").status_code == 403
        # No token is set: an empty bearer must not match it.
        assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403
    with _client(settings) as client:
        assert client.get("/metrics").status_code == 200


def test_a_bad_network_in_the_allow_list_is_named() -> None:
    with pytest.raises(ValueError, match="'10.0.0.0/33' is not a network"):
        Settings(STEPWISE_METRICS_ALLOW="127.0.0.1/32,10.0.0.0/33")


def test_a_bad_scoring_batch_stops_the_settings_not_a_request() -> None:
    # The scorer's own rule: "8192.0" passes a plain int field, and int() reads "８１９２".
    for bad in ("0", "lots", "8192.0", "８１９２"):
        with pytest.raises(ValueError, match="STEPWISE_SCORE_BATCH_TOKENS"):
            Settings(STEPWISE_SCORE_BATCH_TOKENS=bad)
    assert Settings(STEPWISE_SCORE_BATCH_TOKENS="8192").score_batch_tokens == 8192


def test_the_operations_routes_stay_out_of_the_api_schema(client) -> None:  # type: ignore[no-untyped-def]
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert not {"/healthz", "/readyz", "/metrics"} & set(paths)
