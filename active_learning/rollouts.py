"""Step labels from rollouts: how often completions sampled from a step's prefix reach the answer.

Math-Shepherd (Wang et al., 2024) labels a step by sampling K completions from the solution cut
after it: a step from which the generator still reaches the ground-truth answer is probably
right, one from which it never does probably holds (or follows) a mistake. The share of right
completions is the soft label; a hard label is +1 above `threshold` and -1 otherwise (0.0 is
Math-Shepherd's hard estimate: +1 when any completion is right). A rollout cannot tell a neutral
step from a useful one, so it never gives 0.

Two methods:
- `mc` estimates every step's prefix (K rollouts each, all prefixes of a solution in parallel);
- `binary` (OmegaPRM, Luo et al., 2024) assumes that once a prefix is wrong every longer one is,
  and finds the first wrong step by binary search over prefixes: about K * log2(steps) rollouts.
  Steps before the first error are rated +1 by that assumption without being estimated.
Either way a solution's final step, where it states its answer, is graded directly (share 1 or
0, no rollouts), and ratings stop at the first -1 as PRM800K's labelers do.

Prompt formats: a generator whose tokenizer has the step marker (a base from `stepwise prm
pretrain`) reads `problem + "\\n\\n"` then each step followed by the marker, as
`data.tokenize_example` lays it out, and a completion ends at the marker after its `# Answer`
step. Any other model gets generate.PROMPT (the prompt the platform samples candidates with)
followed by the steps one a line, and writes the rest one step a line up to `# Answer`.

Completions are graded by grading.grade against the task's ground-truth answer.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Protocol

from active_learning.data import PROMPT_END
from active_learning.generate import PROMPT, load_causal_lm, parse_solution, refuse_prm_checkpoint
from active_learning.generator_spec import check_generator_spec, local_model_path
from active_learning.grading import extract_answer, grade
from active_learning.tokenizer import STEP_MARKER

METHODS = ("mc", "binary")
FORMATS = ("stepwise", "plain")


@dataclass(frozen=True)
class RolloutSettings:
    rollouts: int = 8
    method: str = "mc"
    threshold: float = 0.0
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    batch_size: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if self.rollouts < 1 or self.batch_size < 1 or self.max_new_tokens < 1:
            raise ValueError("rollouts, batch_size and max_new_tokens must be positive")
        if not 0 <= self.threshold < 1:
            raise ValueError("threshold must be in [0, 1): a step is +1 when its share exceeds it")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")

    def describe(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RolloutTask:
    key: str
    problem: str
    steps: list[str]
    answer: str  # the ground truth


@dataclass(frozen=True)
class StepEstimate:
    step: int
    share: float | None  # None: not estimated
    rollouts: int
    rating: int | None  # None: after the first error


@dataclass(frozen=True)
class RolloutLabel:
    key: str
    steps: list[StepEstimate]
    first_error: int | None
    generator: dict  # backend, model, prompt format and the sampling settings

    @property
    def rollouts(self) -> int:
        return sum(s.rollouts for s in self.steps)


class Generator(Protocol):
    description: dict  # {"backend": ..., "model": ..., "format": "stepwise" | "plain"}

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]: ...


# ---- prompt formats ----

def prefix_prompt(prompt_format: str, problem: str, steps: list[str]) -> str:
    """The text a generator continues: the problem and `steps` as it reads solutions."""
    if prompt_format == "stepwise":
        return problem + PROMPT_END + "".join(step + STEP_MARKER for step in steps)
    return PROMPT.format(problem=problem) + "".join(step.strip() + "\n" for step in steps)


def completed_answer(prompt_format: str, completion: str) -> str | None:
    """The final answer a completion writes, or None when it never reaches `# Answer`."""
    if prompt_format == "stepwise":
        # The pretrained base was never shown text after a solution's last marker: what it
        # writes there is noise, so the completion ends at the first step holding an answer.
        for step in completion.split(STEP_MARKER):
            answer = extract_answer(step)
            if answer is not None:
                return answer
        return None
    return parse_solution(completion)[1]


def _finished(prompt_format: str, completion: str) -> bool:
    if prompt_format == "stepwise":
        return any(extract_answer(step) is not None for step in completion.split(STEP_MARKER)[:-1])
    return parse_solution(completion)[1] is not None


def _share_right(prompt_format: str, completions: list[str], truth: str) -> float:
    answers = [completed_answer(prompt_format, c) for c in completions]
    return sum(a is not None and grade(a, truth) == "right" for a in answers) / len(completions)


# ---- generators ----

def _call_seed(settings: RolloutSettings, prompts: list[str]) -> int:
    # Seeded by the batch's content, so a resumed run samples a batch as the first run did.
    return (settings.seed * 1_000_003 + zlib.crc32("\x00".join(prompts).encode())) % 2**31


class TransformersGenerator:
    """Samples with `generate` from a causal LM: a local directory, or a hub id the user named."""

    def __init__(self, model: str, device: str = "auto") -> None:
        from active_learning.model import resolve_device

        self.device = resolve_device(device)
        self.model, self.tokenizer = load_causal_lm(model, self.device)
        self.format = "stepwise" if STEP_MARKER in self.tokenizer.get_vocab() else "plain"
        self.description = {"backend": "transformers", "model": _model_name(model), "format": self.format}

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]:
        import torch
        from transformers import set_seed

        set_seed(_call_seed(settings, prompts))
        inputs = self.tokenizer(prompts, return_tensors="pt", padding=True)
        inputs = inputs.to(self.device)
        sampling = settings.temperature > 0
        start = inputs["input_ids"].shape[1]
        with torch.inference_mode():
            out = self.model.generate(
                **inputs, do_sample=sampling, temperature=settings.temperature if sampling else None,
                top_p=settings.top_p if sampling else None, max_new_tokens=settings.max_new_tokens,
                num_return_sequences=settings.rollouts, pad_token_id=self.tokenizer.pad_token_id,
                stopping_criteria=[_AnswerWritten(self, start)])
        texts = self.tokenizer.batch_decode(out[:, start:], skip_special_tokens=False)
        texts = [self.clean(t) for t in texts]
        k = settings.rollouts
        return [texts[i * k:(i + 1) * k] for i in range(len(prompts))]

    def clean(self, text: str) -> str:
        """A decoded completion up to its end of text, without padding."""
        eos, pad = self.tokenizer.eos_token, self.tokenizer.pad_token
        if eos:
            text = text.split(eos)[0]
        return text.replace(pad, "") if pad and pad != eos else text


class _AnswerWritten:
    """Stops each row once its completion has stated an answer, instead of at max_new_tokens:
    the tiny base never learnt to stop, and most of a rollout's cost is its length."""

    def __init__(self, generator: TransformersGenerator, start: int) -> None:
        self.generator, self.start = generator, start
        tokenizer = generator.tokenizer
        self.marker = tokenizer.convert_tokens_to_ids(STEP_MARKER) if generator.format == "stepwise" else None

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        # Only a row that just closed a step (stepwise) can have finished; in the plain format
        # any token can close the answer line.
        rows = ((input_ids[:, -1] == self.marker).nonzero().flatten().tolist() if self.marker is not None
                else range(input_ids.shape[0]))
        for row in rows:
            text = self.generator.tokenizer.decode(input_ids[row, self.start:], skip_special_tokens=False)
            done[row] = _finished(self.generator.format, self.generator.clean(text))
        return done


