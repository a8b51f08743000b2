"""The PRM800K record, rendered from Stepwise's rows.

The same rendering decides, at import, what a label must keep in `Label.extra`: whatever this
function would not give back by itself (keys it does not know, the exact timestamp string,
question fields that differ from the shared problem or solution row). Export applies `extra`
on top of the rendering, which gives the imported record back.

`extra` is sparse: {"record": {...}, "question": {...}, "label": {...}, "steps": {"i": {...}},
"completions": {"i.j": {...}}}, each an update to the rendered object at that place, and
{"absent": {"question": [...]}}, the question keys the record did not have.

The rendering has PRM800K's shape: a phase-1 question (no pre-generated solution) holds the
problem and its answer, a phase-2 one all six keys; timestamps are UTC without an offset; a label
made here on a pre-generated solution has a generation, as every phase-2 record does. Stepwise's
own fields go where PRM800K readers, which read the keys they know, pass them by.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.models import StepsSource

RECORD_KEYS = frozenset(
    {
        "labeler",
        "timestamp",
        "generation",
        "is_quality_control_question",
        "is_initial_screening_question",
        "question",
        "label",
    }
)
# In PRM800K's order.
QUESTION_ORDER = (
    "problem",
    "ground_truth_solution",
    "ground_truth_answer",
    "pre_generated_steps",
    "pre_generated_answer",
    "pre_generated_verifier_score",
)
QUESTION_KEYS = frozenset(QUESTION_ORDER)
# Not PRM800K's: the give-up or bad-problem reason a labeler wrote here, written only when there
# is one.
FINISH_NOTE = "finish_note"
# Label.extra's count of the empty steps that ended the label as imported.
EMPTY_END = "empty_steps_at_end"
LABEL_KEYS = frozenset({"steps", "total_time", "finish_reason", FINISH_NOTE})
STEP_KEYS = frozenset({"completions", "human_completion", "chosen_completion"})
COMPLETION_KEYS = frozenset({"text", "rating", "flagged"})
# The generation of a label made here on a pre-generated solution that has none (no round picked
# it, nor did its file say): PRM800K has one on every phase-2 record, null meaning phase 1. 1 is
# the first round's number; 0 and -1 (PRM800K's screening questions) would read as something else.
UNROUNDED_GENERATION = 1


def render_timestamp(created_at: datetime) -> str:
    """UTC without an offset, as PRM800K writes it ("2023-01-22T04:34:27.052924")."""
    return created_at.astimezone(UTC).replace(tzinfo=None).isoformat()


def render_generation(generation: int | None, made_here: bool, steps_source: StepsSource) -> int | None:
    if generation is None and made_here and steps_source == StepsSource.given:
        return UNROUNDED_GENERATION
    return generation


def render_question(
    statement: str,
    answer: str | None,
    reference_solution: str | None,
    solution_steps: list[str],
    steps_source: StepsSource,
    final_answer: str | None,
    verifier_score: float | None,
) -> dict[str, Any]:
    # A solution made of a labeler's chosen steps is PRM800K's phase 1, whose questions hold
    # nothing pre-generated, nor the reference solution.
    if steps_source != StepsSource.given:
        return {"problem": statement, "ground_truth_answer": answer}
    return {
        "problem": statement,
        "ground_truth_solution": reference_solution,
        "ground_truth_answer": answer,
        "pre_generated_steps": solution_steps,
        "pre_generated_answer": final_answer,
        "pre_generated_verifier_score": verifier_score,
    }


def render_steps(
    stored: list[dict[str, Any]], solution_steps: list[str], extra: dict[str, Any]
) -> list[dict[str, Any]]:
    steps = []
    n_solution = len(solution_steps)
    for i, step in enumerate(stored):
        # Only a completion that is the solution's own step has no text (see models.label).
        own = solution_steps[i] if i < n_solution else None
        steps.append(
            {
                "completions": [
                    {"text": c.get("text", own), "rating": c.get("rating"), "flagged": c.get("flagged")}
                    for c in step["completions"]
                ],
                "human_completion": step.get("human_completion"),
                "chosen_completion": step.get("chosen_completion"),
            }
        )
    # Given back where the import took them off (app.imports.prm800k._without_empty_end).
    steps += [{"completions": None, "human_completion": None, "chosen_completion": None}
              for _ in range(extra.get(EMPTY_END, 0))]
    for key, unknown in (extra.get("steps") or {}).items():
        steps[int(key)].update(unknown)
    for key, unknown in (extra.get("completions") or {}).items():
        i, j = key.split(".")
        steps[int(i)]["completions"][int(j)].update(unknown)
    return steps


def render_record(
    *,
    labeler: str | None,
    created_at: datetime,
    generation: int | None,
    is_quality_control: bool,
    is_initial_screening: bool,
    question: dict[str, Any],
    solution_steps: list[str],
    label_steps: list[dict[str, Any]],
    total_time_ms: int | None,
    finish_reason: str | None,
    finish_note: str | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "labeler": labeler,
        "timestamp": render_timestamp(created_at),
        "generation": generation,
        "is_quality_control_question": is_quality_control,
        "is_initial_screening_question": is_initial_screening,
        "question": question,
        "label": {
            "steps": render_steps(label_steps, solution_steps, extra),
            "total_time": total_time_ms,
            "finish_reason": finish_reason,
        },
    }
    if finish_note is not None:
        record["label"][FINISH_NOTE] = finish_note
    if extra:
        record.update(extra.get("record") or {})
        record["label"].update(extra.get("label") or {})
        record["question"] = _as_given(question, extra)
    return record


def _as_given(question: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The question with the record's own keys: PRM800K's in its order, then any others."""
    given = extra.get("question")
    absent = (extra.get("absent") or {}).get("question")
    if not given and not absent:
        return question
    question.update(given or {})
    for key in absent or ():
        question.pop(key, None)
    ordered = {key: question.pop(key) for key in QUESTION_ORDER if key in question}
    ordered.update(question)
    return ordered
