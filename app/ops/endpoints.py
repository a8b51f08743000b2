"""/healthz, /readyz and /metrics: for load balancers, orchestrators and Prometheus, not people.

Outside the login (a probe has no account) and outside the OpenAPI schema (not the JSON API).
"""

from __future__ import annotations

import logging

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.ops import service
from app.ops.metrics import CONTENT_TYPE, exposition

router = APIRouter(include_in_schema=False)
log = logging.getLogger(__name__)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process answers; says nothing of the database, so that a database outage does not
    get every server restarted."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Whether to send traffic here. Why not, which names the database's host, its driver's
    error or the schema's revision, is for whoever may read /metrics (an operator's probe on the
    host, or the token's holder) and the log; a stranger learns only that it is not ready."""
    reason = await anyio.to_thread.run_sync(service.not_ready_reason, request.app.state.engine)
    if reason is None:
        return JSONResponse({"status": "ready"})
    if not may_read_ops(request):
        log.warning("not ready: %s", reason)
        return JSONResponse({"status": "unavailable", "reason": NOT_SAID}, status_code=503)
    return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)


NOT_SAID = "see the server's log, or ask from an address in STEPWISE_METRICS_ALLOW or with STEPWISE_METRICS_TOKEN"


def may_read_ops(request: Request) -> bool:
    """Whether the caller may read /metrics, and so why the server is not ready (the database's
    host, its driver's error, the schema's revisions)."""
    client = request.client.host if request.client else None
    return service.may_read_metrics(request.app.state.settings, client, request.headers.get("authorization"))


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    if not may_read_ops(request):
        return JSONResponse(
            {"detail": "metrics are for the addresses in STEPWISE_METRICS_ALLOW or holders of STEPWISE_METRICS_TOKEN"},
            status_code=403,
        )
    body = await anyio.to_thread.run_sync(exposition, request.app.state.session_factory)
    return Response(body, media_type=CONTENT_TYPE)
