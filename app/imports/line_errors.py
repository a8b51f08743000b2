"""Bad lines of an import, listed up to a limit and counted beyond it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.errors import BadLines

MAX_LISTED_ERRORS = 200


class LineErrors:
    """Bad lines, listed up to a limit and counted beyond it."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.count = 0
        self.listed: list[dict[str, Any]] = []
        # Every bad line's field, past the limit too: a file of another format fails on one field
        # at every line, and the count by field says so where the list stops.
        self.by_field: Counter[str] = Counter()
        # Whether every bad line says what the first (always listed) says: a file of another
        # format, or for another project, is one sentence, not the same row for each line.
        self.alike = True

    def add(self, line: int | None, field: str | None, message: str) -> None:
        self.count += 1
        self.by_field[field or "the line as a whole"] += 1
        if self.listed and (self.listed[0]["field"], self.listed[0]["message"]) != (field, message):
            self.alike = False
        if len(self.listed) < MAX_LISTED_ERRORS:
            self.listed.append({"file": self.filename, "line": line, "field": field, "message": message})

    def raise_if_any(self, records: int) -> None:
        """Raise BadLines if any line was bad; `records` is how many lines the file holds (blank
        ones aside): when every one of them failed alike, one row says so."""
        if not self.count:
            return
        noun = "bad line" if self.count == 1 else "bad lines"
        if self.count > 1 and self.count == records and self.alike:
            first = self.listed[0]
            alike = {**first, "line": None, "message": f"all {records:,} lines: {first['message']}"}
            raise BadLines(f"{self.count} {noun} in {self.filename}: nothing was imported", [alike])
        # In the file's order: a chunk's lines are judged twice (as JSON, then against the
        # project's problems), and the second round's errors came after the first's.
        details = sorted(self.listed, key=lambda error: (error["line"] is None, error["line"] or 0))
        if self.count > len(details):
            more = self.count - len(details)
            fields = ", ".join(f"{field} {n:,}" for field, n in self.by_field.most_common(5))
            details.append({"file": self.filename, "line": None, "field": None,
                            "message": f"and {more:,} more bad lines (all {self.count:,}, the most by field: {fields})"})
        raise BadLines(f"{self.count} {noun} in {self.filename}: nothing was imported", details)
