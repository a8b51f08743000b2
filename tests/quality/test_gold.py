"""Gold made here: a manager takes a person's current label as its solution's reference, by
page or API, and the checks, accuracy and exports follow; refused where it cannot be gold."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import update

from app.db import session_scope
from app.errors import Conflict, NotFound
from app.labeling import review
from app.models import FinishReason, Label, LabelSource
from app.quality import gate
from app.quality.gold import set_gold
from app.quality.service import labeler_accuracy
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.exports.conftest import export
from tests.reports.builders import add_problem, label_next


@pytest.fixture
def labeled(session_factory):  # type: ignore[no-untyped-def]
    """Two labelers on one three-step solution: ann finds no error, bob one at the second step."""
    project = make_project(session_factory, overlap=2)
    _, (solution_id,) = add_problem(session_factory, project, "What is $1+1$?", n_solutions=1)
    ann = make_user(session_factory, "ann", "labeler")
    bob = make_user(session_factory, "bob", "labeler")
    _, ann_label = label_next(session_factory, project.id, ann.id, FinishReason.solution)
    _, bob_label = label_next(session_factory, project.id, bob.id, FinishReason.found_error, ratings=[(1, False), (-1, False)])
    return project, solution_id, ann_label, bob_label


def test_a_gold_label_grades_the_other_labels_of_its_solution(session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, solution_id, ann_label, _ = labeled
    with session_scope(session_factory) as session:
        assert gate.gold_of(session, project.id, [solution_id]) == {}
        set_gold(session, project.id, ann_label, gold=True)
    with session_scope(session_factory) as session:
        gold = gate.gold_of(session, project.id, [solution_id])[solution_id]
        assert (gold.first_error, gold.screening) == (None, False)
        assert [(a.name, a.compared, a.agreed) for a in labeler_accuracy(session, project.id)] == [("bob", 1, 0)]
        set_gold(session, project.id, ann_label, gold=True, screening=True)
        assert gate.is_screening_item(session, project.id, solution_id)
        set_gold(session, project.id, ann_label, gold=False)
    with session_scope(session_factory) as session:
        assert gate.gold_of(session, project.id, [solution_id]) == {}
        assert labeler_accuracy(session, project.id) == []
        label = session.get(Label, ann_label)
        assert (label.is_quality_control, label.is_initial_screening) == (False, False)


def test_labels_that_cannot_be_gold_are_refused_and_unchanged(session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, solution_id, ann_label, bob_label = labeled
    other = make_project(session_factory, "other")
    with session_scope(session_factory) as session:
        session.execute(update(Label).where(Label.id == bob_label).values(source=LabelSource.rollout))
    carl = make_user(session_factory, "carl", "labeler")
    add_problem(session_factory, project, "What is $2+2$?", n_solutions=1)
    _, gave_up = label_next(session_factory, project.id, carl.id, FinishReason.give_up, ratings=[], note="Unsure.")
    cases = [
        (bob_label, Conflict, "only a person's label can be gold"),
        (gave_up, Conflict, "gave up: it says nothing about the steps"),
    ]
    for label_id, error, words in cases:
        with session_scope(session_factory) as session, pytest.raises(error, match=words):
            set_gold(session, project.id, label_id, gold=True)
    with session_scope(session_factory) as session:
        with pytest.raises(NotFound):
            set_gold(session, other.id, ann_label, gold=True)
        assert not any(session.get(Label, i).is_quality_control for i in (ann_label, bob_label, gave_up))


def test_a_corrected_label_names_its_correction_and_a_gold_label_is_not_corrected(session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, _, ann_label, bob_label = labeled
    with session_scope(session_factory) as session:
        label = session.get(Label, bob_label)
        label.superseded_at = label.created_at
        session.add(Label(project_id=project.id, solution_id=label.solution_id, user_id=label.user_id,
                          steps=label.steps, finish_reason=FinishReason.found_error, supersedes_id=bob_label))
    with session_scope(session_factory) as session, pytest.raises(Conflict, match=f"label {bob_label} was corrected by label \\d+"):
        set_gold(session, project.id, bob_label, gold=True)
    with session_scope(session_factory) as session:
        set_gold(session, project.id, ann_label, gold=True)
        window = review.get_own_label(session, session.get(Label, ann_label).user_id, ann_label).correction
        assert not window.open and window.reason == "a manager made it the gold reference of its solution"


def test_the_api_makes_and_removes_gold_for_managers_only(client, session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, _, ann_label, _ = labeled
    make_user(session_factory, "max", "manager")
    make_user(session_factory, "rae", "researcher")
    url = f"/api/v1/projects/{project.id}/labels/{ann_label}/gold"
    assert client.put(url, headers=api_headers(client, "rae"), json={}).status_code == 403
    assert client.put(url, headers=api_headers(client, "ann"), json={}).status_code == 403
    manager = api_headers(client, "max")
    assert client.put(url, headers=manager, json={"screening": "sometimes"}).status_code == 422
    assert client.put(url, headers=manager, json={"screening": "yes"}).status_code == 422
    assert client.put(url, headers=manager, json={"gold": True}).status_code == 422
    made = client.put(url, headers=manager, json={"screening": True})
    assert made.status_code == 200, made.text
    assert (made.json()["is_quality_control"], made.json()["is_initial_screening"]) == (True, True)
    assert client.put(url, headers=manager, json={"screening": True}).json() == made.json()
    exported = [orjson.loads(line) for line in export(session_factory, project, "prm800k").splitlines()]
    assert sorted(r["is_quality_control_question"] for r in exported) == [False, True]
    removed = client.delete(url, headers=manager)
    assert removed.status_code == 200 and removed.json()["is_quality_control"] is False
    assert client.put(f"/api/v1/projects/{project.id}/labels/999999/gold", headers=manager, json={}).status_code == 404


def test_the_label_page_makes_gold_and_says_why_it_cannot(client, session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, _, ann_label, _ = labeled
    carl = make_user(session_factory, "carl", "labeler")
    add_problem(session_factory, project, "What is $2+2$?", n_solutions=1)
    _, bad = label_next(session_factory, project.id, carl.id, FinishReason.bad_problem, ratings=[], note="Broken.")
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels/{ann_label}")
    assert "Use as gold" in page.text
    made = client.post(f"/manage/projects/{project.id}/labels/{ann_label}/gold",
                       data={"csrf_token": csrf, "gold": "true", "via": "reports"}, follow_redirects=False)
    assert made.status_code == 303
    assert made.headers["location"] == f"/manage/projects/{project.id}/labels/{ann_label}?gold=made&via=reports"
    shown = client.get(made.headers["location"]).text
    assert "This label is now gold" in shown and "gold (QC)" in shown and "Stop using as gold" in shown
    screening = client.post(f"/manage/projects/{project.id}/labels/{ann_label}/gold",
                            data={"csrf_token": csrf, "gold": "true", "screening": "true"})
    assert "screening gold" in screening.text and "Not a screening item" in screening.text
    assert "Use as gold" not in client.get(f"/manage/projects/{project.id}/labels/{bad}").text
    refused = client.post(f"/manage/projects/{project.id}/labels/{bad}/gold",
                          data={"csrf_token": csrf, "gold": "true", "via": "reports"})
    assert refused.status_code == 409
    assert f"Nothing changed: label {bad} reported a bad problem" in refused.text
    # A reload shows the label's page from the tab it was opened on, without posting again.
    assert f'<meta name="page-address" content="/manage/projects/{project.id}/labels/{bad}?via=reports">' in refused.text
    assert "?gold=made" in made.headers["location"] and '<meta name="page-address"' in shown
    with session_scope(session_factory) as session:
        assert not session.get(Label, bad).is_quality_control


def test_a_correction_taken_as_gold_grades_others_but_not_its_own_labeler(client, session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    """ann corrects her label to find the error bob found; the manager takes her correction as
    gold. bob agrees with it; ann's first label is not held against her own correction."""
    project, solution_id, ann_label, _ = labeled
    with session_scope(session_factory) as session:
        label = session.get(Label, ann_label)
        label.superseded_at = label.created_at
        correction = Label(project_id=project.id, solution_id=solution_id, user_id=label.user_id,
                           steps=[{"completions": [{"rating": 1, "flagged": False}], "chosen_completion": 0},
                                  {"completions": [{"rating": -1, "flagged": False}], "chosen_completion": None}],
                           finish_reason=FinishReason.found_error, supersedes_id=ann_label)
        session.add(correction)
        session.flush()
        set_gold(session, project.id, correction.id, gold=True)
        ann_id = label.user_id
    with session_scope(session_factory) as session:
        assert [(a.name, a.compared, a.agreed) for a in labeler_accuracy(session, project.id)] == [("bob", 1, 1)]
        assert gate.marks(session, project.id, ann_id) == []
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    assert client.get(f"/manage/projects/{project.id}").status_code == 200
    kept = export(session_factory, project, "prm800k", min_labeler_accuracy=0.5)
    assert len(kept.splitlines()) == 2


