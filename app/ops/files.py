"""Files the CLI writes (exports, backups): active_learning.outputs' checks, a path that cannot
be written refused as BadInput like any other bad input."""

from __future__ import annotations

from pathlib import Path

from active_learning import outputs
from active_learning.outputs import written_aside
from app.errors import BadInput

__all__ = ["output_directory", "output_file", "written_aside"]


def output_file(path: Path) -> Path:
    """See active_learning.outputs.output_file."""
    try:
        return outputs.output_file(path)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def output_directory(path: Path) -> Path:
    """See active_learning.outputs.output_directory."""
    try:
        return outputs.output_directory(path)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
