"""One PRM800K line -> the problem, solution and label it holds (both phases).

Phase 2 records carry `question.pre_generated_steps`: they are the solution. Phase 1 records do
not: the solution is the trajectory the labeler built, the chosen completion (or the
labeler's own human completion) of every step.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.exports.prm800k import (
    COMPLETION_KEYS,
    LABEL_KEYS,
    QUESTION_KEYS,
    RECORD_KEYS,
    STEP_KEYS,
    render_question,
    render_timestamp,
)
from app.imports.fields import (
    Invalid,
    flag,
    integer,
    mapping,
    number,
    string_list,
    text,
)
from app.imports.reader import type_name
from app.imports.records import (
    MAX_ANSWER,
    MAX_STEPS,
    LabelIn,
    PrmRecord,
    ProblemIn,
    QuestionAsGiven,
    SolutionIn,
    StoredProblem,
    StoredSolution,
)
from app.models import FinishReason, StepsSource

RATINGS = (-1, 0, 1)
_FINISH_REASONS = {r.value: r for r in FinishReason}


def parse_prm800k(obj: dict[str, Any], origin: dict[str, Any], now: datetime) -> PrmRecord:
    question = mapping(obj, "question")
    assert question is not None
    problem = ProblemIn(
        statement=text(question, "problem", "question", required=True),  # type: ignore[arg-type]
        answer=text(question, "ground_truth_answer", "question"),
        reference_solution=text(question, "ground_truth_solution", "question"),
    )
    pre_steps = string_list(question, "pre_generated_steps", "question", max_items=MAX_STEPS)
    given_answer = text(question, "pre_generated_answer", "question", max_length=MAX_ANSWER)
    verifier_score = number(question, "pre_generated_verifier_score", "question")
    generation = integer(obj, "generation")
    label = mapping(obj, "label", required=False)
    if label is None:
        if pre_steps is None:
            raise Invalid("question.pre_generated_steps", "missing, and there is no label to take the steps from")
        solution = SolutionIn(pre_steps, given_answer, StepsSource.given, verifier_score, generation, origin)
        return PrmRecord(problem, solution, None)

    raw_steps = label.get("steps")
    if type(raw_steps) is not list:
        raise Invalid("label.steps", f"must be an array, not {type_name(raw_steps)}")
    if len(raw_steps) > MAX_STEPS:
        raise Invalid("label.steps", f"has {len(raw_steps)} steps; at most {MAX_STEPS} are allowed")
    finish_reason = _finish_reason(label)
    if not raw_steps and finish_reason in (FinishReason.found_error, FinishReason.solution):
        raise Invalid("label.steps", f"is empty, but finish_reason is {finish_reason.value}")
    extra: dict[str, Any] = {}
    steps, trajectory = _label_steps(raw_steps, pre_steps, extra)
    if pre_steps is None:
        if not trajectory:
            raise Invalid("label.steps", "no chosen or human completion to make the solution's steps from")
        _omit_chosen_texts(steps)
        solution = SolutionIn(trajectory, given_answer, StepsSource.label, verifier_score, generation, origin)
    else:
        solution = SolutionIn(pre_steps, given_answer, StepsSource.given, verifier_score, generation, origin)

    record_extra = {k: v for k, v in obj.items() if k not in RECORD_KEYS}
    created_at, timestamp = _created_at(obj, now)
    if timestamp is None or render_timestamp(created_at) != timestamp:
        record_extra["timestamp"] = timestamp
    is_qc = flag(obj, "is_quality_control_question")
    is_screening = flag(obj, "is_initial_screening_question")
    for key, value in (("is_quality_control_question", is_qc), ("is_initial_screening_question", is_screening)):
        if value is None:
            record_extra[key] = None
    _put(extra, "record", record_extra)
    _put(extra, "question", {k: v for k, v in question.items() if k not in QUESTION_KEYS})
    _put(extra, "label", {k: v for k, v in label.items() if k not in LABEL_KEYS})
    return PrmRecord(
        problem,
        solution,
        LabelIn(
            foreign_labeler=text(obj, "labeler", max_length=100),
            created_at=created_at,
            timestamp=timestamp,
            generation=generation,
            is_quality_control=bool(is_qc),
            is_initial_screening=bool(is_screening),
            finish_reason=finish_reason,
            total_time_ms=integer(label, "total_time", "label", low=0),
            steps=steps,
            extra=extra,
            question=QuestionAsGiven(
                ground_truth_solution=problem.reference_solution,
                pre_generated_steps=pre_steps,
                pre_generated_answer=given_answer,
                pre_generated_verifier_score=question.get("pre_generated_verifier_score"),
            ),
        ),
    )


def _put(extra: dict[str, Any], key: str, values: dict[str, Any]) -> None:
    if values:
        extra[key] = values


def _created_at(obj: dict[str, Any], now: datetime) -> tuple[datetime, str | None]:
    timestamp = text(obj, "timestamp")
    if timestamp is None:
        return now, None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise Invalid("timestamp", f"not an ISO 8601 date and time: {timestamp[:40]!r}") from None
    # PRM800K writes UTC without an offset.
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment, timestamp


def _finish_reason(label: dict[str, Any]) -> FinishReason | None:
    value = text(label, "finish_reason", "label")
    if value is None:
        return None
    reason = _FINISH_REASONS.get(value)
    if reason is None:
        raise Invalid("label.finish_reason", f"unknown {value[:40]!r}; expected one of {', '.join(_FINISH_REASONS)}")
    return reason


def _label_steps(
    raw_steps: list[Any], solution_steps: list[str] | None, extra: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Checked steps in Label.steps' shape, and the trajectory the labeler chose through them.

    A completion's `text` is left out where it is the solution's own step; without
    pre-generated steps the solution is not known yet and every text is kept.
    """
    n_solution = len(solution_steps) if solution_steps is not None else 0
    stored: list[dict[str, Any]] = []
    trajectory: list[str] = []
    open_end = False
    for i, step in enumerate(raw_steps):
        # Field paths are only spelled out for errors: this loop runs once per step of the file.
        if type(step) is not dict:
            raise Invalid(f"label.steps[{i}]", f"must be an object, not {type_name(step)}")
        if not step.keys() <= STEP_KEYS:
            extra.setdefault("steps", {})[str(i)] = {k: v for k, v in step.items() if k not in STEP_KEYS}
        own = solution_steps[i] if i < n_solution else None  # type: ignore[index]
        completions = step.get("completions")
        if type(completions) is not list:
            raise Invalid(f"label.steps[{i}].completions", f"must be an array, not {type_name(completions)}")
        kept = [_completion(c, i, j, own, extra) for j, c in enumerate(completions)]
        human = step.get("human_completion")
        human_text = None if human is None else _human_text(human, f"label.steps[{i}].human_completion")
        chosen = step.get("chosen_completion")
        if chosen is not None and (type(chosen) is not int or not 0 <= chosen < len(completions)):
            raise Invalid(
                f"label.steps[{i}].chosen_completion",
                f"must be null or the index of one of the {len(completions)} completions",
            )
        if open_end and solution_steps is None:
            raise Invalid(f"label.steps[{i}]", "follows a step with neither a chosen nor a human completion")
        if chosen is not None:
            trajectory.append(completions[chosen]["text"])
        elif human_text is not None:
            trajectory.append(human_text)
        else:
            open_end = True
        stored.append({"completions": kept, "human_completion": human, "chosen_completion": chosen})
    return stored, trajectory