def test_a_label_says_which_other_labels_are_gold_for_its_solution(client, session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    project, _, ann_label, bob_label = labeled
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    client.put(f"/api/v1/projects/{project.id}/labels/{ann_label}/gold", headers=headers, json={})
    bob = client.get(f"/api/v1/projects/{project.id}/labels/{bob_label}", headers=headers).json()
    assert bob["other_gold"] == [ann_label] and bob["is_quality_control"] is False
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels/{bob_label}").text
    assert f'Already gold for this solution: <a href="/manage/projects/{project.id}/labels/{ann_label}">' in page


def test_gold_labels_that_differ_say_which_one_is_the_reference(client, session_factory, labeled) -> None:  # type: ignore[no-untyped-def]
    """ann's label (no error) is made gold after bob's (error at step 2): a tie goes to the
    earliest label, ann's, whichever was made gold first; a third gold agreeing with bob's
    makes his verdict the majority."""
    project, solution_id, ann_label, bob_label = labeled
    make_user(session_factory, "max", "manager")
    headers = api_headers(client, "max")
    assert client.get(f"/api/v1/projects/{project.id}/labels/{ann_label}", headers=headers).json()["gold"] is None
    client.put(f"/api/v1/projects/{project.id}/labels/{bob_label}/gold", headers=headers, json={})
    alone = client.get(f"/api/v1/projects/{project.id}/labels/{ann_label}", headers=headers).json()["gold"]
    assert alone == {"label_id": bob_label, "first_error_step": 2, "votes": 1, "golds": 1, "tied": False}
    made = client.put(f"/api/v1/projects/{project.id}/labels/{ann_label}/gold", headers=headers, json={}).json()
    assert made["gold"] == {"label_id": ann_label, "first_error_step": None, "votes": 1, "golds": 2, "tied": True}
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}/labels/{bob_label}").text
    assert ("They differ on the first error, with no majority: the earliest label's verdict counts, "
            f'<a href="/manage/projects/{project.id}/labels/{ann_label}">label {ann_label}</a>\'s verdict (no error).') in page

    with session_scope(session_factory) as session:
        cat = make_user(session_factory, "cat", "labeler")
        third = Label(project_id=project.id, solution_id=solution_id, user_id=cat.id,
                      steps=[{"completions": [{"rating": 1, "flagged": False}], "chosen_completion": 0},
                             {"completions": [{"rating": -1, "flagged": False}], "chosen_completion": None}],
                      finish_reason=FinishReason.found_error)
        session.add(third)
        session.flush()
        set_gold(session, project.id, third.id, gold=True)
    page = client.get(f"/manage/projects/{project.id}/labels/{bob_label}").text
    assert "They differ on the first error: 2 of the 3 give the reference, this label's verdict (first error at step 2)." in page
