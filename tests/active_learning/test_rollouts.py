"""Rollout labels: the search over prefixes, the three ways of sampling, and resuming.

The search is checked against the oracle with a deterministic generator that finishes a
synthetic solution correctly from wherever its prefix stands: rollouts from a prefix before the
first mistake reach the answer, from one at or after it they carry the mistake on. The sampling
paths run for real: a tiny causal LM pretrained here through transformers, and an HTTP server
speaking the OpenAI completions protocol.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from active_learning.config import PretrainConfig
from active_learning.pretrain import pretrain
from active_learning.rollouts import (
    RolloutSettings, RolloutTask, autolabel, completed_answer, open_generator, prefix_prompt,
)
from active_learning.synthetic import _apply, iter_candidates, to_prm800k
from active_learning.tokenizer import STEP_MARKER

_RESULT = re.compile(r"= (-?\d+)\$")


class FinishingGenerator:
    """Finishes each synthetic prefix by applying the problem's remaining operations, correctly,
    to the value the prefix last wrote: the generator the tiny LM approximates."""

    description = {"backend": "test", "model": "finisher", "format": "stepwise"}

    def __init__(self, candidates) -> None:
        self.problems = {c.problem.text: c.problem for c in candidates}
        self.calls: list[int] = []

    def finish(self, prompt: str) -> str:
        problem_text, _, written = prompt.partition("\n\n")
        problem = self.problems[problem_text]
        results = [int(m) for m in _RESULT.findall(written)]
        value = results[-1] if results else problem.start
        for op, b in problem.ops[len(results):]:
            value = _apply(op, value, b)
        return f"${value}$.\n\n# Answer\n\n{value}{STEP_MARKER}"

    def complete(self, prompts, settings):
        self.calls.append(len(prompts))
        return [[self.finish(p)] * settings.rollouts for p in prompts]


def _tasks(candidates):
    return [RolloutTask(f"s{i}", c.problem.text, c.steps, str(c.problem.answer)) for i, c in enumerate(candidates)]


# Mistakes that change the answer: rollouts can see them (a false remark leaves the value intact).
VISIBLE = ("result", "operand", "carry")


def test_both_methods_find_the_oracle_first_error_and_binary_spends_less() -> None:
    candidates = list(iter_candidates(12, 3, seed=5, error_rate=0.7, errors=VISIBLE))
    generator = FinishingGenerator(candidates)
    spent = {}
    for method in ("mc", "binary"):
        labels = list(autolabel(generator, _tasks(candidates), RolloutSettings(rollouts=3, method=method,
                                                                                batch_size=5)))
        assert [label.key for label in labels] != [] and len(labels) == len(candidates)
        by_key = {label.key: label for label in labels}
        for i, candidate in enumerate(candidates):
            label = by_key[f"s{i}"]
            assert label.first_error == candidate.first_error, (method, candidate.steps)
            ratings = [s.rating for s in label.steps]
            expected = candidate.ratings if candidate.first_error is None else \
                candidate.ratings[:candidate.first_error + 1]
            assert [r for r in ratings if r is not None] == [1 if r >= 0 else -1 for r in expected]
            assert all(s.share is None or 0 <= s.share <= 1 for s in label.steps)
            assert label.generator["settings"]["method"] == method and label.generator["model"] == "finisher"
        spent[method] = sum(label.rollouts for label in labels)
    assert max(generator.calls) <= 5
    assert 0 < spent["binary"] < spent["mc"]


def test_the_final_step_is_graded_without_rollouts_and_mc_rates_until_the_first_error() -> None:
    candidate = next(c for c in iter_candidates(40, 1, seed=2, error_rate=0.9, errors=("result",))
                     if c.first_error is not None and c.first_error < len(c.steps) - 2)
    label = next(autolabel(FinishingGenerator([candidate]), _tasks([candidate]), RolloutSettings(rollouts=2)))
    last = label.steps[-1]
    assert last.rollouts == 0 and last.share == 0.0
    assert all(s.rollouts == 2 for s in label.steps[:-1])
    assert [s.rating for s in label.steps[label.first_error + 1:]] == [None] * (len(candidate.steps) - label.first_error - 1)


def test_resuming_skips_the_keys_already_done_and_reports_progress() -> None:
    candidates = list(iter_candidates(5, 2, seed=1, errors=VISIBLE))
    tasks = _tasks(candidates)
    settings = RolloutSettings(rollouts=2, method="binary", batch_size=3)
    first = []
    for label in autolabel(FinishingGenerator(candidates), tasks, settings):
        first.append(label)
        if len(first) == 4:
            break  # interrupted
    seen = []
    rest = list(autolabel(FinishingGenerator(candidates), tasks, settings, skip={l.key for l in first},
                          progress=lambda done, total: seen.append((done, total))))
    assert sorted(l.key for l in first + rest) == sorted(t.key for t in tasks)
    assert seen == [(done, len(tasks) - 4) for done in range(1, len(tasks) - 3)]


def test_settings_and_specs_that_cannot_work_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="method"):
        RolloutSettings(method="beam")
    with pytest.raises(ValueError, match="threshold"):
        RolloutSettings(threshold=1.0)
    with pytest.raises(ValueError, match="no such model directory"):
        open_generator(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="only http"):
        open_generator("ftp://example.org/v1")
    with pytest.raises(ValueError, match="vllm"):
        open_generator("vllm:some/model")
    with pytest.raises(ValueError, match="prompt format"):
        open_generator(str(tmp_path), prompt_format="chat")
    with pytest.raises(RuntimeError, match="cannot reach"):
        open_generator("http://127.0.0.1:9/v1")  # asks /v1/models for the model


def test_answers_are_read_where_each_format_writes_them() -> None:
    assert completed_answer("stepwise", f"$3 + 4 = 7$.{STEP_MARKER}$7$.\n\n# Answer\n\n7{STEP_MARKER}9 9") == "7"
    assert completed_answer("stepwise", f"$3 + 4 = 7$.{STEP_MARKER}$7 - 1") is None
    assert completed_answer("plain", "$3 + 4 = 7$.\n# Answer\n\n7\nmore text") == "7"
    assert prefix_prompt("stepwise", "P?", ["a", "b"]) == f"P?\n\na{STEP_MARKER}b{STEP_MARKER}"
    assert prefix_prompt("plain", "P?", ["a", "b"]).endswith("Problem: P?\n\nSolution:\na\nb\n")


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    records = [to_prm800k(c) for c in iter_candidates(40, 1, seed=9, error_rate=0.0)]
    output = tmp_path_factory.mktemp("rollouts") / "base"
    return pretrain(PretrainConfig(output=str(output), steps=3, batch_size=4, max_length=256, device="cpu"), records)


def test_a_pretrained_tiny_lm_rolls_out_through_transformers(tiny_base: Path) -> None:
    generator = open_generator(str(tiny_base), device="cpu")
    assert generator.description == {"backend": "transformers", "model": "base", "format": "stepwise"}
    candidates = list(iter_candidates(3, 2, seed=4, errors=VISIBLE))
    spent = {}
    for method in ("mc", "binary"):
        settings = RolloutSettings(rollouts=3, method=method, max_new_tokens=24, batch_size=4)
        labels = list(autolabel(generator, _tasks(candidates), settings))
        assert len(labels) == len(candidates)
        for label, candidate in zip(sorted(labels, key=lambda l: int(l.key[1:])), candidates):
            assert len(label.steps) == len(candidate.steps)
            assert all(s.share is None or 0 <= s.share <= 1 for s in label.steps)
            assert label.first_error is None or label.steps[label.first_error].rating == -1
        spent[method] = sum(label.rollouts for label in labels)
    assert spent["binary"] < spent["mc"]
    completions = generator.complete([prefix_prompt("stepwise", candidates[0].problem.text, candidates[0].steps[:1])],
                                     RolloutSettings(rollouts=2, max_new_tokens=5))
    assert len(completions) == 1 and len(completions[0]) == 2 and all(isinstance(t, str) for t in completions[0])


def test_a_prm_checkpoint_is_not_taken_for_a_generator(tiny_base: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "prm"
    checkpoint.mkdir()
    (checkpoint / "stepwise.json").write_text(json.dumps({"format": 1, "config": {}}))
    with pytest.raises(ValueError, match="PRM checkpoint"):
        open_generator(str(checkpoint))


class _CompletionsServer:
    """A real HTTP server answering /v1/models and /v1/completions from a FinishingGenerator."""

    def __init__(self, finisher: FinishingGenerator) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "served-finisher", "object": "model"}]})

            def do_POST(self) -> None:
                if self.path != "/v1/completions":
                    self._send(404, {"error": "no such route"})
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({**body, "authorization": self.headers.get("Authorization")})
                if body["max_tokens"] < 1:
                    self._send(400, {"error": "max_tokens must be positive"})
                    return
                prompts = body["prompt"]
                choices = [{"index": i * body["n"] + j, "text": finisher.finish(p), "finish_reason": "stop"}
                           for i, p in enumerate(prompts) for j in range(body["n"])]
                self._send(200, {"object": "text_completion", "model": body["model"], "choices": choices[::-1]})

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_openai_compatible_endpoint_is_asked_over_http_with_the_sampling_settings() -> None:
    candidates = list(iter_candidates(4, 2, seed=3, error_rate=0.7, errors=VISIBLE))
    server = _CompletionsServer(FinishingGenerator(candidates))
    try:
        generator = open_generator(server.url, api_key="secret", prompt_format="stepwise")
        assert generator.description["model"] == "served-finisher"  # from /v1/models
        settings = RolloutSettings(rollouts=3, temperature=0.9, top_p=0.8, max_new_tokens=77, batch_size=4)
        labels = list(autolabel(generator, _tasks(candidates), settings))
        assert {l.key: l.first_error for l in labels} == {f"s{i}": c.first_error for i, c in enumerate(candidates)}
        assert labels[0].generator["backend"] == "openai" and labels[0].generator["settings"]["rollouts"] == 3
        first = server.requests[0]
        assert (first["n"], first["temperature"], first["top_p"], first["max_tokens"]) == (3, 0.9, 0.8, 77)
        assert first["model"] == "served-finisher" and first["authorization"] == "Bearer secret"
        assert first["skip_special_tokens"] is False
        assert all(1 <= len(r["prompt"]) <= 4 for r in server.requests)
        assert first["prompt"][0].startswith(candidates[0].problem.text + "\n\n")

        named = open_generator(server.url + "#other-name", prompt_format="stepwise")
        assert named.description["model"] == "other-name"
        with pytest.raises(RuntimeError, match="answered 400"):
            named.complete(["x"], _ZeroTokens())
    finally:
        server.close()


class _ZeroTokens:
    """Settings a server refuses (max_tokens 0), which RolloutSettings itself would not allow."""

    rollouts, temperature, top_p, max_new_tokens, seed = 1, 0.7, 1.0, 0, 0


def _bench():
    import importlib.util

    path = Path(__file__).parents[2] / "bench" / "rollout_labels.py"
    spec = importlib.util.spec_from_file_location("rollout_labels_bench", path)
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve the module's annotations through sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_scores_labels_against_the_oracle_by_kind_of_mistake() -> None:
    bench = _bench()
    pool = list(iter_candidates(30, 3, seed=0, error_rate=0.7, errors=(*VISIBLE, "remark")))
    labels = sorted(autolabel(FinishingGenerator(pool), _tasks(pool), RolloutSettings(rollouts=2)),
                    key=lambda label: int(label.key[1:]))
    scores = bench.agreement(labels, pool)
    # A perfect finisher sees every mistake that changes the value, and none that does not.
    assert scores["recall_by_kind"] == {"carry": 1.0, "operand": 1.0, "remark": 0.0, "result": 1.0}
    assert scores["precision_wrong"] == 1.0 and scores["flagged_too_early"] == 0.0
    remarks = sum(bench.error_kind(c) == "remark" for c in pool)
    assert scores["missed_or_late"] == remarks / len(pool) > 0
    record = bench.rollout_record(pool[0], labels[0])
    rated = [s["completions"][0]["rating"] for s in record["label"]["steps"]]
    assert rated == [s.rating for s in labels[0].steps if s.rating is not None]


def test_the_simulated_generator_continues_from_the_prefix_value_and_slips_at_its_rate() -> None:
    bench = _bench()
    pool = list(iter_candidates(30, 3, seed=0, error_rate=0.7, errors=(*VISIBLE, "remark")))
    exact = bench.SimulatedGenerator([c.problem for c in pool], 0.0, seed=0)
    labels = sorted(autolabel(exact, _tasks(pool), RolloutSettings(rollouts=2)), key=lambda label: int(label.key[1:]))
    # Without slips it is the perfect finisher: every value-changing mistake found, no remark.
    assert bench.agreement(labels, pool)["recall_by_kind"] == {"carry": 1.0, "operand": 1.0, "remark": 0.0, "result": 1.0}
    clean = next(c for c in pool if c.first_error is None)
    prompt = prefix_prompt("plain", clean.problem.text, clean.steps[:1])
    sloppy = bench.SimulatedGenerator([clean.problem], 0.5, seed=1)
    answers = [completed_answer("plain", text) for text in sloppy.complete([prompt], RolloutSettings(rollouts=400))[0]]
    # From the first step on, each remaining operation slips with chance 0.5.
    remaining = len(clean.problem.ops) - 1
    right = sum(a == str(clean.problem.answer) for a in answers) / len(answers)
    assert abs(right - 0.5 ** remaining) < 0.1
    with pytest.raises(ValueError, match="0 <= P < 1"):
        bench.SimulatedGenerator([clean.problem], 1.0, seed=0)
