"""Removing an imported file: what it added goes, unless work was done on it since."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import delete, func, select, update

from app.db import session_scope
from app.errors import Conflict, NotFound
from app.imports.removal import batch_contents, refusals, remove_import
from app.models import (
    Assignment,
    AssignmentStatus,
    FinishReason,
    Label,
    PickReason,
    Problem,
    Round,
    RoundPick,
    RoundStatus,
    Solution,
    utcnow,
)
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl, row_counts, sample_records
from tests.reports.builders import label_next, next_task

FOUR = {"problem": "What is $2 + 2$?", "answer": "4"}
THREE = {"problem": "What is $1 + 2$?", "answer": "3"}


def _problems(factory, project, *problems: dict[str, str], filename: str = "problems.jsonl") -> int:  # type: ignore[no-untyped-def]
    return import_bytes(factory, project, jsonl(list(problems or [FOUR])), "math", filename=filename).batch_id


def _candidates(*steps: str, problem: dict[str, str] = FOUR) -> list[dict[str, object]]:
    return [{"problem": problem["problem"], "steps": [s, f"# Answer\n\n{problem['answer']}"]} for s in steps]


def _remove(factory, project, batch_id):  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return remove_import(session, project, batch_id)


def test_removing_a_file_takes_what_it_added_and_it_can_be_imported_again(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _problems(session_factory, project)
    import_bytes(session_factory, project, jsonl(_candidates("Two and two.")), "solutions", filename="a.jsonl")
    before = row_counts(session_factory)
    # The wrong files: a new problem beside the first one again, and solutions of both problems.
    more = _problems(session_factory, project, FOUR, THREE, filename="more.jsonl")
    wrong = jsonl(_candidates("Two twos.") + _candidates("Three.", problem=THREE))
    second = import_bytes(session_factory, project, wrong, "solutions", filename="b.jsonl")
    assert second.added == {"problems": 0, "solutions": 2, "labels": 0}
    with session_scope(session_factory) as session:
        contents = batch_contents(session, project.id)
    assert contents[second.batch_id] == {"problems": 0, "shared_problems": 0, "solutions": 2, "labels": 0}
    # Its new problem stays while the second file's solutions use it.
    assert contents[more] == {"problems": 0, "shared_problems": 1, "solutions": 0, "labels": 0}

    removal = _remove(session_factory, project, second.batch_id)
    assert (removal.filename, removal.problems, removal.solutions, removal.labels) == ("b.jsonl", 0, 2, 0)
    with session_scope(session_factory) as session:
        assert batch_contents(session, project.id)[more] == {
            "problems": 1, "shared_problems": 0, "solutions": 0, "labels": 0}
    assert _remove(session_factory, project, more).problems == 1
    # The first files' problem and solution stay, with their queue slots.
    assert row_counts(session_factory) == before
    with session_scope(session_factory) as session:
        assert session.scalars(select(Problem.statement)).all() == [FOUR["problem"]]
    with session_scope(session_factory) as session, pytest.raises(NotFound):
        remove_import(session, project, second.batch_id)
    _problems(session_factory, project, FOUR, THREE, filename="more.jsonl")
    again = import_bytes(session_factory, project, wrong, "solutions", filename="b.jsonl")
    assert not again.already_imported and again.added["solutions"] == 2


def test_a_problem_another_files_solutions_share_stays(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    batch = _problems(session_factory, project, FOUR, THREE)
    import_bytes(session_factory, project, jsonl(_candidates("Three.", problem=THREE)), "solutions")
    assert _remove(session_factory, project, batch).problems == 1
    with session_scope(session_factory) as session:
        assert session.execute(select(Problem.statement, Problem.import_batch_id)).all() == [(THREE["problem"], None)]


def test_labels_a_file_brought_to_earlier_solutions_go_with_it(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=3)
    records = sample_records()[:1]

    def waiting() -> int:
        with session_scope(session_factory) as session:
            return session.scalar(select(func.count()).select_from(Assignment).where(
                Assignment.status == AssignmentStatus.waiting)) or 0

    import_bytes(session_factory, project, jsonl(records), filename="first.jsonl")
    assert waiting() == 2
    # The same solution labeled by someone else: a label on the first file's solution, which
    # then needs one labeler fewer.
    relabeled = [{**record, "labeler": "another-labeler"} for record in records]
    second = import_bytes(session_factory, project, jsonl(relabeled), filename="second.jsonl")
    assert second.added == {"problems": 0, "solutions": 0, "labels": 1}
    assert (second.queued, second.unqueued) == (0, 1)
    assert waiting() == 1

    removal = _remove(session_factory, project, second.batch_id)
    assert (removal.labels, removal.requeued) == (1, 1)
    # The solution has the slots it lacks to reach the overlap again.
    assert waiting() == 2
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 1


def test_a_retired_problems_solutions_get_no_slots_back(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=3)
    records = sample_records()[:1]
    import_bytes(session_factory, project, jsonl(records), filename="first.jsonl")
    second = import_bytes(session_factory, project, jsonl([{**r, "labeler": "another-labeler"} for r in records]),
                          filename="second.jsonl")
    with session_scope(session_factory) as session:
        session.execute(update(Problem).values(retired_at=utcnow()))
        session.execute(delete(Assignment).where(Assignment.status == AssignmentStatus.waiting))
    # Nobody is served a retired problem's solutions: slots for them would only wait.
    assert _remove(session_factory, project, second.batch_id).requeued == 0
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(Assignment)) == 0


def test_imported_labels_take_only_untouched_slots_out_of_the_queue(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, open_to_all=True, overlap=3)
    lena = make_user(session_factory, "lena", "labeler")
    records = sample_records()[:1]
    import_bytes(session_factory, project, jsonl(records), filename="first.jsonl")
    assert next_task(session_factory, project.id, lena.id) is not None
    # Two more labelers' labels: three labels and a lease for an overlap of three. The lease in
    # hand stays; the one untouched slot goes.
    more = [{**record, "labeler": name} for record in records for name in ("ann", "bob")]
    second = import_bytes(session_factory, project, jsonl(more), filename="second.jsonl")
    assert (second.added["labels"], second.unqueued) == (2, 1)
    assert "(1 taken out, filled by its labels)" in second.summary()
    with session_scope(session_factory) as session:
        slots = session.execute(select(Assignment.status, Assignment.user_id)).all()
    assert slots == [(AssignmentStatus.leased, lena.id)]


def test_work_done_on_a_files_solutions_keeps_it(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=2)
    _problems(session_factory, project)
    batch = import_bytes(session_factory, project, jsonl(_candidates("One.", "Two.")), "solutions").batch_id
    ann, bob = (make_user(session_factory, name, "labeler") for name in ("ann", "bob"))

    def refused(reason: str) -> None:
        # The project page gives the reason before anyone asks: the same rule, the same words.
        with session_scope(session_factory) as session:
            assert re.search(reason, refusals(session, project.id)[batch])
        before = row_counts(session_factory)
        with session_scope(session_factory) as session, pytest.raises(Conflict, match=reason):
            remove_import(session, project, batch)
        assert row_counts(session_factory) == before

    with session_scope(session_factory) as session:
        solution = session.scalars(select(Solution.id).order_by(Solution.id)).first()
        done = Round(project_id=project.id, number=1, status=RoundStatus.done)
        session.add(done)
        session.flush()
        session.add(RoundPick(round_id=done.id, solution_id=solution, rank=0, score=0.9,
                              reason=PickReason.convincing_wrong, answer_grade="wrong", priority=1.0))
    refused("round 1 picked some of its solutions")
    with session_scope(session_factory) as session:
        session.execute(RoundPick.__table__.delete())

    assert next_task(session_factory, project.id, ann.id) is not None
    refused("labelers hold 1 of its solutions right now: try again once their leases end or are given back; "
            "once they submit, their labels keep the file$")
    with session_scope(session_factory) as session:
        # A lease that ran out holds nothing.
        session.execute(update(Assignment).values(expires_at=utcnow() - timedelta(minutes=1)))
        assert refusals(session, project.id) == {}
    assert _remove(session_factory, project, batch).solutions == 2

    batch = import_bytes(session_factory, project, jsonl(_candidates("One.", "Two.")), "solutions").batch_id
    _, labeled = label_next(session_factory, project.id, bob.id, FinishReason.solution)
    refused("its solutions carry 1 label that did not come with it")
    # A correction replaces the label: still one label.
    with session_scope(session_factory) as session:
        label = session.get(Label, labeled)
        label.superseded_at = utcnow()
        session.add(Label(project_id=project.id, solution_id=label.solution_id, user_id=bob.id, steps=label.steps,
                          finish_reason=label.finish_reason, supersedes_id=label.id))
    refused("its solutions carry 1 label that did not come with it .*; only deleting the project undoes it now$")


def test_a_file_of_another_project_is_not_found(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    other = make_project(session_factory, "other")
    batch = _problems(session_factory, project)
    with session_scope(session_factory) as session, pytest.raises(NotFound):
        remove_import(session, other, batch)
    assert row_counts(session_factory)["problems"] == 1


def test_the_api_removes_a_file_for_managers_only(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    for name, role in (("max", "manager"), ("rae", "researcher"), ("lou", "labeler")):
        make_user(session_factory, name, role)
    _problems(session_factory, project)
    batch = import_bytes(session_factory, project, jsonl(_candidates("One.")), "solutions", filename="x.jsonl").batch_id
    url = f"/api/v1/projects/{project.id}/imports/{batch}"
    for name in ("rae", "lou"):
        assert client.delete(url, headers=api_headers(client, name)).status_code == 403
    manager = api_headers(client, "max")
    removed = client.delete(url, headers=manager)
    assert removed.status_code == 200, removed.text
    assert removed.json() == {"batch_id": batch, "filename": "x.jsonl", "problems": 0, "solutions": 1, "labels": 0,
                              "requeued": 0}
    gone = client.delete(url, headers=manager)
    assert gone.status_code == 404 and "no imported file" in gone.json()["detail"]
    assert [b["filename"] for b in client.get(f"/api/v1/projects/{project.id}/imports", headers=manager).json()] == [
        "problems.jsonl"]


def test_the_overview_removes_a_file_or_says_why_not(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, overlap=1)
    make_user(session_factory, "max", "manager")
    ann = make_user(session_factory, "ann", "labeler")
    _problems(session_factory, project)
    kept = import_bytes(session_factory, project, jsonl(_candidates("One.")), "solutions", filename="kept.jsonl").batch_id
    label_next(session_factory, project.id, ann.id, FinishReason.solution)
    wrong = import_bytes(session_factory, project, jsonl(_candidates("Two.", "Three.")), "solutions",
                         filename="wrong.jsonl").batch_id
    csrf = browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}").text
    assert 'data-confirm="Remove wrong.jsonl from algebra?"' in page
    assert "What it added and is still here is deleted: 0 problems, 2 solutions, 0 labels. Refused" in page
    # The problems file: its problem stays, as the solution files use it.
    assert "Nothing it added would go; its record does. 1 problem it added stays: other files' solutions use it." in page
    # A file the server would refuse to remove says why up front, with no form to try.
    assert (f'id="refusal-{kept}">Cannot be removed: its solutions carry 1 label that did not come with it (made '
            "here, or imported with another file), which would go with them; only deleting the project undoes it "
            "now.</span>") in page
    assert f"/imports/{kept}/remove" not in page and f"/imports/{wrong}/remove" in page

    refused = client.post(f"/manage/projects/{project.id}/imports/{kept}/remove", data={"csrf_token": csrf})
    assert refused.status_code == 409
    assert ("Nothing changed: kept.jsonl cannot be removed: its solutions carry 1 label that did not come with it"
            in refused.text)
    removed = client.post(f"/manage/projects/{project.id}/imports/{wrong}/remove", data={"csrf_token": csrf},
                          follow_redirects=False)
    assert removed.headers["location"] == f"/manage/projects/{project.id}?import_removed=1#imports"
    page = client.get(removed.headers["location"]).text
    assert "The file was removed, with the problems, solutions and labels it added." in page
    assert "wrong.jsonl" not in page and "kept.jsonl" in page
    twice = client.post(f"/manage/projects/{project.id}/imports/{wrong}/remove", data={"csrf_token": csrf})
    assert twice.status_code == 404 and "it was removed already" in twice.text
    lou = make_user(session_factory, "lou", "labeler")
    browser_login(client, lou.username)
    assert client.post(f"/manage/projects/{project.id}/imports/{kept}/remove",
                       data={"csrf_token": csrf}).status_code in (403, 404)
    assert row_counts(session_factory)["solutions"] == 1
