"""MATH-style problem lines: `problem`, `answer`, `solution`, `subject`, `level`, `unique_id`.

The original MATH files have no `answer` and call the subject `type`; their answer is the last
`\\boxed{}` of the reference solution, which is where MATH-500's `answer` came from too.
"""

from __future__ import annotations

import re
from typing import Any

from active_learning.grading import extract_answer
from app.imports.fields import Invalid, beyond_64_bits, integer, text, type_name
from app.imports.records import ProblemIn

_LEVEL_TEXT = re.compile(r"^Level (\d+|\?)$")


# Keys of the other formats: a line with one, chosen as MATH by mistake, would become a copy of
# a problem already there (without an answer, or with a candidate's answer as the reference),
# its steps dropped. A file of problems with their answers and a solution each as `text` is one,
# imported as MATH and then as solutions.
_OTHER_FORMATS = (
    ("steps", "a solution's steps: the file is of candidate solutions"),
    ("problem_id", "a solution's problem: the file is of candidate solutions"),
    ("question", "a PRM800K record's question: the file is PRM800K"),
    ("label", "a PRM800K record's label: the file is PRM800K"),
)


def parse_problem(obj: dict[str, Any]) -> ProblemIn:
    for key, what in _OTHER_FORMATS:
        if key in obj:
            raise Invalid(None, f"holds `{key}`, {what}, not of MATH problems: import it in that format")
    if "text" in obj and "answer" not in obj and "solution" not in obj:
        raise Invalid(None, "holds a solution's `text` and no `answer`: the file is of candidate solutions, not of "
                            "MATH problems: import it in that format")
    statement = text(obj, "problem", required=True)
    solution = text(obj, "solution")
    answer = text(obj, "answer", numbers=True)
    if answer is None and solution is not None:
        answer = extract_answer(solution)
    subject_key = "subject" if "subject" in obj else "type"
    return ProblemIn(
        statement=statement,  # type: ignore[arg-type]
        answer=answer,
        reference_solution=solution,
        subject=text(obj, subject_key, max_length=100),
        level=_level(obj),
        source_id=text(obj, "unique_id", max_length=255),
    )


def _level(obj: dict[str, Any]) -> int | None:
    value = obj.get("level")
    if type(value) is str:
        match = _LEVEL_TEXT.match(value)
        if match is None:
            raise Invalid("level", f"must be an integer or 'Level N', not {value[:40]!r}")
        return None if match.group(1) == "?" else int(match.group(1))
    if value is not None and type(value) is not int and not beyond_64_bits(value):
        raise Invalid("level", f"must be an integer or 'Level N', not {type_name(value)}")
    return integer(obj, "level", low=0, high=100)
