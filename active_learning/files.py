"""Files written whole or not at all, and output paths checked before any work: the model half's
commands and, refused there as BadInput, the platform's exports and backups (app.ops.files). A
path that cannot be written is refused with ValueError."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PARTIAL = ".partial"


def output_file(path: Path) -> Path:
    """Where writing `path` lands: a symlink's target, since renaming over the link itself would
    leave the file it points to as it was. Refused: standard output, a target that is not a
    regular file (a FIFO or device would be replaced by a file), a missing or read-only directory."""
    if str(path) == "-":
        raise ValueError("writing to standard output is not supported: name a file")
    try:
        target = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ValueError(f"cannot write {path}: {exc}") from None
    if target.is_dir():
        raise ValueError(f"{path} is a directory; name a file")
    if target.exists() and not target.is_file():
        raise ValueError(f"{path} exists and is not a regular file (a device, FIFO or socket): name a file")
    _refuse_unwritable_parent(path, target.parent)
    _refuse_long_name(path, target)
    return target


def _refuse_long_name(path: Path, target: Path) -> None:
    # written_aside writes under the name plus PARTIAL first: a name that fits only without it
    # would fail after the work, with the file system's own error.
    name_max = os.pathconf(target.parent, "PC_NAME_MAX")  # -1 where the file system sets none
    limit = name_max - len(PARTIAL)
    if name_max > 0 and len(os.fsencode(target.name)) > limit:
        raise ValueError(f"cannot write {path}: its name is {len(os.fsencode(target.name))} bytes long; "
                         f"at most {limit} fit here")


def output_directory(path: Path) -> Path:
    """`path` as a directory to make, checked as output_file checks a file: refused standard
    output, something already there (never merged into), a missing or read-only parent."""
    if str(path) == "-":
        raise ValueError("a dataset is a directory, not standard output: name a new directory")
    if path.exists() or path.is_symlink():
        raise ValueError(f"{path} already exists; name a new directory for the dataset")
    _refuse_unwritable_parent(path, path.parent)
    return path


def _refuse_unwritable_parent(path: Path, parent: Path) -> None:
    if not parent.is_dir():
        raise ValueError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"cannot write {path}: directory {parent} is not writable")


@contextmanager
def written_aside(target: Path) -> Iterator[Path]:
    """A path beside `target` to write, renamed over it when the block succeeds: a file cut short
    never passes for a whole one, and a failure leaves no partial file behind."""
    partial = target.with_name(target.name + PARTIAL)
    try:
        yield partial
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def replace_whole(path: Path, text: str) -> None:
    """Write `text` to `path` (written_aside): a kill, or a reader in the middle, sees the old file
    or the new one, never half of one."""
    with written_aside(path) as partial:
        partial.write_text(text)
