"""A labeler's own labels: the list, one label as submitted, and corrections.

A correction is a new label row that names the label it replaces (`supersedes_id`); the
replaced row is kept and marked `superseded_at`, so that nothing a labeler sent is lost while
exports, counts and training read only the latest. The project's correction window runs from the
moment the solution was first labeled, not from the last correction: correcting again does not
keep a label open forever.

A project's mode may change after labeling, so a label is read, and corrected, in the mode it
was made in, or where it does not know it (made before labels kept one), by what its steps hold
(see `_label_mode`), never by the project's mode alone.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.errors import Conflict, NotFound
from app.exports.trajectory import path_and_others
from app.labeling.schemas import (
    CorrectionReceipt,
    CorrectionWindow,
    LabelSubmit,
    OwnLabel,
    OwnLabelDetail,
    OwnLabelPage,
    OwnSkip,
    OwnSkipPage,
    RatedAlternative,
    RatedStep,
    RatingCounts,
    StepRating,
)
from app.labeling.service import check_ratings, own_labels, prm800k_step, same_submission
from app.models import FinishReason, Label, LabelingMode, Problem, Project, Skip, Solution, utcnow
from app.projects.access import may_label
from app.quality.service import taken_step
from app.reports.service import carry_reports

PAGE_SIZE = 20
SNIPPET_CHARS = 120


def list_own_labels(session: Session, user_id: int, page: int = 1) -> OwnLabelPage:
    mine = {"user": user_id}
    total = session.scalar(select(func.count()).select_from(Label).where(own_labels()), mine) or 0
    pages = max(1, -(-total // PAGE_SIZE))
    rows = session.execute(
        select(Label, Project.name, Problem.statement)
        .join(Project, Project.id == Label.project_id)
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(own_labels())
        .order_by(Label.id.desc())
        .offset((page - 1) * PAGE_SIZE)
        .limit(PAGE_SIZE),
        mine,
    ).all()
    items = [_own_label(label, name, statement) for label, name, statement in rows]
    return OwnLabelPage(items=items, page=page, pages=pages, total=total)


def list_own_skips(session: Session, user_id: int, page: int = 1) -> OwnSkipPage:
    """The solutions the labeler skipped, in the projects they may still label (as their labels)."""
    mine = {"user": user_id}
    own = (Skip.user_id == bindparam("user")) & may_label(Skip.project_id)
    total = session.scalar(select(func.count()).select_from(Skip).where(own), mine) or 0
    pages = max(1, -(-total // PAGE_SIZE))
    rows = session.execute(
        select(Skip, Project.name, Problem.statement)
        .join(Project, Project.id == Skip.project_id)
        .join(Solution, Solution.id == Skip.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(own)
        .order_by(Skip.skipped_at.desc(), Skip.solution_id.desc())
        .offset((page - 1) * PAGE_SIZE)
        .limit(PAGE_SIZE),
        mine,
    ).all()
    items = [
        OwnSkip(
            solution_id=skip.solution_id,
            project_id=skip.project_id,
            project_name=name,
            problem_snippet=snippet_of(statement),
            skipped_at=skip.skipped_at,
        )
        for skip, name, statement in rows
    ]
    return OwnSkipPage(items=items, page=page, pages=pages, total=total)


def get_own_label(session: Session, user_id: int, label_id: int) -> OwnLabelDetail:
    label, project, solution, problem = _own(session, user_id, label_id)
    superseded_by = session.scalar(select(Label.id).where(Label.supersedes_id == label.id))
    mode = _label_mode(project, label, len(solution.steps))
    return OwnLabelDetail(
        **_own_label(label, project.name, problem.statement).model_dump(),
        labeling_mode=mode,
        problem_id=problem.id,
        problem=problem.statement,
        answer=problem.answer,
        steps=_rated_steps(mode, solution, label),
        finish_note=label.finish_note,
        total_time_ms=label.total_time_ms,
        superseded_by_id=superseded_by,
        correction=correction_window(session, label, project, utcnow()),
    )


def _rated_steps(mode: LabelingMode, solution: Solution, label: Label) -> list[RatedStep]:
    if mode == LabelingMode.phase1:
        # The path the labeler took through the alternatives, their own steps included, each
        # with the alternatives they rated there and left.
        return [
            RatedStep(text=step.text, rating=step.rating, flagged=bool(step.flagged), written=step.human,
                      others=[RatedAlternative(text=o.text, rating=o.rating, flagged=bool(o.flagged))
                              for o in others if o.rating is not None])
            for step, others in path_and_others(solution.steps, label.steps)
        ]
    ratings = step_ratings(label.steps)
    return [
        RatedStep(
            text=text,
            rating=ratings[i][0] if i < len(ratings) else None,
            flagged=ratings[i][1] if i < len(ratings) else False,
        )
        for i, text in enumerate(solution.steps)
    ]


def correct_label(
    session: Session, user_id: int, label_id: int, data: LabelSubmit
) -> CorrectionReceipt:
    """Store `data` as the label that replaces `label_id`; a retried key gets its first receipt."""
    retried = _receipt_for_retry(session, user_id, label_id, data)
    if retried is not None:
        return retried
    label, project, solution, problem = _own(session, user_id, label_id, lock=True)
    now = utcnow()
    window = correction_window(session, label, project, now)
    if not window.open:
        # The lock may have waited for a twin of this request, which has corrected the label
        # under the same key in the meantime: that is a retry, not a conflict.
        retried = _receipt_for_retry(session, user_id, label_id, data)
        if retried is not None:
            return retried
        raise Conflict(f"label {label_id} cannot be corrected: {window.reason}")
    check_ratings(_label_mode(project, label, len(solution.steps)), len(solution.steps), data)
    correction = Label(
        project_id=label.project_id,
        solution_id=label.solution_id,
        user_id=user_id,
        generation=label.generation,
        is_quality_control=False,
        is_initial_screening=label.is_initial_screening,
        finish_reason=data.finish_reason,
        finish_note=(data.finish_note or "").strip() or None,
        labeling_mode=label.labeling_mode,
        total_time_ms=data.total_time_ms,
        steps=[prm800k_step(r) for r in data.ratings],
        idempotency_key=data.idempotency_key,
        extra={},
        started_at=data.started_at,
        supersedes_id=label.id,
        created_at=now,
    )
    session.add(correction)
    label.superseded_at = now
    try:
        session.flush()
    except IntegrityError as exc:
        # The row lock keeps PostgreSQL's twins apart; on SQLite the unique supersedes_id does.
        raise Conflict(f"label {label_id} was corrected at the same moment by another request") from exc
    carry_reports(session, label, correction, problem.id, data.ratings)
    return CorrectionReceipt(label_id=correction.id, supersedes_id=label.id, duplicate=False)


def correction_window(session: Session, label: Label, project: Project, now: datetime) -> CorrectionWindow:
    if label.superseded_at is not None:
        return _closed("it was corrected since; correct the newer label instead")
    if label.is_quality_control:
        # A correction would be an ordinary label: the solution would lose its gold unseen.
        return _closed("a manager made it the gold reference of its solution")
    if _phase1_shaped(label):
        # Its alternatives and written steps have no form to be corrected in: the labeling
        # page corrects ratings of given steps.
        return _closed("a phase-1 label cannot be corrected")
    hours = project.correction_window_hours
    if hours == 0:
        return _closed("this project does not allow corrections")
    closes_at = _first_labeled_at(session, label) + timedelta(hours=hours)
    if now >= closes_at:
        return _closed(
            f"the project's {hours}-hour correction window closed at "
            f"{closes_at:%Y-%m-%d %H:%M} UTC"
        )
    return CorrectionWindow(open=True, closes_at=closes_at, reason=None)


def _label_mode(project: Project, label: Label, n_steps: int) -> LabelingMode:
    """The mode a label is read and corrected in: the one it was made in, where it knows it (a
    phase-1 label in the ratings' shape is corrected as first error, which phase 1's path
    follows: it ends at a -1); else by what it holds: phase 1 for a label in phase 1's shape;
    full for one rating a step after a -1; first error for a found error with steps left
    unrated (full mode rates them all). A label either mode would have taken is read in the
    project's mode (first error where that is phase 1, which has no rules for ratings)."""
    if _phase1_shaped(label):
        return LabelingMode.phase1
    if label.labeling_mode is not None:
        return LabelingMode.first_error if label.labeling_mode == LabelingMode.phase1 else label.labeling_mode
    ratings = [rating for rating, _ in step_ratings(label.steps) if rating is not None]
    if -1 in ratings[:-1]:
        return LabelingMode.full
    if label.finish_reason == FinishReason.found_error and len(ratings) < n_steps:
        return LabelingMode.first_error
    return LabelingMode.first_error if project.labeling_mode == LabelingMode.phase1 else project.labeling_mode


