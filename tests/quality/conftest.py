"""A PRM800K record with one labeler's ratings, as the quality tests import them."""

from __future__ import annotations

from typing import Any


def labeled_record(labeler: str, problem: str, steps: list[str], ratings: list[int], *, qc: bool = False,
                   screening: bool = False, finish: str | None = None) -> dict[str, Any]:
    return {
        "labeler": labeler,
        "timestamp": "2023-02-01T10:00:00",
        "generation": 1,
        "is_quality_control_question": qc,
        "is_initial_screening_question": screening,
        "question": {"problem": problem, "ground_truth_answer": "1", "pre_generated_steps": steps},
        "label": {
            "steps": [
                {
                    "completions": [{"text": steps[i], "rating": r, "flagged": False}],
                    "human_completion": None,
                    "chosen_completion": None if r == -1 else 0,
                }
                for i, r in enumerate(ratings)
            ],
            "total_time": 1000,
            "finish_reason": finish or ("found_error" if -1 in ratings else "solution"),
        },
    }
