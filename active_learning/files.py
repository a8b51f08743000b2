"""Files written whole or not at all."""

import os
from pathlib import Path


def replace_whole(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file renamed over it: a kill, or a reader in the
    middle, sees the old file or the new one, never half of one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)
