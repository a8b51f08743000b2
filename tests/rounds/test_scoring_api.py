"""POST /api/v1/model-versions/{id}/score: a stored model scores candidates sent by others."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from active_learning.data import Solution
from active_learning.model import load_checkpoint
from active_learning.score import score_solutions
from app.config import Settings
from app.db import session_scope
from app.main import create_app
from app.models import ModelVersion
from tests.conftest import PASSWORD, api_headers, make_project, make_user
from tests.rounds.conftest import untrained_checkpoint

PROBLEM = "Start with 10. Subtract 2, then multiply by 3."
# A bound on waits for what should come at once; reached only when it does not.
ANSWER_BOUND_S = 30
CANDIDATES = [["$10 - 2 = 8$.", "$8 \\times 3 = 24$.\n\n# Answer\n\n24"], ["$10 - 2 = 7$.", "# Answer\n\n21"]]


def _version(factory: sessionmaker[Session], path: Path) -> int:
    project = make_project(factory, "scored")
    with session_scope(factory) as session:
        version = ModelVersion(project_id=project.id, path=str(path), base="tiny", data_hash="abc", train_labels=10)
        session.add(version)
        session.flush()
        return version.id


def test_researchers_score_candidates_as_the_scorer_does(client, session_factory, checkpoint: Path, backend: str) -> None:  # type: ignore[no-untyped-def]
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "rita", "researcher")
    response = client.post(f"/api/v1/model-versions/{version_id}/score", headers=api_headers(client, "rita"),
                           json={"problem": PROBLEM, "solutions": [{"steps": s} for s in CANDIDATES]})
    assert response.status_code == 200, response.text
    body = response.json()
    model, tokenizer, _ = load_checkpoint(checkpoint)
    expected = score_solutions(model, tokenizer, [Solution("p", PROBLEM, steps) for steps in CANDIDATES], max_length=1024)
    assert body["model_version_id"] == version_id and body["max_length"] == 1024
    for got, want in zip(body["solutions"], expected, strict=True):
        assert got["step_scores"] == pytest.approx(want.step_scores, abs=1e-5)
        assert (got["product"], got["minimum"]) == pytest.approx((want.product, want.minimum), abs=1e-5)
        assert got["truncated"] is False

    # A step longer than the window alone has no score, and the candidate says so.
    overlong = client.post(f"/api/v1/model-versions/{version_id}/score", headers=api_headers(client, "rita"),
                           json={"problem": PROBLEM, "solutions": [{"steps": ["$10 - 2 = 8$.", "y" * 3000]}]})
    scored = overlong.json()["solutions"][0]
    assert scored["step_scores"][1] is None and scored["truncated"] is True
    assert scored["product"] == pytest.approx(scored["step_scores"][0])
    # Not one step read: no score, rather than the empty product's 1, the best there is.
    unread = client.post(f"/api/v1/model-versions/{version_id}/score", headers=api_headers(client, "rita"),
                         json={"problem": PROBLEM, "solutions": [{"steps": ["y" * 3000]}]})
    assert unread.json()["solutions"][0] == {"step_scores": [None], "product": None, "minimum": None, "truncated": True}


def test_a_neutral_step_counts_as_the_projects_rounds_count_it_unless_asked(client, session_factory, checkpoint: Path) -> None:  # type: ignore[no-untyped-def]
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "rita", "researcher")
    headers = api_headers(client, "rita")
    url = f"/api/v1/model-versions/{version_id}/score"
    with session_scope(session_factory) as session:
        project_id = session.get(ModelVersion, version_id).project_id
    assert client.patch(f"/api/v1/projects/{project_id}/round-settings", headers=headers,
                        json={"neutral_as_correct": False}).status_code == 200
    model, tokenizer, _ = load_checkpoint(checkpoint)
    solutions = [Solution("p", PROBLEM, steps) for steps in CANDIDATES]
    for asked, counted in ((None, False), (True, True), (False, False)):
        body = {"problem": PROBLEM, "solutions": [{"steps": s} for s in CANDIDATES]}
        if asked is not None:
            body["neutral_as_correct"] = asked
        answer = client.post(url, headers=headers, json=body).json()
        assert answer["neutral_as_correct"] is counted
        expected = score_solutions(model, tokenizer, solutions, max_length=1024, neutral_as_correct=counted)
        for got, want in zip(answer["solutions"], expected, strict=True):
            assert got["step_scores"] == pytest.approx(want.step_scores, abs=1e-5)


def test_a_read_only_token_scores(client, session_factory, checkpoint: Path) -> None:  # type: ignore[no-untyped-def]
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "rita", "researcher")
    made = client.post("/api/v1/auth/tokens", json={"username": "rita", "password": PASSWORD, "read_only": True})
    reader = {"Authorization": f"Bearer {made.json()['token']}"}
    body = {"problem": PROBLEM, "solutions": [{"steps": s} for s in CANDIDATES]}
    scored = client.post(f"/api/v1/model-versions/{version_id}/score", headers=reader, json=body)
    assert scored.status_code == 200, scored.text
    assert [len(s["step_scores"]) for s in scored.json()["solutions"]] == [2, 2]
    # The same token changes nothing next door.
    with session_scope(session_factory) as session:
        project_id = session.get(ModelVersion, version_id).project_id
    refused = client.patch(f"/api/v1/projects/{project_id}/round-settings", headers=reader, json={"max_length": 512})
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]


@pytest.mark.parametrize("role", ["labeler", "manager"])
def test_other_roles_are_refused(client, session_factory, checkpoint: Path, role: str) -> None:  # type: ignore[no-untyped-def]
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "someone", role)
    response = client.post(f"/api/v1/model-versions/{version_id}/score", headers=api_headers(client, "someone"),
                           json={"problem": PROBLEM, "solutions": [{"steps": CANDIDATES[0]}]})
    assert response.status_code == 403
    # Admins may do everything: the refusal names them too.
    assert response.json()["detail"] == f"this needs the role researcher or admin; you are {role}"


def test_bad_requests_are_refused_with_reasons(client, session_factory, checkpoint: Path, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "rita", "researcher")
    headers = api_headers(client, "rita")
    url = f"/api/v1/model-versions/{version_id}/score"
    for bad in [{"problem": PROBLEM, "solutions": []},
                {"problem": PROBLEM, "solutions": [{"steps": []}]},
                {"problem": PROBLEM, "solutions": [{"steps": ["x"]}] * 65},
                {"problem": "", "solutions": [{"steps": ["x"]}]},
                {"problem": PROBLEM, "solutions": [{"steps": ["x" * 20_001]}]},
                {"problem": PROBLEM, "solutions": [{"steps": ["x"], "answer": "1"}]}]:
        response = client.post(url, headers=headers, json=bad)
        assert response.status_code == 422, (bad, response.text)
    for empty in (" \n", "\u200b \u200b"):
        blank = client.post(url, headers=headers, json={"problem": PROBLEM, "solutions": [{"steps": ["x", empty]}]})
        assert blank.status_code == 422 and "step 2 of 2 is blank" in blank.text, empty
    # Each field within its bound, the whole past one batch: refused before any tokenizing.
    heavy = {"problem": "p" * 5_000, "solutions": [{"steps": ["x" * 10_000] * 2}] * 41}
    too_much = client.post(url, headers=headers, json=heavy)
    assert too_much.status_code == 422, too_much.text
    assert "the request holds 1,025,000 characters of text, the problem counted with each candidate; at most " \
           "1,000,000" in too_much.json()["detail"]
    nul = client.post(url, headers=headers, json={"problem": PROBLEM, "solutions": [{"steps": ["x", "\u0000"]}]})
    assert nul.status_code == 422 and "NUL character" in nul.json()["detail"]
    unwritten = client.post(url, headers=headers, json={"problem": " \n", "solutions": [{"steps": ["x"]}]})
    assert unwritten.status_code == 422 and "the problem is blank" in unwritten.text
    missing = client.post("/api/v1/model-versions/999/score", headers=headers, json={"problem": PROBLEM, "solutions": [{"steps": ["x"]}]})
    assert missing.status_code == 404 and "999" in missing.json()["detail"]
    with session_scope(session_factory) as session:
        session.get(ModelVersion, version_id).path = str(tmp_path / "gone")
    gone = client.post(url, headers=headers, json={"problem": PROBLEM, "solutions": [{"steps": ["x"]}]})
    assert gone.status_code == 409 and "no longer on this server" in gone.json()["detail"]
    damaged = tmp_path / "damaged"
    shutil.copytree(checkpoint, damaged)
    (damaged / "tokenizer.json").unlink()
    with session_scope(session_factory) as session:
        session.get(ModelVersion, version_id).path = str(damaged)
    unreadable = client.post(url, headers=headers, json={"problem": PROBLEM, "solutions": [{"steps": ["x"]}]})
    assert unreadable.status_code == 409, unreadable.text
    assert unreadable.json()["detail"] == f"model version {version_id}'s checkpoint cannot be loaded; the server log says why"
    # The cause, with the server's paths, goes to the log instead.
    assert any("has no tokenizer files" in r.getMessage() and str(damaged) in r.getMessage() for r in caplog.records)


def test_a_burst_past_the_scoring_queue_is_told_to_retry(  # type: ignore[no-untyped-def]
    database_url: str, engine, session_factory, checkpoint: Path, monkeypatch
) -> None:
    from app.rounds import scoring

    app = create_app(Settings(database_url=database_url, STEPWISE_ENV="test", STEPWISE_SCORING_QUEUE=1))
    version_id = _version(session_factory, checkpoint)
    make_user(session_factory, "rita", "researcher")
    scoring_now, go_on = threading.Event(), threading.Event()
    score = scoring.score_solutions

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        scoring_now.set()
        go_on.wait(ANSWER_BOUND_S)
        return score(*args, **kwargs)

    monkeypatch.setattr(scoring, "score_solutions", held)
    url = f"/api/v1/model-versions/{version_id}/score"
    body = {"problem": PROBLEM, "solutions": [{"steps": CANDIDATES[0]}]}
    answers: list[int] = []
    with TestClient(app) as client:
        headers = api_headers(client, "rita")
        first = threading.Thread(target=lambda: answers.append(client.post(url, headers=headers, json=body).status_code))
        first.start()
        try:
            assert scoring_now.wait(ANSWER_BOUND_S)
            busy = client.post(url, headers=headers, json=body)
        finally:
            go_on.set()
            first.join(ANSWER_BOUND_S)
        assert busy.status_code == 503, busy.text
        assert busy.headers["Retry-After"] == "5" and "the scorer is busy" in busy.json()["detail"]
        assert answers == [200]
        # Its turn given back, the next one is scored.
        assert client.post(url, headers=headers, json=body).status_code == 200
    app.state.engine.dispose()


# Run apart: on a model still mapped from its file, the truncation below is a SIGBUS, which would
# end the test run itself rather than fail this test.
CUT_SHORT_AFTER_LOADING = """
import json, os, sys
from active_learning.data import Solution
from active_learning.score import score_solutions
from app.rounds import scoring

