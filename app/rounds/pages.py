"""Research pages: rounds with live progress, metrics across rounds, model versions, settings,
and a picks inspector that says why each solution was chosen."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request, status
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field

from active_learning.data import format_source_weights, parse_source_weights
from app.deps import RESEARCH, DataPageUser, ResearcherPageUser, SessionDep, has_role
from app.errors import BadInput, Conflict, NotFound
from app.forms import FormInvalid, PageId, SentFields, row_id, sent_values, validate_form
from app.models import PickReason, Project, PromoteMetric, ScoreKind, SelectorMode, User
from app.projects.service import get_project, list_projects
from app.rounds import service
from app.rounds.charts import labels_chart, loss_chart, quality_chart
from app.rounds.comparison import comparison_views, request_comparison
from app.rounds.jobs import wake_after_commit, wake_comparison_after_commit
from app.rounds.payoff import selection_payoff
from app.rounds.picking import EMPTY_POOL
from app.rounds.pool import pool_shape
from app.rounds.schemas import NULLABLE_SETTINGS, RoundSettingsUpdate
from app.rounds.sources import round_sources
from app.templating import render

router = APIRouter(prefix="/research", include_in_schema=False)

PICKS_PER_PAGE = 50


class SettingsForm(BaseModel):
    """The fields as typed; RoundSettingsUpdate judges them so errors show in place."""

    picks_per_round: str = Field(default="", max_length=50)
    per_problem_cap: str = Field(default="", max_length=50)
    wrong_share: str = Field(default="", max_length=50)
    control_share: str = Field(default="", max_length=50)
    qc_share: str = Field(default="", max_length=50)
    duplicate_similarity: str = Field(default="", max_length=50)
    score_kind: str = Field(default="", max_length=50)
    neutral_as_correct: str = Field(default="", max_length=50)
    base_model: str = Field(default="", max_length=300)
    train_epochs: str = Field(default="", max_length=50)
    learning_rate: str = Field(default="", max_length=50)
    max_length: str = Field(default="", max_length=50)
    min_train_labels: str = Field(default="", max_length=50)
    heldout_share: str = Field(default="", max_length=50)
    promote_metric: str = Field(default="", max_length=50)
    promote_min: str = Field(default="", max_length=50)
    promote_margin: str = Field(default="", max_length=50)
    promote_min_heldout: str = Field(default="", max_length=50)
    selector_mode: str = Field(default="", max_length=50)
    selector_version_id: str = Field(default="", max_length=50)
    selector_min_step_auroc: str = Field(default="", max_length=50)
    accept_agreeing_machine_labels: str = Field(default="", max_length=50)
    autolabel_generator: str = Field(default="", max_length=600)
    autolabel_rollouts: str = Field(default="", max_length=50)
    autolabel_method: str = Field(default="", max_length=50)
    autolabel_limit: str = Field(default="", max_length=50)
    every_new_labels: str = Field(default="", max_length=50)
    schedule_hours: str = Field(default="", max_length=50)
    source_weights: str = Field(default="", max_length=200)


@router.get("")
def research_home(request: Request, user: DataPageUser, session: SessionDep) -> Response:
    rows = [
        (p, service.list_rounds(session, p.id, limit=1), service.served_version(session, p.id))
        for p in list_projects(session)
    ]
    return render(request, "research/index.html", {"rows": rows})


@router.get("/projects/{project_id}")
def project_rounds(
    request: Request, project_id: PageId, user: DataPageUser, session: SessionDep
) -> Response:
    project = get_project(session, project_id)
    messages = []
    if request.query_params.get("started") == "1":
        messages.append({"kind": "success", "text": "Round queued: a worker will pick it up."})
    if request.query_params.get("saved") == "1":
        messages.append({"kind": "success", "text": "Round settings saved."})
    if request.query_params.get("compared") == "1":
        messages.append({"kind": "success", "text": "Comparison queued: a worker measures both versions."})
    return _overview(request, session, user, project, messages=messages)


@router.post("/projects/{project_id}/rounds")
def start_round(
    request: Request, project_id: PageId, user: ResearcherPageUser, session: SessionDep
) -> Response:
    project = get_project(session, project_id)
    try:
        round_ = service.start_round(session, project, user=user)
    except Conflict as exc:
        messages = [{"kind": "error", "text": exc.message}]
        return _overview(request, session, user, project, messages=messages, status_code=409)
    wake_after_commit(session, round_.id)
    return RedirectResponse(f"/research/projects/{project.id}?started=1", status_code=303)


@router.post("/projects/{project_id}/settings")
def update_settings(
    request: Request,
    project_id: PageId,
    user: ResearcherPageUser,
    session: SessionDep,
    form: Annotated[SettingsForm, Form()],
    sent: SentFields,
) -> Response:
    project = get_project(session, project_id)
    values = {k: v.strip() for k, v in sent_values(form, sent).items()}
    weights_error = None
    try:
        weights = parse_source_weights(values["source_weights"]) if values.get("source_weights") else None
    except ValueError as exc:
        # Judged with the other fields below, so that every field's error shows at once.
        weights, weights_error = None, str(exc)
    try:
        changes = validate_form(RoundSettingsUpdate, {**values, "source_weights": weights},
                                required=SettingsForm.model_fields.keys() - set(NULLABLE_SETTINGS))
    except FormInvalid as exc:
        errors = {**exc.errors, **({"source_weights": weights_error} if weights_error else {})}
        return _overview(request, session, user, project, values=values, errors=errors, status_code=422)
    if weights_error:
        return _overview(request, session, user, project, values=values,
                         errors={"source_weights": weights_error}, status_code=422)
    # A nullable setting sent blank is turned off (null); one the post left out stays.
    changes = changes.model_copy(update={k: None for k in NULLABLE_SETTINGS if values.get(k) == ""})
    try:
        service.update_round_settings(session, project.id, changes, by=user)
    except BadInput as exc:
        errors = {item["field"]: item["message"] for item in exc.details} if exc.details else {"form": exc.message}
        return _overview(request, session, user, project, values=values, errors=errors, status_code=422)
    return RedirectResponse(f"/research/projects/{project.id}?saved=1#settings", status_code=303)


class ComparisonForm(BaseModel):
    version_a: str = Field(default="", max_length=20)
    version_b: str = Field(default="", max_length=20)


@router.post("/projects/{project_id}/comparisons")
def queue_comparison(
    request: Request,
    project_id: PageId,
    user: ResearcherPageUser,
    session: SessionDep,
    form: Annotated[ComparisonForm, Form()],
) -> Response:
    project = get_project(session, project_id)
    version_a, version_b = row_id(form.version_a), row_id(form.version_b)
    if version_a is None or version_b is None:
        return _overview(request, session, user, project, status_code=422,
                         messages=[{"kind": "error", "text": "Choose two model versions to compare."}])
    try:
        comparison = request_comparison(session, project.id, version_a, version_b, user_id=user.id)
    except (BadInput, NotFound) as exc:
        return _overview(request, session, user, project, status_code=422,
                         messages=[{"kind": "error", "text": f"Not compared: {exc.message}."}])
    wake_comparison_after_commit(session, comparison.id)
    return RedirectResponse(f"/research/projects/{project.id}?compared=1#comparisons", status_code=303)


def _overview(
    request: Request,
    session: SessionDep,
    user: User,
    project: Project,
    *,
    values: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
    messages: list[dict[str, str]] | None = None,
    status_code: int = status.HTTP_200_OK,
) -> Response:
    rounds = service.list_rounds(session, project.id)
    settings = service.round_settings(session, project.id)
    return render(
        request,
        "research/project.html",
        {
            "project": project,
            "rounds": rounds,
            "active": service.active_round(session, project.id),
            "versions": service.list_model_versions(session, project.id),
            "comparisons": comparison_views(session, project.id, limit=5),
            # Each version's round by id: its number and why its model was or was not promoted.
            "round_of": {r.id: r for r in rounds},
            "quality": quality_chart(rounds),
            "payoff": selection_payoff(session, project.id, settings.promote_metric),
            "labels": labels_chart(rounds),
            "settings": settings,
            # A field the post left out shows what is stored, as it stays.
            "values": {**{k: ("" if v is None else v) for k, v in _settings_values(settings).items()},
                       **(values or {})},
            "errors": errors or {},
            "messages": messages or [],
            "can_research": has_role(user, RESEARCH),
            "score_kinds": list(ScoreKind),
            "promote_metrics": list(PromoteMetric),
            "selector_modes": list(SelectorMode),
            "pool": pool_shape(session, project.id),
        },
        status_code=status_code,
        # A refused cancel answers from the round's address with this page.
        address=f"/research/projects/{project.id}",
    )


def _settings_values(settings: Any) -> dict[str, Any]:
    values = {
        name: (value.value if hasattr(value, "value") else value)
        for name in SettingsForm.model_fields
        for value in [getattr(settings, name)]
    }
    weights = values["source_weights"]
    values["source_weights"] = format_source_weights(weights) if weights is not None else None
    return values


@router.get("/rounds/{round_id}")
def round_page(
    request: Request,
    round_id: PageId,
    user: DataPageUser,
    session: SessionDep,
    reason: PickReason | None = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    round_ = service.get_round(session, round_id)
    project = get_project(session, round_.project_id)
    picks = service.list_picks(
        session, round_, reason=reason.value if reason else None,
        offset=(page - 1) * PICKS_PER_PAGE, limit=PICKS_PER_PAGE + 1,
    )
    return render(
        request,
        "research/round.html",
        {
            "project": project,
            "round": round_,
            "picks": picks[:PICKS_PER_PAGE],
            "has_next": len(picks) > PICKS_PER_PAGE,
            "page": page,
            "reason": reason.value if reason else None,
            "counts": service.count_picks(session, round_.id),
            "loss": loss_chart(service.round_training_log(session, round_.id)),
            "reasons": list(PickReason),
            "label_sources": round_sources(session, round_),
            "can_research": has_role(user, RESEARCH),
            "empty_pool": EMPTY_POOL,
        },
    )


@router.post("/rounds/{round_id}/cancel")
def cancel_round(
    request: Request, round_id: PageId, user: ResearcherPageUser, session: SessionDep
) -> Response:
    round_ = service.get_round(session, round_id)
    try:
        service.cancel_round(round_, by=user)
    except Conflict as exc:
        # Ended already (or cancelled from another tab): the page it went back to, saying so.
        messages = [{"kind": "error", "text": f"Nothing changed: {exc.message}."}]
        return _overview(request, session, user, get_project(session, round_.project_id),
                         messages=messages, status_code=409)
    return RedirectResponse(f"/research/projects/{round_.project_id}", status_code=303)
