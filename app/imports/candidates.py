"""Candidate solution lines: a problem (`problem` text or `problem_id`), then `steps`, or `text`
cut at a separator, and an optional `answer`. Other keys are kept in the solution's origin.
"""

from __future__ import annotations

from typing import Any

from active_learning.data import is_blank
from app.errors import BadInput
from app.imports.fields import Invalid, integer, string_list, text
from app.imports.records import MAX_ANSWER, MAX_STEPS, Candidate, SolutionIn

DEFAULT_SEPARATOR = "\n\n"
ANSWER_HEADING = "# Answer"
KNOWN_KEYS = frozenset({"problem", "problem_id", "steps", "text", "answer"})
_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r"}
# As long as an import batch keeps.
MAX_SEPARATOR_LENGTH = 100


def separator_from(given: str | None) -> str:
    """The separator as typed: a shell or a form field cannot easily hold a real newline."""
    if given is None:
        return DEFAULT_SEPARATOR
    for escaped, char in _ESCAPES.items():
        given = given.replace(escaped, char)
    if "\x00" in given:
        # As every text the importer reads: PostgreSQL text cannot hold it (app.imports.reader).
        raise BadInput("the step separator must not contain a NUL character")
    return given


def _answer_rejoined(parts: list[str], separator: str) -> list[str]:
    """PRM800K-style text ends with a `# Answer` heading, a blank line and the answer. Cut at blank
    lines, the heading would be a step of its own, one a labeler cannot rate; rejoined with its
    answer it is the last step, as in PRM800K, and the page shows the answer under it. A heading
    that ends a part (its step's last line, where the steps were cut at something else) goes
    with the answer too."""
    steps: list[str] = []
    for i, part in enumerate(parts):
        if steps and steps[-1] == ANSWER_HEADING:
            steps[-1] = f"{ANSWER_HEADING}{separator}{part}"
            continue
        before, newline, last_line = part.rpartition("\n")
        if newline and last_line.strip() == ANSWER_HEADING and before.strip() and i + 1 < len(parts):
            steps.extend([before.rstrip(), ANSWER_HEADING])
        else:
            steps.append(part)
    return steps


def _figures_whole(parts: list[str], separator: str) -> list[str]:
    """An Asymptote figure's code ([asy]…[/asy], as MATH writes figures) may hold blank lines:
    a separator inside one cuts no step, or its code would be spread over several. A figure
    that never closes (the tag in prose, a generation cut short) joins nothing."""
    steps: list[str] = []
    i = 0
    while i < len(parts):
        end = i
        opened = parts[i].count("[asy]") - parts[i].count("[/asy]")
        while opened > 0 and end + 1 < len(parts):
            end += 1
            opened += parts[end].count("[asy]") - parts[end].count("[/asy]")
        if opened > 0:
            end = i
        steps.append(separator.join(parts[i:end + 1]))
        i = end + 1
    return steps


def _cut(whole: str, separator: str) -> list[str]:
    if "\r" not in separator:
        # A file written on Windows: its blank lines are "\r\n\r\n", which "\n\n" does not match.
        whole = whole.replace("\r\n", "\n").replace("\r", "\n")
    parts = [part.strip() for part in whole.split(separator) if not is_blank(part)]
    return _answer_rejoined(_figures_whole(parts, separator), separator)


def parse_candidate(obj: dict[str, Any], separator: str, origin: dict[str, Any]) -> Candidate:
    statement = text(obj, "problem")
    # A string names the problem by the id its own file gave it (MATH's `unique_id`), which the
    # manager knows; a number is Stepwise's id.
    source_id = text(obj, "problem_id", max_length=255) if isinstance(obj.get("problem_id"), str) else None
    problem_id = None if source_id is not None else integer(obj, "problem_id", low=1)
    if (statement is None) == (problem_id is None and source_id is None):
        raise Invalid("problem", "give exactly one of `problem` (its text) and `problem_id` (its unique_id, or "
                                 "Stepwise's number)")
    if statement is not None and not statement.strip():
        raise Invalid("problem", "is empty")
    steps = string_list(obj, "steps", max_items=MAX_STEPS)
    whole = text(obj, "text")
    if (steps is None) == (whole is None):
        raise Invalid("steps", "give exactly one of `steps` (a list) and `text` (cut at the separator)")
    uncut = False
    if steps is None:
        steps = _cut(whole, separator)  # type: ignore[arg-type]
        # One step of several lines: the separator was not in the text, perhaps not the file's.
        uncut = len(steps) == 1 and "\n" in steps[0] and not steps[0].startswith(ANSWER_HEADING)
        if not steps:
            raise Invalid("text", "has no steps: it is blank")
        if len(steps) > MAX_STEPS:
            raise Invalid("text", f"has {len(steps)} steps; at most {MAX_STEPS} are allowed")
    else:
        for i, step in enumerate(steps):
            if is_blank(step):
                raise Invalid(f"steps[{i}]", "is blank: a step needs text")
    meta = {k: v for k, v in obj.items() if k not in KNOWN_KEYS}
    if meta:
        origin = {**origin, "meta": meta}
    answer = text(obj, "answer", max_length=MAX_ANSWER, numbers=True)
    return Candidate(statement, problem_id, SolutionIn(steps, answer, origin=origin), uncut, source_id)
