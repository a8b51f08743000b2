"""Starting, following and tuning rounds through the JSON API and the research pages."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, text

from app.db import session_scope
from app.models import ModelVersion, PickReason, Round, RoundSettings, RoundStage, RoundStatus
from app.rounds.schemas import RoundSettingsUpdate
from tests.conftest import api_headers, browser_login, make_project, make_user
from tests.forms.shipped import form_fields


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    for name, role in [("rita", "researcher"), ("boss", "admin"), ("max", "manager"), ("ann", "labeler")]:
        make_user(session_factory, name, role)
    return make_project(session_factory, "algebra")


def rounds_in_db(session_factory) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        return [(r.number, r.status.value) for r in session.scalars(select(Round).order_by(Round.id))]


def test_researchers_and_admins_start_rounds_one_at_a_time(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    url = f"/api/v1/projects/{project.id}/rounds"
    started = client.post(url, headers=api_headers(client, "rita"))
    assert started.status_code == 202, started.text
    body = started.json()
    assert (body["number"], body["status"], body["stage"]) == (1, "queued", "autolabel")

    again = client.post(url, headers=api_headers(client, "boss"))
    assert again.status_code == 409 and "still queued" in again.json()["detail"]
    assert rounds_in_db(session_factory) == [(1, "queued")]

    cancelled = client.post(f"/api/v1/rounds/{body['id']}/cancel", headers=api_headers(client, "boss"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.post(f"/api/v1/rounds/{body['id']}/cancel", headers=api_headers(client, "boss")).status_code == 409

    second = client.post(url, headers=api_headers(client, "boss"))
    assert second.status_code == 202 and second.json()["number"] == 2
    listed = client.get(url, headers=api_headers(client, "max")).json()
    assert [(r["number"], r["status"]) for r in listed] == [(2, "queued"), (1, "cancelled")]
    one = client.get(f"/api/v1/rounds/{second.json()['id']}", headers=api_headers(client, "max"))
    assert one.status_code == 200 and one.json()["percent"] == 0


@pytest.mark.parametrize("who", ["ann", "max"])
def test_labelers_and_managers_cannot_start_rounds(client, session_factory, project, who) -> None:  # type: ignore[no-untyped-def]
    response = client.post(f"/api/v1/projects/{project.id}/rounds", headers=api_headers(client, who))
    assert response.status_code == 403 and "researcher" in response.json()["detail"]
    assert rounds_in_db(session_factory) == []


def test_labelers_cannot_read_rounds(client, project) -> None:  # type: ignore[no-untyped-def]
    headers = api_headers(client, "ann")
    assert client.get(f"/api/v1/projects/{project.id}/rounds", headers=headers).status_code == 403
    assert client.get(f"/api/v1/projects/{project.id}/model-versions", headers=headers).status_code == 403


def test_missing_things_are_404(client, project) -> None:  # type: ignore[no-untyped-def]
    headers = api_headers(client, "rita")
    assert client.post("/api/v1/projects/999/rounds", headers=headers).status_code == 404
    assert client.get("/api/v1/rounds/999", headers=headers).status_code == 404
    assert client.get("/api/v1/rounds/999/picks", headers=headers).status_code == 404
    assert client.get("/api/v1/rounds/1/picks?reason=bogus", headers=headers).status_code == 422


def test_round_settings_are_validated_and_bad_ones_change_nothing(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    url = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")
    defaults = client.get(url, headers=headers).json()
    assert (defaults["picks_per_round"], defaults["wrong_share"], defaults["control_share"]) == (100, 0.8, 0.1)
    assert (defaults["selector_mode"], defaults["selector_version_id"], defaults["promote_min_heldout"]) == ("uniform", None, 50)
    assert defaults["selector_min_step_auroc"] == 0.9

    changed = client.patch(url, headers=headers, json={"picks_per_round": 40, "every_new_labels": 25})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["picks_per_round"], changed.json()["every_new_labels"]) == (40, 25)

    for bad in [{"wrong_share": 1.5}, {"picks_per_round": 0}, {"qc_share": 0.95}, {"bogus": 1},
                {"picks_per_round": None}, {"promote_metric": "vibes"}, {"selector_mode": "sometimes"},
                {"selector_version_id": 999}, {"promote_min_heldout": 0}, {"selector_min_step_auroc": 1.5},
                {"selector_min_step_auroc": "high"}, {"selector_version_id": True}, {"wrong_share": False},
                {"source_weights": {"human": True}}]:
        response = client.patch(url, headers=headers, json=bad)
        assert response.status_code == 422, (bad, response.text)
        # Each names its field, as any field error does (the shares' sum is both fields').
        if "qc_share" not in bad:
            assert response.json()["errors"][0]["field"] == next(iter(bad)), (bad, response.text)
    assert client.get(url, headers=headers).json() == changed.json()

    off = client.patch(url, headers=headers, json={"every_new_labels": None, "selector_min_step_auroc": None})
    assert off.json()["every_new_labels"] is None and off.json()["selector_min_step_auroc"] is None
    assert client.patch(url, headers=api_headers(client, "max"), json={"picks_per_round": 5}).status_code == 403
    with session_scope(session_factory) as session:
        assert session.scalar(select(func.count()).select_from(RoundSettings)) == 1


def test_a_base_model_no_worker_could_load_is_refused_where_it_is_typed(client, session_factory, backend, project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")
    no_tokenizer = tmp_path / "weights-only"
    no_tokenizer.mkdir()
    (no_tokenizer / "config.json").write_text("{}")
    for bad, why in [("my base model", "names no base: give a preset (tiny, 100m, 500m), a model directory, or a hub id"),
                     ("~/models/qwen", "give the directory's full path")]:
        response = client.patch(url, headers=headers, json={"base_model": bad})
        assert response.status_code == 422 and why in response.json()["detail"], response.text
        assert response.json()["errors"][0]["field"] == "base_model"
    # SQLite's workers are on this machine, so its directories are checked; PostgreSQL's workers
    # may mount what this API does not have, and its disk is not probed for a caller. Whatever
    # the path holds, or if nothing is there, the answer is the same: it tells no one which of
    # the server's files exist.
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    details = set()
    for path in (str(no_tokenizer), str(tmp_path), str(a_file), "/models/qwen-math", "/etc/passwd"):
        response = client.patch(url, headers=headers, json={"base_model": path})
        if backend == "sqlite":
            assert response.status_code == 422 and response.json()["errors"][0]["field"] == "base_model", response.text
            details.add(response.json()["detail"].replace(path, "PATH", 1))
        else:
            assert response.status_code == 200, response.text
    if backend == "sqlite":
        assert details == {"base_model: PATH is not a model directory here: give the full path of a directory holding "
                           "a model saved with save_pretrained (config.json) and its tokenizer (tokenizer.save_pretrained)"}
    assert client.patch(url, headers=headers, json={"base_model": "Qwen/Qwen2.5-Math-1.5B"}).status_code == 200

    csrf = browser_login(client, "rita")
    page = client.post(f"/research/projects/{project.id}/settings",
                       data={"csrf_token": csrf, "base_model": "my base model", "picks_per_round": "31"})
    assert page.status_code == 422
    field = re.search(r'<input name="base_model"([^>]*)>\s*</label>\s*<span class="field-hint" id="base_model-hint">[^<]*</span>'
                      r'\s*<span class="field-hint error" id="base_model-error">([^<]*)</span>', page.text)
    assert field and 'aria-invalid="true"' in field.group(1) and "names no base" in field.group(2)
    with session_scope(session_factory) as session:
        settings = session.get(RoundSettings, project.id)
        assert (settings.base_model, settings.picks_per_round) == ("Qwen/Qwen2.5-Math-1.5B", 100)


def test_research_page_starts_a_round_from_the_button(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "rita")
    page = client.get(f"/research/projects/{project.id}")
    assert page.status_code == 200 and "Start a round" in page.text
    started = client.post(f"/research/projects/{project.id}/rounds", data={"csrf_token": csrf}, follow_redirects=False)
    assert started.status_code == 303
    shown = client.get(started.headers["location"])
    assert "Round queued" in shown.text and "data-live-round" in shown.text
    # Its first stage has not begun: no worker has taken the round up.
    assert '<span data-field="stage">not started</span>' in shown.text
    twice = client.post(f"/research/projects/{project.id}/rounds", data={"csrf_token": csrf})
    assert twice.status_code == 409 and "still queued" in twice.text
    assert rounds_in_db(session_factory) == [(1, "queued")]
    # Cancelled before any worker took it, it never reached a stage.
    with session_scope(session_factory) as session:
        round_id = session.scalar(select(Round.id))
    assert client.post(f"/research/rounds/{round_id}/cancel", data={"csrf_token": csrf}).status_code == 200
    assert '<span data-field="stage">not started</span>' in client.get(f"/research/projects/{project.id}").text


def test_a_manager_sees_rounds_but_no_button(client, project) -> None:  # type: ignore[no-untyped-def]
    browser_login(client, "max")
    page = client.get(f"/research/projects/{project.id}")
    assert page.status_code == 200
    assert "Start a round" not in page.text and "Researchers and admins start rounds" in page.text
    # A new project's settings, read-only: uniform picks, no ranking shares.
    assert "uniform: rounds draw their picks uniformly" in page.text and "all picks uniform; 0% QC" in page.text
    assert "wrong-answer of the ranked picks" not in page.text
    assert client.get("/research").status_code == 200


def test_research_settings_form_shows_errors_in_place(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "rita")
    url = f"/research/projects/{project.id}/settings"
    bad = client.post(url, data={"csrf_token": csrf, "wrong_share": "lots", "picks_per_round": "30"})
    assert bad.status_code == 422 and "Must be a number" in bad.text
    emptied = client.post(url, data={"csrf_token": csrf, "wrong_share": "", "picks_per_round": "30"})
    assert emptied.status_code == 422 and "Needs a value" in emptied.text
    good = client.post(url, data={"csrf_token": csrf, "picks_per_round": "30", "schedule_hours": "12"},
                       follow_redirects=False)
    assert good.status_code == 303
    # A version of no model here is marked on its field, in the form's words.
    unknown = client.post(url, data={"csrf_token": csrf, "selector_version_id": "999"})
    assert unknown.status_code == 422
    shown = html.unescape(unknown.text).split('id="selector_version_id-error">', 1)[1].split("<", 1)[0]
    assert shown == "Version 999 is not a model version of this project"
    cleared = client.post(url, data={"csrf_token": csrf, "schedule_hours": ""}, follow_redirects=False)
    assert cleared.status_code == 303
    with session_scope(session_factory) as session:
        settings = session.get(RoundSettings, project.id)
        assert (settings.picks_per_round, settings.wrong_share, settings.schedule_hours) == (30, 0.8, None)


def test_every_round_setting_the_api_takes_is_on_the_research_form(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "rita")
    url = f"/research/projects/{project.id}/settings"
    shipped = form_fields(client.get(f"/research/projects/{project.id}").text, url)
    assert set(RoundSettingsUpdate.model_fields) <= set(shipped), set(RoundSettingsUpdate.model_fields) - set(shipped)
    assert shipped["neutral_as_correct"] == "true"
    saved = client.post(url, data={**shipped, "csrf_token": csrf, "neutral_as_correct": "false"}, follow_redirects=False)
    assert saved.status_code == 303
    with session_scope(session_factory) as session:
        assert session.get(RoundSettings, project.id).neutral_as_correct is False
    assert form_fields(client.get(f"/research/projects/{project.id}").text, url)["neutral_as_correct"] == "false"


def test_the_settings_form_marks_every_bad_field_at_once(client, project) -> None:  # type: ignore[no-untyped-def]
    csrf = browser_login(client, "rita")
    bad = client.post(f"/research/projects/{project.id}/settings",
                      data={"csrf_token": csrf, "train_epochs": "abc", "source_weights": "human=<b>1</b>"})
    assert bad.status_code == 422
    page = html.unescape(bad.text)
    assert 'id="train_epochs-error">' in page and 'id="source_weights-error">' in page
    assert "<b>1</b>" not in bad.text


def test_the_control_and_qc_shares_must_fit_in_the_picks(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    api = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")
    rule = "control_share + qc_share must not exceed 1"
    together = client.patch(api, headers=headers, json={"control_share": 0.6, "qc_share": 0.6})
    assert together.status_code == 422 and rule in together.text
    assert client.patch(api, headers=headers, json={"qc_share": 0.6}).status_code == 200
    # Against the share already stored, not only those sent together.
    apart = client.patch(api, headers=headers, json={"control_share": 0.6})
    assert apart.status_code == 422 and rule in apart.text

    csrf = browser_login(client, "rita")
    url = f"/research/projects/{project.id}/settings"
    page = client.post(url, data={"csrf_token": csrf, "control_share": "0.6", "picks_per_round": "31"})
    assert page.status_code == 422 and f"The settings were not saved:\n    {rule}." in page.text
    assert form_fields(page.text, url)["control_share"] == "0.6"
    with session_scope(session_factory) as session:
        settings = session.get(RoundSettings, project.id)
        assert (settings.control_share, settings.qc_share) == (0.1, 0.6) and settings.picks_per_round != 31


def test_a_research_setting_left_out_stays_and_one_emptied_is_turned_off(client, project) -> None:  # type: ignore[no-untyped-def]
    api = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")

    def stored() -> dict[str, object]:
        return {k: v for k, v in client.get(api, headers=headers).json().items() if k != "updated_at"}

    client.patch(api, headers=headers, json={
        "every_new_labels": 25, "schedule_hours": 12, "selector_min_step_auroc": 0.7,
        "source_weights": {"human": 1, "rollout": 0.5}, "autolabel_generator": "vllm:gen"})
    before = stored()
    csrf = browser_login(client, "rita")
    url = f"/research/projects/{project.id}/settings"

    partial = client.post(url, data={"csrf_token": csrf, "picks_per_round": "40"}, follow_redirects=False)
    assert partial.status_code == 303
    assert stored() == {**before, "picks_per_round": 40}

    # The form as shipped sends every field, so a trigger the researcher emptied arrives empty.
    shipped = form_fields(client.get(f"/research/projects/{project.id}").text, url)
    assert (shipped["every_new_labels"], shipped["source_weights"]) == ("25", "human=1, rollout=0.5")
    emptied = client.post(url, data={**shipped, "every_new_labels": ""}, follow_redirects=False)
    assert emptied.status_code == 303
    assert stored() == {**before, "picks_per_round": 40, "every_new_labels": None}


def test_a_patch_that_changes_nothing_leaves_when_settings_last_changed(client, project) -> None:  # type: ignore[no-untyped-def]
    api = f"/api/v1/projects/{project.id}/round-settings"
    headers = api_headers(client, "rita")
    changed = client.patch(api, headers=headers, json={"picks_per_round": 33}).json()["updated_at"]
    for same in ({}, {"picks_per_round": 33}):
        again = client.patch(api, headers=headers, json=same)
        assert again.status_code == 200 and again.json()["updated_at"] == changed


def test_a_refused_partial_research_post_shows_the_stored_settings_it_left_out(client, project) -> None:  # type: ignore[no-untyped-def]
    client.patch(f"/api/v1/projects/{project.id}/round-settings", headers=api_headers(client, "rita"),
                 json={"every_new_labels": 25})
    csrf = browser_login(client, "rita")
    url = f"/research/projects/{project.id}/settings"
    refused = client.post(url, data={"csrf_token": csrf, "picks_per_round": "lots"})
    assert refused.status_code == 422
    shown = form_fields(refused.text, url)
    assert (shown["picks_per_round"], shown["every_new_labels"], shown["wrong_share"]) == ("lots", "25", "0.8")


# SQLite has no job queue: its local worker polls the rounds table.
@pytest.mark.parametrize("backend", ["postgresql"])
def test_starting_a_round_wakes_a_postgresql_worker_through_the_job_queue(client, session_factory, project, backend) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        session.execute(text("DELETE FROM procrastinate.procrastinate_jobs"))
    body = client.post(f"/api/v1/projects/{project.id}/rounds", headers=api_headers(client, "rita")).json()
    with session_scope(session_factory) as session:
        jobs = session.execute(text(
            "SELECT task_name, args, status, queueing_lock FROM procrastinate.procrastinate_jobs"
        )).all()
        session.execute(text("DELETE FROM procrastinate.procrastinate_jobs"))
    assert [tuple(j) for j in jobs] == [
        ("stepwise.run_round", {"round_id": body["id"]}, "todo", f"round-{body['id']}")
    ]


def test_a_round_that_trained_no_model_says_so(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    skipped = "3 training labels, fewer than the 10 needed: no model this round"
    with session_scope(session_factory) as session:
        for number, metrics in [(1, {"candidate": {"step_auroc": 0.7}, "rule": "passed"}), (2, {"rule": skipped})]:
            session.add(Round(project_id=project.id, number=number, status=RoundStatus.done,
                              stage=RoundStage.done, percent=100.0, metrics=metrics, promoted=False))
    headers = api_headers(client, "rita")
    listed = client.get(f"/api/v1/projects/{project.id}/rounds", headers=headers).json()
    assert {r["number"]: (r["status"], r["status_text"]) for r in listed} == {
        1: ("done", "done"), 2: ("done", "done, no model trained"),
    }

    browser_login(client, "rita")
    badges = re.findall(r'data-field="status">([^<]*)<', client.get(f"/research/projects/{project.id}").text)
    assert sorted(badges) == ["done", "done, no model trained"]
    latest = next(r["id"] for r in listed if r["number"] == 2)
    assert re.findall(r'data-field="status">([^<]*)<', client.get(f"/research/rounds/{latest}").text) == ["done, no model trained"]
    assert 'data-field="status">done, no model trained<' in client.get("/research").text
    # Its model column says there was none to promote, as a round that trained one and kept it back does not.
    page = client.get(f"/research/projects/{project.id}").text
    rows = re.findall(r'<tr data-round="\d+">.*?</tr>', page, re.S)
    assert [(">no model</span>" in row, "not promoted" in row) for row in rows] == [(True, False), (False, True)]


def test_the_round_page_draws_its_models_training_loss(client, session_factory, project, tmp_path) -> None:  # type: ignore[no-untyped-def]
    logged, silent, garbled = tmp_path / "logged", tmp_path / "silent", tmp_path / "garbled"
    for directory in (logged, silent, garbled):
        directory.mkdir()
    (logged / "training_log.json").write_text(json.dumps({
        "format": 1, "total_steps": 30,
        "train": [{"step": s, "epoch": s / 10, "loss": 2.0 / s, "lr": 1e-3} for s in (5, 10, 20, 30)],
        "eval": [{"step": 30, "metrics": {"step_auroc": 0.8}}],
    }))
    (garbled / "training_log.json").write_text("{not json")
    ids = {}
    with session_scope(session_factory) as session:
        for number, path in enumerate((logged, silent, garbled), start=1):
            round_ = Round(project_id=project.id, number=number, status=RoundStatus.done,
                           stage=RoundStage.done, percent=100.0, metrics={})
            session.add(round_)
            session.flush()
            session.add(ModelVersion(project_id=project.id, round_id=round_.id, path=str(path),
                                     base="tiny", data_hash="x", train_labels=10, metrics={}))
            ids[path] = round_.id
    browser_login(client, "rita")

    page = client.get(f"/research/rounds/{ids[logged]}").text
    chart = re.search(r'<svg[^>]*aria-label="Training loss by step".*?</svg>', page, re.S)
    assert chart is not None
    assert re.findall(r"<title>step (\d+): loss ([\d.]+)</title>", chart.group()) == [
        ("5", "0.4000"), ("10", "0.2000"), ("20", "0.1000"), ("30", "0.0667")]
    assert "evaluated at step 30" in chart.group() and "No training log" not in page
    for quiet in (silent, garbled):
        page = client.get(f"/research/rounds/{ids[quiet]}")
        assert page.status_code == 200 and "No training log." in page.text
        assert 'aria-label="Training loss by step"' not in page.text


def _done_round(session_factory, project) -> int:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.done, stage=RoundStage.done,
                       percent=100.0, metrics={})
        session.add(round_)
        session.flush()
        return round_.id


def test_the_picks_legend_explains_every_pick_reason(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    round_id = _done_round(session_factory, project)
    browser_login(client, "rita")
    legend = re.search(r"Queue order\. Each pick says why it was chosen:(.*?)</p>",
                       client.get(f"/research/rounds/{round_id}").text, re.S)
    assert legend is not None
    explained = set(re.findall(r"<strong>([^<]+)</strong>", legend.group(1)))
    assert {reason.value.replace("_", " ") for reason in PickReason} <= explained


def test_a_setting_that_is_not_a_finite_number_is_refused_as_such(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    api = f"/api/v1/projects/{project.id}/round-settings"
    headers = {**api_headers(client, "rita"), "Content-Type": "application/json"}
    # JSON has no NaN: Python's reader takes the bare tokens, and text is no number at all.
    for literal in (b"NaN", b"Infinity", b"-Infinity"):
        response = client.patch(api, headers=headers, content=b'{"learning_rate": ' + literal + b"}")
        assert response.status_code == 422 and "finite number" in response.text, (literal, response.text)
    for value in ("NaN", "nan", "inf", "-Infinity"):
        response = client.patch(api, headers=headers, json={"learning_rate": value})
        assert response.status_code == 422 and "must be a number" in response.text, (value, response.text)
    csrf = browser_login(client, "rita")
    page = client.post(f"/research/projects/{project.id}/settings",
                       data={"csrf_token": csrf, "learning_rate": "nan", "train_epochs": "inf"})
    assert page.status_code == 422 and page.text.count("be a finite number") == 2
    with session_scope(session_factory) as session:
        settings = session.get(RoundSettings, project.id)
        assert settings is None or (settings.learning_rate, settings.train_epochs) == (0.001, 3.0)


def test_the_project_page_says_why_a_model_was_not_promoted_with_its_intervals(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    too_few = "step_auroc was measured on 17 held-out labels, fewer than the 50 needed"
    metrics = {"step_auroc": 0.406, "ci95": {"step_auroc": [0.27, 0.59], "first_error_f1": [0.0, 0.1]},
               "first_error_f1": 0.05, "best_of_n": {"prm_accuracy": 0.43, "prm_accuracy_ci95": [0.14, 0.86]}}
    other = make_project(session_factory, "geometry")
    with session_scope(session_factory) as session:
        # Another project's round first, so that round ids are not round numbers.
        session.add(Round(project_id=other.id, number=1, status=RoundStatus.done, stage=RoundStage.done,
                          percent=100.0, metrics={}))
        session.flush()
        for number, served_id in [(1, None), (2, 7)]:
            round_ = Round(project_id=project.id, number=number, status=RoundStatus.done, stage=RoundStage.done,
                           percent=100.0, promoted=False,
                           metrics={"rule": too_few, "candidate": metrics, "served_version_id": served_id})
            session.add(round_)
            session.flush()
            session.add(ModelVersion(project_id=project.id, round_id=round_.id, path="/nowhere", base="tiny",
                                     data_hash="x", train_labels=133, metrics=metrics, passed=False))
    browser_login(client, "rita")
    page = client.get(f"/research/projects/{project.id}").text
    # Round 1 had no served model: it kept nothing; round 2 kept version 7.
    rows = re.findall(r'<tr data-round="\d+">.*?</tr>', page, re.S)
    assert ["kept old" in row for row in rows] == [True, False]
    assert ["not promoted" in row for row in rows] == [False, True]
    assert page.count(f'<span class="small muted rule-why">{too_few}</span>') == 2
    # A version the rule kept back is not a failure: the red badge is for failed rounds.
    assert page.count('<span class="badge warn">not passed</span>') == 2 and "badge bad" not in page
    assert "0.406 <span class=\"ci-text small muted\">[0.27, 0.59]</span>" in page
    assert "[0.14, 0.86]" in page and "[0.00, 0.10]" in page
    with session_scope(session_factory) as session:
        ids = {r.number: r.id for r in session.scalars(select(Round).where(Round.project_id == project.id))}
    trained_by = re.findall(r'<td class="num"><a href="/research/rounds/(\d+)">(\d+)</a></td>', page)
    assert sorted(trained_by) == sorted((str(ids[n]), str(n)) for n in (1, 2))


def test_majority_voting_stands_in_each_models_column_as_no_models_number(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    candidate = {"step_auroc": 0.9, "best_of_n": {"prm_accuracy": 0.61, "majority_accuracy": 0.55, "problems": 40}}
    with session_scope(session_factory) as session:
        alone = Round(project_id=project.id, number=1, status=RoundStatus.done, stage=RoundStage.done,
                      percent=100.0, metrics={"candidate": candidate})
        against = Round(project_id=project.id, number=2, status=RoundStatus.done, stage=RoundStage.done, percent=100.0,
                        metrics={"candidate": candidate, "served": {**candidate, "best_of_n": {"prm_accuracy": 0.58}}})
        session.add_all([alone, against])
        session.flush()
        ids = alone.id, against.id
    browser_login(client, "rita")

    def majority_row(round_id: int) -> list[str]:
        page = client.get(f"/research/rounds/{round_id}").text
        row = re.search(r"<tr><td>Majority voting.*?</tr>", page, re.S)
        assert row is not None
        return re.findall(r'<td class="num">(.*?)</td>', row.group())

    # Without a served model, its column stays empty for this row as for the others.
    assert majority_row(ids[0]) == ["0.550", '<span class="muted">–</span>']
    assert majority_row(ids[1]) == ["0.550", "0.550"]


@pytest.mark.parametrize(("minutes", "words"), [(5, "done about"), (-5, "past its estimate of")])
def test_a_running_rounds_eta_says_when_the_round_has_overrun_it(client, session_factory, project, minutes, words) -> None:  # type: ignore[no-untyped-def]
    eta = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=minutes)
    with session_scope(session_factory) as session:
        session.add(Round(project_id=project.id, number=1, status=RoundStatus.running, stage=RoundStage.train,
                          percent=40.0, eta_at=eta, metrics={}))
    browser_login(client, "rita")
    page = client.get(f"/research/projects/{project.id}").text
    assert f'<span data-field="eta" class="muted">· {words} {eta:%H:%M:%S} UTC</span>' in page


def test_cancelling_a_round_that_has_ended_shows_the_page_saying_so(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    round_id = _done_round(session_factory, project)
    csrf = browser_login(client, "rita")
    stale = client.post(f"/research/rounds/{round_id}/cancel", data={"csrf_token": csrf})
    assert stale.status_code == 409
    assert "Nothing changed: round 1 is done, not queued or running." in stale.text
    assert "Start a round" in stale.text
    # A reload fetches the page shown instead of posting the cancel again.
    assert f'<meta name="page-address" content="/research/projects/{project.id}">' in stale.text
    assert rounds_in_db(session_factory) == [(1, "done")]


def test_a_version_whose_round_failed_before_judging_it_is_marked_and_cannot_be_the_selector(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        failed = Round(project_id=project.id, number=1, status=RoundStatus.failed, stage=RoundStage.evaluate)
        judged = Round(project_id=project.id, number=2, status=RoundStatus.done, stage=RoundStage.done)
        session.add_all([failed, judged])
        session.flush()
        versions = [ModelVersion(project_id=project.id, round_id=r.id, path=f"/nowhere/{r.number}", base="tiny",
                                 data_hash="x", train_labels=10, metrics={"step_auroc": 0.7}, passed=passed)
                    for r, passed in ((failed, None), (judged, False))]
        session.add_all(versions)
        session.flush()
        unjudged_id, judged_id = (v.id for v in versions)
    url = f"/api/v1/projects/{project.id}/round-settings"
    refused = client.patch(url, headers=api_headers(client, "rita"), json={"selector_version_id": unjudged_id})
    assert refused.status_code == 422 and "failed or was cancelled, before it was evaluated" in refused.text
    with session_scope(session_factory) as session:
        assert session.get(RoundSettings, project.id) is None or session.get(RoundSettings, project.id).selector_version_id is None
    assert client.patch(url, headers=api_headers(client, "rita"), json={"selector_version_id": judged_id}).status_code == 200
    # Pinned before its round failed, it stays, and the form that sends it again with every save
    # saves the other settings.
    with session_scope(session_factory) as session:
        session.get(RoundSettings, project.id).selector_version_id = unjudged_id
    again = client.patch(url, headers=api_headers(client, "rita"), json={"selector_version_id": unjudged_id,
                                                                           "picks_per_round": 31})
    assert again.status_code == 200 and again.json()["picks_per_round"] == 31
    browser_login(client, "rita")
    page = html.unescape(client.get(f"/research/projects/{project.id}").text)
    assert page.count(">not judged</span>") == 1
    assert "round 1 failed before evaluating it: its metrics are the training run's own" in page
    # The compare form's choices say it too (twice: A and B).
    assert page.count(f">{unjudged_id} · round 1 · not judged") == 2
    assert page.count(f">{judged_id} · round 2<") == 2


def test_a_running_round_whose_worker_stopped_answering_reads_stalled(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    # Its worker killed, a round stayed "running" with an estimate long past; nothing said that
    # no worker held it any more.
    lost = (datetime.now(UTC) - timedelta(minutes=5)).replace(microsecond=0)
    with session_scope(session_factory) as session:
        round_ = Round(project_id=project.id, number=1, status=RoundStatus.running, stage=RoundStage.train,
                       percent=26.0, attempts=1, lease_owner="worker-gone", lease_expires_at=lost,
                       eta_at=lost + timedelta(minutes=1), message="training: step 128 of 320")
        session.add(round_)
        session.flush()
        round_id = round_.id
    body = client.get(f"/api/v1/rounds/{round_id}", headers=api_headers(client, "rita")).json()
    assert (body["status"], body["status_text"]) == ("running", "stalled, no worker")
    assert datetime.fromisoformat(body["lease_expires_at"]) == lost
    browser_login(client, "rita")
    page = client.get(f"/research/rounds/{round_id}").text
    assert ">stalled, no worker<" in page and "past its estimate" not in page
    assert f"its worker stopped answering at {lost.strftime('%H:%M:%S UTC')}; a worker takes it over once one runs" in page
    with session_scope(session_factory) as session:
        session.get(Round, round_id).lease_expires_at = datetime.now(UTC) + timedelta(minutes=1)
    assert client.get(f"/api/v1/rounds/{round_id}", headers=api_headers(client, "rita")).json()["status_text"] == "running"


def test_rounds_list_a_page_at_a_time_so_that_older_ones_stay_reachable(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        session.add_all(Round(project_id=project.id, number=number, status=RoundStatus.done, stage=RoundStage.done,
                              percent=100.0, metrics={}, promoted=False) for number in range(1, 6))
    headers = api_headers(client, "rita")
    url = f"/api/v1/projects/{project.id}/rounds"

    def numbers(**params: int) -> list[int]:
        answer = client.get(url, headers=headers, params=params)
        assert answer.status_code == 200, answer.text
        return [r["number"] for r in answer.json()]

    assert numbers(limit=2) == [5, 4]
    assert numbers(limit=2, offset=2) == [3, 2]
    assert numbers(offset=4) == [1]
    assert numbers(offset=5) == []
    assert client.get(url, headers=headers, params={"offset": -1}).status_code == 422
    schema = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/projects/{project_id}/rounds"]["get"]
    assert {p["name"] for p in schema["parameters"]} >= {"limit", "offset"}