def _model_name(model: str) -> str:
    return os.path.basename(os.path.normpath(model)) if os.path.isdir(model) else model


class VllmGenerator:
    def __init__(self, model: str, prompt_format: str) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise ValueError("vllm is not installed: pip install vllm, or serve the model with "
                             "`vllm serve` and give its URL (http://host:port/v1)") from None
        refuse_prm_checkpoint(model)
        self.llm = LLM(model=model)
        self.format = prompt_format
        self.description = {"backend": "vllm", "model": model, "format": prompt_format}

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]:
        from vllm import SamplingParams

        params = SamplingParams(n=settings.rollouts, temperature=settings.temperature, top_p=settings.top_p,
                                max_tokens=settings.max_new_tokens, seed=_call_seed(settings, prompts),
                                skip_special_tokens=self.format == "plain")
        return [[o.text for o in out.outputs] for out in self.llm.generate(prompts, params)]


class EndpointError(RuntimeError):
    """An OpenAI-compatible endpoint that cannot be reached or answers badly: the user's to
    mend (address, server, model name), not a bug, so the CLI says it in one line."""


class OpenAIGenerator:
    """An OpenAI-compatible `/v1/completions` endpoint (a vLLM server, say): every prompt of a
    batch in one request, `n` completions each."""

    def __init__(self, url: str, model: str | None, prompt_format: str, api_key: str | None = None,
                 timeout_s: float = 600) -> None:
        self.url, self.api_key, self.timeout_s = url.rstrip("/"), api_key, timeout_s
        self.model = model or self._served_model()
        self.format = prompt_format
        self.description = {"backend": "openai", "model": self.model, "url": self.url, "format": prompt_format}

    def _request(self, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode(errors="replace")
            raise EndpointError(f"{self.url}{path} answered {e.code}: {detail}") from None
        except urllib.error.URLError as e:
            raise EndpointError(f"cannot reach {self.url}{path}: {e.reason}") from None

    def _served_model(self) -> str:
        models = self._request("/models").get("data") or []
        if not models:
            raise EndpointError(f"{self.url}/models lists no model; name one: {self.url}#MODEL")
        return models[0]["id"]

    def complete(self, prompts: list[str], settings: RolloutSettings) -> list[list[str]]:
        body = {"model": self.model, "prompt": prompts, "n": settings.rollouts,
                "temperature": settings.temperature, "top_p": settings.top_p,
                "max_tokens": settings.max_new_tokens, "seed": _call_seed(settings, prompts)}
        if self.format == "stepwise":
            # vLLM's extension: the step markers must come back to cut the completion into steps.
            body["skip_special_tokens"] = False
        choices = self._request("/completions", body).get("choices") or []
        if len(choices) != len(prompts) * settings.rollouts:
            raise EndpointError(f"{self.url}/completions returned {len(choices)} choices for "
                               f"{len(prompts)} prompts x n={settings.rollouts}")
        texts = [c["text"] for c in sorted(choices, key=lambda c: c["index"])]
        k = settings.rollouts
        return [texts[i * k:(i + 1) * k] for i in range(len(prompts))]


def _format_of(model: str) -> str:
    """stepwise for a local model whose tokenizer has the step marker, else plain."""
    if not os.path.isdir(model):
        return "plain"
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    return "stepwise" if STEP_MARKER in tokenizer.get_vocab() else "plain"


def open_generator(spec: str, device: str = "auto", api_key: str | None = None,
                   prompt_format: str | None = None) -> Generator:
    """A generator from a spec: `http(s)://host:port/v1[#model]` (an OpenAI-compatible server),
    `vllm:MODEL`, or a local directory or hub id loaded through transformers.

    `prompt_format` (stepwise or plain) is read from the tokenizer of a local model; for a server
    it defaults to plain, and `stepwise` is for a server serving a pretrained Stepwise base.
    """
    if prompt_format is not None and prompt_format not in FORMATS:
        raise ValueError(f"prompt format must be one of {', '.join(FORMATS)}, not {prompt_format!r}")
    spec = check_generator_spec(spec)
    if urllib.parse.urlsplit(spec).scheme in ("http", "https"):
        url, _, model = spec.partition("#")
        return OpenAIGenerator(url, model or None, prompt_format or "plain", api_key)
    if spec.startswith("vllm:"):
        model = spec.removeprefix("vllm:")
        return VllmGenerator(model, prompt_format or _format_of(model))
    generator = TransformersGenerator(local_model_path(spec), device)
    if prompt_format is not None:
        generator.format = generator.description["format"] = prompt_format
    return generator


# ---- labeling ----

@dataclass(eq=False)
class _Search:
    """One solution's estimates so far, and which prefixes (by their last step) it still needs."""

    task: RolloutTask
    settings: RolloutSettings
    shares: dict[int, float] = field(default_factory=dict)
    spent: dict[int, int] = field(default_factory=dict)
    requested: set[int] = field(default_factory=set)
    lo: int = -1  # binary: the longest prefix known right (-1: the problem alone)
    hi: int | None = None  # binary: the shortest prefix known wrong

    def __post_init__(self) -> None:
        last = len(self.task.steps) - 1
        if last >= 0 and extract_answer(self.task.steps[last]) is not None:
            # The solution states its answer: grade it, no rollouts needed.
            self.record(last, float(grade(self.task.steps[last], self.task.answer) == "right"), 0)

    def bad(self, step: int) -> bool:
        return self.shares[step] <= self.settings.threshold

    def _wanted(self) -> list[int]:
        last = len(self.task.steps) - 1
        if self.settings.method == "mc":
            return [i for i in range(last + 1) if i not in self.shares]
        if last < 0:
            return []
        if last not in self.shares:
            return [last]
        if self.hi is None or self.hi - self.lo <= 1:
            return []  # the whole solution is right, or the first error is found
        return [(self.lo + self.hi) // 2]

    def take(self) -> list[int]:
        """The prefixes to roll out next that are not already on their way."""
        new = [i for i in self._wanted() if i not in self.requested]
        self.requested.update(new)
        return new

    def record(self, step: int, share: float, rollouts: int) -> None:
        self.shares[step], self.spent[step] = share, rollouts
        if self.settings.method != "binary":
            return
        if self.hi is None:
            # The first estimate is the whole solution's: the search starts only if it fails.
            if self.bad(step):
                self.hi = step
        elif self.bad(step):
            self.hi = step
        else:
            self.lo = step

    @property
    def done(self) -> bool:
        return not self._wanted()

    def label(self, generator: dict) -> RolloutLabel:
        if self.settings.method == "mc":
            first_error = next((i for i in sorted(self.shares) if self.bad(i)), None)
        else:
            first_error = self.hi
        estimates = []
        for i in range(len(self.task.steps)):
            rating = None if first_error is not None and i > first_error else -1 if i == first_error else 1
            estimates.append(StepEstimate(i, self.shares.get(i), self.spent.get(i, 0), rating))
        return RolloutLabel(self.task.key, estimates, first_error, generator)


def autolabel(generator: Generator, tasks: Iterable[RolloutTask], settings: RolloutSettings, *,
              skip: Container[str] = (), progress: Callable[[int, int], None] | None = None,
              ) -> Iterator[RolloutLabel]:
    """A RolloutLabel per task whose key is not in `skip`, each as soon as it is finished.

    Prefixes of several solutions go to the generator together, `settings.batch_size` a call;
    a caller that stores each label as it comes and passes the stored keys as `skip` resumes an
    interrupted run where it stopped. `progress(done, total)` follows each finished solution.
    """
    pending = [t for t in tasks if t.key not in skip]
    prompt_format = generator.description.get("format", "plain")
    record = {**generator.description, "settings": settings.describe()}
    waiting = iter(pending)
    active: list[_Search] = []
    queue: list[tuple[_Search, int]] = []
    done = 0
    while active or done + len(active) < len(pending):
        # Admit solutions until a batch is full: binary search asks one prefix at a time.
        while len(queue) < settings.batch_size and done + len(active) < len(pending):
            search = _Search(next(waiting), settings)
            active.append(search)
            queue += [(search, i) for i in search.take()]
        if queue:
            batch, queue = queue[:settings.batch_size], queue[settings.batch_size:]
            prompts = [prefix_prompt(prompt_format, s.task.problem, s.task.steps[:i + 1]) for s, i in batch]
            for (search, i), completions in zip(batch, generator.complete(prompts, settings), strict=True):
                search.record(i, _share_right(prompt_format, completions, search.task.answer), len(completions))
                queue += [(search, j) for j in search.take()]
        for search in [s for s in active if s.done]:
            active.remove(search)
            done += 1
            yield search.label(record)
            if progress is not None:
                progress(done, len(pending))