def _completion(completion: Any, i: int, j: int, own: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    if type(completion) is not dict:
        raise Invalid(f"label.steps[{i}].completions[{j}]", f"must be an object, not {type_name(completion)}")
    step_text = completion.get("text")
    rating = completion.get("rating")
    flagged = completion.get("flagged")
    if type(step_text) is not str:
        raise Invalid(f"label.steps[{i}].completions[{j}].text", f"must be a string, not {type_name(step_text)}")
    if rating is not None and (type(rating) is not int or rating not in RATINGS):
        shown = rating if type(rating) in (int, float) else type_name(rating)
        raise Invalid(f"label.steps[{i}].completions[{j}].rating", f"must be -1, 0, 1 or null, not {shown}")
    if flagged is not None and type(flagged) is not bool:
        flag(completion, "flagged", f"label.steps[{i}].completions[{j}]")
    if not completion.keys() <= COMPLETION_KEYS:
        extra.setdefault("completions", {})[f"{i}.{j}"] = {
            k: v for k, v in completion.items() if k not in COMPLETION_KEYS
        }
    if step_text == own:
        return {"rating": rating, "flagged": flagged}
    return {"text": step_text, "rating": rating, "flagged": flagged}


def _human_text(human: Any, path: str) -> str | None:
    if human is None or type(human) is str:
        return human
    if type(human) is dict and type(human.get("text")) is str:
        return human["text"]
    raise Invalid(path, "must be null, a string, or an object with a string `text`")


def _omit_chosen_texts(steps: list[dict[str, Any]]) -> None:
    # The chosen completions became the solution's steps; like phase 2, keep them once.
    for step in steps:
        chosen = step["chosen_completion"]
        if chosen is not None:
            step["completions"][chosen].pop("text", None)


def label_extra(record: PrmRecord, problem: StoredProblem, solution: StoredSolution) -> dict[str, Any]:
    """The label's `extra`, completed with the question fields its shared rows render otherwise."""
    assert record.label is not None
    rendered = render_question(
        record.problem.statement,
        record.problem.answer,
        problem.reference_solution,
        record.solution.steps,
        solution.steps_source,
        solution.final_answer,
        solution.verifier_score,
    )
    given = record.label.question
    overrides = {
        key: original
        for key, original in (
            ("ground_truth_solution", given.ground_truth_solution),
            ("pre_generated_steps", given.pre_generated_steps),
            ("pre_generated_answer", given.pre_generated_answer),
            ("pre_generated_verifier_score", given.pre_generated_verifier_score),
        )
        # Type too: a score given as 1 renders as 1.0 from the float column.
        if type(original) is not type(rendered[key]) or original != rendered[key]
    }
    if not overrides:
        return record.label.extra
    extra = dict(record.label.extra)
    extra["question"] = {**extra.get("question", {}), **overrides}
    return extra
