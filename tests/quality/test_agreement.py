"""Inter-annotator agreement on a hand-built overlap-3 project, checked against hand counts and
an ordinal α written out here from Krippendorff's coincidence-matrix definition."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from collections import defaultdict
from itertools import combinations, permutations
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.config import get_settings
from app.db import session_scope
from app.exports.schemas import ExportFilters
from app.exports.service import write_export
from app.models import FinishReason, Label, utcnow
from app.quality import agreement
from app.quality.agreement import NO_PAIRS, NO_VARIATION, project_agreement
from app.quality.service import first_error
from tests.conftest import add_solutions, api_headers, browser_login, make_project, make_user

SOLUTION = FinishReason.solution
FOUND = FinishReason.found_error

# Per solution, each labeler's ratings as labeled in first-error mode: nothing after a −1.
LABELS: list[dict[str, tuple[int, ...]]] = [
    {"ann": (1, 1, 1, 1), "bob": (1, 1, 1, 1), "cat": (1, 1, 1, 1)},
    {"ann": (1, -1), "bob": (1, -1), "cat": (1, 1, -1)},
    {"ann": (1, 0, 1, 1), "bob": (1, 1, 1, 1), "cat": (0, 0, 1, 1)},
    {"ann": (-1,), "bob": (0, -1), "cat": (-1,)},
    {"ann": (1, 1, 1, -1), "bob": (1, 1, 1, 1)},
    {"ann": (1, 1, 1, 1), "ext-7": (1, -1)},
]


def _steps(*ratings: int) -> list[dict]:  # type: ignore[type-arg]
    return [{"completions": [{"rating": r, "flagged": False}], "human_completion": None,
             "chosen_completion": None if r == -1 else 0} for r in ratings]


def _units(labels: list[dict[str, tuple[int, ...]]], only: str | None = None) -> list[list[int]]:
    """The values of each step rated twice or more (by `only` among others, when given)."""
    units = []
    for by_labeler in labels:
        for index in range(4):
            rated = {name: r[index] for name, r in by_labeler.items() if index < len(r)}
            if len(rated) >= 2 and (only is None or only in rated):
                units.append(list(rated.values()))
    return units


def _ordinal_alpha_by_hand(units: list[list[int]]) -> float:
    """α = 1 − (n−1)·Σ o_ck δ²_ck / Σ n_c n_k δ²_ck, with the coincidences o_ck of each unit's
    ordered value pairs weighted 1/(m_u − 1) and the ordinal δ_ck = Σ_{g=c..k} n_g − (n_c+n_k)/2."""
    values = (-1, 0, 1)
    o = {(c, k): 0.0 for c in values for k in values}
    for unit in units:
        for a, b in permutations(unit, 2):
            o[(a, b)] += 1 / (len(unit) - 1)
    n_c = {c: sum(o[(c, k)] for k in values) for c in values}
    n = sum(n_c.values())

    def delta2(c: int, k: int) -> float:
        lo, hi = sorted((c, k))
        return (sum(n_c[g] for g in values if lo <= g <= hi) - (n_c[lo] + n_c[hi]) / 2) ** 2

    observed = sum(o[(c, k)] * delta2(c, k) for c in values for k in values)
    expected = sum(n_c[c] * n_c[k] * delta2(c, k) for c in values for k in values)
    return 1 - (n - 1) * observed / expected


@pytest.fixture
def project(session_factory):  # type: ignore[no-untyped-def]
    """Three labelers on six solutions, plus what must not count: a give-up, a superseded label,
    an imported label naming no labeler, and a solution labeled once."""
    project = make_project(session_factory, "agreement", overlap=3)
    solutions = add_solutions(session_factory, project, 7, steps=4)
    users = {name: make_user(session_factory, name, "labeler").id for name in ("ann", "bob", "cat")}
    now = utcnow()
    with session_scope(session_factory) as session:
        for solution, by_labeler in zip(solutions, LABELS, strict=False):
            for name, ratings in by_labeler.items():
                session.add(Label(
                    project_id=project.id, solution_id=solution, steps=_steps(*ratings),
                    user_id=users.get(name), foreign_labeler=None if name in users else name,
                    finish_reason=FOUND if -1 in ratings else SOLUTION, created_at=now,
                ))
        session.add_all([
            Label(project_id=project.id, solution_id=solutions[4], user_id=users["cat"], steps=_steps(1, 1),
                  finish_reason=FinishReason.give_up, created_at=now),
            Label(project_id=project.id, solution_id=solutions[0], user_id=users["bob"], steps=_steps(-1),
                  finish_reason=FOUND, superseded_at=now, created_at=now),
            Label(project_id=project.id, solution_id=solutions[5], steps=_steps(-1), finish_reason=FOUND,
                  created_at=now),
            Label(project_id=project.id, solution_id=solutions[6], user_id=users["ann"], steps=_steps(1, -1),
                  finish_reason=FOUND, created_at=now),
        ])
    return project


def test_step_alpha_first_error_and_confusion(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    with session_scope(session_factory) as session:
        found = project_agreement(session, project)

    units = _units(LABELS)
    assert found.units == len(units) == 17
    assert found.step_alpha == pytest.approx(_ordinal_alpha_by_hand(units))
    assert found.step_alpha_reason is None
    assert (found.overlap, found.solutions, found.labels) == (3, 6, 16)
    # Pairs agreeing on the first −1: 3 + 1 + 3 + 1 + 0 + 0 of 3 + 3 + 3 + 3 + 1 + 1.
    assert (found.first_error_pairs, found.first_error_agreement) == (14, 8 / 14)
    assert found.rating_pairs == 39
    assert found.confusion == [[4, 2, 4], [2, 2, 4], [4, 4, 52]]

    rows = {a.name: a for a in found.labelers}
    assert [a.name for a in found.labelers] == ["ann", "bob", "cat", "ext-7"]
    assert [(rows[n].first_error_pairs, rows[n].first_error_agreement) for n in rows] == [
        (10, 6 / 10), (9, 5 / 9), (8, 5 / 8), (1, 0.0)
    ]
    assert (rows["cat"].rating_pairs, rows["cat"].rating_agreement) == (22, 16 / 22)
    assert rows["cat"].step_alpha == pytest.approx(_ordinal_alpha_by_hand(_units(LABELS, only="cat")))
    assert rows["ext-7"].step_alpha == pytest.approx(_ordinal_alpha_by_hand(_units(LABELS, only="ext-7")))


def test_alpha_is_null_with_a_reason(session_factory) -> None:  # type: ignore[no-untyped-def]
    project = make_project(session_factory, "single")
    solutions = add_solutions(session_factory, project, 2, steps=2)

    def label(solution: int, labeler: str, *ratings: int) -> Label:
        return Label(project_id=project.id, solution_id=solutions[solution], foreign_labeler=labeler,
                     steps=_steps(*ratings), finish_reason=FOUND if -1 in ratings else SOLUTION)

    with session_scope(session_factory) as session:
        session.add(label(0, "x", 1, 1))
        session.flush()
        found = project_agreement(session, project)
        assert (found.step_alpha, found.solutions, found.first_error_agreement) == (None, 0, None)
        assert found.step_alpha_reason == "no solution has current labels from two labelers yet"
        # Two labels of one solution, but no step rated by both: y stopped before any.
        session.add_all([label(1, "x", -1), label(1, "y")])
        session.flush()
        found = project_agreement(session, project)
        assert (found.solutions, found.step_alpha, found.step_alpha_reason) == (1, None, NO_PAIRS)
        assert (found.first_error_pairs, found.first_error_agreement) == (1, 0.0)
        session.add(label(0, "y", 1, 1))
        session.flush()
        found = project_agreement(session, project)
        assert (found.step_alpha, found.step_alpha_reason) == (None, NO_VARIATION)
        assert found.confusion == [[0, 0, 0], [0, 0, 0], [0, 0, 4]]


def test_api_for_managers_and_researchers_only(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    for name, role in (("max", "manager"), ("rae", "researcher")):
        make_user(session_factory, name, role)
        response = client.get(f"/api/v1/projects/{project.id}/agreement", headers=api_headers(client, name))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["first_error_agreement"] == pytest.approx(8 / 14)
        assert body["confusion"][2][2] == 52
    refused = client.get(f"/api/v1/projects/{project.id}/agreement", headers=api_headers(client, "ann"))
    assert refused.status_code == 403
    missing = client.get("/api/v1/projects/9999/agreement", headers=api_headers(client, "max"))
    assert missing.status_code == 404


@pytest.mark.parametrize("backend", ["sqlite"])
def test_cli_prints_one_json_object(monkeypatch, database_url, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["agreement", "--project", "agreement"])
        unknown = CliRunner().invoke(cli, ["agreement", "--project", "nope"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.output)
    assert (body["solutions"], body["labels"], body["first_error_agreement"]) == (6, 16, pytest.approx(8 / 14))
    assert body["step_alpha"] == pytest.approx(_ordinal_alpha_by_hand(_units(LABELS)))
    assert [row["name"] for row in body["labelers"]] == ["ann", "bob", "cat", "ext-7"]
    assert unknown.exit_code != 0


def test_project_page_shows_the_card(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    page = client.get(f"/manage/projects/{project.id}")
    assert page.status_code == 200
    card = page.text.split('id="agreement"', 1)[1].split("</section>", 1)[0]
    alpha = _ordinal_alpha_by_hand(_units(LABELS))
    assert f"{alpha:.3f}" in card
    assert "57%" in card and "of 14 pairs" in card
    assert "<td class=\"num\">52</td>" in card
    cat = card.split("<td>cat</td>", 1)[1].split("</tr>", 1)[0]
    # 16 of 22 is 72.7%: shares are shown rounded down.
    assert "72%" in cat and "of 22" in cat and "62%" in cat


def _exported_solutions(session_factory, project, **filters) -> list[str]:  # type: ignore[no-untyped-def]
    sink = io.BytesIO()
    with session_scope(session_factory) as session:
        write_export(session, project, "prm800k", ExportFilters(**filters), sink)
    lines = [orjson.loads(line) for line in sink.getvalue().splitlines()]
    return sorted(line["question"]["pre_generated_steps"][0] for line in lines)


def test_export_keeps_solutions_whose_labelers_agree(session_factory, project) -> None:  # type: ignore[no-untyped-def]
    unanimous = _exported_solutions(session_factory, project, min_agreement=1.0)
    assert unanimous == ["step 0 of 0"] * 3 + ["step 0 of 2"] * 3
    a_third = _exported_solutions(session_factory, project, min_agreement=0.3)
    assert a_third == [f"step 0 of {i}" for i in range(4) for _ in range(3)]
    everything = _exported_solutions(session_factory, project)
    assert len(everything) == 19, "no filter: every current label, give-up and lone label included"


def test_export_form_takes_a_percentage(client, session_factory, project) -> None:  # type: ignore[no-untyped-def]
    make_user(session_factory, "max", "manager")
    browser_login(client, "max")
    url = f"/manage/projects/{project.id}/export/download?format=prm800k&min_agreement="
    wrong = client.get(url + "lots")
    assert wrong.status_code == 422 and "Give a percentage from 0 to 100" in wrong.text.split('name="min_agreement"', 1)[1]
    right = client.get(url + "100", follow_redirects=False)
    assert right.status_code == 303 and "min_agreement=1.0" in right.headers["location"]
    api = client.get(f"/api/v1/projects/{project.id}/export?format=prm800k&min_agreement=2")
    assert api.status_code == 422


@pytest.mark.parametrize("seed", range(20))
def test_phase1_tallies_match_pairs_counted_one_by_one(monkeypatch, seed: int) -> None:  # type: ignore[no-untyped-def]
    """The report counts ratings per unit; here every pair of ratings of a unit (an alternative
    of a step reached the same way) is walked instead, on random phase-1 labels: several
    alternatives, steps of the labeler's own, stops, unrated alternatives."""
    rng = random.Random(seed)
    by_solution = {}
    for solution in range(rng.randint(1, 10)):
        labels = []
        for who in rng.sample(range(5), rng.randint(2, 4)):
            # Alternatives by key: None for the solution's own step, the text for another.
            widths = [rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(0, 5))]
            alternatives = tuple(
                tuple((key, rating) for key, rating in ((None if j == 0 else f"alternative {j}",
                                                         rng.choice([-1, 0, 1, 1, None])) for j in range(width))
                      if rating is not None)
                for width in widths)
            path = tuple(rng.choice([None, "alternative 1", "written", agreement.STOPPED]) if width > 1 else None
                         for width in widths)
            key = ("user", who) if who % 2 else ("imported", f"ext-{who}")
            labels.append(agreement.ComparedLabel(key, f"labeler {who}", rng.choice([None, 0, 1]), len(labels),
                                                  alternatives, path))
        by_solution[solution] = labels
    monkeypatch.setattr(agreement, "compared_labels", lambda session, project_id: by_solution)
    report = agreement.project_agreement(None, SimpleNamespace(id=1, overlap=3))  # type: ignore[arg-type]

    units = defaultdict(list)
    for solution, labels in by_solution.items():
        for label in labels:
            for index, rated in enumerate(label.alternatives):
                for alternative, rating in rated:
                    units[(solution, label.path[:index], index, alternative)].append((label.name, rating))
    confusion = [[0] * 3 for _ in range(3)]
    pairs: dict[str, list[bool]] = defaultdict(list)
    for rated in units.values():
        for (name_a, a), (name_b, b) in combinations(rated, 2):
            confusion[a + 1][b + 1] += 1
            confusion[b + 1][a + 1] += 1
            pairs[name_a].append(a == b)
            pairs[name_b].append(a == b)
    shared = [[r for _, r in rated] for rated in units.values() if len(rated) >= 2]
    assert report.confusion == confusion
    assert report.units == len(shared) and report.rating_pairs == sum(len(u) * (len(u) - 1) // 2 for u in shared)
    for row in report.labelers:
        assert row.rating_pairs == len(pairs[row.name])
        assert row.rating_agreement == (sum(pairs[row.name]) / len(pairs[row.name]) if pairs[row.name] else None)
        own = [[r for _, r in rated] for rated in units.values()
               if len(rated) >= 2 and row.name in {name for name, _ in rated}]
        _assert_alpha(row.step_alpha, own)
    _assert_alpha(report.step_alpha, shared)


def _assert_alpha(alpha: float | None, units: list[list[int]]) -> None:
    """α as written out by hand, or none where nothing is paired or every rating is the same."""
    if not units or len({r for unit in units for r in unit}) < 2:
        assert alpha is None
    else:
        assert alpha == pytest.approx(_ordinal_alpha_by_hand(units))


def test_the_agreement_benchmark_times_both_views_against_reading_the_steps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    output = tmp_path / "speed.json"
    done = subprocess.run([sys.executable, str(Path(__file__).parents[2] / "bench" / "agreement_speed.py"), "--quick",
                           "--output", str(output)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = json.loads(output.read_text())["runs"]
    assert [run["database"] for run in runs] == ["postgresql", "sqlite"]
    for run in runs:
        # Two labels a solution, a few of the records duplicates of others.
        assert 350 < run["labels"] <= 400
        assert run["baseline_read_steps_s"] > 0 and run["labels_tab_s"] > 0 and run["agreement_report_s"] > 0


@pytest.mark.parametrize("seed", range(5))
def test_a_label_read_for_comparing_has_the_first_error_the_gate_finds(seed: int) -> None:
    # _read finds the first error as it walks the steps; quality.service.first_error is the rule.
    rng = random.Random(seed)
    for _ in range(200):
        steps = []
        for _ in range(rng.randint(0, 6)):
            completions = [{**({"text": f"t{j}"} if rng.random() < 0.5 else {}), "rating": rng.choice([-1, 0, 1, None])}
                           for j in range(rng.choice([1, 1, 2, 3]))]
            human = rng.choice([None, None, "written", {"text": "w", "rating": rng.choice([None, -1, 1])}])
            chosen = rng.choice([None, 0, len(completions) - 1])
            steps.append({"completions": completions, "chosen_completion": chosen, "human_completion": human})
        assert agreement._read(steps).first_error == first_error(steps)
