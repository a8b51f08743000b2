"""The steps a labeler actually went through, each with its rating: what TRL and Parquet export.

A label step holds every completion rated at that point; the trajectory takes the one the
labeler continued with: the chosen completion, else the labeler's own human completion, else
(the step that ended the solution badly, where PRM800K chooses nothing) the solution's own step,
or failing that the first completion rated -1.

The other rated completions of a step are its alternatives: each is one more rated step after
the trajectory's steps before it (what `--completions all` exports).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class RatedStep:
    text: str
    rating: int | None
    flagged: bool | None
    # Written by the labeler (PRM800K's human completion), not by the model.
    human: bool = False


@dataclass(slots=True)
class Alternative:
    """A rated completion the labeler did not continue with: the trajectory's first `at` steps,
    then it."""

    at: int
    steps: list[RatedStep]


def trajectory(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[RatedStep]:
    return [step for step, _ in _path(solution_steps, label_steps)]


def path_and_others(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[tuple[RatedStep, list[RatedStep]]]:
    """The trajectory's steps, each with the other completions rated at it, in order."""
    return [
        (step, [_rated(completion, solution_steps, i)
                for j, completion in enumerate(label_steps[i].get("completions") or [])
                if j != taken and completion.get("rating") is not None])
        for i, (step, taken) in enumerate(_path(solution_steps, label_steps))
    ]


def alternatives(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> Iterator[Alternative]:
    path = _path(solution_steps, label_steps)
    prefix = [step for step, _ in path]
    for i, (_, taken) in enumerate(path):
        for j, completion in enumerate(label_steps[i].get("completions") or []):
            if j != taken and completion.get("rating") is not None:
                yield Alternative(i, [*prefix[:i], _rated(completion, solution_steps, i)])


def _path(solution_steps: list[str], label_steps: list[dict[str, Any]]) -> list[tuple[RatedStep, int | None]]:
    """The trajectory's steps, each with the index of the completion it is (None for a human
    completion)."""
    steps: list[tuple[RatedStep, int | None]] = []
    for i, step in enumerate(label_steps):
        completions = step.get("completions") or []
        chosen = step.get("chosen_completion")
        human = step.get("human_completion")
        if chosen is not None:
            steps.append((_rated(completions[chosen], solution_steps, i), chosen))
        elif human is not None:
            steps.append((_human(human), None))
        else:
            pick = _own_step(completions)
            if pick is None:
                pick = _first_bad(completions)
            if pick is None:
                break
            steps.append((_rated(completions[pick], solution_steps, i), pick))
    return steps


def _rated(completion: dict[str, Any], solution_steps: list[str], i: int) -> RatedStep:
    text = completion["text"] if "text" in completion else solution_steps[i]
    return RatedStep(text, completion.get("rating"), completion.get("flagged"))


def _human(human: str | dict[str, Any]) -> RatedStep:
    # PRM800K labelers wrote their own step only as a +1 step, and left it unrated.
    if isinstance(human, str):
        return RatedStep(human, 1, None, human=True)
    rating = human.get("rating")
    return RatedStep(human["text"], 1 if rating is None else rating, human.get("flagged"), human=True)


def _own_step(completions: list[dict[str, Any]]) -> int | None:
    return next((j for j, c in enumerate(completions) if "text" not in c), None)


def _first_bad(completions: list[dict[str, Any]]) -> int | None:
    return next((j for j, c in enumerate(completions) if c.get("rating") == -1), None)
