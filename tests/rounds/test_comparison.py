"""Two model versions compared on the same held-out labels: the paired difference of each metric
with its interval, made by `stepwise rounds compare`, kept for the research page and the API."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from active_learning.data import load_examples
from active_learning.evaluate import compare_examples, evaluate_examples
from active_learning.model import load_checkpoint
from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.models import ComparisonStatus, ModelComparison, utcnow
from app.rounds.comparison import (
    MAX_ATTEMPTS,
    request_comparison,
    run_comparison,
    runnable_comparisons,
    stale_claim,
)
from app.rounds.service import round_settings
from app.rounds.worker import LocalWorker
from tests.cli.conftest import refused, stepwise  # noqa: F401  (stepwise: a fixture)
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.rounds.conftest import add_versions, synthetic_project, untrained_checkpoint

STEPWISE = str(Path(sys.executable).with_name("stepwise"))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("versions")
    return [untrained_checkpoint(root / f"seed-{seed}", seed) for seed in (0, 1)]


def test_the_difference_is_paired_and_a_model_against_itself_differs_by_nothing(checkpoints) -> None:  # type: ignore[no-untyped-def]
    examples = load_examples([to_prm800k(c) for c in iter_candidates(12, 3, seed=2)])
    a, b = (load_checkpoint(path)[:2] for path in checkpoints)
    same = compare_examples(a, a, examples, bootstrap=200)
    assert same["difference"]["step_auroc"] == 0 and same["difference_ci95"]["step_auroc"] == [0.0, 0.0]

    compared = compare_examples(a, b, examples, bootstrap=200)
    alone = evaluate_examples(*a, examples)
    assert compared["a"]["step_auroc"] == pytest.approx(alone["step_auroc"])
    difference = compared["a"]["step_auroc"] - compared["b"]["step_auroc"]
    assert compared["difference"]["step_auroc"] == pytest.approx(difference) and difference != 0
    low, high = compared["difference_ci95"]["step_auroc"]
    assert low <= difference <= high


def test_compare_two_versions_from_the_command_line_and_read_it_on_the_page(
    stepwise, database_url, session_factory, client, checkpoints  # type: ignore[no-untyped-def]
) -> None:
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)

    shown = stepwise(database_url, "rounds", "compare", "--project", "cmp", old, "served")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"version {old} (A) against version {served} (B) on ")
    assert "step AUROC\t" in shown.stdout and "first-error F1\t" in shown.stdout
    as_json = json.loads(stepwise(database_url, "rounds", "compare", "--project", "cmp", old, served, "--json").stdout)
    assert (as_json["version_a_id"], as_json["version_b_id"]) == (old, served)
    results = as_json["results"]
    assert results["difference"]["step_auroc"] == pytest.approx(results["a"]["step_auroc"] - results["b"]["step_auroc"])
    assert len(results["difference_ci95"]["step_auroc"]) == 2
    bon = results["best_of_n"]
    assert bon["problems"] > 0 and bon["difference"] == pytest.approx(bon["a"] - bon["b"])
    assert len(bon["difference_ci95"]) == 2 and as_json["heldout_labels"] > 0
    # How both were measured is kept with the result: the project's settings may change after.
    positions = json.loads((Path(checkpoints[0]) / "config.json").read_text())["max_position_embeddings"]
    with session_scope(session_factory) as session:
        window = min(round_settings(session, project.id).max_length, positions)
    assert (results["neutral_as_correct"], results["max_length"]) == (True, window)

    make_user(session_factory, "rita", "researcher")
    make_user(session_factory, "ann", "labeler")
    listed = client.get(f"/api/v1/projects/{project.id}/model-comparisons", headers=api_headers(client, "rita"))
    assert listed.status_code == 200 and [c["id"] for c in listed.json()] == [as_json["id"], as_json["id"] - 1]
    assert client.get(f"/api/v1/projects/{project.id}/model-comparisons",
                      headers=api_headers(client, "ann")).status_code == 403
    browser_login(client, "rita")
    page = client.get(f"/research/projects/{project.id}").text
    section = page.split('id="comparisons"', 1)[1].split("</section>", 1)[0]
    assert section.count(f"Version {old} (A) against version {served} (B)") == 2
    assert f"a neutral step (0) counted as correct, windows of {window:,} tokens" in section
    verdict = re.search(r"step AUROC</td>.*?<td>(.*?)</td>", section, re.S).group(1)
    assert any(word in verdict for word in ("no clear difference", "A better", "B better"))


def test_a_comparison_that_cannot_be_made_says_why(
    stepwise, database_url, session_factory, checkpoints, tmp_path  # type: ignore[no-untyped-def]
) -> None:
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)
    bare = make_project(session_factory, "bare")
    other, _ = add_versions(session_factory, bare.id, checkpoints)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_text("{}")
    broken, _ = add_versions(session_factory, project.id, [damaged, checkpoints[0]], serve_last=False)

    def compare(*args: object):  # type: ignore[no-untyped-def]
        return stepwise(database_url, "rounds", "compare", "--project", *args)

    # Refused before anything is queued.
    refused(compare("cmp", old, old), "compare two different model versions")
    refused(compare("cmp", old, 9999), "no model version 9999 in this project")
    refused(compare("cmp", old, other), f"no model version {other} in this project")
    refused(compare("cmp", old, "newest"), "'newest' is not a model version")
    refused(compare("nope", old, served), "nope")
    make_project(session_factory, "unserved")
    refused(compare("unserved", old, "served"), "serves no model yet")
    assert statuses(session_factory) == []
    # Measured and failed: kept with the reason, for the page.
    refused(compare("cmp", broken, old), "failed: version A's checkpoint at", "cannot be loaded")
    refused(compare("bare", other, "served"), "failed: the project has no held-out labels yet")
    assert [status for status, _ in statuses(session_factory)] == ["failed", "failed"]


def statuses(factory) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return [(c.status.value, c.message) for c in session.scalars(select(ModelComparison).order_by(ModelComparison.id))]


def test_researchers_queue_a_comparison_that_a_worker_measures(client, session_factory, checkpoints) -> None:  # type: ignore[no-untyped-def]
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)
    for name, role in [("rita", "researcher"), ("max", "manager"), ("ann", "labeler")]:
        make_user(session_factory, name, role)
    url = f"/api/v1/projects/{project.id}/model-comparisons"
    rita = api_headers(client, "rita")
    for who in ("max", "ann"):
        assert client.post(url, headers=api_headers(client, who),
                           json={"version_a_id": old, "version_b_id": served}).status_code == 403
    for bad, code in [({"version_a_id": old}, 422), ({"version_a_id": old, "version_b_id": old}, 422),
                      ({"version_a_id": old, "version_b_id": 9999}, 404),
                      ({"version_a_id": old, "version_b_id": "x"}, 422),
                      ({"version_a_id": True, "version_b_id": served}, 422),
                      ({"version_a_id": old, "version_b_id": served, "extra": 1}, 422)]:
        assert client.post(url, headers=rita, json=bad).status_code == code, bad
    assert statuses(session_factory) == []

    queued = client.post(url, headers=rita, json={"version_a_id": old, "version_b_id": served})
    assert queued.status_code == 202 and queued.json()["status"] == "queued" and queued.json()["results"] == {}
    again = client.post(url, headers=rita, json={"version_a_id": old, "version_b_id": served})
    assert again.json()["id"] == queued.json()["id"]

    LocalWorker(session_factory).run_once()
    done = client.get(f"/api/v1/model-comparisons/{queued.json()['id']}", headers=api_headers(client, "max")).json()
    assert done["status"] == "done" and done["heldout_labels"] > 0 and done["finished_at"] is not None
    assert done["results"]["difference"]["step_auroc"] == pytest.approx(
        done["results"]["a"]["step_auroc"] - done["results"]["b"]["step_auroc"])
    assert client.get("/api/v1/model-comparisons/9999", headers=rita).status_code == 404
    assert client.get(f"/api/v1/model-comparisons/{done['id']}", headers=api_headers(client, "ann")).status_code == 403


def test_the_research_page_queues_a_comparison_and_shows_it(client, session_factory, checkpoints) -> None:  # type: ignore[no-untyped-def]
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)
    make_user(session_factory, "rita", "researcher")
    make_user(session_factory, "max", "manager")
    csrf = browser_login(client, "rita")
    page_url = f"/research/projects/{project.id}"
    form = client.get(page_url).text.split('class="form-row compare-form"', 1)[1].split("</form>", 1)[0]
    assert f'<option value="{old}" selected>' in form and "served" in form

    same = client.post(f"{page_url}/comparisons", data={"csrf_token": csrf, "version_a": old, "version_b": old})
    assert same.status_code == 422 and "Not compared: compare two different model versions." in same.text
    for a, b in (("", "x"), ("²", str(served)), (str(2**40), str(served))):
        blank = client.post(f"{page_url}/comparisons", data={"csrf_token": csrf, "version_a": a, "version_b": b})
        assert blank.status_code == 422 and "Choose two model versions to compare." in blank.text
    assert statuses(session_factory) == []

    queued = client.post(f"{page_url}/comparisons", data={"csrf_token": csrf, "version_a": old, "version_b": served},
                         follow_redirects=False)
    assert queued.status_code == 303 and queued.headers["location"].endswith("?compared=1#comparisons")
    shown = client.get(queued.headers["location"]).text
    assert "Comparison queued" in shown and "a worker measures both versions; the result appears here when it is ready" in shown
    LocalWorker(session_factory).run_once()
    measured = client.get(page_url).text.split('id="comparisons"', 1)[1].split("</section>", 1)[0]
    assert f"Version {old} (A) against version {served} (B)</strong>" in measured and "step AUROC" in measured

    browser_login(client, "max")
    read_only = client.get(page_url).text
    assert "compare-form" not in read_only and "step AUROC" in read_only
    assert client.post(f"{page_url}/comparisons", data={"version_a": old, "version_b": served}).status_code == 403


def test_a_comparison_whose_worker_died_is_measured_again_then_given_up(session_factory, checkpoints) -> None:  # type: ignore[no-untyped-def]
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)
    with session_scope(session_factory) as session:
        comparison_id = request_comparison(session, project.id, old, served).id
    with session_scope(session_factory) as session:
        session.execute(update(ModelComparison).values(status=ComparisonStatus.running, attempts=1,
                                                       claimed_at=utcnow()))
    with session_scope(session_factory) as session:
        assert runnable_comparisons(session) == []
    assert run_comparison(session_factory, comparison_id) is None
    with session_scope(session_factory) as session:
        session.execute(update(ModelComparison).values(claimed_at=utcnow() - stale_claim() - timedelta(minutes=1)))
    with session_scope(session_factory) as session:
        assert runnable_comparisons(session) == [comparison_id]
    assert run_comparison(session_factory, comparison_id) == ComparisonStatus.done
    with session_scope(session_factory) as session:
        comparison_id = request_comparison(session, project.id, served, old).id
        session.flush()
        session.execute(update(ModelComparison).where(ModelComparison.id == comparison_id).values(
            status=ComparisonStatus.running, attempts=MAX_ATTEMPTS, claimed_at=utcnow() - stale_claim() * 2))
    assert run_comparison(session_factory, comparison_id) == ComparisonStatus.failed
    assert statuses(session_factory)[-1] == ("failed", f"its workers died {MAX_ATTEMPTS} times while measuring")


def _queued_comparison(session_factory, checkpoints) -> int:  # type: ignore[no-untyped-def]
    """A project's two versions, their comparison queued; its id."""
    project = synthetic_project(session_factory, "cmp")
    old, served = add_versions(session_factory, project.id, checkpoints)
    with session_scope(session_factory) as session:
        return request_comparison(session, project.id, old, served).id


