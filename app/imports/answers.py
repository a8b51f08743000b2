"""Grading imported solutions' final answers, once per distinct (answer, ground truth) pair.

An equivalence check costs milliseconds (sympy), and a file holds many solutions with the same
answer to the same problem, so each pair is graded once per import.
"""

from __future__ import annotations

from active_learning.grading import GRADER_VERSION, grade
from app.models import AnswerGrade

# Bounds the cache's memory on a file with millions of distinct answers.
_CACHE_LIMIT = 200_000
# A dict, not AnswerGrade(value): the enum's lookup by value cost as much as most gradings.
_GRADES = {grade.value: grade for grade in AnswerGrade}


class AnswerGrader:
    def __init__(self) -> None:
        self._grades: dict[tuple[str, str], AnswerGrade] = {}
        self.comparisons = 0

    def grade(self, answer: str | None, ground_truth: str | None) -> tuple[AnswerGrade, str | None]:
        """The grade and the grader version it came from (None when nothing was graded)."""
        if ground_truth is None or not ground_truth.strip():
            return AnswerGrade.ungraded, None
        if answer is None or not answer.strip():
            return AnswerGrade.no_answer, GRADER_VERSION
        key = (answer, ground_truth)
        found = self._grades.get(key)
        if found is None:
            if len(self._grades) >= _CACHE_LIMIT:
                self._grades.clear()
            self.comparisons += 1
            found = _GRADES[grade(answer, ground_truth)]
            self._grades[key] = found
        return found, GRADER_VERSION
