"""TRL's stepwise-supervision records: {"prompt", "completions", "labels"}.

Labels are booleans, as TRL's PRM trainer reads them. A step rated -1 is the last one kept:
what follows a first error says nothing the trainer can use. Steps left unrated end the record
too, and a label with no rated step gives no record. `source` says who labeled (human, rollout,
judge, prm); `label_id`, `solution_id` and `problem_id` are Stepwise's ids, to trace a record back
and to split by problem (a problem's solutions in both train and test sets leak its answer);
`labeler` is the PRM800K export's (the labeler's UUID, or an imported file's id), so that the
records of two labelers of one solution can be told apart, kept or dropped. TRL's trainer ignores
all five.

With every completion (`completions="all"`), a label gives one record more for each rated
alternative it did not continue with (the steps before it, then it), and each record says which
of its steps the labeler wrote (`human_written`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from app.exports.query import LabelRow, labeler_of
from app.exports.trajectory import RatedStep, alternatives, trajectory


def trl_records(row: LabelRow, neutral_is_good: bool, every_completion: bool) -> Iterator[dict[str, Any]]:
    solution_steps, label_steps = orjson.loads(row.solution_steps), orjson.loads(row.label_steps)
    paths = [trajectory(solution_steps, label_steps)]
    if every_completion:
        paths.extend(alternative.steps for alternative in alternatives(solution_steps, label_steps))
    for steps in paths:
        record = _record(row.statement, steps, neutral_is_good, every_completion, row.source.value)
        if record is not None:
            yield {**record, "label_id": row.label_id, "solution_id": row.solution_id, "problem_id": row.problem_id,
                   "labeler": labeler_of(row)}


def _record(prompt: str, steps: list[RatedStep], neutral_is_good: bool, mark_human: bool,
            source: str) -> dict[str, Any] | None:
    kept: list[RatedStep] = []
    for step in steps:
        if step.rating is None:
            break
        kept.append(step)
        if step.rating == -1:
            break
    if not kept:
        return None
    record: dict[str, Any] = {
        "prompt": prompt,
        "completions": [s.text for s in kept],
        "labels": [s.rating == 1 or (s.rating == 0 and neutral_is_good) for s in kept],
        "source": source,
    }
    if mark_human:
        record["human_written"] = [s.human for s in kept]
    return record