def _phase1_shaped(label: Label) -> bool:
    """Whether some step is not as a submit by ratings stores it (service.prm800k_step): it has
    other alternatives than the solution's own step, a written step, or stops where its step was
    not rated -1. Only phase-1 mode stores such steps. A phase-1 label that holds none is stored
    as ratings would be, and correcting it by ratings loses nothing."""
    for step in label.steps:
        completions = step.get("completions") or []
        if len(completions) != 1:
            return True
        # Unchecked: what is stored is compared with the ratings shape, not judged.
        own = StepRating.model_construct(rating=completions[0].get("rating"), flagged=completions[0].get("flagged"))
        if step != prm800k_step(own):
            return True
    return False


def step_ratings(steps: list[dict[str, Any]]) -> list[tuple[int | None, bool]]:
    """(rating, flagged) of each labeled step, from PRM800K's step shape."""
    return [(taken.get("rating"), bool(taken.get("flagged"))) for taken in map(taken_step, steps)]


def rating_counts(steps: list[dict[str, Any]]) -> RatingCounts:
    """Every rating given: each rated alternative of a phase-1 step, and a written step's own."""
    ratings = [completion.get("rating") for step in steps for completion in step.get("completions") or []]
    ratings += [step["human_completion"].get("rating") for step in steps
                if isinstance(step.get("human_completion"), dict)]
    return RatingCounts(
        positive=ratings.count(1), neutral=ratings.count(0), negative=ratings.count(-1)
    )


