"""Helpers for export tests: an export through the service, a label made in Stepwise, and labels
made in two modes."""

from __future__ import annotations

import io
from typing import Any

from sqlalchemy import update

from app.db import session_scope
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from app.models import FinishReason, Label, Project
from app.projects.schemas import ProjectUpdate
from app.projects.service import update_project
from tests.conftest import api_headers, make_project, make_user
from tests.imports.conftest import SAMPLE, import_bytes, jsonl
from tests.reports.builders import add_problem, label_next


def export(factory, project, fmt: str = "prm800k", **filters: Any) -> bytes:  # type: ignore[no-untyped-def]
    sink = io.BytesIO()
    with session_scope(factory) as session:
        write_export(session, project, fmt, ExportFilters(**filters), sink)
    return sink.getvalue()


def label_in_stepwise(client, session_factory, ratings, reason, mode="first_error", note=None):  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "here", labeling_mode=mode)
    problems = jsonl([{"problem": "What is $6 \\times 7$?", "answer": "42", "solution": "$\\boxed{42}$"}])
    import_bytes(session_factory, project, problems, "math")
    steps = ["$6 \\times 7 = 6 \\times 5 + 12$.", "That is $30 + 12 = 42$.", "# Answer\n\n42"]
    import_bytes(session_factory, project, jsonl([{"problem": "What is $6 \\times 7$?", "steps": steps}]), "solutions")
    make_user(session_factory, "lena", "labeler")
    headers = api_headers(client, "lena")
    task = client.post(f"/api/v1/projects/{project.id}/tasks/next", headers=headers).json()["task"]
    submit = client.post(
        f"/api/v1/assignments/{task['assignment_id']}/submit",
        headers=headers,
        json={
            "idempotency_key": "label-one-0001",
            "ratings": [{"rating": r, "flagged": i == 1} for i, r in enumerate(ratings)],
            "finish_reason": reason,
            "finish_note": note,
            "total_time_ms": 65432,
        },
    )
    assert submit.status_code == 200, submit.text
    return project, steps


def labels_in_two_modes(session_factory):  # type: ignore[no-untyped-def]
    """A project with imported labels that labeled in first-error mode, then in full mode:
    (project, a first-error label's id, a full one's, one's from before labels kept their mode)."""
    project = make_project(session_factory, "switched", overlap=1)
    import_bytes(session_factory, project, SAMPLE.read_bytes())
    add_problem(session_factory, project, "1 + 1?", n_solutions=3)
    labeler = make_user(session_factory, "lena", "labeler")
    first_error = [label_next(session_factory, project.id, labeler.id, FinishReason.solution)[1] for _ in range(2)]
    with session_scope(session_factory) as session:
        update_project(session, session.get(Project, project.id), ProjectUpdate(labeling_mode="full"))
    full = label_next(session_factory, project.id, labeler.id, FinishReason.solution)[1]
    with session_scope(session_factory) as session:
        # Made before labels kept their mode, on a lease that kept none: not known.
        session.execute(update(Label).where(Label.id == first_error[1]).values(labeling_mode=None))
    return project, first_error[0], full, first_error[1]

