"""TRL's stepwise-supervision records: {"prompt", "completions", "labels"}.

Labels are booleans, as TRL's PRM trainer reads them. A step rated -1 is the last one kept:
what follows a first error says nothing the trainer can use. Steps left unrated end the record
too, and a label with no rated step gives no record. `source` says who labeled (human, rollout,
judge, prm); TRL's trainer ignores it.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.exports.query import LabelRow
from app.exports.trajectory import trajectory


def trl_record(row: LabelRow, neutral_is_good: bool) -> dict[str, Any] | None:
    completions: list[str] = []
    labels: list[bool] = []
    for step in trajectory(orjson.loads(row.solution_steps), orjson.loads(row.label_steps)):
        if step.rating is None:
            break
        completions.append(step.text)
        labels.append(step.rating == 1 or (step.rating == 0 and neutral_is_good))
        if step.rating == -1:
            break
    if not completions:
        return None
    return {"prompt": row.statement, "completions": completions, "labels": labels, "source": row.source.value}
