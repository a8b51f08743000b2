"""A labeler's own labels through the API: the list, one label, corrections and their window."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from sqlalchemy import func, select, update

from app.db import session_scope
from app.labeling.queue import add_slots
from app.labeling import review
from app.labeling.review import _label_mode
from app.models import Assignment, Label, Project
from app.projects.schemas import ProjectUpdate
from app.projects.service import project_progress, update_project
from app.rounds.pool import label_records, label_snapshot
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user
from tests.exports.conftest import export


def _label(client, headers, project, key: str, ratings, reason: str = "solution") -> int:  # type: ignore[no-untyped-def]
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    response = client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={"idempotency_key": key, "ratings": [{"rating": r} for r in ratings],
              "finish_reason": reason, "total_time_ms": 30000},
    )
    assert response.status_code == 200, response.text
    return response.json()["label_id"]


def _correction(key: str, ratings, reason: str) -> dict:  # type: ignore[no-untyped-def]
    return {"idempotency_key": key, "ratings": [{"rating": r} for r in ratings],
            "finish_reason": reason, "total_time_ms": 12000}


def _setup(client, session_factory, **settings):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, **settings)
    add_solutions(session_factory, project, 2, steps=3)
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    return project, headers


def _labels(session_factory) -> list[tuple[int, int | None, bool]]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        rows = session.execute(select(Label.id, Label.supersedes_id, Label.superseded_at).order_by(Label.id))
        return [(i, s, at is not None) for i, s, at in rows]


def test_a_correction_within_the_window_supersedes_and_exports_keep_only_it(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    first = _label(client, headers, project, "lena-key-0001", [1, 1, 1])

    response = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                           json=_correction("lena-fix-0001", [1, -1], "found_error"))
    assert response.status_code == 200, response.text
    receipt = response.json()
    assert receipt["supersedes_id"] == first and not receipt["duplicate"]
    fixed = receipt["label_id"]
    assert _labels(session_factory) == [(first, None, True), (fixed, first, False)]

    again = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                        json=_correction("lena-fix-0001", [1, -1], "found_error"))
    assert again.json() == {**receipt, "duplicate": True}

    listed = client.get("/api/v1/me/labels", headers=headers).json()
    assert [item["label_id"] for item in listed["items"]] == [fixed]
    assert listed["items"][0]["supersedes_id"] == first
    assert listed["items"][0]["ratings"] == {"positive": 1, "neutral": 0, "negative": 1}
    old = client.get(f"/api/v1/me/labels/{first}", headers=headers).json()
    assert old["superseded_by_id"] == fixed
    assert old["correction"]["open"] is False and "corrected since" in old["correction"]["reason"]
    assert [s["rating"] for s in old["steps"]] == [1, 1, 1], "the old label reads as it was submitted"

    records = [json.loads(line) for line in export(session_factory, project).splitlines()]
    assert len(records) == 1
    assert [s["completions"][0]["rating"] for s in records[0]["label"]["steps"]] == [1, -1]
    assert records[0]["label"]["finish_reason"] == "found_error"
    trl = [json.loads(line) for line in export(session_factory, project, "trl").splitlines()]
    assert [r["labels"] for r in trl] == [[True, False]]
    table = pq.read_table(io.BytesIO(export(session_factory, project, "parquet")))
    assert table.num_rows == 1 and table.column("ratings").to_pylist() == [[1, -1]]

    with session_scope(session_factory) as session:
        assert project_progress(session, session.get(Project, project.id)).labels == 1
        assert label_snapshot(session, project.id)[1] == 1
        (record,) = label_records(session, project.id, fixed)
        assert record["label"]["finish_reason"] == "found_error"
        # A snapshot taken before the correction still reads the label it counted.
        (before,) = label_records(session, project.id, first)
        assert before["label"]["finish_reason"] == "solution"
    assert client.get("/api/v1/me/stats", headers=headers).json()["labels"] == 1

    # A manager follows the correction both ways.
    make_user(session_factory, "mona", "manager")
    mona = api_headers(client, "mona")
    url = f"/api/v1/projects/{project.id}/labels"
    assert client.get(f"{url}/{first}", headers=mona).json()["corrected_by"] == fixed
    assert client.get(f"{url}/{fixed}", headers=mona).json()["corrects"] == first
    browser_login(client, "mona")
    page = client.get(f"/manage/projects/{project.id}/labels/{first}").text
    assert f'by <a href="/manage/projects/{project.id}/labels/{fixed}">label {fixed}</a>' in page
    page = client.get(f"/manage/projects/{project.id}/labels/{fixed}").text
    assert f'of <a href="/manage/projects/{project.id}/labels/{first}">label {first}</a>' in page


def test_a_correction_takes_no_slot_and_raising_the_overlap_counts_the_label_once(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    first = _label(client, headers, project, "lena-key-0002", [1, 1, 1])
    assert client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                       json=_correction("lena-fix-0002", [0, 1, 1], "solution")).status_code == 200
    with session_scope(session_factory) as session:
        update_project(session, session.get(Project, project.id), ProjectUpdate(overlap=2))
        slots = dict(session.execute(
            select(Assignment.solution_id, func.count()).group_by(Assignment.solution_id)).all())
        # Adding slots again finds nothing missing: the correction is not an extra label.
        assert add_slots(session, session.get(Project, project.id),
                         [(s, 0.0, None) for s in slots]) == 0
    assert sorted(slots.values()) == [2, 2]


def test_after_the_window_a_correction_is_refused_and_nothing_changes(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory, correction_window_hours=2)
    first = _label(client, headers, project, "lena-key-0003", [1, 1, 1])
    with session_scope(session_factory) as session:
        created = session.scalar(select(Label.created_at).where(Label.id == first))
        session.execute(update(Label).where(Label.id == first).values(created_at=created - timedelta(hours=3)))

    view = client.get(f"/api/v1/me/labels/{first}", headers=headers).json()
    assert view["correction"]["open"] is False
    assert "2-hour correction window closed" in view["correction"]["reason"]
    refused = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                          json=_correction("lena-fix-0003", [1, -1], "found_error"))
    assert refused.status_code == 409
    assert "correction window closed" in refused.json()["detail"]
    assert _labels(session_factory) == [(first, None, False)]


def test_the_window_runs_from_the_first_label_not_the_last_correction(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory, correction_window_hours=2)
    first = _label(client, headers, project, "lena-key-0004", [1, 1, 1])
    fixed = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                        json=_correction("lena-fix-0004", [1, -1], "found_error")).json()["label_id"]
    with session_scope(session_factory) as session:
        created = session.scalar(select(Label.created_at).where(Label.id == first))
        session.execute(update(Label).where(Label.id == first).values(created_at=created - timedelta(hours=3)))
    refused = client.post(f"/api/v1/me/labels/{fixed}/corrections", headers=headers,
                          json=_correction("lena-fix-0005", [1, 1, 1], "solution"))
    assert refused.status_code == 409


def test_a_project_with_no_window_refuses_corrections(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory, correction_window_hours=0)
    first = _label(client, headers, project, "lena-key-0006", [1, 1, 1])
    refused = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                          json=_correction("lena-fix-0006", [1, -1], "found_error"))
    assert refused.status_code == 409 and "does not allow corrections" in refused.json()["detail"]
    assert _labels(session_factory) == [(first, None, False)]


def test_a_correction_of_a_corrected_label_or_with_bad_ratings_is_refused(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    first = _label(client, headers, project, "lena-key-0007", [1, 1, 1])
    bad = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                      json=_correction("lena-fix-0007", [1, -1, 1], "found_error"))
    assert bad.status_code == 422 and "first -1" in bad.json()["detail"]
    assert _labels(session_factory) == [(first, None, False)]
    assert client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                       json=_correction("lena-fix-0008", [1, -1], "found_error")).status_code == 200
    twice = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                        json=_correction("lena-fix-0009", [-1], "found_error"))
    assert twice.status_code == 409 and "correct the newer label" in twice.json()["detail"]
    reused = client.post(f"/api/v1/me/labels/{first + 1}/corrections", headers=headers,
                         json=_correction("lena-fix-0008", [-1], "found_error"))
    assert reused.status_code == 409 and "another label" in reused.json()["detail"]


def test_a_true_rating_is_refused_by_submit_and_correction(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    body = {**_correction("lena-key-0031", [1, 1, 1], "solution"), "ratings": [{"rating": True}] * 3}
    assert client.post(f"/api/v1/assignments/{task['assignment_id']}/submit", headers=headers, json=body).status_code == 422
    first = _label(client, headers, project, "lena-key-0032", [1, 1, 1])
    body = {**body, "idempotency_key": "lena-fix-0032"}
    assert client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers, json=body).status_code == 422
    assert _labels(session_factory) == [(first, None, False)]


def test_another_labelers_label_is_not_found(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    first = _label(client, headers, project, "lena-key-0010", [1, 1, 1])
    make_user(session_factory, "omar", "labeler")
    omar = api_headers(client, "omar")
    assert client.get(f"/api/v1/me/labels/{first}", headers=omar).status_code == 404
    stolen = client.post(f"/api/v1/me/labels/{first}/corrections", headers=omar,
                         json=_correction("omar-fix-0001", [-1], "found_error"))
    assert stolen.status_code == 404
    assert client.get("/api/v1/me/labels", headers=omar).json() == {"items": [], "page": 1, "pages": 1, "total": 0}
    assert client.get(f"/api/v1/me/labels/{first + 99}", headers=headers).status_code == 404
    assert _labels(session_factory) == [(first, None, False)]


def test_the_list_pages_newest_first(client, session_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("app.labeling.review.PAGE_SIZE", 1)
    project, headers = _setup(client, session_factory)
    older = _label(client, headers, project, "lena-key-0011", [1, 1, 1])
    newer = _label(client, headers, project, "lena-key-0012", [-1], "found_error")
    first_page = client.get("/api/v1/me/labels", headers=headers).json()
    assert [i["label_id"] for i in first_page["items"]] == [newer]
    assert (first_page["pages"], first_page["total"]) == (2, 2)
    second = client.get("/api/v1/me/labels", params={"page": 2}, headers=headers).json()
    assert [i["label_id"] for i in second["items"]] == [older]
    assert second["items"][0]["problem_snippet"] == "What is 1+1?"
    assert client.get("/api/v1/me/labels", params={"page": 0}, headers=headers).status_code == 422


def test_stats_count_the_labels_the_list_shows(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    _label(client, headers, project, "lena-key-0021", [1, 1, 1])
    closed = make_project(session_factory, "members only", open_to_all=False)
    add_solutions(session_factory, closed, 1, steps=3)
    make_user(session_factory, "max", "manager")
    manager = api_headers(client, "max")
    member = client.post(f"/api/v1/projects/{closed.id}/members", headers=manager, json={"username": "lena"}).json()
    _label(client, headers, closed, "lena-key-0022", [1, -1], "found_error")
    assert client.get("/api/v1/me/stats", headers=headers).json()["labels"] == 2

    assert client.delete(f"/api/v1/projects/{closed.id}/members/{member['user_id']}", headers=manager).status_code == 204
    listed = client.get("/api/v1/me/labels", headers=headers).json()
    stats = client.get("/api/v1/me/stats", headers=headers).json()
    assert listed["total"] == stats["labels"] == stats["labels_today"] == len(stats["recent"]) == 1
    assert (stats["steps_rated"], stats["by_finish_reason"]) == (3, {"solution": 1})


def test_pages_show_the_list_the_label_and_why_correcting_is_closed(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory, correction_window_hours=0)
    first = _label(client, headers, project, "lena-key-0013", [1, -1], "found_error")
    browser_login(client, "lena")
    stats = client.get("/label/stats")
    assert f'href="/label/labels/{first}"' in stats.text and "What is 1+1?" in stats.text
    view = client.get(f"/label/labels/{first}")
    assert view.status_code == 200
    assert "Correcting is closed" in view.text and "does not allow corrections" in view.text
    assert "step 0 of" in view.text
    closed = client.get(f"/label/labels/{first}/correct")
    assert closed.status_code == 409 and "does not allow corrections" in closed.text
    assert client.get(f"/label/labels/{first + 5}").status_code == 404


@pytest.mark.parametrize("turns_to", ["phase1", "other"])
@pytest.mark.parametrize(
    ("mode", "ratings", "reason", "refused_ratings", "refused_words"),
    [
        # Each keeps the rules of the mode it was labeled in: the label sent again is accepted,
        # and what only the other mode allows is refused.
        ("first_error", [1, -1], "found_error", [-1, 1, 1], "first -1"),
        ("full", [1, -1, 1], "found_error", [1, -1], "every step rated"),
        # Labels either mode would have taken: only the mode kept with the label tells.
        ("first_error", [1, 1, 1], "solution", [1, -1, 1], "first -1"),
        ("full", [1, 1, 1], "solution", [1, -1], "every step rated"),
    ],
)
def test_a_ratings_label_keeps_its_mode_when_the_project_changes_its(  # type: ignore[no-untyped-def]
    client, session_factory, mode, ratings, reason, refused_ratings, refused_words, turns_to
) -> None:
    project, headers = _setup(client, session_factory, labeling_mode=mode)
    first = _label(client, headers, project, "lena-key-0014", ratings, reason)
    new_mode = turns_to if turns_to == "phase1" else {"first_error": "full", "full": "first_error"}[mode]
    with session_scope(session_factory) as session:
        update_project(session, session.get(Project, project.id), ProjectUpdate(labeling_mode=new_mode))

    own = client.get(f"/api/v1/me/labels/{first}", headers=headers).json()
    assert own["correction"]["open"] is True and own["labeling_mode"] == mode
    assert [s["rating"] for s in own["steps"]] == [*ratings, None][:3]
    browser_login(client, "lena")
    page = client.get(f"/label/labels/{first}/correct")
    assert page.status_code == 200 and f'"labeling_mode":"{mode}"' in page.text.replace(" ", "")
    assert f'data-mode="{mode}"' in page.text and "Phase 1 mode" not in page.text

    bad = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                      json=_correction("lena-fix-0014", refused_ratings, "found_error"))
    assert bad.status_code == 422 and refused_words in bad.json()["detail"]
    assert _labels(session_factory) == [(first, None, False)]
    fixed = client.post(f"/api/v1/me/labels/{first}/corrections", headers=headers,
                        json=_correction("lena-fix-0015", ratings, reason))
    assert fixed.status_code == 200, fixed.text
    assert _labels(session_factory) == [(first, None, True), (fixed.json()["label_id"], first, False)]
    # A correction keeps the mode, for the next correction.
    assert client.get(f"/api/v1/me/labels/{fixed.json()['label_id']}", headers=headers).json()["labeling_mode"] == mode


RATED = {"completions": [{"rating": 1, "flagged": False}], "human_completion": None, "chosen_completion": 0}
WRITTEN = {"text": "My own step.", "rating": 1, "source": "human", "flagged": False, "corrected_rating": None}


@pytest.mark.parametrize(
    ("steps", "mode"),
    [
        ([RATED, {**RATED, "completions": [{"rating": -1, "flagged": True}], "chosen_completion": None}], "full"),
        ([{**RATED, "completions": [*RATED["completions"], {"text": "Another.", "rating": -1, "flagged": False}]}], "phase1"),
        ([{**RATED, "completions": [{"text": "Another.", "rating": 1, "flagged": False}]}], "phase1"),
        ([{**RATED, "completions": [{"rating": -1, "flagged": False}], "human_completion": WRITTEN, "chosen_completion": None}], "phase1"),
        # Left without going on though not rated -1: a phase-1 give-up.
        ([{**RATED, "chosen_completion": None}], "phase1"),
    ],
    ids=["ratings", "alternatives", "another text", "a written step", "a step left"],
)
def test_a_label_is_phase_1_by_what_its_steps_hold(steps, mode) -> None:  # type: ignore[no-untyped-def]
    assert _label_mode(Project(labeling_mode="full"), Label(steps=steps), len(steps)) == mode


@pytest.mark.parametrize(("text", "limit", "snippet"), [
    ("Short $x$.", 40, "Short $x$."),
    ("Let $x$ be a number bigger than ten.", 15, "Let $x$ be a n…"),
    # A formula the limit splits is kept whole when it closes within twice the limit...
    ("Let $a_1, a_2$ be real. Compute $(a_9 + a_{10})^2$ now.", 40, "Let $a_1, a_2$ be real. Compute $(a_9 + a_{10})^2$…"),
    ("See $$\\sum_{k=1}^{n} k$$ here and more.", 15, "See $$\\sum_{k=1}^{n} k$$…"),
    ("Find \\(x^2 + y^2\\) please.", 12, "Find \\(x^2 + y^2\\)…"),
    ("Define $f(x) = x^2$", 10, "Define $f(x) = x^2$"),
    # ...and cut before when it is longer.
    ("Define $f(x) = x^2 + 2x + 1 + \\frac{1}{x}$ for all $x$.", 12, "Define…"),
    ("See $$\\sum_{k=1}^{n} k^2 + \\sum_{k=1}^{n} k^3$$ here and more.", 15, "See…"),
    ("Costs \\$5 and \\$6 in all, $x$ more.", 20, "Costs \\$5 and \\$6 i…"),
    # Opening with a formula longer than the limit: nothing before it to keep, so the plain cut.
    ("$x_1 + x_2 + x_3 + x_4$ is long", 10, "$x_1 + x_…"),
    ("Plain   words\nacross lines, nothing else at all.", 20, "Plain words across…"),
])
def test_a_snippet_never_ends_inside_a_formula(text: str, limit: int, snippet: str) -> None:
    assert review.snippet_of(text, limit) == snippet


def test_a_page_asked_for_what_it_cannot_show_says_so_once_and_offers_the_page(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "lena", "labeler")
    browser_login(client, "lena")
    page = client.get("/label/stats", params={"page": "999999"})
    assert page.status_code == 422
    text = page.text
    assert "The address asks for something this page cannot show:" in text
    assert text.count("must be at most 100000") == 1 and "<code>page</code>: must be at most 100000" in text
    assert "query.page" not in text
    assert '<a class="button primary" href="/label/stats">Open the page as it comes</a>' in text
    # The API still names the part by where it is.
    api = client.get("/api/v1/me/labels", params={"page": "999999"}, headers=api_headers(client, "lena"))
    assert api.status_code == 422 and api.json()["errors"][0]["field"] == "query.page"


def test_a_correction_key_resent_with_other_content_is_refused_not_answered_as_stored(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project, headers = _setup(client, session_factory)
    first = _label(client, headers, project, "lena-key-0001", [1, 1, 1])
    url = f"/api/v1/me/labels/{first}/corrections"
    stored = client.post(url, headers=headers, json=_correction("lena-fix-0001", [1, -1], "found_error"))
    assert stored.status_code == 200, stored.text
    for body in (_correction("lena-fix-0001", [1, 1, -1], "found_error"),
                 _correction("lena-fix-0001", [0, 0, 0], "solution"),
                 {**_correction("lena-fix-0001", [1, -1], "give_up"), "finish_note": "unsure"}):
        refused = client.post(url, headers=headers, json=body)
        assert refused.status_code == 409 and "different correction" in refused.json()["detail"], refused.text
    assert client.post(url, headers=headers, json=_correction("lena-fix-0001", [1, -1], "found_error")).json()["duplicate"]
    with session_scope(session_factory) as session:
        steps = session.scalar(select(Label.steps).where(Label.id == stored.json()["label_id"]))
    assert [s["completions"][0]["rating"] for s in steps] == [1, -1], "the correction as first sent"
