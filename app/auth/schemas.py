from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(max_length=64)
    password: str = Field(max_length=1024)
    name: str = Field(default="api", max_length=100, description="a note to recognise the token by")


class TokenRead(BaseModel):
    token: str
    token_type: str = "bearer"
