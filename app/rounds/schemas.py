from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from active_learning.data import check_source_weights, check_written_problem, check_written_steps
from active_learning.generator_spec import check_generator_spec
from app.models import ComparisonStatus, PickReason, PromoteMetric, RoundStage, RoundStatus, RoundTrigger, ScoreKind, SelectorMode
from app.validation import ScalarsAsWritten

# active_learning.rollouts.METHODS, spelled out so that the API's schema lists them.
RolloutMethod = Literal["mc", "binary"]


class RoundRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    project_id: int
    number: int = Field(description="the generation its picks are labeled with")
    status: RoundStatus
    status_text: str = Field(
        description='the status in words: "done, no model trained" for a round that had too few labels to train; '
        '"stalled, no worker" for a running one whose worker stopped renewing its lease (see lease_expires_at)'
    )
    stage: RoundStage = Field(description="the next stage to run, or done")
    percent: float
    eta_at: datetime | None
    lease_expires_at: datetime | None = Field(
        description="when the worker running it must renew its hold; past, while running, the round is stalled")
    message: str
    trigger: RoundTrigger
    snapshot_label_id: int | None
    snapshot_labels: int | None
    snapshot_hash: str | None
    promoted: bool | None
    metrics: dict[str, Any]
    error: str | None = Field(description="the last error, in one line; the worker's log has its traceback")
    attempts: int = Field(description="claims by a worker, one that died mid-round included")
    failures: int = Field(description="attempts that failed on an error (at STEPWISE_ROUND_MAX_ATTEMPTS the round "
                          "fails for good)")
    retry_at: datetime | None = Field(
        description="a round queued again after an error is not claimed before this; null otherwise"
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


class ShareRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    hits: int
    n: int
    value: float | None = Field(description="hits / n; null when n is 0")
    ci95: tuple[float, float] | None = Field(description="Wilson 95% interval")


class SourceComparisonRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    source: str = Field(description="a machine source: rollout, judge or prm")
    solutions: int = Field(description="the round's picks with both this source's label and a labeler's")
    first_error_agreement: ShareRead = Field(
        description="(machine, labeler) label pairs that put the first -1 on the same step, or both nowhere"
    )
    negative_precision: ShareRead = Field(description="of the steps both rated that the machine rated -1, those the labeler rated -1")
    negative_recall: ShareRead = Field(description="of the steps both rated that the labeler rated -1, those the machine rated -1")


class RoundSourcesRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    pick_labels: dict[str, int] = Field(description="current labels on the round's picks, per source")
    accepted_for_training: int = Field(
        description="machine labels the round trained on without a human (accept_agreeing_machine_labels)"
    )
    comparisons: list[SourceComparisonRead]


class RoundDetailRead(RoundRead):
    label_sources: RoundSourcesRead = Field(
        description="where the labels on the round's picks came from, and machine labels against labelers' on the same solutions"
    )


class ModelVersionRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    project_id: int
    round_id: int | None
    path: str
    base: str
    data_hash: str
    train_labels: int
    metrics: dict[str, Any]
    passed: bool | None
    is_served: bool
    created_at: datetime
    promoted_at: datetime | None


class ModelComparisonIn(ScalarsAsWritten):
    # Strict: `true` is not version 1.
    model_config = ConfigDict(extra="forbid", strict=True)

    version_a_id: int = Field(ge=1, le=2**31 - 1)
    version_b_id: int = Field(ge=1, le=2**31 - 1)


class ModelComparisonRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    version_a_id: int
    version_b_id: int
    status: ComparisonStatus = Field(description="queued, running (a worker measures it), done or failed")
    message: str = Field(description="why it failed; empty otherwise")
    snapshot_label_id: int | None = Field(description="once done: the held-out set is the project's human labels up to this id")
    heldout_labels: int | None
    results: dict[str, Any] = Field(
        description="once done: `a` and `b`, each version's metrics; `difference`, a − b per metric; "
        "`difference_ci95`, its 95% paired bootstrap interval; `best_of_n`, accuracies, difference and "
        "interval on held-out problems"
    )
    created_at: datetime
    finished_at: datetime | None


class PickRead(BaseModel):
    rank: int
    solution_id: int
    problem_id: int
    reason: PickReason
    score: float | None
    answer_grade: str
    priority: float
    model_version_id: int | None
    problem_statement: str
    ground_truth_answer: str | None
    final_answer: str | None
    steps: list[str]
    step_scores: list[float | None] | None = Field(
        description="P(step is correct) per step from the model that scored it; null for a step that alone is longer than the model's token limit"
    )
    detail: str | None = Field(
        default=None,
        description='why a routed pick went to humans: "rollout and PRM disagree on step 3"',
    )


class RoundSettingsRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    project_id: int
    picks_per_round: int
    per_problem_cap: int
    wrong_share: float
    control_share: float
    qc_share: float
    duplicate_similarity: float
    score_kind: ScoreKind
    neutral_as_correct: bool
    base_model: str
    train_epochs: float
    learning_rate: float
    max_length: int
    min_train_labels: int
    heldout_share: float
    promote_metric: PromoteMetric
    promote_min: float
    promote_margin: float
    promote_min_heldout: int
    selector_mode: SelectorMode
    selector_version_id: int | None
    selector_min_step_auroc: float | None = Field(
        description="rounds draw uniformly until the selector's held-out step AUROC (lower end of its 95% interval) reaches this; null: any served model ranks")
    accept_agreeing_machine_labels: bool = Field(
        description="train on machine labels, without a human, of solutions whose machine sources agree with each other and with the served PRM"
    )
    autolabel_generator: str | None = Field(
        description="generator the round's first stage samples rollouts from; null: no autolabel stage")
    autolabel_rollouts: int
    autolabel_method: RolloutMethod
    autolabel_limit: int = Field(description="most pool solutions one round labels by rollouts")
    every_new_labels: int | None
    schedule_hours: float | None
    source_weights: dict[str, float] | None = Field(
        description="training weight per label source; null: human labels only")
    updated_at: datetime


# The settings a null turns off; every other one must have a value.
NULLABLE_SETTINGS = ("every_new_labels", "schedule_hours", "selector_version_id", "source_weights",
                     "autolabel_generator", "selector_min_step_auroc")


def _null_only_where_allowed(schema: dict[str, Any]) -> None:
    """A left-out field is None to pydantic, so the generated schema offers null for every
    field; the service refuses null for all but NULLABLE_SETTINGS, and the schema says so."""
    for name, field in schema["properties"].items():
        options = field.get("anyOf")
        if name in NULLABLE_SETTINGS or options is None:
            continue
        kept = [option for option in options if option.get("type") != "null"]
        if len(kept) == 1:
            del field["anyOf"]
            field.pop("default", None)
            field.update(kept[0])


class RoundSettingsUpdate(ScalarsAsWritten):
    """Fields left out stay as they are; send null for `every_new_labels` or `schedule_hours`
    to turn that trigger off, for `selector_version_id` to let the next round pin the served
    model as the fixed selector, and for `selector_min_step_auroc` to let any served model rank."""

    # NaN would otherwise fail the bounds checks with a message about the bound, not the value.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra=_null_only_where_allowed)

    picks_per_round: int | None = Field(default=None, ge=1, le=100_000)
    per_problem_cap: int | None = Field(default=None, ge=1, le=1000)
    wrong_share: float | None = Field(default=None, ge=0, le=1)
    control_share: float | None = Field(default=None, ge=0, le=1)
    qc_share: float | None = Field(default=None, ge=0, le=1)
    duplicate_similarity: float | None = Field(default=None, gt=0, le=1.01)
    score_kind: ScoreKind | None = None
    neutral_as_correct: bool | None = None
    base_model: str | None = Field(default=None, min_length=1, max_length=255)
    train_epochs: float | None = Field(default=None, gt=0, le=100)
    learning_rate: float | None = Field(default=None, gt=0, le=1)
    max_length: int | None = Field(default=None, ge=64, le=32768)
    min_train_labels: int | None = Field(default=None, ge=1, le=10_000_000)
    heldout_share: float | None = Field(default=None, gt=0, lt=1)
    promote_metric: PromoteMetric | None = None
    promote_min: float | None = Field(default=None, ge=0, le=1)
    promote_margin: float | None = Field(default=None, ge=0, le=1)
    promote_min_heldout: int | None = Field(default=None, ge=1, le=10_000_000)
    selector_mode: SelectorMode | None = None
    selector_version_id: int | None = Field(default=None, ge=1, le=2**31 - 1)
    selector_min_step_auroc: float | None = Field(
        default=None, ge=0, le=1,
        description="rounds draw uniformly until the selector's held-out step AUROC, the lower end of its 95% "
        "interval on at least promote_min_heldout labels, reaches this; null: any served model ranks",
    )
    accept_agreeing_machine_labels: bool | None = None
    autolabel_generator: str | None = Field(
        default=None,
        max_length=500,
        description="a model directory or hub id (transformers), vllm:MODEL, or an OpenAI-compatible "
        "http(s)://host/v1[#model]; the round's first stage labels pool solutions by rollouts from it, "
        "as `stepwise autolabel` does; null: off",
    )
    autolabel_rollouts: int | None = Field(default=None, ge=1, le=1024)
    autolabel_method: RolloutMethod | None = None
    autolabel_limit: int | None = Field(default=None, ge=1, le=1_000_000)
    every_new_labels: int | None = Field(default=None, ge=1, le=10_000_000)
    schedule_hours: float | None = Field(default=None, ge=0.1, le=24 * 365)
    source_weights: dict[str, float] | None = Field(
        default=None,
        description=(
            "training weight per label source, e.g. {\"human\": 1, \"rollout\": 0.5}; a source left "
            "out is not trained on; null: human labels only. Held-out evaluation is human labels alone."
        ),
    )

    @field_validator("autolabel_generator")
    @classmethod
    def _a_generator_spec(cls, spec: str | None) -> str | None:
        return None if spec is None else check_generator_spec(spec)

    @field_validator("source_weights")
    @classmethod
    def _known_sources_and_one_trains(cls, weights: dict[str, float] | None) -> dict[str, float] | None:
        if weights is None:
            return None
        check_source_weights(weights)
        if not any(weight > 0 for weight in weights.values()):
            raise ValueError("at least one source needs a weight above 0")
        return weights


class CandidateIn(ScalarsAsWritten):
    model_config = ConfigDict(extra="forbid")

    steps: list[Annotated[str, Field(max_length=20_000)]] = Field(min_length=1, max_length=200)

    @field_validator("steps")
    @classmethod
    def _every_step_written(cls, steps: list[str]) -> list[str]:
        check_written_steps(steps)
        return steps


# The text one score request may send, the problem counted with each candidate (each is scored
# with it). Each field's own bound allowed 256 MB, and tokenizing that held the server at 21 GB
# for scores it could not give (every step longer than the window); this is 64 candidates of
# about 15,000 characters each, a long solution beside its problem.
SCORE_REQUEST_CHARACTERS = 1_000_000


class ScoreRequest(ScalarsAsWritten):
    """A problem and candidate solutions to score with one model version, for best-of-N
    reranking from other systems. Bounded so that one request stays one batch."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, max_length=20_000)
    solutions: list[CandidateIn] = Field(min_length=1, max_length=64)
    neutral_as_correct: bool | None = Field(
        default=None,
        description="count a step rated 0 (neutral) as correct, as the paper's PRM scoring does; by default as "
        "the project's `neutral_as_correct` round setting says, as its rounds rank the pool",
    )

    @field_validator("problem")
    @classmethod
    def _problem_written(cls, problem: str) -> str:
        check_written_problem(problem)
        return problem

    @model_validator(mode="after")
    def _within_one_batch(self) -> ScoreRequest:
        characters = sum(len(self.problem) + sum(map(len, candidate.steps)) for candidate in self.solutions)
        if characters > SCORE_REQUEST_CHARACTERS:
            raise ValueError(
                f"the request holds {characters:,} characters of text, the problem counted with each candidate; "
                f"at most {SCORE_REQUEST_CHARACTERS:,} are scored in one request: send fewer candidates or split "
                "them over several requests")
        return self


class CandidateScore(BaseModel):
    step_scores: list[float | None] = Field(
        description="P(step is correct) per step; null for a step that alone is longer than the model's limit"
    )
    product: float | None = Field(
        description="P(every step is correct) over the steps scored: the paper's solution score; null when no "
        "step could be scored (every one alone is longer than `max_length`), rather than the best score there is"
    )
    minimum: float | None = Field(description="the weakest scored step's P(correct); null when no step was scored")
    truncated: bool = Field(
        description="some step alone is longer than `max_length` and has no score, so `product` and `minimum` "
        "leave it out: rank such a candidate as you see fit"
    )


class ScoreResponse(BaseModel):
    model_version_id: int
    neutral_as_correct: bool = Field(description="whether a neutral step counted as correct in these scores")
    max_length: int = Field(
        description="tokens per window: the project's current `max_length` round setting, at most the model's "
        "positions. A longer solution is read in windows, each step after the first window with up to half a window of what precedes it "
        "(`prm score --max-length` with this value gives the same scores)"
    )
    solutions: list[CandidateScore]
