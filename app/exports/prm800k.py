"""The PRM800K record, rendered from Stepwise's rows.

The same rendering decides, at import, what a label must keep in `Label.extra`: whatever this
function would not give back by itself (keys it does not know, the exact timestamp string,
question fields that differ from the shared problem or solution row). Export applies `extra`
on top of the rendering, which gives the imported record back.

`extra` is sparse: {"record": {...}, "question": {...}, "label": {...}, "steps": {"i": {...}},
"completions": {"i.j": {...}}}, each an update to the rendered object at that place.
"""

from __future__ import annotations

from datetime import datetime
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
QUESTION_KEYS = frozenset(
    {
        "problem",
        "ground_truth_solution",
        "ground_truth_answer",
        "pre_generated_steps",
        "pre_generated_answer",
        "pre_generated_verifier_score",
    }
)
LABEL_KEYS = frozenset({"steps", "total_time", "finish_reason"})
STEP_KEYS = frozenset({"completions", "human_completion", "chosen_completion"})
COMPLETION_KEYS = frozenset({"text", "rating", "flagged"})


def render_timestamp(created_at: datetime) -> str:
    return created_at.isoformat()


def render_question(
    statement: str,
    answer: str | None,
    reference_solution: str | None,
    solution_steps: list[str],
    steps_source: StepsSource,
    final_answer: str | None,
    verifier_score: float | None,
) -> dict[str, Any]:
    # A solution made of a labeler's chosen steps (PRM800K phase 1) had nothing pre-generated.
    given = steps_source == StepsSource.given
    return {
        "problem": statement,
        "ground_truth_solution": reference_solution,
        "ground_truth_answer": answer,
        "pre_generated_steps": solution_steps if given else None,
        "pre_generated_answer": final_answer if given else None,
        "pre_generated_verifier_score": verifier_score if given else None,
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
    if extra:
        record.update(extra.get("record") or {})
        question.update(extra.get("question") or {})
        record["label"].update(extra.get("label") or {})
    return record
