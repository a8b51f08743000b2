"""Service settings, read from environment variables with safe defaults."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from active_learning.config import BATCH_TOKENS_VARIABLE, batch_tokens_setting


def normalize_database_url(url: str) -> str:
    """Let users write the URL every PostgreSQL tool understands, or the psycopg2 one older
    SQLAlchemy set-ups use; we speak psycopg 3, which reads the same URLs."""
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./stepwise.db",
        description="SQLAlchemy URL; the embedded default is a SQLite file in the working directory.",
    )
    environment: Literal["development", "production", "test"] = Field(
        default="development", alias="STEPWISE_ENV"
    )
    cookie_secure: bool = Field(
        default=False,
        alias="STEPWISE_COOKIE_SECURE",
        description="Send session cookies over HTTPS only; turn on behind TLS.",
    )
    session_hours: int = Field(default=12, ge=1, le=24 * 30, alias="STEPWISE_SESSION_HOURS")
    # A browser left logged in on a shared computer is anyone's until the session ends: one
    # unused this long ends sooner (0: only at session_hours). Requests a page makes on its own
    # (an empty queue's recheck, a round's progress) do not count as use.
    session_idle_minutes: int = Field(default=120, ge=0, le=24 * 60 * 30, alias="STEPWISE_SESSION_IDLE_MINUTES")
    max_upload_mb: int = Field(default=2048, ge=1, alias="STEPWISE_MAX_UPLOAD_MB")
    # Connections a worker process keeps open. Fewer than its requests in flight, and every
    # request past them opened and closed a connection of its own (PostgreSQL forks a backend
    # for each): at 64 labelers on 4 workers, a pool of 10 served 76-80 req/s against 110-112
    # for 30 (same-day alternating runs).
    db_pool_size: int = Field(default=30, ge=1, alias="STEPWISE_DB_POOL_SIZE")
    # Next-task and submit requests a server process runs at once; more wait their turn, first
    # come first served. Forty at once (the thread pool's size) took turns at the interpreter
    # lock in no order, and the unluckiest waited. At 64 labelers on 4 processes, three rotated
    # runs each: 40 at once served 373 / 361 / 341 next-task req/s with p99 366 / 319 / 336 ms;
    # 8 served 361 / 377 / 394 with p99 311 / 201 / 224 ms; 4 served 333 / 351 / 358 with p99
    # 172 / 174 / 161 ms. With a database farther away than loopback, more may pay.
    labeling_concurrency: int = Field(default=8, ge=1, alias="STEPWISE_LABELING_CONCURRENCY")
    # Score requests a server process holds at once, the one on the CPU or GPU included; more
    # are answered 503 with Retry-After. Each one waiting holds one of the threads (40) that
    # serve every page and API call: unbounded, a reranking service's burst took them all.
    scoring_queue: int = Field(default=8, ge=1, le=32, alias="STEPWISE_SCORING_QUEUE")
    # Read by the PRM scorer itself (active_learning.score.default_batch_tokens), which the web
    # process imports only when a model is used; declared here, checked by the scorer's own
    # rule, so that a bad value stops the server at start-up rather than failing the first
    # score request or round.
    score_batch_tokens: int | None = Field(default=None, ge=1, alias=BATCH_TOKENS_VARIABLE)

    # Failed logins (see app.auth.throttle): this many for one username, or from one client
    # address, within the window lock that username or address out for the lockout time.
    login_max_failures: int = Field(default=10, ge=1, le=1000, alias="STEPWISE_LOGIN_MAX_FAILURES")
    login_max_failures_per_address: int = Field(
        default=50, ge=1, le=100_000, alias="STEPWISE_LOGIN_MAX_FAILURES_PER_ADDRESS"
    )
    login_failure_window_minutes: int = Field(
        default=15, ge=1, le=24 * 60, alias="STEPWISE_LOGIN_FAILURE_WINDOW_MINUTES"
    )
    login_lockout_minutes: int = Field(default=15, ge=1, le=24 * 60, alias="STEPWISE_LOGIN_LOCKOUT_MINUTES")
    # A lost or leaked token works until it expires or is revoked: a site may cap how long any
    # lasts (one asked for without an expiry then gets the cap).
    token_max_days: int | None = Field(default=None, ge=1, le=3650, alias="STEPWISE_TOKEN_MAX_DAYS")

    asymptote: str = Field(
        default="asy",
        alias="STEPWISE_ASYMPTOTE",
        description="Asymptote's asy (a path, or a name on PATH) to draw [asy] figures in "
        "problems; 'off', or asy missing, shows the figure's source collapsed instead.",
    )
    # A MATH figure takes about a second (latex and dvisvgm included); ten leaves room on a busy
    # machine and still bounds a request that has to draw one.
    asymptote_timeout_s: float = Field(default=10.0, gt=0, le=120, alias="STEPWISE_ASYMPTOTE_TIMEOUT_S")
    figures_dir: Path = Field(
        default=Path("./figures"),
        alias="STEPWISE_FIGURES_DIR",
        description="Cache of drawn figures, by content hash; server processes may share it.",
    )

    log_format: Literal["text", "json"] = Field(
        default="text",
        alias="STEPWISE_LOG_FORMAT",
        description="'json' writes one JSON object a line, for a log collector.",
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        alias="STEPWISE_METRICS_TOKEN",
        description="Bearer token that lets a scraper read /metrics from any address.",
    )
    # Loopback only by default: a Prometheus beside the server, or one given the token.
    metrics_allow: str = Field(
        default="127.0.0.1/32,::1/128",
        alias="STEPWISE_METRICS_ALLOW",
        description="Comma-separated networks (CIDR) that may read /metrics without the token.",
    )

    @field_validator("score_batch_tokens", mode="before")
    @classmethod
    def _batch_tokens(cls, value: object) -> object:
        return batch_tokens_setting(value) if isinstance(value, str) else value

    @field_validator("session_idle_minutes")
    @classmethod
    def _idle(cls, value: int) -> int:
        # Use is written down to the minute: a session allowed a minute or two unused would end
        # under someone at work.
        if 0 < value < 5:
            raise ValueError("must be 0 (sessions end only when they expire) or at least 5 minutes")
        return value

    @field_validator("metrics_allow")
    @classmethod
    def _networks(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                try:
                    ipaddress.ip_network(part.strip(), strict=False)
                except ValueError:
                    raise ValueError(f"{part.strip()!r} is not a network such as 10.0.0.0/8") from None
        return value

    @property
    def metrics_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(p.strip(), strict=False) for p in self.metrics_allow.split(",") if p.strip())

    @field_validator("database_url")
    @classmethod
    def _normalize(cls, value: str) -> str:
        url = normalize_database_url(value.strip())
        try:
            backend = make_url(url).get_backend_name()
        except ArgumentError:
            raise ValueError(
                "not a database URL: expected sqlite:///path/to/file.db or postgresql://user@host/database"
            ) from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"{backend} is not supported: Stepwise runs on SQLite and PostgreSQL")
        if backend == "sqlite" and make_url(url).database in (None, "", ":memory:"):
            # Each connection would open its own empty database: migrated by one, gone for the next.
            raise ValueError("an in-memory SQLite database cannot be shared by the server's connections: "
                             "name a file, as sqlite:///path/to/stepwise.db")
        return url

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def production_warnings(self) -> list[str]:
        """What a production server should not run with, said when it starts; warned, not
        refused: a closed network without TLS may be a deliberate choice."""
        if self.environment != "production":
            return []
        warnings = []
        if not self.cookie_secure:
            warnings.append("STEPWISE_COOKIE_SECURE is off: session cookies also travel over plain HTTP, where "
                            "anyone on the way can take a session; set it to true behind a TLS proxy")
        if self.is_sqlite:
            warnings.append("the database is a SQLite file: writes take turns across server processes and no "
                            "second server can share it; set DATABASE_URL to a PostgreSQL database")
        return warnings


@lru_cache
def get_settings() -> Settings:
    return Settings()
