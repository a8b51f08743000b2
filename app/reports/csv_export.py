"""The Reports page's rows as a CSV file."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from app.reports.schemas import ReportRead

COLUMNS = (
    "report_id",
    "created_at",
    "kind",
    "status",
    "labeler",
    "problem_id",
    "problem_statement",
    "problem_retired",
    "solution_id",
    "label_id",
    "step",
    "reason",
    "dismissed_at",
    "dismissed_by",
    "label_url",
)

# Spreadsheet programs run a cell that begins with one of these as a formula, so a reason a
# labeler typed as "=HYPERLINK(...)" would run on the manager's machine when the file is opened
# (CSV injection). A leading apostrophe makes such a cell text; tab and carriage return are on
# OWASP's list too, as some programs skip them before looking for a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def label_url(report: ReportRead) -> str:
    return f"/manage/projects/{report.project_id}/labels/{report.label_id}"


def reports_csv(reports: Iterable[ReportRead]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for r in reports:
        row = (
            r.id,
            r.created_at.isoformat(),
            r.kind.value,
            r.status.value,
            r.labeler,
            r.problem_id,
            r.problem_statement,
            "yes" if r.problem_retired else "no",
            r.solution_id,
            r.label_id,
            r.step,
            r.reason,
            r.dismissed_at.isoformat() if r.dismissed_at else None,
            r.dismissed_by,
            label_url(r),
        )
        writer.writerow([safe_cell(value) for value in row])
    return out.getvalue()
