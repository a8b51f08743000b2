"""`stepwise autolabel`: rollout labels for the pool from a real (tiny, pretrained here) causal LM,
stored with what made them, resumable, and never for solutions labelers already did."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from active_learning.config import PretrainConfig
from active_learning.pretrain import pretrain
from active_learning.synthetic import iter_candidates, to_prm800k
from app.cli import cli
from app.config import get_settings
from app.db import session_scope
from app.models import FinishReason, Label, LabelSource, Problem, Solution, utcnow
from tests.conftest import add_solutions, make_project, make_user


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    records = [to_prm800k(c) for c in iter_candidates(40, 1, seed=9, error_rate=0.0)]
    output = tmp_path_factory.mktemp("autolabel") / "base"
    return pretrain(PretrainConfig(output=str(output), steps=3, batch_size=4, max_length=256, device="cpu"), records)


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    """Five pool solutions of a problem with an answer; one more labeled by a labeler, and one
    of a problem without an answer: neither is for rollouts."""
    project = make_project(session_factory, "rollouts", overlap=1)
    solutions = add_solutions(session_factory, project, 6, steps=2)
    ann = make_user(session_factory, "ann", "labeler").id
    with session_scope(session_factory) as session:
        session.add(Label(project_id=project.id, solution_id=solutions[5], user_id=ann, steps=[],
                          finish_reason=FinishReason.solution, created_at=utcnow()))
        problem = Problem(project_id=project.id, statement="Prove it.", content_hash="no-answer")
        session.add(problem)
        session.flush()
        session.add(Solution(project_id=project.id, problem_id=problem.id, steps=["a", "b"], content_hash="x"))
    return project


def _run(monkeypatch, database_url: str, *args: str):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        return CliRunner().invoke(cli, ["autolabel", "--project", "rollouts", *args])
    finally:
        get_settings.cache_clear()


def _rollout_labels(session_factory) -> list[Label]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return list(session.scalars(select(Label).where(Label.source == LabelSource.rollout).order_by(Label.id)))


def test_labels_the_pool_resumably(monkeypatch, database_url, session_factory, project, tiny_base) -> None:  # type: ignore[no-untyped-def]
    common = ["--generator", str(tiny_base), "--rollouts", "2", "--max-new-tokens", "12", "--batch-size", "4",
              "--device", "cpu"]
    first = _run(monkeypatch, database_url, *common, "--limit", "2")
    assert first.exit_code == 0, first.output
    assert "stored 2 rollout labels (0 of 5" in first.stdout
    assert "autolabel: 2/2 solutions" in first.stderr
    rest = _run(monkeypatch, database_url, *common)
    assert "stored 3 rollout labels (2 of 5" in rest.stdout, rest.output
    again = _run(monkeypatch, database_url, *common)
    assert "stored 0 rollout labels (5 of 5" in again.stdout, again.output
    labels = _rollout_labels(session_factory)
    assert len(labels) == 5 and len({label.solution_id for label in labels}) == 5
    # Other sampling settings are another generator: its labels sit beside the first ones.
    other = _run(monkeypatch, database_url, *common, "--method", "binary", "--limit", "1")
    assert "stored 1 rollout labels (0 of 5" in other.stdout, other.output

    label = _rollout_labels(session_factory)[0]
    detail = label.source_detail
    assert label.user_id is None and label.assignment_id is None
    assert (detail["backend"], detail["model"], detail["spec"]) == ("transformers", "base", str(tiny_base))
    assert detail["settings"]["rollouts"] == 2 and detail["settings"]["method"] == "mc"
    assert detail["settings"]["max_new_tokens"] == 12 and detail["settings"]["temperature"] == 0.7
    assert len(detail["shares"]) == 2 and all(s is None or 0 <= s <= 1 for s in detail["shares"])
    ratings = [step["completions"][0]["rating"] for step in label.steps]
    assert ratings and set(ratings) <= {1, -1} and -1 not in ratings[:-1]
    assert (detail["first_error"] is None) == (-1 not in ratings)


def test_bad_input_is_refused_and_stores_nothing(monkeypatch, database_url, session_factory, project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = _run(monkeypatch, database_url, "--generator", str(tmp_path / "nowhere"))
    assert missing.exit_code != 0 and "no such model directory" in missing.output
    threshold = _run(monkeypatch, database_url, "--generator", str(tmp_path), "--threshold", "1.5")
    assert threshold.exit_code != 0 and "threshold" in threshold.output
    unknown = _run(monkeypatch, database_url, "--generator", str(tmp_path), "--project", "nope")
    assert unknown.exit_code != 0 and "nope" in unknown.output
    assert _rollout_labels(session_factory) == []
