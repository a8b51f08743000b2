"""Round stages are timed, and the ones that raise are counted, in the process that runs them."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from app.db import session_scope
from app.models import Project, RoundStage, RoundStatus
from app.rounds import lease, stages
from app.rounds.service import start_round
from app.rounds.stages import run_round
from tests.rounds.conftest import synthetic_project, worker_settings  # noqa: F401

STAGES = [s.value for s in RoundStage if s != RoundStage.done]


def _sample(name: str, stage: str) -> float:
    return REGISTRY.get_sample_value(name, {"stage": stage}) or 0.0


def _counts() -> dict[str, tuple[float, float]]:
    return {
        stage: (
            _sample("stepwise_round_stage_duration_seconds_count", stage),
            _sample("stepwise_round_stage_failures_total", stage),
        )
        for stage in STAGES
    }


def _start(factory, project_id: int) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return start_round(session, session.get(Project, project_id)).id


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_every_stage_of_a_round_is_timed_once(session_factory, worker_settings, backend) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    project = synthetic_project(session_factory)
    before = _counts()
    assert run_round(session_factory, _start(session_factory, project.id), "worker-m", worker_settings) == RoundStatus.done
    after = _counts()
    assert {s: after[s][0] - before[s][0] for s in STAGES} == dict.fromkeys(STAGES, 1)
    assert {s: after[s][1] - before[s][1] for s in STAGES} == dict.fromkeys(STAGES, 0)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(("error", "failed"), [(RuntimeError("out of memory"), 1), (lease.LeaseLost("taken over"), 0)])
def test_a_stage_that_raises_is_counted_as_failed_unless_the_lease_moved(  # type: ignore[no-untyped-def]
    session_factory, worker_settings, backend, monkeypatch, error, failed  # noqa: F811
) -> None:
    project = synthetic_project(session_factory, labeled_problems=2, pool_problems=1)

    def broken(run) -> None:  # type: ignore[no-untyped-def]
        raise error

    monkeypatch.setitem(stages.STAGES, RoundStage.snapshot, broken)
    before = _counts()["snapshot"]
    run_round(session_factory, _start(session_factory, project.id), "worker-m", worker_settings)
    after = _counts()["snapshot"]
    assert (after[0] - before[0], after[1] - before[1]) == (0, failed)
