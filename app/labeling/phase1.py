"""Phase-1 mode (PRM800K phase 1): each step comes with alternative completions.

The alternatives are those of the first label imported for the solution: a phase-1 record's
completions at every step, or a phase-2 record's at the steps it has. Where no imported label
says more, a step's one alternative is the solution's own step. They were sampled after the
imported labeler's path, so a later step's alternatives follow that path whatever this labeler
continues with.

A label is stored in PRM800K's phase-1 shape: every alternative rated, the chosen one's index,
or the labeler's own step as a `human_completion` object.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import BadInput
from app.labeling.schemas import AlternativesRated, LabelSubmit, StepRating
from app.models import FinishReason, Label


def task_alternatives(session: Session, solution_id: int, solution_steps: list[str]) -> list[list[str]]:
    imported = session.scalar(
        select(Label.steps)
        .where(Label.solution_id == solution_id, Label.import_batch_id.is_not(None))
        .order_by(Label.id)
        .limit(1)
    )
    alternatives: list[list[str]] = []
    for i, step in enumerate(imported or []):
        # A completion without text is the solution's own step (see models.label).
        own = solution_steps[i] if i < len(solution_steps) else None
        texts = [c.get("text", own) for c in step.get("completions") or []]
        if not texts or None in texts:
            break
        alternatives.append(texts)
    alternatives.extend([own] for own in solution_steps[len(alternatives) :])
    return alternatives


def check_alternatives(alternatives: list[list[str]], data: LabelSubmit) -> None:
    """BadInput when the label does not fit the task's alternatives or phase 1's rules."""
    if data.ratings or data.alternatives is None:
        raise BadInput("a phase-1 project takes `alternatives` (each step's alternatives rated), not `ratings`",
                       field="ratings" if data.ratings else "alternatives")
    sent = data.alternatives
    if len(sent) > len(alternatives):
        raise BadInput(f"{len(sent)} steps sent for a task of {len(alternatives)} steps", field="alternatives")
    for i, step in enumerate(sent):
        _check_step(i, step, len(alternatives[i]))
        if i < len(sent) - 1 and not _continues(step):
            raise BadInput(f"step {i + 1} continues with nothing (choose an alternative or write a step), "
                           f"yet step {i + 2} follows", field=f"alternatives.{i}")
    if problem := data.note_problem():
        raise BadInput(problem, field="finish_note")
    reason = data.finish_reason
    if reason in (FinishReason.give_up, FinishReason.bad_problem):
        return
    if reason == FinishReason.found_error:
        if not sent or _continues(sent[-1]) or all(r.rating != -1 for r in sent[-1].ratings):
            raise BadInput("found_error needs the last step to continue with nothing, with an alternative rated -1",
                           field="finish_reason")
    elif len(sent) != len(alternatives) or not _continues(sent[-1]):
        raise BadInput("solution needs every step rated, each continued with an alternative or a step of your own",
                       field="finish_reason")


def _check_step(i: int, step: AlternativesRated, n_alternatives: int) -> None:
    where = f"step {i + 1}"
    if len(step.ratings) != n_alternatives:
        rated = f"{len(step.ratings)} rating{'' if len(step.ratings) == 1 else 's'}"
        offered = f"{n_alternatives} alternative{'' if n_alternatives == 1 else 's'}"
        raise BadInput(f"{where}: {rated} for {offered}; rate every one",
                       field=f"alternatives.{i}.ratings")
    if step.chosen is not None:
        if step.chosen >= n_alternatives:
            raise BadInput(f"{where}: chosen is {step.chosen}, but the alternatives are numbered 0 to {n_alternatives - 1}",
                           field=f"alternatives.{i}.chosen")
        if step.ratings[step.chosen].rating == -1:
            raise BadInput(f"{where}: the chosen alternative is rated -1; choose a good one or write your own step",
                           field=f"alternatives.{i}.chosen")


def _continues(step: AlternativesRated) -> bool:
    return step.chosen is not None or step.human is not None


def path_ratings(data: LabelSubmit) -> list[StepRating]:
    """The rating of each step the labeler went through, as the other modes send them: the
    chosen alternative's, the written step's, or -1 where nothing was good. A step is flagged
    when anything in it was."""
    assert data.alternatives is not None
    path = []
    for step in data.alternatives:
        flagged = any(r.flagged for r in step.ratings) or bool(step.human and step.human.flagged)
        if step.chosen is not None:
            rating = step.ratings[step.chosen].rating
        elif step.human is not None:
            rating = step.human.rating
        else:
            rating = -1
        path.append(StepRating(rating=rating, flagged=flagged))
    return path


def stored_steps(
    alternatives: list[list[str]], solution_steps: list[str], data: LabelSubmit
) -> list[dict[str, Any]]:
    """Label.steps in PRM800K's phase-1 shape."""
    assert data.alternatives is not None
    steps = []
    for i, step in enumerate(data.alternatives):
        own = solution_steps[i] if i < len(solution_steps) else None
        steps.append(
            {
                "completions": [
                    _completion(text, rating, own) for text, rating in zip(alternatives[i], step.ratings, strict=True)
                ],
                "human_completion": None
                if step.human is None
                else {
                    "text": step.human.text,
                    "rating": step.human.rating,
                    "source": "human",
                    "flagged": step.human.flagged,
                    "corrected_rating": None,
                },
                "chosen_completion": step.chosen,
            }
        )
    return steps


def same_choices(steps: list[dict[str, Any]], data: LabelSubmit) -> bool:
    """Whether stored phase-1 steps hold what `data` rated, wrote and chose: a retry's check. The
    alternatives' texts are the task's, not the labeler's, so only the labeler's part is compared."""
    assert data.alternatives is not None
    if len(steps) != len(data.alternatives):
        return False
    for stored, step in zip(steps, data.alternatives, strict=True):
        rated = [(c["rating"], c["flagged"]) for c in stored["completions"]]
        human = stored["human_completion"]
        written = None if human is None else (human["text"], human["rating"], human["flagged"])
        sent = None if step.human is None else (step.human.text, step.human.rating, step.human.flagged)
        if (rated, stored["chosen_completion"], written) != (
            [(r.rating, r.flagged) for r in step.ratings], step.chosen, sent
        ):
            return False
    return True


def _completion(text: str, rating: StepRating, own: str | None) -> dict[str, Any]:
    # The solution's own step is left out, as everywhere in Label.steps (see models.label).
    completion: dict[str, Any] = {"rating": rating.rating, "flagged": rating.flagged}
    if text != own:
        completion["text"] = text
    return completion
