"""Helpers for export tests: an export through the service, and a label made in Stepwise."""

from __future__ import annotations

import io
from typing import Any

from app.db import session_scope
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from tests.conftest import api_headers, make_project, make_user
from tests.imports.conftest import import_bytes, jsonl


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
