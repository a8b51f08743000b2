"""A researcher starts a round in Chromium and watches it to the end; a labeler cannot.

The round runs in the server's own worker thread, as on a fresh embedded install. The server
here is the test's own, on a database and a models directory of its own, so that no other
server's worker can take the round.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import create_db_engine, create_session_factory, session_scope
from app.migrate import upgrade
from app.models import Role, Round, RoundPick
from tests.browser.conftest import ROOT, _free_port, _wait_until_up, login, screenshot, watched_page
from tests.conftest import PASSWORD, make_user
from tests.rounds.conftest import kill_marked_processes, synthetic_project

pytestmark = pytest.mark.slow
RUN = uuid.uuid4().hex


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, sessionmaker[Session], int]]:
    """(base URL, session factory, project id) of a fresh install with one project."""
    home = tmp_path_factory.mktemp("research")
    url = f"sqlite:///{home / 'stepwise.db'}"
    upgrade(url)
    engine = create_db_engine(Settings(database_url=url))
    factory = create_session_factory(engine)
    make_user(factory, "rita", Role.researcher)
    make_user(factory, "ann", Role.labeler)
    project = synthetic_project(factory, "arithmetic")
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": url, "STEPWISE_ENV": "test", "STEPWISE_TEST_RUN": RUN,
           "STEPWISE_MODELS_DIR": str(home / "models"), "STEPWISE_LOCAL_WORKER": "true",
           "STEPWISE_WORKER_POLL_S": "1"}
    log_path = home / "uvicorn.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base_url, server, log_path)
        yield base_url, factory, project.id
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        kill_marked_processes(RUN)
        engine.dispose()


@pytest.fixture
def research_page(browser: Browser, site) -> Iterator[Page]:  # type: ignore[no-untyped-def]
    base_url, _, _ = site
    with watched_page(browser, base_url) as page:
        yield page


def rounds(factory: sessionmaker[Session]) -> int:
    with session_scope(factory) as session:
        return session.scalar(select(func.count()).select_from(Round)) or 0


def test_a_labeler_is_refused_the_button_and_the_post(research_page: Page, site) -> None:  # type: ignore[no-untyped-def]
    _, factory, project_id = site
    page = research_page
    login(page, "ann", "/label")
    page.goto(f"/research/projects/{project_id}")
    expect(page.get_by_text("this needs the role")).to_be_visible()
    expect(page.get_by_role("button", name="Start a round")).to_have_count(0)
    screenshot(page, "research_labeler_refused.png")
    # Even a hand-made form post with the labeler's own valid CSRF token is refused.
    page.goto("/label")
    status = page.evaluate(
        """async (url) => {
            const token = document.querySelector('meta[name="csrf-token"]').content;
            const body = new URLSearchParams({csrf_token: token});
            return (await fetch(url, {method: "POST", body, credentials: "same-origin"})).status;
        }""",
        f"/research/projects/{project_id}/rounds",
    )
    assert status == 403
    assert rounds(factory) == 0


def test_a_researcher_starts_a_round_and_watches_it_finish(research_page: Page, site) -> None:  # type: ignore[no-untyped-def]
    base_url, factory, project_id = site
    page = research_page
    login(page, "rita", "/research")
    page.get_by_role("link", name="arithmetic").click()
    expect(page.get_by_role("heading", name="arithmetic: rounds")).to_be_visible()
    expect(page.get_by_text("No rounds yet.")).to_be_visible()
    page.get_by_role("button", name="Start a round").click()
    expect(page.get_by_text("Round queued: a worker will pick it up.")).to_be_visible()
    expect(page.get_by_role("button", name="Start a round")).to_be_disabled()

    # The bar moves while the round runs (polled, no reload), then the page shows the end.
    status = page.locator('tr[data-round] [data-field="status"]').first
    expect(status).to_have_text(re.compile("running|done"), timeout=120_000)
    screenshot(page, "research_round_running.png")
    expect(status).to_have_text("done", timeout=600_000)
    expect(page.get_by_text("Round queued")).to_have_count(0)
    expect(page.locator("tr[data-round]").first.get_by_text("promoted")).to_be_visible()
    expect(page.get_by_text("100%")).to_be_visible()
    expect(page.locator("tr.served")).to_have_count(1)
    expect(page.locator("svg.line-chart").first).to_be_visible()
    screenshot(page, "research_round_done.png")

    page.get_by_role("link", name="Picks").first.click()
    expect(page.get_by_role("heading", name="Round 1")).to_be_visible()
    # The loss the round's training logged, read from its checkpoint.
    expect(page.get_by_role("img", name="Training loss by step")).to_be_visible()
    picks = page.locator("li.pick")
    expect(picks).to_have_count(12)
    expect(picks.first.locator('[data-field="reason"]')).to_have_text("convincing wrong")
    # Final answers are LaTeX without delimiters; the inspector shows them as math.
    expect(picks.first.locator(".answer-math .katex").first).to_be_visible()
    picks.first.locator("summary").click()
    expect(picks.first.locator("ol.steps li").first).to_be_visible()
    screenshot(page, "research_picks.png")

    # What the labeler gets next is the round's first pick.
    with session_scope(factory) as session:
        first = session.scalar(select(RoundPick.solution_id).order_by(RoundPick.rank).limit(1))
    token = page.request.post(f"{base_url}/api/v1/auth/tokens", data={"username": "ann", "password": PASSWORD})
    headers = {"Authorization": f"Bearer {token.json()['token']}"}
    task = page.request.post(f"{base_url}/api/v1/projects/{project_id}/tasks/next", headers=headers).json()
    assert task["task"]["solution"]["id"] == first
