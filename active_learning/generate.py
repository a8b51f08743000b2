"""Sample candidate solutions from a causal language model, and cut what it writes into steps.

The model is asked for one step a line and PRM800K's closing `# Answer` step. vLLM samples when
it is installed; transformers' `generate` otherwise. Putting the samples into a project's pool
is the platform's part (app.rounds.generation).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

PROMPT = (
    "Solve the following math problem step by step. Write each step on its own line. "
    "When you are done, write a line with only `# Answer` and, on the next line, the final "
    "answer alone.\n\nProblem: {problem}\n\nSolution:\n"
)
_ANSWER_LINE = re.compile(r"^\s*#\s*Answer\s*:?\s*(.*)$", re.IGNORECASE)
# Control characters a sampler can emit; the import refuses NUL (PostgreSQL text cannot hold it).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class GenerationConfig:
    model: str
    samples: int = 4
    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int = 0
    batch_size: int = 8

    def origin(self, backend: str) -> dict:
        """What each generated solution records about where it came from."""
        params = {k: v for k, v in asdict(self).items() if k not in ("model", "batch_size")}
        return {"model": self.model, "backend": backend, **params}


def parse_solution(text: str) -> tuple[list[str], str | None]:
    """(steps, final answer) from generated text: one step a line, PRM800K's `# Answer` step
    last. Text after the answer line is the model rambling on and is dropped."""
    steps: list[str] = []
    lines = _CONTROL.sub("", text).splitlines()
    for i, line in enumerate(lines):
        marker = _ANSWER_LINE.match(line)
        if marker:
            answer = marker.group(1).strip() or next((rest.strip() for rest in lines[i + 1:] if rest.strip()), "")
            if answer:
                steps.append(f"# Answer\n\n{answer}")
                return steps, answer
            break
        if line.strip():
            steps.append(line.strip())
    return steps, None


def _sample_vllm(config: GenerationConfig, prompts: Sequence[str]) -> list[list[str]] | None:
    try:
        from vllm import LLM, SamplingParams
    except ImportError:
        return None
    llm = LLM(model=config.model, seed=config.seed)
    params = SamplingParams(n=config.samples, temperature=config.temperature, top_p=config.top_p,
                            max_tokens=config.max_new_tokens, seed=config.seed)
    return [[o.text for o in out.outputs] for out in llm.generate(list(prompts), params)]


def _sample_transformers(config: GenerationConfig, prompts: Sequence[str]) -> Iterator[list[str]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    local = os.path.isdir(config.model)  # a local directory never triggers a download attempt
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(config.model, local_files_only=local)
    tokenizer.padding_side = "left"  # generation continues from the right end of each row
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        config.model, local_files_only=local,
        dtype=torch.bfloat16 if device == "cuda" else torch.float32,
    ).to(device).eval()
    set_seed(config.seed)
    sampling = config.temperature > 0
    for start in range(0, len(prompts), config.batch_size):
        batch = list(prompts[start:start + config.batch_size])
        inputs = tokenizer(batch, return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            out = model.generate(
                **inputs, do_sample=sampling, temperature=config.temperature if sampling else None,
                top_p=config.top_p if sampling else None, max_new_tokens=config.max_new_tokens,
                num_return_sequences=config.samples, pad_token_id=tokenizer.pad_token_id,
            )  # [batch * samples, prompt + new]
        texts = tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        for i in range(len(batch)):
            yield texts[i * config.samples:(i + 1) * config.samples]


def sample(config: GenerationConfig, problems: Sequence[str]) -> tuple[str, list[list[str]]]:
    """(backend, per problem the `samples` texts the model wrote)."""
    prompts = [PROMPT.format(problem=p) for p in problems]
    texts = _sample_vllm(config, prompts)
    if texts is not None:
        return "vllm", texts
    return "transformers", list(_sample_transformers(config, prompts))
