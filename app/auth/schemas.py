from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.models import ApiToken
from app.validation import ScalarsAsWritten

# Ten years: past that an expiry is no expiry, and a typo of days for hours would go unnoticed.
MAX_TOKEN_DAYS = 3650


class TokenSettings(ScalarsAsWritten):
    """What a new token is: made by the API for a password, or on the account page."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="api", max_length=100, description="a note to recognise the token by")
    expires_in_days: int | None = Field(
        default=None, ge=1, le=MAX_TOKEN_DAYS, description="refused from then on; by default the token lasts until revoked"
    )
    read_only: bool = Field(default=False, description="true: GET requests (listings, reports, exports) and scoring "
                                                       "only; any change is refused with 403, so a leaked copy changes nothing")


class TokenRequest(TokenSettings):
    username: str = Field(max_length=64)
    password: str = Field(max_length=1024)


class TokenRead(BaseModel):
    token: str = Field(description="shown this once: only its digest is stored")
    token_type: str = "bearer"
    id: int
    expires_at: datetime | None
    read_only: bool


class TokenInfo(BaseModel):
    """One of the caller's tokens, without the token itself, which is not kept."""

    id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None = Field(description="to the minute; null if never used")
    expires_at: datetime | None = Field(description="null: until revoked")
    expired: bool
    read_only: bool = Field(description="GET requests and scoring only")
    current: bool = Field(description="the token this request was made with")

    @classmethod
    def of(cls, record: ApiToken, current_id: int | None) -> TokenInfo:
        return cls(id=record.id, name=record.name, created_at=record.created_at, last_used_at=record.last_used_at,
                   expires_at=record.expires_at, expired=record.expired, read_only=record.read_only,
                   current=record.id == current_id)


class HeldTokenInfo(TokenInfo):
    """A token of any user, for an admin."""

    user_id: int
    username: str
