"""Where machine labels and the served PRM disagree about a solution, and how urgently a human
should look.

Each machine source (a rollout estimate, an LLM judge, ...) gives a first error: the 0-based
index of the first step it rated -1, or None when it found none. The served PRM gives one too:
its first step whose P(correct) is below the threshold. A rollout source also gives, per step,
the share of continuations that reached the right answer; a share near the threshold means the
rollouts could not tell, however the label came out.

Priorities order the solutions routed to humans: sources that contradict each other first,
then a machine label that contradicts the PRM, then an uncertain rollout; within each, the
earlier the contested step, the higher (an early error decides more of the solution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PRM = "PRM"
THRESHOLD = 0.5
# A rollout share within this distance of the threshold is a coin toss: a few more
# continuations could flip the step's label.
UNCERTAIN_MARGIN = 0.1

SOURCES_DISAGREE = 3.0
PRM_DISAGREES = 2.0
UNCERTAIN = 1.0


@dataclass(frozen=True)
class Opinion:
    source: str
    first_error: int | None
    # Per step, the share of rollouts from that step that reached the right answer; None where
    # the source measures no such thing.
    shares: Sequence[float | None] | None = None


@dataclass(frozen=True)
class Verdict:
    """`route` is False where every voice agrees and none is uncertain; then the solution's
    machine labels may stand in for a human's."""

    route: bool
    reason: str
    priority: float


def first_error_of_ratings(ratings: Sequence[int | None]) -> int | None:
    return next((i for i, rating in enumerate(ratings) if rating == -1), None)


def first_error_of_scores(step_scores: Sequence[float | None]) -> int | None:
    """The PRM's first error: its first step below the threshold (a step too long to score,
    None, says nothing)."""
    return next((i for i, p in enumerate(step_scores) if p is not None and p < THRESHOLD), None)


def judge(
    opinions: Sequence[Opinion],
    prm_step_scores: Sequence[float | None] | None,
) -> Verdict:
    """Compare the machine sources with each other, with the PRM, and look for uncertain steps.

    Agreement needs two voices: a lone machine source with no PRM to check it is routed too.
    """
    if not opinions:
        raise ValueError("judge needs at least one machine opinion")
    for a, b in _pairs(opinions):
        if a.first_error != b.first_error:
            step = _contested_step(a.first_error, b.first_error)
            return Verdict(True, f"{a.source} and {b.source} disagree on step {step + 1}",
                           SOURCES_DISAGREE + _earliness(step))
    if prm_step_scores is not None:
        prm_error = first_error_of_scores(prm_step_scores)
        machine = opinions[0]
        if machine.first_error != prm_error:
            step = _contested_step(machine.first_error, prm_error)
            return Verdict(True, f"{_names(opinions)} and {PRM} disagree on step {step + 1}",
                           PRM_DISAGREES + _earliness(step))
    uncertain = _most_uncertain(opinions)
    if uncertain is not None:
        source, step, share = uncertain
        closeness = 1 - abs(share - THRESHOLD) / UNCERTAIN_MARGIN
        return Verdict(True, f"{source} uncertain at step {step + 1} (share {share:.2f})",
                       UNCERTAIN + closeness * 0.5 + _earliness(step) * 0.5)
    if len(opinions) == 1 and prm_step_scores is None:
        return Verdict(True, f"{opinions[0].source} alone, no PRM to check it", 0.0)
    return Verdict(False, f"{_names(opinions)}{'' if prm_step_scores is None else ' and ' + PRM} agree", 0.0)


def _pairs(opinions: Sequence[Opinion]) -> list[tuple[Opinion, Opinion]]:
    return [(a, b) for i, a in enumerate(opinions) for b in opinions[i + 1:]]


def _contested_step(a: int | None, b: int | None) -> int:
    """The first step the two first errors rate differently: the earlier of them (one calls it
    wrong, the other right or not yet reached)."""
    return min(x for x in (a, b) if x is not None)


def _earliness(step: int) -> float:
    # In (0, 1): step 0 gives 0.5, later steps less, never reaching the next tier.
    return 1 / (step + 2)


def _names(opinions: Sequence[Opinion]) -> str:
    return " and ".join(o.source for o in opinions)


def _most_uncertain(opinions: Sequence[Opinion]) -> tuple[str, int, float] | None:
    """(source, step, share) of the share closest to the threshold, within the margin, up to
    and including the source's first error (later steps were never judged)."""
    best: tuple[str, int, float] | None = None
    for opinion in opinions:
        shares = list(opinion.shares or [])
        last = len(shares) if opinion.first_error is None else opinion.first_error + 1
        for step, share in enumerate(shares[:last]):
            if share is None or abs(share - THRESHOLD) >= UNCERTAIN_MARGIN:
                continue
            if best is None or abs(share - THRESHOLD) < abs(best[2] - THRESHOLD):
                best = (opinion.source, step, share)
    return best
