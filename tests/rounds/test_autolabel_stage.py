"""The round's autolabel stage: rollout labels for the pool before the snapshot, resumed round
after round, off without a generator, and a generator that cannot be opened costs the round its
machine labels only."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from active_learning.config import PretrainConfig
from active_learning.pretrain import pretrain
from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.models import Label, LabelSource, Round, RoundStage
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import update_round_settings
from tests.conftest import add_solutions, browser_login, make_project, make_user
from tests.rounds.conftest import run_one_round

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def generator(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A real causal LM, pretrained for three steps: it writes nonsense, quickly."""
    records = [to_prm800k(c) for c in iter_candidates(40, 1, seed=9, error_rate=0.0)]
    output = tmp_path_factory.mktemp("generator") / "base"
    return pretrain(PretrainConfig(output=str(output), steps=3, batch_size=4, max_length=256, device="cpu"), records)


def _rollout_labels(session_factory) -> list[Label]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return list(session.scalars(select(Label).where(Label.source == LabelSource.rollout)))


def _settings(session_factory, project_id: int, **values) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        update_round_settings(session, project_id, RoundSettingsUpdate(**values))


def test_each_round_labels_up_to_its_limit_and_the_next_goes_on(
    client, session_factory, worker_settings, generator  # type: ignore[no-untyped-def]
) -> None:
    project = make_project(session_factory, "autolabeled")
    ids = add_solutions(session_factory, project, 5, steps=2)
    _settings(session_factory, project.id, autolabel_generator=str(generator), autolabel_rollouts=2,
              autolabel_limit=3, min_train_labels=1000)
    first = run_one_round(session_factory, project.id, worker_settings)
    labels = _rollout_labels(session_factory)
    assert len(labels) == 3 and {label.solution_id for label in labels} <= set(ids)
    assert all(label.user_id is None and label.source_detail["spec"] == str(generator) for label in labels)
    assert all(label.source_detail["settings"]["rollouts"] == 2 for label in labels)
    with session_scope(session_factory) as session:
        metrics = session.get(Round, first).metrics
    assert metrics["autolabel"] == {"generator": str(generator), "rollouts": 2, "method": "mc",
                                    "stored": 3, "skipped": 0, "candidates": 5}
    # The snapshot's own record sits beside it.
    assert "settings" in metrics and "sources" in metrics

    second = run_one_round(session_factory, project.id, worker_settings)
    assert len({label.solution_id for label in _rollout_labels(session_factory)}) == 5
    with session_scope(session_factory) as session:
        assert session.get(Round, second).metrics["autolabel"]["stored"] == 2
        assert session.get(Round, second).metrics["autolabel"]["skipped"] == 3

    make_user(session_factory, "rita", "researcher")
    browser_login(client, "rita")
    page = client.get(f"/research/rounds/{second}")
    assert page.status_code == 200
    assert "2 rollout labels stored; 3 of 5 pool solutions with an answer had one already" in page.text


def test_without_a_generator_the_stage_passes_and_a_missing_one_is_reported(
    client, session_factory, worker_settings  # type: ignore[no-untyped-def]
) -> None:
    project = make_project(session_factory, "plain")
    add_solutions(session_factory, project, 3, steps=2)
    _settings(session_factory, project.id, min_train_labels=1000)
    assert Round.__table__.c.stage.default.arg == RoundStage.autolabel
    quiet = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        assert "autolabel" not in session.get(Round, quiet).metrics

    _settings(session_factory, project.id, autolabel_generator="/nowhere/generator")
    reported = run_one_round(session_factory, project.id, worker_settings)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, reported)
        outcome = round_.metrics["autolabel"]
    assert outcome["error"] == "cannot open the generator: generator '/nowhere/generator': no such model directory"
    assert _rollout_labels(session_factory) == []
    make_user(session_factory, "rita", "researcher")
    browser_login(client, "rita")
    assert "no such model directory" in client.get(f"/research/rounds/{reported}").text


@pytest.mark.parametrize(("spec", "message"), [
    ("ftp://models/gen", "only http(s):// endpoints are understood"),
    ("vllm:", "vllm:MODEL needs a model"),
    ("   ", "generator: name a directory"),
    # Saved, a typo was found only by a round, which skipped its rollouts and said so in a log.
    ("not a model", "generator 'not a model' names no model"),
    ("vllm:my model", "generator 'my model' names no model"),
])
def test_a_generator_spec_of_no_known_form_is_refused(client, session_factory, spec: str, message: str) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import api_headers

    project = make_project(session_factory, "specs")
    make_user(session_factory, "rita", "researcher")
    headers = api_headers(client, "rita")
    url = f"/api/v1/projects/{project.id}/round-settings"
    refused = client.patch(url, headers=headers, json={"autolabel_generator": spec})
    assert refused.status_code == 422 and message in refused.text
    assert client.get(url, headers=headers).json()["autolabel_generator"] is None
    accepted = client.patch(url, headers=headers, json={
        "autolabel_generator": " http://127.0.0.1:8000/v1#gen ", "autolabel_method": "binary", "autolabel_rollouts": 4})
    assert accepted.status_code == 200, accepted.text
    assert (accepted.json()["autolabel_generator"], accepted.json()["autolabel_method"]) == ("http://127.0.0.1:8000/v1#gen", "binary")
    assert client.patch(url, headers=headers, json={"autolabel_method": "grid"}).status_code == 422
    assert client.patch(url, headers=headers, json={"autolabel_generator": None}).json()["autolabel_generator"] is None
