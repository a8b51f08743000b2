"""Logging for operators: uvicorn's text lines, or one JSON object a line for a log collector.

Every record made while a request is served carries its request id (and, once known, its route
and user id), so that a traceback can be matched with the request line that ended in a 500.
JSON through python-json-logger, a stdlib `logging.Formatter`: records from uvicorn,
SQLAlchemy and procrastinate come out in the same shape as ours, with `exc_info` rendered as a
traceback string, without a formatter of our own to maintain.
"""

from __future__ import annotations

import copy
import logging
import re
import uuid
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from uvicorn.config import LOGGING_CONFIG

# One event a request, when access logging is on (`stepwise serve --access-log`).
ACCESS_LOGGER = "stepwise.access"

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
ROUTE: ContextVar[str | None] = ContextVar("route", default=None)
USER_ID: ContextVar[int | None] = ContextVar("user_id", default=None)

# A proxy's id is kept so that its lines and ours match; anything else (too long, odd
# characters that could forge log lines) is replaced by one of ours.
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(incoming: str | None) -> str:
    if incoming and _SANE_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestContext(logging.Filter):
    """Adds the request's id, route and user to every record made while it is served."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in (("request_id", REQUEST_ID), ("route", ROUTE), ("user_id", USER_ID)):
            if getattr(record, name, None) is None:
                setattr(record, name, var.get())
        return True


class Json(JsonFormatter):
    def __init__(self) -> None:
        super().__init__(
            "{levelname}{name}{message}",
            style="{",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            # uvicorn gives its records a copy of the message with terminal colour codes, for
            # its own text lines: a collector would store the escapes.
            reserved_attrs=[*RESERVED_ATTRS, "color_message"],
        )


# Alembic says how it will migrate each time /readyz compares the schema with the code: two
# lines a probe, every few seconds.
QUIET = {"alembic.runtime.migration": {"level": "WARNING"}}


def logging_config(log_format: str, access_log: bool) -> dict[str, Any]:
    """The `logging.config.dictConfig` of a server or worker process."""
    if log_format == "text":
        # uvicorn's own lines, its access line included (uvicorn's `access_log` turns it on),
        # and every other logger's (the worker's rounds, the API's warnings) with time and level:
        # uvicorn's configuration leaves the root without a handler, which dropped them.
        config = copy.deepcopy(LOGGING_CONFIG)
        config["formatters"]["text"] = {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
        config["handlers"]["text"] = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                      "formatter": "text"}
        config["root"] = {"handlers": ["text"], "level": "INFO"}
        config["loggers"].update(QUIET)
        config["loggers"][ACCESS_LOGGER] = {"level": "WARNING"}
        return config
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": RequestContext}},
        "formatters": {"json": {"()": Json}},
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "json",
                "filters": ["request"],
            }
        },
        "root": {"handlers": ["json"], "level": "INFO"},
        "loggers": {
            "uvicorn": {"level": "INFO"},
            # Replaced by ours, which names the route template, never the path as sent.
            "uvicorn.access": {"level": "WARNING"},
            ACCESS_LOGGER: {"level": "INFO" if access_log else "WARNING"},
            **QUIET,
        },
    }
