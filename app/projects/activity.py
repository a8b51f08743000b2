"""Per-labeler activity on a project, for its manager: how much, how fast, how harsh, how good.

Pace is seconds of active time per rated step, a label's total time over its rated steps, so
that long and short solutions compare. A labeler whose median pace is under a quarter of the
project's (the median of its labelers' medians, which one prolific labeler cannot drag along)
is flagged for review: that fast, the steps were hardly read.

Labels per day over the last days, those of the last hour and the time of the last label say who
is labeling now and who stopped: the totals alone cannot.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.labeling import task_handles
from app.labeling.review import step_ratings
from app.models import Assignment, AssignmentStatus, FinishReason, Label, Skip, Solution, User, utcnow
from app.projects.schemas import CHART_DAYS, DailyCount, LeaseList, LeaseRead
from app.quality.service import LabelerAccuracy, labeler_accuracy

FAST_FRACTION = 0.25
# Fewer timed labels than this say too little about a pace to flag anyone.
MIN_TIMED_LABELS = 3


@dataclass(frozen=True)
class LabelerActivity:
    user_id: int
    username: str
    # What the exports call the labeler (PRM800K's `labeler`): the page says whose it is.
    labeler_uuid: str
    labels: int
    median_seconds_per_step: float | None
    negative_share: float | None
    give_ups: int
    bad_problems: int
    # Solutions passed over unlabeled (app.labeling.service.skip_task).
    skips: int
    qc_compared: int
    qc_accuracy: float | None
    fast: bool
    last_label_at: datetime | None
    labels_last_hour: int
    # Each of the last CHART_DAYS days (UTC), oldest first, today last, zeros included.
    labels_per_day: list[DailyCount]

    @property
    def recent_labels(self) -> int:
        return sum(d.labels for d in self.labels_per_day)


@dataclass(frozen=True)
class ProjectActivity:
    labelers: list[LabelerActivity]
    median_seconds_per_step: float | None

    @property
    def fast_below(self) -> float | None:
        """The pace under which a labeler is flagged."""
        if self.median_seconds_per_step is None:
            return None
        return self.median_seconds_per_step * FAST_FRACTION


@dataclass
class _Tally:
    username: str
    labeler_uuid: str
    labels: int = 0
    rated: int = 0
    negative: int = 0
    give_ups: int = 0
    bad_problems: int = 0
    skips: int = 0
    paces: list[float] = field(default_factory=list)
    last_label_at: datetime | None = None
    last_hour: int = 0
    recent: list[int] = field(default_factory=lambda: [0] * CHART_DAYS)


def project_activity(
    session: Session, project_id: int, accuracy: list[LabelerAccuracy] | None = None,
    *, now: datetime | None = None,
) -> ProjectActivity:
    """Every labeler of the platform with a current label or a skip in the project, most labels
    first; `accuracy` is labeler_accuracy's answer, when the caller has it already."""
    now = now or utcnow()
    today = now.date()
    hour_ago = now - timedelta(hours=1)
    since = today - timedelta(days=CHART_DAYS - 1)
    rows = session.execute(
        select(Label.user_id, User.username, User.labeler_uuid, Label.steps, Label.total_time_ms,
               Label.finish_reason, Label.created_at)
        .join(User, User.id == Label.user_id)
        .where(Label.project_id == project_id, Label.superseded_at.is_(None))
    )
    tallies: dict[int, _Tally] = {}
    for user_id, username, labeler_uuid, steps, time_ms, reason, created_at in rows:
        tally = tallies.setdefault(user_id, _Tally(username, labeler_uuid))
        ratings = [rating for rating, _ in step_ratings(steps)]
        tally.labels += 1
        tally.rated += len(ratings)
        tally.negative += ratings.count(-1)
        tally.give_ups += reason == FinishReason.give_up
        tally.bad_problems += reason == FinishReason.bad_problem
        if time_ms is not None and ratings:
            tally.paces.append(time_ms / 1000 / len(ratings))
        if tally.last_label_at is None or created_at > tally.last_label_at:
            tally.last_label_at = created_at
        tally.last_hour += hour_ago < created_at <= now
        day = (created_at.date() - since).days
        if 0 <= day < CHART_DAYS:
            tally.recent[day] += 1
    skips = session.execute(
        select(Skip.user_id, User.username, User.labeler_uuid, func.count())
        .join(User, User.id == Skip.user_id)
        .where(Skip.project_id == project_id)
        .group_by(Skip.user_id, User.username, User.labeler_uuid)
    )
    for user_id, username, labeler_uuid, skipped in skips:
        tallies.setdefault(user_id, _Tally(username, labeler_uuid)).skips = skipped
    medians = {
        user_id: statistics.median(t.paces) if t.paces else None for user_id, t in tallies.items()
    }
    timed = [m for user_id, m in medians.items() if m is not None]
    project_median = statistics.median(timed) if timed else None
    if accuracy is None:
        accuracy = labeler_accuracy(session, project_id)
    qc_of = {a.user_id: a for a in accuracy if a.user_id is not None}
    labelers = []
    for user_id, tally in tallies.items():
        median = medians[user_id]
        qc = qc_of.get(user_id)
        fast = (
            project_median is not None
            and median is not None
            and len(tally.paces) >= MIN_TIMED_LABELS
            and median < project_median * FAST_FRACTION
        )
        labelers.append(
            LabelerActivity(
                user_id=user_id,
                username=tally.username,
                labeler_uuid=tally.labeler_uuid,
                labels=tally.labels,
                median_seconds_per_step=median,
                negative_share=tally.negative / tally.rated if tally.rated else None,
                give_ups=tally.give_ups,
                bad_problems=tally.bad_problems,
                skips=tally.skips,
                qc_compared=qc.compared if qc else 0,
                qc_accuracy=qc.accuracy if qc else None,
                fast=fast,
                last_label_at=tally.last_label_at,
                labels_last_hour=tally.last_hour,
                labels_per_day=[DailyCount(day=since + timedelta(days=i), labels=n)
                                for i, n in enumerate(tally.recent)],
            )
        )
    labelers.sort(key=lambda a: (-a.labels, a.username))
    return ProjectActivity(labelers=labelers, median_seconds_per_step=project_median)


def leases_in_hand(session: Session, project_id: int, limit: int = 50) -> LeaseList:
    """The tasks labelers hold now (leases not run out), the longest held first: who has what,
    since when, behind the overview's "in progress"."""
    held = (Assignment.project_id == project_id, Assignment.status == AssignmentStatus.leased,
            Assignment.expires_at > utcnow())
    total = session.scalar(select(func.count()).select_from(Assignment).where(*held)) or 0
    rows = session.execute(
        select(Assignment, User.username, Solution.problem_id)
        .join(User, User.id == Assignment.user_id)
        .join(Solution, Solution.id == Assignment.solution_id)
        .where(*held)
        .order_by(Assignment.leased_at, Assignment.id)
        .limit(limit)
    ).all()
    # Named as the labeler's task is (tasks/next, renew, release), so a lease can be acted on.
    return LeaseList(total=total, leases=[
        LeaseRead(assignment_id=task_handles.handle_of(session, lease.id), solution_id=lease.solution_id,
                  problem_id=problem_id, user_id=lease.user_id, labeler=username, check_item=lease.slot < 0,
                  leased_at=lease.leased_at, expires_at=lease.expires_at)
        for lease, username, problem_id in rows
    ])