def test_an_interrupted_comparison_goes_back_to_the_queue(session_factory, checkpoints, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Ctrl-C on `rounds compare`: left "running", the next one would wait for its claim to go stale.
    comparison_id = _queued_comparison(session_factory, checkpoints)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("app.rounds.comparison._measure_now", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_comparison(session_factory, comparison_id)
    with session_scope(session_factory) as session:
        assert runnable_comparisons(session) == [comparison_id]
        assert session.get(ModelComparison, comparison_id).status == ComparisonStatus.queued


def test_the_measuring_worker_keeps_its_claim_fresh(session_factory, checkpoints, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A claim is as short as a round's lease: measuring for longer than that must not let a
    # second worker take the comparison, while a worker killed mid-measure loses it as soon.
    comparison_id = _queued_comparison(session_factory, checkpoints)
    monkeypatch.setattr("app.rounds.comparison.stale_claim", lambda: timedelta(seconds=0.6))
    seen: list[bool] = []

    def measuring(*args: object) -> tuple[int, int, dict]:
        for _ in range(6):
            time.sleep(0.3)
            with session_scope(session_factory) as session:
                seen.append(comparison_id in runnable_comparisons(session))
        return 0, 0, {}

    monkeypatch.setattr("app.rounds.comparison._measure_now", measuring)
    assert run_comparison(session_factory, comparison_id) == ComparisonStatus.done
    assert seen == [False] * 6
    with session_scope(session_factory) as session:
        session.execute(update(ModelComparison).values(status=ComparisonStatus.running, claimed_at=utcnow()))
    time.sleep(0.7)
    with session_scope(session_factory) as session:
        assert runnable_comparisons(session) == [comparison_id]


def test_a_worker_that_lost_its_claim_records_nothing(session_factory, checkpoints, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Its renewals held up past the claim (a database failover), another worker took it over:
    # the first must neither renew the claim nor write its results over the new holder's.
    comparison_id = _queued_comparison(session_factory, checkpoints)
    monkeypatch.setattr("app.rounds.comparison.stale_claim", lambda: timedelta(seconds=0.6))

    def taken_over(*args: object) -> tuple[int, int, dict]:
        with session_scope(session_factory) as session:
            session.execute(update(ModelComparison).values(claimed_by="another-worker", claimed_at=utcnow()))
        time.sleep(0.5)
        return 1, 1, {"from": "the first worker"}

    monkeypatch.setattr("app.rounds.comparison._measure_now", taken_over)
    assert run_comparison(session_factory, comparison_id) is None
    with session_scope(session_factory) as session:
        comparison = session.get(ModelComparison, comparison_id)
        assert (comparison.status, comparison.claimed_by, comparison.results) == (
            ComparisonStatus.running, "another-worker", {})


def test_stepwise_worker_measures_a_queued_comparison(session_factory, database_url, checkpoints, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _queued_comparison(session_factory, checkpoints)
    env = {**os.environ, "DATABASE_URL": database_url, "STEPWISE_MODELS_DIR": str(tmp_path / "models")}
    done = subprocess.run([STEPWISE, "worker", "--once"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [status for status, _ in statuses(session_factory)] == ["done"]


def test_a_comparison_of_a_version_with_itself_names_the_field_to_change(client, session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "same")
    make_user(session_factory, "rita", "researcher")
    same = client.post(f"/api/v1/projects/{project.id}/model-comparisons", headers=api_headers(client, "rita"),
                          json={"version_a_id": 3, "version_b_id": 3})
    assert same.status_code == 422
    assert same.json()["errors"] == [{"field": "version_b_id", "message": "compare two different model versions"}]
