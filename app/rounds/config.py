"""Settings of the round workers, read from environment variables with safe defaults."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="STEPWISE_", extra="ignore")

    models_dir: Path = Field(
        default=Path("./models"),
        description="Where round checkpoints are written; workers and the API must share it.",
    )
    local_worker: bool = Field(
        default=True,
        description="On SQLite, run rounds in a thread of the web server.",
    )
    round_lease_s: float = Field(
        default=60.0,
        ge=1.0,
        description="A round whose worker has not renewed its lease for this long is resumed "
        "by another worker; a comparison, measured again.",
    )
    worker_poll_s: int = Field(
        default=10,
        ge=1,
        le=60,
        description="How often idle workers look for rounds to resume and triggers that are due.",
    )
    round_max_attempts: int = Field(
        default=3, ge=1, description="A round that fails this many times stays failed."
    )
    round_retry_after_s: float = Field(
        default=60.0,
        ge=0.0,
        description="A round that failed is tried again after this many seconds, doubled for each "
        "earlier attempt (60 s, then 120 s, ...; an hour at most).",
    )
    round_max_claims: int = Field(
        default=20,
        ge=1,
        description="A round whose workers died (killed, not failed) this many times is failed.",
    )

    @field_validator("models_dir", mode="before")
    @classmethod
    def _names_a_folder(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must name a folder (blank would mean whatever folder the process starts in)")
        return value

    @field_validator("worker_poll_s")
    @classmethod
    def _divides_a_minute(cls, value: int) -> int:
        # The PostgreSQL worker's periodic sweep is a cron with a seconds field.
        if 60 % value:
            raise ValueError("must divide 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)")
        return value


@lru_cache
def get_worker_settings() -> WorkerSettings:
    return WorkerSettings()
