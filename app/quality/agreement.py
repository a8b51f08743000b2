"""Inter-annotator agreement on a project whose solutions have several labelers (overlap ≥ 2).

Only current labels about the steps count: a correction replaces the label it corrects, and a
give-up or bad-problem report says nothing about the steps. A label made here names its user;
an imported one its file's labeler id (`foreign_labeler`), and an imported label with neither is
left out, since nothing tells whether two of them came from one person. A labeler with two
current labels of one solution (an import can hold both) counts with the later one.

- Step α: Krippendorff's ordinal α over units (solution, step index, alternative), values
  −1 < 0 < +1; a phase-2 step has one alternative, a phase-1 step several. An alternative is
  known by its text, the solution's own step as such: where a solution was made from a PRM800K
  phase-1 record's path, the step its labeler wrote is the solution's own, and the same unit as
  that step rated by a label made here. A step a labeler did
  not rate (those after the first −1 when labeling stops there) is missing, not a value: it
  neither agrees nor disagrees. In phase 1, labelers who went on differently (another
  alternative, a step of their own) rate different steps after that point: a unit is a step
  reached the same way.
- First-error agreement: of the pairs of labels on one solution, the share that put the first −1
  at the same step, or both found none.
- Confusion: every pair of ratings of one step by two labelers, counted both ways round, so the
  table is symmetric and adds up to twice the pairs.
- Per labeler: α over the units they rated (everyone's ratings of those steps, so it says how
  well the steps they saw were agreed on, theirs included), the share of their rating pairs with
  another labeler that are equal, and their first-error agreement with the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

import krippendorff
import numpy as np
import orjson
from sqlalchemy import ColumnElement, Text, bindparam, cast, func, or_, select
from sqlalchemy.orm import Session

from app.machine_labels.service import is_human
from app.models import Label, Project, User
from app.quality.service import NOT_ABOUT_STEPS, taken_step

RATINGS = (-1, 0, 1)
COLUMN = {rating: column for column, rating in enumerate(RATINGS)}

NO_PAIRS = "no step has ratings from two labelers yet"
NO_VARIATION = "every rating is the same, so chance agreement is total and α is undefined"


@dataclass(frozen=True)
class Alpha:
    value: float | None
    reason: str | None = None


@dataclass(frozen=True)
class LabelerAgreement:
    name: str
    labels: int
    step_alpha: float | None
    step_alpha_reason: str | None
    rating_pairs: int
    rating_agreement: float | None
    first_error_pairs: int
    first_error_agreement: float | None


@dataclass(frozen=True)
class ProjectAgreement:
    overlap: int
    solutions: int
    labels: int
    units: int
    step_alpha: float | None
    step_alpha_reason: str | None
    first_error_pairs: int
    first_error_agreement: float | None
    rating_pairs: int
    # confusion[i][j]: pairs rated RATINGS[i] by one labeler and RATINGS[j] by the other.
    confusion: list[list[int]]
    labelers: list[LabelerAgreement]
    # Current labels left out because their labeler has a later one of the same solution.
    earlier_labels: int = 0


@dataclass(frozen=True)
class ComparedLabel:
    # A user's and an imported labeler's names may coincide: the key tells them apart.
    key: tuple[str, int | str]
    name: str
    first_error: int | None
    label_id: int
    # Each step's alternatives as rated, (key, rating) (one in phase 2), and which one the labeler
    # went on with, by key (the text, None for the solution's own step: see _read), STOPPED where
    # they stopped.
    alternatives: tuple[tuple[tuple[str | None, int], ...], ...]
    path: tuple[str | None | bool, ...]
    # The labeler's earlier current labels of the solution, which this one stands for.
    replaces: tuple[int, ...] = ()


@dataclass
class _Tally:
    name: str
    labels: int = 0
    first_error_pairs: int = 0
    first_error_agreed: int = 0


def compared_labels(session: Session, project_id: int,
                    solution_ids: Iterable[int] | None = None) -> dict[int, list[ComparedLabel]]:
    """The labels that take part, by solution: only solutions with two labelers or more, and
    only these solutions when given."""
    about_steps = (
        Label.project_id == project_id,
        Label.superseded_at.is_(None),
        or_(Label.finish_reason.is_(None), Label.finish_reason.not_in(NOT_ABOUT_STEPS)),
        or_(Label.user_id.is_not(None), Label.foreign_labeler.is_not(None)),
        is_human(),
    )
    # Most projects have overlap 1: only solutions labeled twice are worth reading steps for.
    # They are found first, not in a subquery: PostgreSQL, its statistics not yet updated after
    # an import, ran such a subquery once a label (80,000 labels: minutes).
    shared = list(session.scalars(
        select(Label.solution_id).where(*about_steps, *([] if solution_ids is None else [of_solutions(solution_ids)]))
        .group_by(Label.solution_id).having(func.count() >= 2)
    ))
    if not shared:
        return {}
    rows = session.execute(
        # As text, parsed by orjson: the driver's JSON parsing took over half the time (80,000
        # labels on PostgreSQL).
        select(Label.id, Label.solution_id, Label.user_id, User.username, Label.foreign_labeler,
               cast(Label.steps, Text))
        .outerjoin(User, User.id == Label.user_id)
        .where(*about_steps, of_solutions(shared))
        .order_by(Label.solution_id, Label.id)
    )
    latest: dict[int, dict[tuple[str, int | str], ComparedLabel]] = defaultdict(dict)
    # Labelers who agree wrote the same steps: a solution's labels of one text are read once, and
    # share their tuples, which labels_disagree then finds equal at once.
    read: dict[str, _Read] = {}
    for label_id, solution_id, user_id, username, foreign, steps_text in rows:
        if solution_id not in latest:
            read.clear()
        if (found := read.get(steps_text)) is None:
            found = read[steps_text] = _read(orjson.loads(steps_text))
        key: tuple[str, int | str] = ("user", user_id) if user_id is not None else ("imported", foreign)
        name = username if user_id is not None else foreign
        earlier = latest[solution_id].get(key)
        latest[solution_id][key] = ComparedLabel(key, name, found.first_error, label_id, found.alternatives,
                                                 found.path, () if earlier is None else (*earlier.replaces, earlier.label_id))
    return {s: list(by_key.values()) for s, by_key in latest.items() if len(by_key) >= 2}


@dataclass(frozen=True, slots=True)
class _Read:
    first_error: int | None
    alternatives: tuple[tuple[tuple[str | None, int], ...], ...]
    path: tuple[str | None | bool, ...]


# Where a label stopped, in its path: no key is False (keys are texts, or None for the solution's
# own step).
STOPPED = False


_OWN_RATED = {rating: ((None, rating),) for rating in RATINGS}


def _read(steps: list[dict]) -> _Read:
    """A label's ratings keyed by alternative: by its text, None for the solution's own step (a
    completion stored without its text, or a step the labeler wrote where no completion is the
    solution's own, as in a solution made from a PRM800K phase-1 record's path)."""
    alternatives = []
    path: list[str | None | bool] = []
    error: int | None = None
    for i, step in enumerate(steps):
        completions = step.get("completions") or []
        if len(completions) == 1 and step.get("human_completion") is None:
            # A phase-2 step, read without building anything: the bulk of every project. Its one
            # completion is the step taken (see taken_step).
            only = completions[0]
            key, rating = only.get("text"), only.get("rating")
            if rating == -1 and error is None:
                error = i
            if rating is None:
                alternatives.append(())
            elif key is None and rating in _OWN_RATED:
                alternatives.append(_OWN_RATED[rating])
            else:
                alternatives.append(((key, rating),))
            path.append(key)
            continue
        if error is None and taken_step(step).get("rating") == -1:
            error = i
        rated = [(c.get("text"), c["rating"]) for c in completions if c.get("rating") is not None]
        human = step.get("human_completion")
        written = human if isinstance(human, str) else human.get("text") if isinstance(human, dict) else None
        is_own = written is not None and all("text" in c for c in completions)
        if isinstance(human, dict) and human.get("rating") is not None:
            rated.append((None if is_own else written, human["rating"]))
        alternatives.append(tuple(rated))
        chosen = step.get("chosen_completion")
        if chosen is not None and 0 <= chosen < len(completions):
            path.append(completions[chosen].get("text"))
        elif written is not None:
            path.append(None if is_own else written)
        elif len(completions) == 1:
            # A step of one completion is the solution's own, and every labeler goes on with it
            # (a full-mode label rates on past a −1).
            path.append(completions[0].get("text"))
        else:
            path.append(STOPPED)
    return _Read(error, tuple(alternatives), tuple(path))


def of_solutions(solution_ids: Iterable[int]) -> ColumnElement[bool]:
    return _written_in(Label.solution_id, solution_ids)


def of_labels(label_ids: Iterable[int]) -> ColumnElement[bool]:
    return _written_in(Label.id, label_ids)


def _written_in(column: ColumnElement[int], ids: Iterable[int]) -> ColumnElement[bool]:
    # The ids are written into the SQL, not bound one by one: a large project's would pass
    # SQLite's limit on bound parameters.
    # unique: a statement may hold two such lists (labels and solutions), each its own parameter.
    return column.in_(bindparam("ids", sorted(ids), expanding=True, literal_execute=True, unique=True))


def labels_disagree(a: ComparedLabel, b: ComparedLabel) -> bool:
    """Whether two labels of one solution disagree: an alternative of a step they both reached got
    different ratings (in phase 2 a step has one), or their first −1 differs. Where they went on
    differently (another alternative, or a step of their own), the steps after are not the same
    steps, and comparing stops there. A rating one of them did not give neither agrees nor
    disagrees."""
    if a.alternatives == b.alternatives and a.path == b.path:
        return a.first_error != b.first_error  # the loop's answer, without walking it
    for rated_a, rated_b, took_a, took_b in zip(a.alternatives, b.alternatives, a.path, b.path, strict=False):
        if rated_a != rated_b:
            by_key = dict(rated_b)
            if any(by_key.get(key, rating) != rating for key, rating in rated_a):
                return True
        if took_a != took_b:
            return False
    return a.first_error != b.first_error


def ordinal_alpha(counts: np.ndarray) -> Alpha:
    """Krippendorff's ordinal α over units given as rows of how many times each of RATINGS was
    given (missing ratings left out)."""
    pairable = counts[counts.sum(axis=1) >= 2] if len(counts) else counts
    if not len(pairable):
        return Alpha(None, NO_PAIRS)
    if np.count_nonzero(pairable.any(axis=0)) < 2:
        return Alpha(None, NO_VARIATION)
    value = krippendorff.alpha(value_counts=pairable, value_domain=list(RATINGS), level_of_measurement="ordinal")
    return Alpha(float(value)) if math.isfinite(value) else Alpha(None, NO_VARIATION)


def solution_agreement(labels: list[ComparedLabel]) -> float:
    """The share of the solution's label pairs that agree on the first-error step."""
    pairs = list(combinations(labels, 2))
    return sum(a.first_error == b.first_error for a, b in pairs) / len(pairs)


