"""Browser tests: a real uvicorn server on a loopback port, driven by Debian's Chromium.

One server and one browser serve the whole session; every test gets its own browser context
(fresh cookies and storage) and, through the shared fixtures, emptied tables. The server runs
on the tests' SQLite database, the embedded default that labelers meet first.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.labeling.queue import add_slots
from app.migrate import upgrade
from app.models import Problem, Project, Solution
from labeler_ui import vendor_assets
from tests.conftest import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "tests" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def backend() -> str:
    """The server runs on SQLite, so the builders write there too."""
    return "sqlite"


@pytest.fixture(scope="session")
def live_server(sqlite_url: str, migrated: dict[str, str], tmp_path_factory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    for package in vendor_assets.PACKAGES:
        vendor_assets.fetch(package)
    if "sqlite" not in migrated:
        upgrade(sqlite_url)
        migrated["sqlite"] = sqlite_url
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "uvicorn.log"
    env = {**os.environ, "DATABASE_URL": sqlite_url, "STEPWISE_ENV": "test",
           "STEPWISE_FIGURES_DIR": str(tmp_path_factory.mktemp("figures"))}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base_url, process, log_path)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"uvicorn exited with {process.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{base_url}/login", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.1)
    pytest.fail(f"uvicorn did not answer on {base_url} within 60 s:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@contextmanager
def watched_page(browser: Browser, base_url: str, **context_options: Any) -> Iterator[Page]:
    """A page in a fresh context (a desktop's 1360x900 unless `context_options` say otherwise);
    fails the test on any uncaught script error or off-site request."""
    context = browser.new_context(base_url=base_url, **{"viewport": {"width": 1360, "height": 900}, **context_options})
    page = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "request",
        lambda request: None if request.url.startswith(base_url) else foreign.append(request.url),
    )
    yield page
    context.close()
    assert not errors, f"script errors on the page: {errors}"
    assert not foreign, f"the page fetched from other sites: {foreign}"


@pytest.fixture
def page(browser: Browser, live_server: str, engine) -> Iterator[Page]:  # type: ignore[no-untyped-def]
    with watched_page(browser, live_server) as page:
        yield page


def login(page: Page, username: str, next_path: str) -> None:
    page.goto(f"/login?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**{next_path}")


def add_member(page: Page, project_id: int, manager: str, labeler: str) -> None:
    """`manager` logs in and adds `labeler` to the project on its page."""
    login(page, manager, f"/manage/projects/{project_id}")
    page.get_by_label("Add a labeler by username").fill(labeler)
    page.get_by_role("button", name="Add member").click()
    expect(page.get_by_text(f"{labeler} is now a member.")).to_be_visible()


def add_solution(
    factory: sessionmaker[Session],
    project: Project,
    steps: list[str],
    *,
    statement: str = "What is $1+1$?",
    answer: str | None = "2",
    priority: float = 0.0,
) -> int:
    """A problem with one solution, queued for labeling; higher priority is served first."""
    with session_scope(factory) as session:
        problem = Problem(
            project_id=project.id, statement=statement, answer=answer, content_hash=uuid.uuid4().hex
        )
        session.add(problem)
        session.flush()
        solution = Solution(
            project_id=project.id,
            problem_id=problem.id,
            steps=steps,
            priority=priority,
            content_hash=uuid.uuid4().hex,
        )
        session.add(solution)
        session.flush()
        add_slots(session, project, [(solution.id, priority, None)])
        return solution.id


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    # A full-page shot of a scrolled page draws the sticky header mid-page.
    page.evaluate("window.scrollTo({top: 0, behavior: 'instant'})")
    page.evaluate("document.fonts.ready.then(() => true)")
    page.screenshot(path=str(path), full_page=True, animations="disabled")
    return path
