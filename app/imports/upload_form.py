"""The upload form's file parts, counted before the route takes one."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

ONE_FILE = "one file at a time: the upload holds {count} files; import each on its own"


async def _file_parts(request: Request) -> int:
    """How many `file` parts the form holds. FastAPI gives a route the last of several and drops
    the others unsaid: a manager who chose two files imported one and was told nothing of the
    other. The form is parsed once; FastAPI reads the route's fields from the same parse."""
    return len((await request.form()).getlist("file"))


FileParts = Annotated[int, Depends(_file_parts)]