def agreeing_solutions(session: Session, project_id: int, threshold: float) -> set[int]:
    """The solutions with two labelers or more whose first-error agreement reaches `threshold`."""
    return {
        solution_id
        for solution_id, labels in compared_labels(session, project_id).items()
        if solution_agreement(labels) >= threshold
    }


def project_agreement(session: Session, project: Project) -> ProjectAgreement:
    by_solution = compared_labels(session, project.id)
    # A unit is an alternative of a step, reached the same way: labelers who went on differently
    # (phase 1) rate different steps after that. A way is numbered as it is first met, from the
    # way before it and how the labeler went on, so a step's unit is found without its prefix.
    ways: dict[tuple[int, int, str | None | bool], int] = {}
    unit_of: dict[tuple[int, int, str | None], int] = {}
    labeler_of: dict[tuple[str, int | str], int] = {}
    tallies: list[_Tally] = []
    # One entry a rating: its unit, its labeler, its column in RATINGS.
    rated_units: list[int] = []
    rated_by: list[int] = []
    rated_as: list[int] = []
    fe_pairs = fe_agreed = 0
    for solution_id, labels in by_solution.items():
        for label in labels:
            labeler = labeler_of.setdefault(label.key, len(labeler_of))
            if labeler == len(tallies):
                tallies.append(_Tally(name=label.name))
            tallies[labeler].labels += 1
            way = 0
            for rated, took in zip(label.alternatives, label.path, strict=True):
                for alternative, rating in rated:
                    if rating in RATINGS:
                        rated_units.append(unit_of.setdefault((solution_id, way, alternative), len(unit_of)))
                        rated_by.append(labeler)
                        rated_as.append(COLUMN[rating])
                way = ways.setdefault((solution_id, way, took), len(ways) + 1)
        for a, b in combinations(labels, 2):
            agreed = a.first_error == b.first_error
            fe_pairs += 1
            fe_agreed += agreed
            for key in (a.key, b.key):
                tallies[labeler_of[key]].first_error_pairs += 1
                tallies[labeler_of[key]].first_error_agreed += agreed

    units, by, value = (np.array(column, dtype=np.int64) for column in (rated_units, rated_by, rated_as))
    table = np.bincount(units * len(RATINGS) + value, minlength=len(unit_of) * len(RATINGS)).reshape(-1, len(RATINGS))
    raters = table.sum(axis=1)
    paired = table[raters >= 2]
    # Every pair of ratings of one unit, both ways round: Σ n_c n_k off the diagonal, n_c (n_c − 1) on it.
    confusion = paired.T @ paired - np.diag(paired.sum(axis=0))
    # A rating pairs with the unit's m − 1 others, n_v − 1 of them equal to it.
    shared = raters[units] >= 2
    pairs = np.bincount(by[shared], weights=raters[units[shared]] - 1, minlength=len(tallies))
    agreed = np.bincount(by[shared], weights=table[units[shared], value[shared]] - 1, minlength=len(tallies))

    alpha = ordinal_alpha(table)
    labelers = []
    for labeler, tally in enumerate(tallies):
        # A labeler rates a unit once, so their units are their shared ratings' units.
        own = ordinal_alpha(table[units[shared & (by == labeler)]])
        labelers.append(
            LabelerAgreement(
                name=tally.name,
                labels=tally.labels,
                step_alpha=own.value,
                step_alpha_reason=own.reason,
                rating_pairs=int(pairs[labeler]),
                rating_agreement=_share(int(agreed[labeler]), int(pairs[labeler])),
                first_error_pairs=tally.first_error_pairs,
                first_error_agreement=_share(tally.first_error_agreed, tally.first_error_pairs),
            )
        )
    labelers.sort(key=lambda a: (-a.labels, a.name.casefold(), a.name))
    return ProjectAgreement(
        overlap=project.overlap,
        solutions=len(by_solution),
        labels=sum(len(labels) for labels in by_solution.values()),
        units=len(paired),
        step_alpha=alpha.value,
        step_alpha_reason=alpha.reason
        if by_solution
        else "no solution has current labels from two labelers yet",
        first_error_pairs=fe_pairs,
        first_error_agreement=_share(fe_agreed, fe_pairs),
        rating_pairs=int(raters[raters >= 2] @ (raters[raters >= 2] - 1)) // 2,
        confusion=confusion.tolist(),
        labelers=labelers,
        earlier_labels=sum(len(label.replaces) for labels in by_solution.values() for label in labels),
    )


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None