path, problem, candidates = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
solutions = [Solution("p", problem, steps) for steps in candidates]
model, tokenizer = scoring._model(path, "cpu")
before = [s.step_scores for s in score_solutions(model, tokenizer, solutions, max_length=1024)]
os.truncate(os.path.join(path, "model.safetensors"), 100)
after = [s.step_scores for s in score_solutions(model, tokenizer, solutions, max_length=1024)]
print(json.dumps({"before": before, "after": after}))
"""


def test_a_cached_model_reads_nothing_from_its_file_after_loading(checkpoint: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(checkpoint, tmp_path / "prm")
    done = subprocess.run([sys.executable, "-c", CUT_SHORT_AFTER_LOADING, str(copy), PROBLEM, json.dumps(CANDIDATES)],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    scores = json.loads(done.stdout.splitlines()[-1])
    assert scores["after"] == scores["before"]


def test_a_changed_checkpoint_is_loaded_again_or_refused(  # type: ignore[no-untyped-def]
    client, session_factory, checkpoint: Path, tmp_path: Path, caplog
) -> None:
    served = shutil.copytree(checkpoint, tmp_path / "served")
    other = untrained_checkpoint(tmp_path / "other", seed=1)
    version_id = _version(session_factory, served)
    make_user(session_factory, "rita", "researcher")
    headers = api_headers(client, "rita")
    url = f"/api/v1/model-versions/{version_id}/score"
    body = {"problem": PROBLEM, "solutions": [{"steps": s} for s in CANDIDATES]}

    def scores() -> list[float]:
        response = client.post(url, headers=headers, json=body)
        assert response.status_code == 200, response.text
        return [step for s in response.json()["solutions"] for step in s["step_scores"]]

    def expected(path: Path) -> list[float]:
        model, tokenizer, _ = load_checkpoint(path)
        solutions = [Solution("p", PROBLEM, steps) for steps in CANDIDATES]
        return [step for s in score_solutions(model, tokenizer, solutions, max_length=1024) for step in s.step_scores]

    first, second = expected(checkpoint), expected(other)
    assert first != pytest.approx(second, abs=1e-5)  # else the test could not tell them apart
    assert scores() == pytest.approx(first, abs=1e-5)
    weights = served / "model.safetensors"
    # Another model's weights renamed into place (a new file, as a rewrite makes): that model answers.
    shutil.copyfile(other / "model.safetensors", tmp_path / "incoming")
    os.replace(tmp_path / "incoming", weights)
    assert scores() == pytest.approx(second, abs=1e-5)
    # Copied over the file in place (the same inode, a new modification time): the first again.
    shutil.copyfile(checkpoint / "model.safetensors", weights)
    assert scores() == pytest.approx(first, abs=1e-5)
    # Replaced by a damaged file: refused as one damaged before any load is, not served from memory.
    (tmp_path / "incoming").write_bytes((checkpoint / "model.safetensors").read_bytes()[:100])
    os.replace(tmp_path / "incoming", weights)
    refused = client.post(url, headers=headers, json=body)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"] == f"model version {version_id}'s checkpoint cannot be loaded; the server log says why"
    assert any("cannot load the checkpoint" in r.getMessage() and str(served) in r.getMessage() for r in caplog.records)
    # Mended, it is served again.
    shutil.copyfile(checkpoint / "model.safetensors", weights)
    assert scores() == pytest.approx(first, abs=1e-5)