def _receipt_for_retry(
    session: Session, user_id: int, label_id: int, data: LabelSubmit
) -> CorrectionReceipt | None:
    """The receipt of the correction stored under the key, sent again; a key reused for other
    ratings, outcome or note is refused (as a submit's), not answered as if stored."""
    earlier = session.execute(
        select(Label.id, Label.supersedes_id, Label.finish_reason, Label.finish_note, Label.steps).where(
            Label.user_id == user_id, Label.idempotency_key == data.idempotency_key
        )
    ).first()
    if earlier is None:
        return None
    if earlier.supersedes_id != label_id:
        raise Conflict("this idempotency key was already used for another label")
    if not same_submission(earlier.finish_reason, earlier.finish_note, earlier.steps, data):
        raise Conflict("this idempotency key was already used for a different correction of this label: "
                       "a retry sends the same ratings, outcome and note")
    return CorrectionReceipt(label_id=earlier.id, supersedes_id=label_id, duplicate=True)


def _closed(reason: str) -> CorrectionWindow:
    return CorrectionWindow(open=False, closes_at=None, reason=reason)


def _first_labeled_at(session: Session, label: Label) -> datetime:
    created_at, earlier = label.created_at, label.supersedes_id
    while earlier is not None:
        created_at, earlier = session.execute(
            select(Label.created_at, Label.supersedes_id).where(Label.id == earlier)
        ).one()
    return created_at


def _own(
    session: Session, user_id: int, label_id: int, *, lock: bool = False
) -> tuple[Label, Project, Solution, Problem]:
    query = (
        select(Label, Project, Solution, Problem)
        .join(Project, Project.id == Label.project_id)
        .join(Solution, Solution.id == Label.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(Label.id == label_id, may_label(Label.project_id))
    )
    if lock:
        query = query.with_for_update(of=Label)
    row = session.execute(query, {"user": user_id}).first()
    if row is None or row[0].user_id != user_id:
        # Another labeler's label reads as missing: ids must not reveal other labelers' work.
        raise NotFound(f"you have no label {label_id}")
    return row[0], row[1], row[2], row[3]


_MATH_DELIMITER = re.compile(r"\\\$|\$\$|\$|\\\(|\\\)|\\\[|\\\]")
_CLOSES = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}


def snippet_of(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The text's start on one line, about `limit` characters, never ending inside a formula, so
    that the page renders the math it shows instead of a stray `$` and LaTeX. A formula the limit
    splits is kept whole when it closes within twice the limit (the page's ellipsis clips what
    does not fit); a longer one is cut before, unless nothing precedes it."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut, closing, opened = limit - 1, None, 0
    for match in _MATH_DELIMITER.finditer(text, 0, 2 * limit):
        token = match.group()
        if closing is None and match.start() >= cut:
            break
        if token == "\\$":
            continue
        if closing is None and token in _CLOSES:
            closing, opened = _CLOSES[token], match.start()
        elif token == closing:
            closing = None
            if match.end() > cut:
                cut = match.end()
                break
    if closing is not None and opened > 0:
        cut = opened
    if cut >= len(text):
        return text
    return text[:cut].rstrip() + "…"


def _own_label(label: Label, project_name: str, statement: str) -> OwnLabel:
    snippet = snippet_of(statement)
    return OwnLabel(
        label_id=label.id,
        project_id=label.project_id,
        project_name=project_name,
        solution_id=label.solution_id,
        problem_snippet=snippet,
        ratings=rating_counts(label.steps),
        finish_reason=label.finish_reason,
        supersedes_id=label.supersedes_id,
        created_at=label.created_at,
    )
