"""Per-labeler activity on a small hand-built project, and its table on the project page."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from app.db import session_scope
from app.models import FinishReason, Label, User, utcnow
from app.projects.activity import project_activity
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user


def _steps(*ratings: int) -> list[dict]:  # type: ignore[type-arg]
    return [{"completions": [{"rating": r, "flagged": False}], "human_completion": None,
             "chosen_completion": None if r == -1 else 0} for r in ratings]


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    """ann, bob and cat take 10, 12 and 8 s a step; dan takes 1 s (under a quarter of the
    median labeler's 10 s) and is flagged; eve is as fast but with too few labels to judge."""
    project = make_project(session_factory, "activity")
    solutions = add_solutions(session_factory, project, 4, steps=4)
    users = {name: make_user(session_factory, name, "labeler").id for name in ("ann", "bob", "cat", "dan", "eve")}
    make_user(session_factory, "max", "manager")
    now = utcnow()

    def label(user: str, solution: int, ratings: tuple[int, ...], seconds_per_step: float,
              reason: FinishReason = FinishReason.solution, **extra: object) -> Label:
        return Label(project_id=project.id, solution_id=solution, user_id=users[user], steps=_steps(*ratings),
                     finish_reason=reason, total_time_ms=int(seconds_per_step * 1000 * len(ratings)),
                     **{"created_at": now, **extra})

    with session_scope(session_factory) as session:
        gold = label("cat", solutions[3], (1, -1), 8, FinishReason.found_error, is_quality_control=True)
        session.add_all([
            label("ann", solutions[0], (1, 1, 1, 1), 10),
            label("ann", solutions[1], (1, -1), 10, FinishReason.found_error),
            label("ann", solutions[2], (1, 1, 1, 1), 10),
            label("ann", solutions[3], (1, -1), 10, FinishReason.found_error),  # agrees with the gold
            label("bob", solutions[0], (1, 1), 12, FinishReason.give_up, finish_note="unsure"),
            label("bob", solutions[1], (1, 1, 1, 1), 12),
            label("bob", solutions[3], (1, 1, 1, 1), 12),  # disagrees with the gold
            label("cat", solutions[0], (1, 1, 1, 1), 8),
            gold,
            label("dan", solutions[0], (1, 1, 1, 1), 1),
            label("dan", solutions[1], (1, 1, 1, 1), 1),
            label("dan", solutions[2], (1, 1, 1, 1), 1.5),
            label("eve", solutions[0], (1, 1, 1, 1), 1),
            label("eve", solutions[1], (1, 1, 1, 1), 1, FinishReason.bad_problem, finish_note="no answer"),
        ])
        session.flush()
        # A correction replaces what it corrects: cat's first label is counted once, as fixed.
        old = label("cat", solutions[1], (1, 1, 1, 1), 80, superseded_at=now)
        session.add(old)
        session.flush()
        session.add(label("cat", solutions[1], (0, -1), 8, FinishReason.found_error, supersedes_id=old.id,
                          created_at=now + timedelta(minutes=1)))
    return project


def test_activity_numbers_and_the_fast_flag(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        activity = project_activity(session, project.id)
    rows = {a.username: a for a in activity.labelers}
    assert [a.username for a in activity.labelers] == ["ann", "bob", "cat", "dan", "eve"]
    assert activity.median_seconds_per_step == 8
    assert activity.fast_below == 2

    ann, bob, cat, dan, eve = (rows[n] for n in ("ann", "bob", "cat", "dan", "eve"))
    assert (ann.labels, ann.median_seconds_per_step, ann.negative_share, ann.give_ups) == (4, 10, 2 / 12, 0)
    assert (ann.qc_compared, ann.qc_accuracy) == (1, 1.0)
    assert (bob.labels, bob.give_ups, bob.negative_share) == (3, 1, 0.0)
    assert (bob.qc_compared, bob.qc_accuracy) == (1, 0.0)
    assert (cat.labels, cat.median_seconds_per_step, cat.negative_share) == (3, 8, 2 / 8)
    assert (cat.qc_compared, cat.qc_accuracy) == (0, None), "a lone gold is not measured against itself"
    assert dan.median_seconds_per_step == 1 and dan.fast
    assert eve.median_seconds_per_step == 1 and not eve.fast, "two labels are too few to flag"
    assert [(a.give_ups, a.bad_problems) for a in (ann, bob, cat, dan, eve)] == [(0, 0), (1, 0), (0, 0), (0, 0), (0, 1)]
    assert not any(a.fast for a in (ann, bob, cat))


def test_the_project_page_shows_the_table_and_the_flag(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}")
    assert page.status_code == 200
    table = page.text.split('id="activity"', 1)[1]
    assert table.count("too fast: review") == 1
    with session_scope(session_factory) as session:
        dan_id = session.scalars(select(User.labeler_uuid).where(User.username == "dan")).one()
    # The id dan's labels carry in exports is beside his name.
    dan_row = table.split('<td data-label="Labeler">dan <span', 1)[1].split("</tr>", 1)[0]
    assert f">{dan_id}</span></td>" in dan_row
    assert "too fast: review" in dan_row and "under a quarter of the project's 8.0 s" in dan_row
    # A count opens what it counts: eve's bad-problem report, bob's give-up.
    assert f'href="/manage/projects/{project.id}/reports?kind=bad_problem&amp;labeler=eve" aria-label="1 bad-problem report by eve">1</a>' in table
    assert f'href="/manage/projects/{project.id}/reports?kind=give_up&amp;labeler=bob" aria-label="1 give-up by bob">1</a>' in table
    # All of dan's labels were made today: the last of his 14 bars holds them.
    today = utcnow().date()
    assert f"<title>{today.isoformat()}: 3 labels</title>" in dan_row
    assert f"<title>{(today - timedelta(days=13)).isoformat()}: 0 labels</title>" in dan_row
    assert f'<time datetime="{today.isoformat()}' in dan_row


def _made(session_factory, project, username: str, when: list[datetime]) -> None:  # type: ignore[no-untyped-def]
    """Move the user's labels (oldest id first) to the given times."""
    with session_scope(session_factory) as session:
        labels = session.scalars(
            select(Label).join(User, User.id == Label.user_id)
            .where(Label.project_id == project.id, User.username == username).order_by(Label.id)
        ).all()
        for label, at in zip(labels, when, strict=True):
            label.created_at = at


def test_labels_per_day_and_the_last_label(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    today = date(2026, 11, 20)
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    # bob: one label today, one three days ago, one before the 14 days the card counts.
    _made(session_factory, project, "bob", [noon - timedelta(days=20), noon - timedelta(days=3), noon])
    # eve: both labels 13 days ago, the first of the 14 days; none since.
    _made(session_factory, project, "eve", [noon - timedelta(days=13), noon - timedelta(days=13, hours=1)])
    with session_scope(session_factory) as session:
        rows = {a.username: a for a in project_activity(session, project.id, now=noon).labelers}
    bob, eve = rows["bob"], rows["eve"]
    assert (bob.labels_last_hour, eve.labels_last_hour) == (1, 0)
    assert [d.day for d in bob.labels_per_day] == [today - timedelta(days=13 - i) for i in range(14)]
    assert [d.labels for d in bob.labels_per_day] == [0] * 10 + [1, 0, 0, 1]
    assert (bob.recent_labels, bob.labels, bob.last_label_at) == (2, 3, noon)
    assert [d.labels for d in eve.labels_per_day] == [2] + [0] * 13
    assert eve.last_label_at == noon - timedelta(days=13)


def test_activity_as_json_for_managers_and_researchers(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "ria", "researcher")
    now = utcnow().replace(microsecond=0)
    _made(session_factory, project, "dan", [now - timedelta(days=1), now - timedelta(days=1), now])
    for name in ("max", "ria"):
        response = client.get(f"/api/v1/projects/{project.id}/activity", headers=api_headers(client, name))
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["median_seconds_per_step"], body["fast_below"]) == (8, 2)
        assert [a["username"] for a in body["labelers"]] == ["ann", "bob", "cat", "dan", "eve"]
        dan = body["labelers"][3]
        assert dan["fast"] and dan["labels"] == 3 and dan["median_seconds_per_step"] == 1
        assert len(dan["labels_per_day"]) == 14
        assert dan["labels_per_day"][-2:] == [{"day": (now - timedelta(days=1)).date().isoformat(), "labels": 2},
                                              {"day": now.date().isoformat(), "labels": 1}]
        assert datetime.fromisoformat(dan["last_label_at"]) == now
    refused = client.get(f"/api/v1/projects/{project.id}/activity", headers=api_headers(client, "ann"))
    assert refused.status_code == 403
    missing = client.get("/api/v1/projects/9999/activity", headers=api_headers(client, "max"))
    assert missing.status_code == 404 and "9999" in missing.json()["detail"]


def test_labels_per_hour_over_the_last_day(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    now = utcnow()
    if now.minute == 59 and now.second >= 50:
        # The hours counted are the server's own: let the hour turn before, not during, the test.
        time.sleep(61 - now.second)
        now = utcnow()
    hour = now.replace(minute=0, second=0, microsecond=0)
    with session_scope(session_factory) as session:
        session.execute(update(Label).where(Label.project_id == project.id).values(created_at=hour))
        others = session.scalar(select(func.count()).select_from(Label).join(User, User.id == Label.user_id)
                                .where(User.username.not_in(["bob", "eve"]), Label.superseded_at.is_(None)))
    # bob: one in the hour under way, one at the start of the hour before, one 24 hours ago (the
    # hour before the first one counted); eve: one in the first hour counted, one days before.
    _made(session_factory, project, "bob", [hour, hour - timedelta(hours=1), hour - timedelta(hours=24)])
    _made(session_factory, project, "eve", [hour - timedelta(hours=23), hour - timedelta(days=3)])
    headers = api_headers(client, "max")
    per_hour = client.get(f"/api/v1/projects/{project.id}/progress", headers=headers).json()["labels_per_hour"]
    assert [datetime.fromisoformat(h["hour"]) for h in per_hour] == [hour - timedelta(hours=23 - i) for i in range(24)]
    assert [h["labels"] for h in per_hour] == [1] + [0] * 21 + [1, 1 + others]
    activity = client.get(f"/api/v1/projects/{project.id}/activity", headers=headers).json()["labelers"]
    last_hour = {a["username"]: a["labels_last_hour"] for a in activity}
    assert (last_hour.pop("bob"), last_hour.pop("eve"), sum(last_hour.values())) == (1, 0, others)

    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}").text
    assert f"{3 + others} labels in the last 24 hours, {1 + others} in the hour under way" in page
    tooltip = f"{hour.strftime('%Y-%m-%d %H:00')}–{(hour + timedelta(hours=1)).strftime('%H:00')}: {1 + others} labels"
    assert f"<title>{tooltip}</title>" in page


def test_the_tasks_in_hand_say_who_holds_what_since_when(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "held", overlap=1)
    add_solutions(session_factory, project, 3)
    for name in ("ann", "bob"):
        make_user(session_factory, name, "labeler")
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    tasks = {name: client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(client, name)).json()["task"]
             for name in ("ann", "bob")}
    listed = client.get(f"/api/v1/projects/{project.id}/leases", headers=api_headers(client, "rae")).json()
    assert listed["total"] == 2
    assert [(lease["labeler"], lease["solution_id"], lease["check_item"]) for lease in listed["leases"]] == [
        ("ann", tasks["ann"]["solution"]["id"], False), ("bob", tasks["bob"]["solution"]["id"], False)]
    assert all(lease["expires_at"] > lease["leased_at"] for lease in listed["leases"])
    one = client.get(f"/api/v1/projects/{project.id}/leases?limit=1", headers=api_headers(client, "max")).json()
    assert (one["total"], len(one["leases"])) == (2, 1)
    assert client.get(f"/api/v1/projects/{project.id}/leases", headers=api_headers(client, "ann")).status_code == 403
    browser_login(client, "max")
    overview = client.get(f"/manage/projects/{project.id}").text
    assert "2 tasks in hand now: who holds what" in overview and f"#{tasks['bob']['solution']['id']}" in overview


def test_a_lease_is_named_by_the_task_id_its_labeler_holds(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "handles", overlap=1)
    add_solutions(session_factory, project, 2)
    make_user(session_factory, "ann", "labeler")
    make_user(session_factory, "max", "manager")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=api_headers(client, "ann")).json()["task"]
    [lease] = client.get(f"/api/v1/projects/{project.id}/leases", headers=api_headers(client, "max")).json()["leases"]
    assert lease["assignment_id"] == task["assignment_id"]
    renewed = client.post(f"/api/v1/assignments/{lease['assignment_id']}/renew", headers=api_headers(client, "ann"))
    assert renewed.status_code == 200, renewed.text
