"""Two model versions compared on the same held-out labels: the paired difference of each metric
with its interval, made by `stepwise rounds compare`, kept for the research page and the API."""

from __future__ import annotations

import json

import pytest
import torch
from sqlalchemy import func, select

from active_learning.config import BOOTSTRAP_SAMPLES
from active_learning.data import load_examples
from active_learning.evaluate import compare_examples, evaluate_examples
from active_learning.model import load_base, load_checkpoint, save_checkpoint
from active_learning.synthetic import iter_candidates, to_prm800k
from app.db import session_scope
from app.models import ModelComparison, ModelVersion
from tests.cli.conftest import refused, stepwise  # noqa: F401  (stepwise: a fixture)
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.rounds.conftest import synthetic_project


def tiny_checkpoint(directory, seed: int):  # type: ignore[no-untyped-def]
    """An untrained tiny PRM; two seeds give two models that score differently."""
    torch.manual_seed(seed)
    model, tokenizer = load_base("tiny")
    save_checkpoint(model, tokenizer, directory, {"base": "tiny", "data_hash": f"seed-{seed}"})
    return directory


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("versions")
    return [tiny_checkpoint(root / f"seed-{seed}", seed) for seed in (0, 1)]


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


def add_versions(factory, project_id: int, paths, *, serve_last: bool = True) -> list[int]:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        versions = [ModelVersion(project_id=project_id, path=str(path), base="tiny", data_hash=path.name,
                                 train_labels=0, is_served=serve_last and i == len(paths) - 1)
                    for i, path in enumerate(paths)]
        session.add_all(versions)
        session.flush()
        return [v.id for v in versions]


def comparisons(factory) -> int:  # type: ignore[no-untyped-def]
    with session_scope(factory) as session:
        return session.scalar(select(func.count()).select_from(ModelComparison)) or 0


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
    assert results["best_of_n"] is None or "difference" in results["best_of_n"]
    assert as_json["heldout_labels"] > 0 and BOOTSTRAP_SAMPLES > 0

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
    assert "step AUROC" in section and ("no clear difference" in section or "better" in section)


def test_a_comparison_that_cannot_be_made_says_why_and_stores_nothing(
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

    refused(compare("cmp", old, old), "compare two different model versions")
    refused(compare("cmp", old, 9999), "no model version 9999 in this project")
    refused(compare("cmp", old, other), f"no model version {other} in this project")
    refused(compare("cmp", old, "newest"), "'newest' is not a model version")
    refused(compare("cmp", broken, old), "version A's checkpoint at", "cannot be loaded")
    refused(compare("bare", other, "served"), "the project has no held-out labels yet")
    refused(compare("nope", old, served), "nope")
    make_project(session_factory, "unserved")
    refused(compare("unserved", old, "served"), "serves no model yet")
    assert comparisons(session_factory) == 0
