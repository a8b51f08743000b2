from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.audit.service import PAGE_SIZE, Category


class EventFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: Category | None = None
    actor: str | None = Field(default=None, max_length=64, description='a username, any case, or "command line"')


class EventQuery(EventFilters):
    limit: int = Field(default=PAGE_SIZE, ge=1, le=500)
    offset: int = Field(default=0, ge=0, le=10_000_000)


class AuditEventRead(BaseModel):
    id: int
    at: datetime
    actor: str | None = Field(description="the username; null for the command line, run on the server (its "
                                          "operating-system account is `details.os_user`), and for a wrong "
                                          "password (`login.failed`), whose maker is unknown (`target` names "
                                          "the user it was tried for)")
    action: str
    target: str
    summary: str = Field(description="what was done, in words, after the target")
    details: dict[str, Any]


class AuditEventPage(BaseModel):
    total: int
    events: list[AuditEventRead]
