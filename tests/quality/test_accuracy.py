"""Labeler accuracy against quality-control gold, on the project page and as an export filter."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.db import session_scope
from app.quality.service import first_error, labeler_accuracy
from tests.conftest import browser_login, make_project, make_user
from tests.exports.conftest import export
from tests.imports.conftest import import_bytes, jsonl
from tests.quality.conftest import labeled_record

STEPS = {
    "A": ["$2 + 2 = 4$.", "$4 \\times 3 = 13$.", "# Answer\n\n13"],
    "D": ["$3 + 3 = 6$.", "$6 - 1 = 4$.", "# Answer\n\n4"],
    "B": ["$5 - 1 = 4$.", "$4 + 4 = 8$.", "# Answer\n\n8"],
    "C": ["$1 + 1 = 2$.", "# Answer\n\n2"],
}


def _record(labeler: str, solution: str, ratings: list[int], *, qc: bool = False, finish: str | None = None) -> dict[str, Any]:
    return labeled_record(labeler, f"Problem {solution}", STEPS[solution], ratings, qc=qc, finish=finish)


RECORDS = [
    _record("gold", "A", [1, -1], qc=True),
    _record("gold", "B", [1, 1, 1], qc=True),
    _record("ann", "A", [1, -1]),  # agrees
    _record("ann", "B", [-1]),  # finds an error the gold does not
    _record("bob", "A", [0, -1]),  # agrees: the same first error, whatever came before it
    _record("bob", "B", [], finish="give_up"),  # says nothing about the steps
    _record("cat", "C", [1, 1]),  # no QC item: never compared
]


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    project = make_project(session_factory)
    import_bytes(session_factory, project, jsonl(RECORDS))
    return project


def test_first_error_reads_the_labeled_trajectory() -> None:
    assert first_error(RECORDS[0]["label"]["steps"]) == 1
    assert first_error(RECORDS[1]["label"]["steps"]) is None
    assert first_error([]) is None
    # Phase 1: an alternative rated -1 was not chosen, so the trajectory goes on.
    step = {"completions": [{"rating": -1}, {"rating": 1}], "chosen_completion": 1, "human_completion": None}
    assert first_error([step]) is None
    # A human step replaced the solution's own step (stored without its text), rated -1.
    replaced = {"completions": [{"rating": -1}], "chosen_completion": None, "human_completion": {"text": "x"}}
    assert first_error([step, replaced]) == 1
    # A solution made from a PRM800K phase-1 record's path goes on with the step its labeler wrote
    # (no completion there is the solution's own), which its writer held correct.
    written = {"completions": [{"text": "y", "rating": -1}], "chosen_completion": None, "human_completion": {"text": "x"}}
    assert first_error([step, written]) is None
    assert first_error([step, {**written, "human_completion": "x"}]) is None
    assert first_error([step, {**written, "human_completion": {"text": "x", "rating": -1}}]) == 1
    # Phase 2's last step: nothing chosen nor written, the solution's step rated -1 ended it.
    assert first_error([step, {"completions": [{"rating": -1}], "chosen_completion": None}]) == 1


def test_accuracy_per_labeler(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        found = {a.name: (a.compared, a.agreed) for a in labeler_accuracy(session, project.id)}
    assert found == {"ann": (2, 1), "bob": (1, 1)}


def test_several_qc_labels_are_measured_against_each_other(session_factory) -> None:  # type: ignore[no-untyped-def]
    # An imported PRM800K file flags every label of a QC question: the gold is their majority.
    project = make_project(session_factory, "flagged")
    records = [
        _record("dan", "D", [1, -1], qc=True),
        _record("eve", "D", [1, -1], qc=True),
        _record("fay", "D", [1, 1, 1], qc=True),
        _record("gus", "D", [-1], qc=True, finish="give_up"),  # neither gold nor measured
        _record("hal", "D", [1, -1]),
    ]
    import_bytes(session_factory, project, jsonl(records))
    with session_scope(session_factory) as session:
        found = {a.name: (a.compared, a.agreed) for a in labeler_accuracy(session, project.id)}
    assert found == {"dan": (1, 1), "eve": (1, 1), "fay": (1, 0), "hal": (1, 1)}


def test_an_item_whose_only_qc_label_gave_up_has_no_gold(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "no-gold")
    records = [_record("gold", "D", [], qc=True, finish="bad_problem"), _record("ann", "D", [1, -1])]
    import_bytes(session_factory, project, jsonl(records))
    with session_scope(session_factory) as session:
        assert labeler_accuracy(session, project.id) == []
    # ann was never compared, so a threshold leaves her out; QC labels are for the qc filter.
    lines = export(session_factory, project, min_labeler_accuracy=0.5).splitlines()
    assert [orjson.loads(line)["labeler"] for line in lines] == ["gold"]


def test_export_keeps_accurate_labelers_and_the_gold(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    def labelers(**filters: Any) -> list[str]:
        return sorted(orjson.loads(line)["labeler"] for line in export(session_factory, project, **filters).splitlines())

    assert labelers(min_labeler_accuracy=0.75) == ["bob", "bob", "gold", "gold"]
    assert labelers(min_labeler_accuracy=0.5) == ["ann", "ann", "bob", "bob", "gold", "gold"]
    assert labelers(min_labeler_accuracy=0.5, qc="exclude") == ["ann", "ann", "bob", "bob"]
    # Unchecked labelers (cat) go out only when no threshold is set.
    assert "cat" in labelers() and "cat" not in labelers(min_labeler_accuracy=0.0)


def test_api_and_form_take_the_threshold(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "mia", "manager")
    browser_login(client, "mia")
    response = client.get(f"/api/v1/projects/{project.id}/export", params={"format": "prm800k", "min_labeler_accuracy": "0.75"})
    assert response.status_code == 200
    assert sorted(orjson.loads(line)["labeler"] for line in response.content.splitlines()) == ["bob", "bob", "gold", "gold"]
    bad = client.get(f"/api/v1/projects/{project.id}/export", params={"format": "prm800k", "min_labeler_accuracy": "1.5"})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "query.min_labeler_accuracy"
    form = client.get(
        f"/manage/projects/{project.id}/export/download",
        params={"format": "trl", "min_labeler_accuracy": "75%"},
        follow_redirects=False,
    )
    assert form.status_code == 303
    assert "min_labeler_accuracy=0.75" in form.headers["location"]
    refused = client.get(
        f"/manage/projects/{project.id}/export/download", params={"format": "trl", "min_labeler_accuracy": "most"}
    )
    assert refused.status_code == 422
    assert "Give a percentage from 0 to 100" in refused.text


def test_project_page_shows_accuracy(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "mia", "manager")
    browser_login(client, "mia")
    html = client.get(f"/manage/projects/{project.id}").text
    assert "Labeler accuracy" in html
    assert "50.0%" in html and "100.0%" in html
