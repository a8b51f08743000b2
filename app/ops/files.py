"""Files the CLI writes (exports, backups): active_learning.files' checks, a path that cannot be
written refused as BadInput like any other bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from active_learning import files
from active_learning.files import written_aside
from app.errors import BadInput

__all__ = ["output_directory", "output_file", "written_aside"]


def output_file(path: Path) -> Path:
    """See active_learning.files.output_file."""
    return _as_bad_input(files.output_file, path)


def output_directory(path: Path) -> Path:
    """See active_learning.files.output_directory."""
    return _as_bad_input(files.output_directory, path)


def _as_bad_input(check: Callable[[Path], Path], path: Path) -> Path:
    try:
        return check(path)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
