"""A round trains on the sources its settings weigh, evaluates on labelers' labels alone, and
records the snapshot's mix."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from active_learning.data import SOURCES, load_examples, record_source, weigh_sources
from app.db import session_scope
from app.machine_labels.service import MachineLabel, store_machine_labels
from app.models import LabelSource, ModelVersion, Project, Round, RoundStage, RoundStatus, Solution
from app.rounds import pool
from app.rounds.schemas import RoundSettingsUpdate
from app.rounds.service import start_round, update_round_settings
from app.rounds.stages import run_round
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.rounds.conftest import synthetic_project

GENERATOR = {"backend": "transformers", "model": "base", "settings": {"rollouts": 4}}


@pytest.mark.slow
def test_round_weighs_sources_and_records_the_mix(session_factory: sessionmaker[Session], worker_settings) -> None:
    project = synthetic_project(session_factory, labeled_problems=12, pool_problems=6)
    with session_scope(session_factory) as session:
        pooled = [(sid, steps) for sid, _, steps, _ in pool.pooled_with_answers(session, project.id)]
        labels = [MachineLabel(sid, [1] * (len(steps) - 1) + [-1], {}) for sid, steps in pooled]
        store_machine_labels(session, project.id, LabelSource.rollout, GENERATOR, labels)
        update_round_settings(session, project.id, RoundSettingsUpdate(source_weights={"human": 1, "rollout": 0.5}))
        round_id = start_round(session, session.get(Project, project.id)).id
        records = pool.label_records(session, project.id, 10**9)

    assert run_round(session_factory, round_id, "worker", worker_settings) == RoundStatus.done

    humans = sum(record_source(r) == "human" for r in records)
    with session_scope(session_factory) as session:
        round_ = session.get(Round, round_id)
        assert round_.metrics["sources"] == {
            "labels": {"human": humans, "rollout": len(pooled)},
            "weights": {"human": 1, "rollout": 0.5},
        }
        # The new-labels count is the labelers' alone.
        assert round_.snapshot_labels == humans
        version = session.scalar(select(ModelVersion).where(ModelVersion.round_id == round_id))
        heldout = round_.metrics["heldout_labels"]
        # Every example trains or is held out, but machine examples are never held out.
        everything = len(load_examples(weigh_sources(records, {"human": 1, "rollout": 0.5})))
        human_only = len(load_examples(weigh_sources(records)))
        assert version.train_labels + heldout < everything
        assert version.train_labels > human_only - heldout
        # Machine-labeled solutions stay in the pool, scored for labelers to be given.
        assert {sid for sid, _ in pooled} <= {r[0] for r in pool.pool_candidates(session, project.id, version.id)}
        assert session.scalar(select(Solution.id).where(Solution.id == pooled[0][0])) is not None


def test_source_weights_setting_through_the_api_and_the_page(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "weights")
    make_user(session_factory, "rita", "researcher")
    make_user(session_factory, "max", "manager")
    url = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")
    assert client.get(url, headers=headers).json()["source_weights"] is None
    changed = client.patch(url, headers=headers, json={"source_weights": {"human": 1, "rollout": 0.5}})
    assert changed.status_code == 200 and changed.json()["source_weights"] == {"human": 1, "rollout": 0.5}
    for bad, message in [({"robot": 1}, "unknown label source 'robot'"), ({"human": 0}, "above 0"),
                         ({"human": -1}, "must be a number from 0 to 100")]:
        response = client.patch(url, headers=headers, json={"source_weights": bad})
        assert response.status_code == 422 and message in response.text, response.text
    assert client.get(url, headers=headers).json()["source_weights"] == {"human": 1, "rollout": 0.5}

    csrf = browser_login(client, "rita")
    page = client.get(f"/research/projects/{project.id}")
    assert 'value="human=1, rollout=0.5"' in page.text
    form = f"/research/projects/{project.id}/settings"
    wrong = client.post(form, data={"csrf_token": csrf, "source_weights": "rollout=lots"})
    assert wrong.status_code == 422 and "write SOURCE=WEIGHT" in wrong.text
    saved = client.post(form, data={"csrf_token": csrf, "source_weights": "human=1, judge=0.25"}, follow_redirects=False)
    assert saved.status_code == 303
    assert client.get(url, headers=headers).json()["source_weights"] == {"human": 1, "judge": 0.25}
    browser_login(client, "max")
    assert "source weights human=1, judge=0.25" in client.get(f"/research/projects/{project.id}").text
    csrf = browser_login(client, "rita")
    blank = client.post(form, data={"csrf_token": csrf, "source_weights": ""}, follow_redirects=False)
    assert blank.status_code == 303 and client.get(url, headers=headers).json()["source_weights"] is None
    browser_login(client, "max")
    assert "human labels only" in client.get(f"/research/projects/{project.id}").text


def test_round_page_shows_the_snapshot_mix(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "mix")
    make_user(session_factory, "rita", "researcher")
    sources = {"labels": {"human": 120, "rollout": 40}, "weights": {"human": 1.0, "rollout": 0.5}}
    with session_scope(session_factory) as session:
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.done, stage=RoundStage.done,
                       percent=100.0, snapshot_labels=120, snapshot_label_id=160, metrics={"sources": sources})
        session.add(round_)
        session.flush()
        round_id = round_.id
    browser_login(client, "rita")
    page = client.get(f"/research/rounds/{round_id}")
    assert page.status_code == 200 and "120 human at weight 1; 40 rollout at weight 0.5" in page.text


def test_the_trainer_knows_every_label_source_the_platform_stores() -> None:
    assert set(SOURCES) == set(LabelSource)
