"""Users → Activity: the audit trail, newest first, filtered by what it concerns and by who."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.audit import service
from app.audit.schemas import EventFilters
from app.deps import AdminPageUser, SessionDep
from app.errors import BadInput
from app.forms import FormInvalid, validate_form
from app.templating import render

router = APIRouter(prefix="/admin/activity", include_in_schema=False)


class ActivityForm(BaseModel):
    """The filters as typed in the address; EventFilters judges them."""

    category: str = Field(default="", max_length=2000)
    actor: str = Field(default="", max_length=2000)
    page: str = Field(default="", max_length=2000)


class ActivityFilters(EventFilters):
    page: int = Field(default=1, ge=1, le=100_000)


@router.get("")
def activity_page(request: Request, _: AdminPageUser, session: SessionDep,
                  form: Annotated[ActivityForm, Query()]) -> Response:
    values = {"category": form.category, "actor": form.actor.strip()}
    errors: dict[str, str] = {}
    try:
        filters = validate_form(ActivityFilters, {**values, "page": form.page})
    except FormInvalid as exc:
        errors = exc.errors
    listing = None
    if not errors:
        try:
            listing = service.list_events(session, category=filters.category, actor=filters.actor,
                                          limit=service.PAGE_SIZE, offset=(filters.page - 1) * service.PAGE_SIZE)
        except BadInput as exc:
            # A name nobody has: said at the field, not as "No events match these filters".
            errors = {"actor": exc.message}
    chosen = {k: v for k, v in values.items() if v and k not in errors}
    return render(request, "admin/activity.html", {
        "values": values,
        "errors": errors,
        "listing": listing,
        "page": 1 if errors else filters.page,
        "pages": max(1, -(-listing.total // service.PAGE_SIZE)) if listing else 1,
        "query": urlencode(chosen),
        "categories": list(service.Category),
        "describe": service.describe,
        "who": service.who,
    }, status_code=422 if errors else 200)
