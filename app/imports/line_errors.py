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
        # Whether every bad line so far says the same, and which lines they are: a file of
        # another format, or for another project, is one sentence, not the same row per line.
        self.same: tuple[str | None, str] | None = None
        self.differ = False
        self.lines: list[int] = []

    def add(self, line: int | None, field: str | None, message: str) -> None:
        self.count += 1
        self.by_field[field or "the line as a whole"] += 1
        if self.same is None and not self.differ:
            self.same = (field, message)
        elif self.same != (field, message):
            self.same, self.differ = None, True
        if line is not None:
            self.lines = [min(self.lines[0], line), max(self.lines[1], line)] if self.lines else [line, line]
        if len(self.listed) < MAX_LISTED_ERRORS:
            self.listed.append({"file": self.filename, "line": line, "field": field, "message": message})

    def _every_line_alike(self) -> dict[str, Any] | None:
        """The one row for bad lines that all say the same and run from the file's first line
        without a gap, or None."""
        if self.count < 2 or self.same is None or not self.lines:
            return None
        first, last = self.lines
        if first != 1 or last - first + 1 != self.count:
            return None
        field, message = self.same
        return {"file": self.filename, "line": None, "field": field,
                "message": f"every line, 1 to {last:,}: {message}"}

    def raise_if_any(self) -> None:
        if not self.count:
            return
        noun = "bad line" if self.count == 1 else "bad lines"
        alike = self._every_line_alike()
        if alike is not None:
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
