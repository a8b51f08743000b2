"""Simulated labelers over loopback: log in, then next → submit, bounded in count and time."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import aiohttp
import orjson
import psycopg

from load_setup import PASSWORD, CpuMeter, Seeded

JSON_HEADERS = {"Content-Type": "application/json"}
CONNECTION_ATTEMPTS = 3


def latency(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"count": 0}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "p50_ms": at(0.50),
        "p99_ms": at(0.99),
        "max_ms": round(ordered[-1], 2),
    }


@dataclass
class Tally:
    samples: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=dict)
    # (labeler, idempotency key, label id, solution) of every label the server acknowledged.
    receipts: list[tuple[int, str, int, int]] = field(default_factory=list)
    unacknowledged: int = 0
    queue_empty: bool = False

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


@dataclass
class Window:
    """The timed part of a phase: labelers start together and begin no new round after `end`."""

    start: float
    end: float


async def _call(
    http: aiohttp.ClientSession,
    url: str,
    tally: Tally,
    kind: str,
    headers: dict[str, str],
    payload: object = None,
) -> tuple[int, dict]:  # type: ignore[type-arg]
    """POST and time it. A dropped connection is retried, as a real client would: every call
    here is safe to repeat (next-task hands back the held lease, submit has its key)."""
    data = orjson.dumps(payload) if payload is not None else None
    start = time.perf_counter()
    for attempt in range(CONNECTION_ATTEMPTS):
        try:
            async with http.post(url, headers=headers, data=data) as response:
                body = await response.read()
            break
        except aiohttp.ClientConnectionError:
            if attempt == CONNECTION_ATTEMPTS - 1:
                raise
            tally.error(f"{kind} connection dropped, retried")
            await asyncio.sleep(0.2)
    tally.samples[kind].append((time.perf_counter() - start) * 1000)
    if response.content_type != "application/json":
        return response.status, {"text": body[:500].decode(errors="replace")}
    return response.status, orjson.loads(body)


def make_label(n_steps: int, rng: random.Random) -> dict[str, object]:
    """Ratings as a first_error labeler gives them: all fine, or fine up to the first error."""
    if rng.random() < 0.5:
        ratings, reason = [rng.choice((1, 1, 0)) for _ in range(n_steps)], "solution"
    else:
        ratings, reason = [1] * rng.randrange(n_steps) + [-1], "found_error"
    return {
        "idempotency_key": uuid.uuid4().hex,
        "ratings": [{"rating": r} for r in ratings],
        "finish_reason": reason,
        "total_time_ms": rng.randint(5_000, 120_000),
    }


async def log_in(
    http: aiohttp.ClientSession, base: str, username: str, tally: Tally
) -> dict[str, str] | None:
    credentials = {"username": username, "password": PASSWORD, "name": "bench"}
    try:
        status, body = await _call(
            http, f"{base}/api/v1/auth/tokens", tally, "login", JSON_HEADERS, credentials
        )
    except aiohttp.ClientConnectionError as exc:
        tally.error(f"login failed: {type(exc).__name__}")
        return None
    if status != 201:
        tally.error(f"login {status}: {body}")
        return None
    return {**JSON_HEADERS, "Authorization": f"Bearer {body['token']}"}


async def label_until(
    http: aiohttp.ClientSession,
    base: str,
    project_id: int,
    user_id: int,
    headers: dict[str, str],
    window: Window,
    args: argparse.Namespace,
    tally: Tally,
    rng: random.Random,
) -> None:
    """One labeler: next → submit, round after round, bounded in count and in time."""
    for _ in range(args.max_iterations):
        if time.monotonic() >= window.end:
            return
        status, body = await _call(
            http, f"{base}/api/v1/projects/{project_id}/tasks/next", tally, "next", headers
        )
        if status != 200:
            tally.error(f"next {status}")
            return
        task = body["task"]
        if task is None:
            tally.queue_empty = True
            return
        payload = make_label(len(task["solution"]["steps"]), rng)
        url = f"{base}/api/v1/assignments/{task['assignment_id']}/submit"
        try:
            status, receipt = await _call(http, url, tally, "submit", headers, payload)
        except (aiohttp.ClientError, TimeoutError):
            # The label may or may not have been stored: the integrity check allows for it.
            tally.unacknowledged += 1
            raise
        if status != 200 or receipt["duplicate"]:
            tally.error(f"submit {status}")
            return
        solution_id = task["solution"]["id"]
        tally.receipts.append((user_id, str(payload["idempotency_key"]), receipt["label_id"], solution_id))
        if rng.random() < args.retry_fraction:
            # A client that lost the answer sends the same label again: it must get the same receipt.
            status, again = await _call(http, url, tally, "retry", headers, payload)
            if status != 200 or not again["duplicate"] or again["label_id"] != receipt["label_id"]:
                tally.error(f"retry {status}")


async def knock_until(
    http: aiohttp.ClientSession, url: str, window: Window, args: argparse.Namespace, tally: Tally
) -> None:
    for _ in range(args.max_iterations):
        if time.monotonic() >= window.end:
            return
        status, _ = await _call(http, url, tally, "floor", JSON_HEADERS)
        if status != 401:
            tally.error(f"floor {status}")
            return


def http_session(concurrency: int) -> aiohttp.ClientSession:
    # Idle connections are dropped before uvicorn's 5 s keep-alive ends them under our feet.
    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=4)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60))


async def load_phase(
    base: str,
    seeded: Seeded,
    usernames: list[str],
    args: argparse.Namespace,
    seconds: float,
    meter: CpuMeter,
) -> tuple[Tally, float]:
    tally = Tally()
    rng = random.Random(args.seed * 1000 + len(usernames))
    async with http_session(len(usernames)) as http:
        logins = await asyncio.gather(*(log_in(http, base, name, tally) for name in usernames))
        window = Window(time.monotonic(), time.monotonic() + seconds)
        meter.start()
        loops = [
            label_until(
                http,
                base,
                seeded.project_id,
                seeded.users[name],
                headers,
                window,
                args,
                tally,
                random.Random(rng.random()),
            )
            for name, headers in zip(usernames, logins, strict=True)
            if headers is not None
        ]
        for result in await asyncio.gather(*loops, return_exceptions=True):
            if isinstance(result, BaseException):
                tally.error(type(result).__name__)
        meter.stop()
        return tally, time.monotonic() - window.start


async def floor_phase(
    base: str, concurrency: int, args: argparse.Namespace, meter: CpuMeter
) -> tuple[Tally, float]:
    tally = Tally()
    # No credentials: the answer is a 401 made without touching the database.
    url = f"{base}/api/v1/assignments/0/release"
    async with http_session(concurrency) as http:
        window = Window(time.monotonic(), time.monotonic() + args.floor_seconds)
        meter.start()
        await asyncio.gather(
            *(knock_until(http, url, window, args, tally) for _ in range(concurrency))
        )
        meter.stop()
        return tally, time.monotonic() - window.start


def verify(url: str, project_id: int, overlap: int, tallies: list[Tally]) -> dict[str, object]:
    """Every acknowledged label stored exactly once, under its own id, labeler and solution;
    nothing over the overlap."""
    receipts = {
        (user, key): (label_id, solution)
        for tally in tallies
        for user, key, label_id, solution in tally.receipts
    }
    unacknowledged = sum(tally.unacknowledged for tally in tallies)
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT id, user_id, idempotency_key, solution_id FROM labels WHERE project_id = %s",
            (project_id,),
        ).fetchall()
        over_overlap = connection.execute(
            "SELECT count(*) FROM (SELECT solution_id FROM labels WHERE project_id = %s"
            " GROUP BY solution_id HAVING count(*) > %s) AS s",
            (project_id, overlap),
        ).fetchone()[0]  # type: ignore[index]
        twice_by_one = connection.execute(
            "SELECT count(*) FROM (SELECT 1 FROM labels WHERE project_id = %s"
            " GROUP BY solution_id, user_id HAVING count(*) > 1) AS s",
            (project_id,),
        ).fetchone()[0]  # type: ignore[index]
        done = connection.execute(
            "SELECT count(*) FROM assignments WHERE project_id = %s AND status = 'done'",
            (project_id,),
        ).fetchone()[0]  # type: ignore[index]
    stored: dict[tuple[int, str], tuple[int, int]] = {}
    for label_id, user, key, _ in rows:
        count, first = stored.get((user, key), (0, label_id))
        stored[(user, key)] = (count + 1, min(first, label_id))
    owners = {label_id: (user, solution) for label_id, user, _, solution in rows}
    missing = sum(1 for key in receipts if key not in stored)
    duplicated = sum(1 for key in receipts if stored.get(key, (1,))[0] > 1)
    wrong_id = sum(
        1 for key, (label_id, _) in receipts.items() if key in stored and stored[key][1] != label_id
    )
    wrong_labeler = sum(
        1 for (user, _), (label_id, _) in receipts.items() if owners.get(label_id, (user,))[0] != user
    )
    wrong_solution = sum(
        1
        for (label_id, solution) in receipts.values()
        if owners.get(label_id, (0, solution))[1] != solution
    )
    stray = sum(count for key, (count, _) in stored.items() if key not in receipts)
    return {
        "acknowledged": len(receipts),
        "stored": len(rows),
        "missing": missing,
        "stored_more_than_once": duplicated,
        "stored_under_another_id": wrong_id,
        "attributed_to_another_labeler": wrong_labeler,
        "stored_for_another_solution": wrong_solution,
        "stored_without_acknowledgement": stray,
        "submits_without_answer": unacknowledged,
        "solutions_over_overlap": over_overlap,
        "solutions_labeled_twice_by_one_labeler": twice_by_one,
        "assignments_done": done,
        "ok": missing == duplicated == wrong_id == wrong_labeler == wrong_solution == 0
        and over_overlap == twice_by_one == 0
        and stray <= unacknowledged
        and done == len(rows),
    }
