"""The research pages' charts: a round's loss from its training log, the rounds' snapshots."""

import pytest

from app.models import Round
from app.rounds.charts import PAD_LEFT, PAD_RIGHT, WIDTH, labels_chart, loss_chart


def test_loss_chart_spans_the_run_with_round_gridlines() -> None:
    log = {"total_steps": 40, "train": [{"step": 10, "loss": 3.2}, {"step": 20, "loss": 1.1}],
           "eval": [{"step": 40, "metrics": {}}]}
    chart = loss_chart(log)
    assert chart is not None
    assert [g["label"] for g in chart.gridlines] == ["0", "2.5", "5"]
    assert [t["label"] for t in chart.steps] == ["0", "20", "40"]
    # Steps are placed on the run's whole length, so an unfinished log ends halfway.
    [series] = chart.series
    assert series.points[-1]["x"] == PAD_LEFT + (WIDTH - PAD_LEFT - PAD_RIGHT) / 2
    assert chart.evals[0]["x"] == WIDTH - PAD_RIGHT and series.points[-1]["value"] == 1.1
    assert series.label == "loss"


def test_a_run_that_also_learnt_next_tokens_shows_its_step_loss_apart() -> None:
    log = {"total_steps": 20, "train": [{"step": 10, "loss": 4.6, "step_loss": 0.9},
                                        {"step": 20, "loss": 3.8, "step_loss": 0.5}]}
    chart = loss_chart(log)
    assert chart is not None
    assert [(s.key, s.label, [p["value"] for p in s.points]) for s in chart.series] == [
        ("loss", "step loss + next-token loss", [4.6, 3.8]), ("step_loss", "step loss", [0.9, 0.5])]
    assert chart.series[1].points[-1]["y"] > chart.series[0].points[-1]["y"]  # lower on the chart


def test_no_chart_without_loss_entries() -> None:
    assert loss_chart(None) is None
    assert loss_chart({"train": []}) is None
    assert loss_chart({"train": [{"step": "one", "loss": 1.0}, {"step": 2}, "x"]}) is None
    assert loss_chart({"train": [{"step": 1, "loss": float("nan")}, {"step": 2, "loss": float("inf")}]}) is None


@pytest.mark.parametrize(("counts", "gridlines"), [
    ([0], ["0", "1", "2"]), ([1], ["0", "1", "2"]), ([3, None], ["0", "2", "4"]), ([5], ["0", "3", "6"]),
    ([137, 40], ["0", "100", "200"]), ([2500], ["0", "2000", "4000"]),
])
def test_snapshot_gridlines_are_whole_counts_each_once(counts, gridlines) -> None:
    rounds = [Round(number=i + 1, snapshot_labels=n, metrics={}) for i, n in enumerate(counts)]
    chart = labels_chart(rounds)
    assert [g["label"] for g in chart.gridlines] == gridlines
    assert [p["value"] for p in chart.series[0].points] == [n for n in counts if n is not None]
