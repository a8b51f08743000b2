from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status

from app.deps import DataApiUser, ResearcherApiUser, RowId, SessionDep
from app.errors import error_responses
from app.models import INT32_MAX, PickReason
from app.projects.service import get_project
from app.rounds import service
from app.rounds.comparison import get_comparison, list_comparisons, request_comparison
from app.rounds.jobs import wake_after_commit, wake_comparison_after_commit
from app.rounds.sources import round_sources
from app.rounds.schemas import (
    ModelComparisonIn,
    ModelComparisonRead,
    ModelVersionRead,
    PickRead,
    RoundDetailRead,
    RoundRead,
    RoundSourcesRead,
    RoundSettingsRead,
    RoundSettingsUpdate,
    ScoreRequest,
    ScoreResponse,
)

# Every route names a project or a round, which may not exist.
router = APIRouter(prefix="/api/v1", tags=["rounds"], responses=error_responses(401, 403, 404, 422))


@router.post(
    "/projects/{project_id}/rounds",
    response_model=RoundRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses=error_responses(409, described={409: "the project has a round queued or running"}),
)
def start_round(project_id: RowId, user: ResearcherApiUser, session: SessionDep) -> RoundRead:
    """Queue a round (snapshot → train → evaluate → promote → score → select → enqueue) for a
    worker. 409 while the project has a round queued or running."""
    round_ = service.start_round(session, get_project(session, project_id), user=user)
    wake_after_commit(session, round_.id)
    return RoundRead.model_validate(round_)


@router.get("/projects/{project_id}/rounds", response_model=list[RoundRead])
def list_rounds(
    project_id: RowId,
    _: DataApiUser,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="rounds in the answer at most")] = 200,
    offset: Annotated[int, Query(ge=0, le=INT32_MAX, description="newer rounds to pass over first")] = 0,
) -> list[RoundRead]:
    """The project's rounds, the newest first: `limit` of them from `offset`; the next page is
    at `offset` + `limit`."""
    get_project(session, project_id)
    return [RoundRead.model_validate(r) for r in service.list_rounds(session, project_id, limit, offset=offset)]


@router.get("/rounds/{round_id}", response_model=RoundDetailRead)
def get_round(round_id: RowId, _: DataApiUser, session: SessionDep) -> RoundDetailRead:
    """A round's state; poll it for the progress bar (stage, percent, ETA). `label_sources`
    says where the labels on its picks came from and how machine labels compare with
    labelers' on the same solutions."""
    round_ = service.get_round(session, round_id)
    return RoundDetailRead(
        **RoundRead.model_validate(round_).model_dump(),
        label_sources=RoundSourcesRead.model_validate(round_sources(session, round_)),
    )


@router.post(
    "/rounds/{round_id}/cancel",
    response_model=RoundRead,
    responses=error_responses(409, described={409: "the round is no longer queued or running"}),
)
def cancel_round(round_id: RowId, user: ResearcherApiUser, session: SessionDep) -> RoundRead:
    round_ = service.cancel_round(service.get_round(session, round_id), by=user)
    return RoundRead.model_validate(round_)


@router.get("/rounds/{round_id}/picks", response_model=list[PickRead])
def list_picks(
    round_id: RowId,
    _: DataApiUser,
    session: SessionDep,
    reason: PickReason | None = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[PickRead]:
    """What the round put in the queue, in queue order, with each pick's score and reason."""
    round_ = service.get_round(session, round_id)
    return service.list_picks(
        session, round_, reason=reason.value if reason else None, offset=offset, limit=limit
    )


@router.get("/projects/{project_id}/model-versions", response_model=list[ModelVersionRead])
def list_model_versions(project_id: RowId, _: DataApiUser, session: SessionDep) -> list[ModelVersionRead]:
    get_project(session, project_id)
    return [ModelVersionRead.model_validate(v) for v in service.list_model_versions(session, project_id)]


@router.post(
    "/projects/{project_id}/model-comparisons",
    response_model=ModelComparisonRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses=error_responses(400, 404),
)
def request_model_comparison(
    project_id: RowId, body: ModelComparisonIn, user: ResearcherApiUser, session: SessionDep
) -> ModelComparisonRead:
    """Queue a comparison of two of the project's model versions on its held-out labels as they
    stand; a worker measures it (the one already waiting for the same pair is returned)."""
    get_project(session, project_id)
    comparison = request_comparison(session, project_id, body.version_a_id, body.version_b_id, user.id)
    wake_comparison_after_commit(session, comparison.id)
    return ModelComparisonRead.model_validate(comparison)


@router.get("/projects/{project_id}/model-comparisons", response_model=list[ModelComparisonRead])
def list_model_comparisons(project_id: RowId, _: DataApiUser, session: SessionDep) -> list[ModelComparisonRead]:
    """The latest 20 comparisons of two model versions, newest first."""
    get_project(session, project_id)
    return [ModelComparisonRead.model_validate(c) for c in list_comparisons(session, project_id)]


@router.get("/model-comparisons/{comparison_id}", response_model=ModelComparisonRead, responses=error_responses(404))
def get_model_comparison(comparison_id: RowId, _: DataApiUser, session: SessionDep) -> ModelComparisonRead:
    return ModelComparisonRead.model_validate(get_comparison(session, comparison_id))


@router.get("/projects/{project_id}/round-settings", response_model=RoundSettingsRead)
def get_round_settings(project_id: RowId, _: DataApiUser, session: SessionDep) -> RoundSettingsRead:
    get_project(session, project_id)
    return RoundSettingsRead.model_validate(service.round_settings(session, project_id))


@router.patch(
    "/projects/{project_id}/round-settings",
    response_model=RoundSettingsRead,
    responses=error_responses(400, 409),
)
def update_round_settings(
    project_id: RowId, body: RoundSettingsUpdate, user: ResearcherApiUser, session: SessionDep
) -> RoundSettingsRead:
    """Selection, training, promotion and trigger settings; a running round keeps the ones
    it started with."""
    get_project(session, project_id)
    return RoundSettingsRead.model_validate(
        service.update_round_settings(session, project_id, body, by=user)
    )


@router.post(
    "/model-versions/{version_id}/score",
    response_model=ScoreResponse,
    responses=error_responses(400, 409, 503, described={
        409: "the version's checkpoint is no longer on this server",
        503: "the scorer is busy (STEPWISE_SCORING_QUEUE requests held), or the database is not available: retry "
             "after `Retry-After` seconds",
    }),
)
def score_with_version(
    request: Request, version_id: RowId, body: ScoreRequest, _: ResearcherApiUser, session: SessionDep
) -> ScoreResponse:
    """Step and solution scores of candidate solutions from one model version, in one batch:
    best-of-N reranking for other systems. Researchers and admins only."""
    # Imported here: torch and transformers load only in processes that are asked to score.
    from app.rounds.scoring import score_candidates

    return score_candidates(session, version_id, body, request.app.state.scoring_turns)
