"""Asymptote figures in problem statements: MATH writes them inline as [asy]...[/asy]."""

from __future__ import annotations

import hashlib
import re

ASY_BLOCK = re.compile(r"\[asy\](.*?)\[/asy\]", re.DOTALL)
# Part of every cache key: a change to how figures are drawn (scale, sanitiser, what a figure may
# read) is a new key, so that stale drawings are never served: 4 drops any that a figure drew from
# a server file before app.figures.guard.
DRAWING_VERSION = "asy-svg-4"


def asy_sources(text: str) -> list[str]:
    """The Asymptote code of each figure in `text`, in order."""
    return [match.group(1) for match in ASY_BLOCK.finditer(text)]


def figure_key(source: str) -> str:
    return hashlib.sha256(f"{DRAWING_VERSION}\n{source}".encode()).hexdigest()
