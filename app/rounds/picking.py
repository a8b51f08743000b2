"""The select and enqueue stages of a round: the rule of active_learning.select applied to the
pool's stored scores, and its picks put at the head of the labeling queue."""

from __future__ import annotations

import logging
import random
from collections import defaultdict

from sqlalchemy import update
from sqlalchemy.orm import Session

from active_learning.select import NO_MODEL, Candidate, Pick, SelectionRule, select_uniform
from active_learning.select import select as select_picks
from app.models import PickReason, Project, Round, RoundSettings, RoundStage
from app.rounds import lease, pool, routing
from app.rounds.failpoints import failpoint
from app.rounds.run import STAGE_START, RoundRun
from app.rounds.service import served_version

log = logging.getLogger("stepwise.rounds")

# A round's pool is what no labeler has labeled or holds; imported labels empty it. Said by the
# round's message and its page.
EMPTY_POOL = "its pool was empty: no solution is left without a human label or a labeler"


def selection_rule(settings: RoundSettings, seed: int) -> SelectionRule:
    return SelectionRule(
        budget=settings.picks_per_round, wrong_share=settings.wrong_share,
        control_share=settings.control_share, qc_share=settings.qc_share,
        per_problem_cap=settings.per_problem_cap,
        duplicate_similarity=settings.duplicate_similarity, seed=seed,
    )


def select_stage(run: RoundRun) -> None:
    with run.session() as session:
        round_ = session.get(Round, run.round_id)
        assert round_ is not None
        # The model the score stage scored the pool with (a round from before selector modes
        # ranked with the served one); none when no model was served. It ranks unless the
        # stage said why the picks are uniform.
        selector = round_.metrics.get("selector")
        served = served_version(session, run.project_id) if selector is None else None
        version_id = selector["version_id"] if selector else served.id if served else None
        ranked = version_id is not None and not (selector or {}).get("uniform_because")
        rows = pool.pool_candidates(session, run.project_id, version_id)
        rule = selection_rule(run.settings, seed=run.round_id)
        if ranked:
            shortlist = reachable(rows, rule)
        else:
            shortlist = random.Random(rule.seed).sample(rows, min(len(rows), 3 * rule.budget + 10))
        qc_rows = pool.qc_candidates(session, run.project_id) if rule.qc_share else []
        texts = pool.solution_texts(session, [r[0] for r in shortlist] + [r[0] for r in qc_rows])
        candidates = [Candidate(sid, pid, score, grade, texts[sid], truncated)
                      for sid, pid, grade, score, truncated in shortlist]
        qc = [Candidate(sid, pid, None, grade, texts[sid]) for sid, pid, grade in qc_rows]
        if ranked:
            picks = select_picks([c for c in candidates if c.score is not None], rule, qc)
        else:
            picks = select_uniform(candidates, rule, uniform_reason(selector), qc)
        grades = {sid: grade for sid, _, grade, *_ in rows} | {sid: grade for sid, _, grade in qc_rows}
        ordered = queue_order(session, run, version_id, rows, picks)
        count = len(ordered)
        pool.write_picks(session, [
            {"round_id": run.round_id, "solution_id": sid, "model_version_id": version_id,
             "rank": rank, "score": score, "reason": reason, "detail": detail,
             "answer_grade": grades[sid],
             # Newer rounds go first; within a round, routed solutions, then the interleaved
             # order of the rule.
             "priority": run.number + 1 - (rank + 1) / (count + 1)}
            for rank, (sid, score, reason, detail) in enumerate(ordered)
        ])
        failpoint("select.written")
        by_reason: dict[str, int] = defaultdict(int)
        for _, _, reason, _ in ordered:
            by_reason[reason] += 1
        wrong = sum(1 for sid, *_ in ordered if grades[sid] == "wrong")
        summary = {"picks": count, "by_reason": dict(by_reason), "pool": len(rows),
                   "wrong_answer_share": wrong / count if count else None}
        lease.advance(session, run.round_id, run.owner, RoundStage.select, RoundStage.enqueue,
                      metrics={**round_.metrics, "selection": summary},
                      percent=STAGE_START[RoundStage.enqueue], message=f"enqueuing {count} picks")


def queue_order(
    session: Session, run: RoundRun, version_id: int | None, rows: list[tuple], picks: list[Pick]
) -> list[tuple[int, float | None, str, str | None]]:
    """(solution id, score, reason, detail) in queue order: the solutions whose machine labels
    need a human, most urgent first and at most a round's budget of them, ahead of the rule's
    picks, which keep their order."""
    scores = {sid: score for sid, _, _, score, _ in rows}
    routed = routing.routed(session, run.project_id, version_id, run.settings.picks_per_round)
    taken = {sid for sid, _ in routed}
    return [
        *((sid, scores.get(sid), routing.pick_reason(v).value, v.reason) for sid, v in routed),
        *((p.solution_id, p.score, str(p.reason), None) for p in picks if p.solution_id not in taken),
    ]


def uniform_reason(selector: dict | None) -> str:
    """Why a round drew its picks uniformly: its project's mode, a selector below the bar, or
    no model yet."""
    if selector and selector.get("uniform_because"):
        return PickReason.uniform if selector["mode"] == "uniform" else PickReason.selector_warmup
    return NO_MODEL


def reachable(rows: list[tuple], rule: SelectionRule) -> list[tuple]:
    """The only candidates the rule could reach: per problem the best-scored wrong answers and
    the best-scored overall, plus a uniform sample for the control slice. Near-duplicates and
    caps are why it keeps a few times what it needs; it spares loading a million texts."""
    keep = max(3 * rule.per_problem_cap, 8)
    by_problem: dict[int, list[tuple]] = defaultdict(list)
    for row in rows:
        if row[3] is not None:
            by_problem[row[1]].append(row)
    chosen: dict[int, tuple] = {}
    for group in by_problem.values():
        group.sort(key=lambda r: (r[4], -r[3]))
        for row in [r for r in group if r[2] == "wrong"][:keep] + group[:keep]:
            chosen[row[0]] = row
    scored = [r for r in rows if r[3] is not None]
    sample = random.Random(rule.seed).sample(scored, min(len(scored), 3 * rule.budget + 10))
    for row in sample:
        chosen[row[0]] = row
    return sorted(chosen.values())


def enqueue_stage(run: RoundRun) -> None:
    with run.session() as session:
        project = session.get(Project, run.project_id)
        assert project is not None
        added = pool.enqueue_picks(session, project, run.round_id, run.number)
        failpoint("enqueue.written")
        round_ = session.get(Round, run.round_id)
        assert round_ is not None
        selection = {**round_.metrics.get("selection", {}), "new_slots": added}
        session.execute(update(Round).where(Round.id == run.round_id)
                        .values(metrics={**round_.metrics, "selection": selection}))
        if round_.promoted:
            verdict = "new model served"
        elif "candidate" in round_.metrics:
            verdict = f"not promoted: {round_.metrics.get('rule')}"
        else:
            # Too few labels to train: there was no model to promote (Round.status_text).
            verdict = str(round_.metrics.get("rule"))
        # A pick already waiting in the queue is moved up, not queued again: the message says how
        # many slots are new, as the log does.
        picks = selection.get("picks", 0)
        picked = f"{picks} picks first in the queue" + (f" ({added} new queue slot{'' if added == 1 else 's'})" if picks else "")
        if selection.get("pool") == 0:
            picked += f" ({EMPTY_POOL})"
        lease.finish(session, run.round_id, run.owner, RoundStage.enqueue, f"{picked}; {verdict}")
    log.info("round id %s: done, %s new queue slots", run.round_id, added)
