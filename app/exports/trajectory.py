"""The steps a labeler actually went through, each with its rating: what TRL and Parquet export.

A label step holds every completion rated at that point; the trajectory takes the one the
labeler continued with: the chosen completion, else the labeler's own human completion, else
(the step that ended the solution badly, where PRM800K chooses nothing) the solution's own step,
or failing that the first completion rated -1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class RatedStep:
    text: str
    rating: int | None
    flagged: bool | None


def trajectory(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[RatedStep]:
    steps = []
    for i, step in enumerate(label_steps):
        completions = step.get("completions") or []
        chosen = step.get("chosen_completion")
        human = step.get("human_completion")
        if chosen is not None:
            steps.append(_rated(completions[chosen], solution_steps, i))
        elif human is not None:
            steps.append(_human(human))
        else:
            pick = _own_step(completions) or _first_bad(completions)
            if pick is None:
                break
            steps.append(_rated(pick, solution_steps, i))
    return steps


def _rated(completion: dict[str, Any], solution_steps: list[str], i: int) -> RatedStep:
    text = completion["text"] if "text" in completion else solution_steps[i]
    return RatedStep(text, completion.get("rating"), completion.get("flagged"))


def _human(human: str | dict[str, Any]) -> RatedStep:
    # PRM800K labelers wrote their own step only as a +1 step, and left it unrated.
    if isinstance(human, str):
        return RatedStep(human, 1, None)
    rating = human.get("rating")
    return RatedStep(human["text"], 1 if rating is None else rating, human.get("flagged"))


def _own_step(completions: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in completions if "text" not in c), None)


def _first_bad(completions: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in completions if c.get("rating") == -1), None)
