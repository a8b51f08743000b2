"""Label files (PRM800K or TRL stepwise supervision) to training examples, and examples to tokens.

An Example is one problem, a sequence of steps, and a rating per step (-1/0/+1) or None where the
step is context only. The trainer goes through `tokenize_example` and the scorer through
`scoring_windows`, which lays out the same text, so the model is read at the place it was trained
at.
"""

import codecs
import hashlib
import itertools
import json
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

IGNORE_INDEX = -100  # positions without a label; cross-entropy skips them
PROMPT_END = "\n\n"  # between the problem and the first step (the checkpoint's prompt format)
# The token read after each step (active_learning.tokenizer adds it to every tokenizer).
STEP_MARKER = "<|step|>"
SKIPPED_FINISH_REASONS = {"give_up", "bad_problem"}


HUMAN_SOURCE = "human"
# Who may label (Stepwise's label sources): labelers, or a machine.
SOURCES = (HUMAN_SOURCE, "rollout", "judge", "prm")
# Machine labels (rollouts, a judge, a PRM) are noisier than a labeler's and their errors are
# the generator's own: training takes them only when asked, at the weight asked.
DEFAULT_SOURCE_WEIGHTS = {HUMAN_SOURCE: 1.0}


@dataclass
class Example:
    problem_id: str
    prompt: str
    steps: list[str]
    labels: list[int | None]
    # How much the example counts in the loss (its label source's weight).
    weight: float = 1.0


@dataclass
class Solution:
    """A whole candidate solution, for scoring and best-of-N; `answer` as written, if known."""

    problem_id: str
    prompt: str
    steps: list[str]
    answer: str | None = None
    ground_truth_answer: str | None = None


def problem_id(problem: str) -> str:
    return hashlib.sha1(problem.strip().encode()).hexdigest()[:16]


class PlacedRecords(list):
    """(place, record) pairs read once, for several readers (`load_examples`, `load_solutions`)
    to check without reading the file again, each message still naming the record's place."""


# Files that are no JSON text, known by their first bytes: read as lines they gave "not valid
# JSON (str is not valid UTF-8…)" for line 1, when one sentence says what the file is.
_NOT_JSON = (
    (b"PAR1", "a Parquet file"),
    (b"\xff\xff\xff\xff", "an Arrow stream, as a dataset saved by the datasets library holds"),
    (b"ARROW1", "an Arrow file"),
    (b"\x1f\x8b", "gzip-compressed: decompress it (gunzip) first"),
    (b"PK\x03\x04", "a zip archive: unpack the .jsonl file inside it"),
)


def placed_records(source: str | Path | Iterable[dict]) -> Iterator[tuple[str, dict]]:
    """(place, record): the place is `FILE:LINE` for a JSONL path, `FILE[N]` for a file holding
    one JSON array of records (as ProcessBench's are), `record N` for dicts in memory, so that a
    message about a record says where it is."""
    if isinstance(source, PlacedRecords):
        yield from source
        return
    if not isinstance(source, (str, Path)):
        for number, record in enumerate(source, 1):
            yield f"record {number}", record
        return
    with open(source, "rb") as f:
        head = f.read(4096)
        for magic, what in _NOT_JSON:
            if head.startswith(magic):
                raise ValueError(f"{source}: {what}; these commands read JSONL, as `stepwise export --format "
                                 "prm800k` or `--format trl` writes it")
        if head.removeprefix(codecs.BOM_UTF8).lstrip().startswith(b"["):
            f.seek(0)
            yield from _array_records(source, f.read().removeprefix(codecs.BOM_UTF8))
            return
        f.seek(0)
        for line_no, line in enumerate(f, 1):
            # A byte order mark opens files saved by some Windows editors; the platform's
            # importer takes them too.
            if line_no == 1:
                line = line.removeprefix(codecs.BOM_UTF8)
            if line.strip():
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise ValueError(f"{source}:{line_no}: not valid JSON ({e})") from None
                if not isinstance(record, dict):
                    raise ValueError(f"{source}:{line_no}: not a JSON object but {type(record).__name__}")
                yield f"{source}:{line_no}", record


def _array_records(source: str | Path, data: bytes) -> Iterator[tuple[str, dict]]:
    try:
        records = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{source}: starts as a JSON array but is not valid JSON ({e})") from None
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"{source}[{index}]: not a JSON object but {type(record).__name__}")
        yield f"{source}[{index}]", record


# What a record of a known layout can raise when a field is missing or of the wrong type.
_MALFORMED = (KeyError, TypeError, IndexError, AttributeError, ValueError)


def _malformed(place: str, kind: str, error: Exception) -> ValueError:
    what = f"no `{error.args[0]}`" if isinstance(error, KeyError) and error.args else str(error)
    return ValueError(f"{place}: a {kind} record, but {what}")


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"`{what}` is not text but {type(value).__name__}")
    return value


def _texts(value, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"`{what}` is not a list of text")
    return value


def _as_json(value) -> str:
    """A value as the file wrote it (true, "0"), not as Python shows it (True, '0')."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _rating(value, what: str) -> int | None:
    if value is not None and (type(value) is not int or value not in (-1, 0, 1)):  # true is not a rating
        raise ValueError(f"`{what}.rating` is -1, 0, 1 or null, not {_as_json(value)}")
    return value


def _problem(record: dict) -> str:
    question = record["question"]
    if not isinstance(question, dict):
        raise TypeError("`question` is not an object")
    return _text(question.get("problem"), "question.problem")


def _label_steps(record: dict) -> list[dict]:
    """A PRM800K record's `label.steps`, each step checked: completions with text and a rating,
    the chosen one's index, the labeler's own step."""
    label = record.get("label") or {}
    if not isinstance(label, dict):
        raise TypeError("`label` is not an object")
    steps = label.get("steps", [])
    if not isinstance(steps, list):
        raise TypeError("`label.steps` is not a list")
    steps = _without_empty_end(steps)
    for n, step in enumerate(steps):
        where = f"label.steps[{n}]"
        if not isinstance(step, dict):
            raise TypeError(f"`{where}` is not an object")
        completions = step.get("completions")
        if not isinstance(completions, list) or not all(isinstance(c, dict) for c in completions):
            raise TypeError(f"`{where}.completions` is not a list of objects")
        for i, completion in enumerate(completions):
            _text(completion.get("text"), f"{where}.completions[{i}].text")
            _rating(completion.get("rating"), f"{where}.completions[{i}]")
        chosen = step.get("chosen_completion")
        if chosen is not None and (type(chosen) is not int or not 0 <= chosen < len(completions)):
            raise ValueError(f"`{where}.chosen_completion` {chosen!r} is not the index of one of its "
                             f"{len(completions)} completions")
        human = step.get("human_completion")
        if chosen is not None and human is not None:
            raise ValueError(f"`{where}` has both a chosen_completion and a human_completion: a step goes on "
                             "with one, a completion chosen or the labeler's own step")
        if isinstance(human, dict):
            _text(human.get("text"), f"{where}.human_completion.text")
            _rating(human.get("rating"), f"{where}.human_completion")
        elif human is not None:
            _text(human, f"{where}.human_completion")
    return steps


def _without_empty_end(steps: list) -> list:
    """The steps but those ending the label with nothing in them (`completions`,
    `human_completion` and `chosen_completion` all null), which PRM800K's phase-1 files have
    and Stepwise's importer takes off too."""
    end = len(steps)
    while end and isinstance(steps[end - 1], dict) and all(
            steps[end - 1].get(key) is None for key in ("completions", "human_completion", "chosen_completion")):
        end -= 1
    return steps[:end]


def _until_first_error(steps: list[str], labels: list[int | None]) -> tuple[list[str], list]:
    # Labelers stop at the first -1, so later steps carry no label; dropping them also saves
    # compute, since a causal model's reading of earlier steps does not depend on them.
    if -1 in labels:
        cut = labels.index(-1) + 1
        return steps[:cut], labels[:cut]
    return steps, labels


def _prm800k_examples(record: dict) -> Iterator[Example]:
    """The labeler's trajectory as one example, and each rated alternative they did not continue
    with as one more: the trajectory's steps before it as unlabeled context, then it."""
    if record.get("is_quality_control_question") or record.get("is_initial_screening_question"):
        return
    label = record.get("label") or {}
    if isinstance(label, dict) and label.get("finish_reason") in SKIPPED_FINISH_REASONS:
        return
    prompt = _problem(record)
    pid = problem_id(prompt)
    steps, labels = [], []
    for n, step in enumerate(_label_steps(record)):
        completions = step["completions"]
        chosen = step.get("chosen_completion")
        human = step.get("human_completion")
        # The trajectory goes on with the chosen completion; where none was chosen and no human
        # step replaced it, it ends on the first rated completion (phase 2: the -1 step).
        if chosen is None and human is None:
            chosen = next((i for i, c in enumerate(completions) if c.get("rating") is not None), None)
        for i, completion in enumerate(completions):
            # A blank alternative is no step to learn from; the importer keeps such
            # completions, so it is passed over here rather than refused.
            if i != chosen and completion.get("rating") is not None and not is_blank(completion["text"]):
                # An alternative completion is one more labeled step in the same context; the
                # context is not labeled again.
                yield Example(pid, prompt, steps + [completion["text"]],
                              [None] * len(labels) + [completion["rating"]])
        if chosen is not None:
            steps.append(_step_text(completions[chosen]["text"], f"label.steps[{n}].completions[{chosen}].text"))
            labels.append(completions[chosen].get("rating"))
        elif human is not None:
            steps.append(_step_text(human_text(human), f"label.steps[{n}].human_completion"))
            # PRM800K's labelers left their own steps unrated: those are context. Stepwise's
            # phase-1 mode has the labeler rate the step they write, and that rating is a label.
            labels.append(human.get("rating") if isinstance(human, dict) else None)
        if labels and labels[-1] == -1 or chosen is None and human is None:
            break
    steps, labels = _until_first_error(steps, labels)
    if any(rating is not None for rating in labels):
        yield Example(pid, prompt, steps, labels)


def _step_text(text: str, what: str) -> str:
    # As the importer refuses it: a blank step would be read, scored and rated as a step. Only
    # whitespace here, not is_blank: steps of zero-width characters were stored before the
    # importer refused them, and a round over them must not fail.
    if not text.strip():
        raise ValueError(f"`{what}` is blank: a step needs text")
    return text


def _trl_example(record: dict) -> Example:
    prompt = _text(record.get("prompt"), "prompt")
    completions, ratings = _texts(record["completions"], "completions"), record["labels"]
    for i, completion in enumerate(completions):
        _step_text(completion, f"completions[{i}]")
    if not isinstance(ratings, list) or not all(isinstance(ok, int) and ok in (0, 1) for ok in ratings):  # bool is an int
        raise TypeError("`labels` is not a list of true or false (or 1 or 0)")
    if len(ratings) != len(completions):
        raise ValueError(f"it has {len(ratings)} labels for {len(completions)} completions")
    labels = [1 if ok else -1 for ok in ratings]
    steps, labels = _until_first_error(list(completions), labels)
    return Example(problem_id(prompt), prompt, steps, labels)


def load_examples(source: str | Path | Iterable[dict], source_weights: dict[str, float] | None = None) -> list[Example]:
    """Training examples from PRM800K or TRL records (a JSONL path or dicts in memory).

    With `source_weights` (see weigh_sources), a record weighs its label source's weight and
    records weighing 0 are left out; without, a record's `weight` (weigh_sources writes it), or 1.
    """
    if source_weights is not None:
        check_source_weights(source_weights)
    examples = []
    for place, record in placed_records(source):
        if "label" in record and "question" in record:
            kind, read = "PRM800K", lambda r: list(_prm800k_examples(r))
        elif "completions" in record and "labels" in record:
            kind, read = "TRL", lambda r: [_trl_example(r)]
        else:
            raise ValueError(f"{place}: neither a PRM800K record (question, label) nor a TRL one "
                             f"(prompt, completions, labels); its keys: {', '.join(sorted(record))}")
        try:
            weight = _weight(record) if source_weights is None else source_weight(record, source_weights)
            if source_weights is not None and weight <= 0:
                continue
            found = read(record)
        except _MALFORMED as e:
            raise _malformed(place, kind, e) from None
        for example in found:
            example.weight = weight
        examples.extend(found)
    return examples


def _weight(record: dict) -> float:
    value = record.get("weight", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`weight` {value!r} is not a number")
    return float(value)


def record_source(record: dict) -> str:
    """Who labeled the record: its `source` (Stepwise's exports write it on machine labels),
    human when it has none."""
    source = record.get("source") or HUMAN_SOURCE
    if not isinstance(source, str):
        raise TypeError(f"`source` {source!r} is not text")
    return source


def parse_source_weights(text: str) -> dict[str, float]:
    """`human=1,rollout=0.5` as a mapping; ValueError naming what is wrong."""
    weights: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, value = item.partition("=")
        name = name.strip()
        if name in weights:
            raise ValueError(f"source {name!r} is given two weights; give each source one")
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(f"source weight {item!r}: write SOURCE=WEIGHT, e.g. rollout=0.5") from None
    return check_source_weights(weights)


def format_source_weights(weights: dict[str, float]) -> str:
    """The weights as parse_source_weights reads them back, exactly: `human=1, rollout=0.5`
    (`:g` kept six digits, so saving a settings form as shown changed 0.1234567)."""
    def exact(weight: float) -> str:
        return str(int(weight)) if float(weight).is_integer() else repr(float(weight))

    return ", ".join(f"{source}={exact(weight)}" for source, weight in sorted(weights.items()))


def check_source_weights(weights: dict[str, float]) -> dict[str, float]:
    for name, weight in weights.items():
        if name not in SOURCES:
            raise ValueError(f"unknown label source {name!r}; expected one of {', '.join(SOURCES)}")
        if not 0 <= weight <= 100:
            raise ValueError(f"the weight of {name} must be a number from 0 to 100, not {weight}")
    return weights


def weigh_sources(records: Iterable[dict], weights: dict[str, float] | None = None) -> list[dict]:
    """The records whose source weighs more than 0, each with that weight as `weight`.

    A source the weights leave out weighs 0; without weights, DEFAULT_SOURCE_WEIGHTS (human
    labels only). A machine record marked `accepted` (taken in place of a labeler's, its
    machine sources agreeing) weighs what a human record does.
    """
    weights = check_source_weights(DEFAULT_SOURCE_WEIGHTS if weights is None else weights)
    kept = []
    for record in records:
        weight = source_weight(record, weights)
        if weight > 0:
            kept.append({**record, "weight": weight})
    return kept


def source_weight(record: dict, weights: dict[str, float]) -> float:
    """The record's weight under `weights`: its source's, or 0 for a source they leave out. A
    machine record marked `accepted` weighs what a human record does."""
    return weights.get(HUMAN_SOURCE if record.get("accepted") else record_source(record), 0.0)


def source_mix(records: Iterable[dict]) -> dict[str, int]:
    """How many records each source gave, for a data snapshot's record."""
    return dict(sorted(Counter(record_source(r) for r in records).items()))


def human_text(human: str | dict) -> str:
    """The text of a human completion: PRM800K writes an object, some files a bare string."""
    return human if isinstance(human, str) else human["text"]


def _trajectory(label_steps: list[dict]) -> list[str]:
    """The solution as PRM800K's README rebuilds it, for phase-1 records without
    pre-generated steps."""
    return [human_text(s["human_completion"]) if s.get("chosen_completion") is None and s.get("human_completion")
            else s["completions"][s.get("chosen_completion") or 0]["text"] for s in label_steps]


def load_solutions(source: str | Path | Iterable[dict], *, every_step_written: bool = False) -> list[Solution]:
    """Whole solutions to score: PRM800K (pre-generated steps, else the labeled trajectory),
    TRL (`prompt`, `completions`), or candidate files (`problem`, `steps`, optional `answer`).

    `every_step_written` refuses a solution with no step or a blank one, for scores that rank
    solutions against each other: the product over no steps is 1, the best there is. (A labeled
    file may hold a give-up before the first step, which evaluation reads as it is.)"""
    solutions = []
    for place, record in placed_records(source):
        kind = ("PRM800K" if "question" in record else "TRL" if "completions" in record
                else "candidate" if "steps" in record else None)
        if kind is None:
            raise ValueError(f"{place}: not a solution: neither PRM800K (question, label), TRL "
                             f"(prompt, completions) nor a candidate (problem, steps); its keys: "
                             f"{', '.join(sorted(record))}")
        try:
            solution = _solution(record)
            if every_step_written:
                check_written_problem(solution.prompt)
                check_written_steps(solution.steps)
        except _MALFORMED as e:
            raise _malformed(place, kind, e) from None
        solutions.append(solution)
    return solutions


def is_blank(text: str) -> bool:
    """Whether `text` shows nothing: spaces, control and format characters (a NUL or a zero-width
    U+200B passed `str.strip`, and a solution of them was scored as written) and the blank
    fillers. A character this Python's Unicode tables do not know, or a private-use one (PDF
    math often has them), counts as shown. So does the step marker's text, which the model
    never reads (see encode_solutions)."""
    return all(char.isspace() or char in _FILLERS or unicodedata.category(char) in ("Cc", "Cf")
               for char in without_marker(text))


def without_marker(text: str) -> str:
    """`text` with the step marker's text taken out, until none is left ("<|st<|step|>ep|>"
    would otherwise close up into one)."""
    while STEP_MARKER in text:
        text = text.replace(STEP_MARKER, "")
    return text


# Letters that draw nothing: Hangul fillers and the blank Braille pattern.
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def check_written_problem(problem: str) -> None:
    """ValueError for a blank problem: the model would score steps against nothing, and the
    score endpoint refuses one."""
    if is_blank(problem):
        raise ValueError("the problem is blank")


def check_written_steps(steps: list[str]) -> None:
    """ValueError for no step or a blank one: scored, such a solution would rank with the rest
    (the product over no steps is 1, the best there is)."""
    if not steps:
        raise ValueError("no steps to score")
    blank = next((n for n, step in enumerate(steps, 1) if is_blank(step)), None)
    if blank is not None:
        raise ValueError(f"step {blank} of {len(steps)} is blank")


def _solution(record: dict) -> Solution:
    if "question" in record:
        prompt, question = _problem(record), record["question"]
        pre_generated = question.get("pre_generated_steps")
        steps = (_texts(pre_generated, "question.pre_generated_steps") if pre_generated
                 else _trajectory(_label_steps(record)))
        return Solution(problem_id(prompt), prompt, steps,
                        question.get("pre_generated_answer"), question.get("ground_truth_answer"))
    if "completions" in record:
        prompt = _text(record.get("prompt"), "prompt")
        return Solution(problem_id(prompt), prompt, list(_texts(record["completions"], "completions")))
    prompt = _text(record["problem"], "problem")
    return Solution(record.get("problem_id") or problem_id(prompt), prompt,
                    list(_texts(record["steps"], "steps")), record.get("answer"),
                    record.get("ground_truth_answer"))


def load_processbench(source: str | Path | Iterable[dict]) -> tuple[list[Solution], list[int | None]]:
    """ProcessBench records (`problem`, `steps`, `label`: the index of the first wrong step, or
    -1 when every step is right; optional `id`, `generator`): the solutions, and each one's first
    wrong step (None for none)."""
    solutions, first_errors = [], []
    for place, record in placed_records(source):
        problem, steps, label = record.get("problem"), record.get("steps"), record.get("label")
        where = place + (f" (id {record['id']})" if "id" in record else "")
        if not isinstance(problem, str) or not isinstance(steps, list) or not steps \
                or not all(isinstance(step, str) for step in steps):
            raise ValueError(f"{where}: a ProcessBench record needs `problem` (text) and `steps` "
                             "(a non-empty list of texts)")
        blank = next((i for i, step in enumerate(steps) if is_blank(step)), None)
        if blank is not None:
            raise ValueError(f"{where}: `steps[{blank}]` is blank: a step needs text")
        if "label" not in record:
            raise ValueError(f"{where}: a ProcessBench record needs `label`: the index of its first wrong step, "
                             "or -1 when every step is right")
        if type(label) is not int or not -1 <= label < len(steps):
            raise ValueError(f"{where}: `label` must be -1 or the index of one of its "
                             f"{len(steps)} steps, not {_as_json(label)}")
        solutions.append(Solution(str(record.get("id") or problem_id(problem)), problem, steps))
        first_errors.append(None if label == -1 else label)
    if not solutions:
        named = f"{source}: " if isinstance(source, (str, Path)) else ""
        raise ValueError(f"{named}no ProcessBench records to evaluate on")
    return solutions, first_errors


def split_by_problem(examples: list[Example], eval_fraction: float,
                     seed: int = 0) -> tuple[list[Example], list[Example]]:
    """Train/validation split that keeps all steps of a problem on one side, so validation
    measures problems the model has not seen, not just other steps of the same solutions."""

    def bucket(pid: str) -> float:
        digest = hashlib.sha1(f"{seed}:{pid}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    train = [e for e in examples if bucket(e.problem_id) >= eval_fraction]
    held_out = [e for e in examples if bucket(e.problem_id) < eval_fraction]
    return train, held_out


def snapshot_hash(examples: list[Example]) -> str:
    """Content hash of a training set, recorded in the checkpoint to name its data snapshot."""
    digest = hashlib.sha256()
    for example in examples:
        fields = asdict(example)
        # Left out at its default, so that data hashed before examples had weights keeps its
        # hash (a round resumed across the upgrade still finds its checkpoint).
        if fields["weight"] == 1.0:
            del fields["weight"]
        digest.update(orjson.dumps(fields))
    return digest.hexdigest()[:16]


# What transformers' `encode` runs for a fast tokenizer, by version; a tokenizer class that
# overrides any of them (CodeLlama splits its infilling marker, LayoutLM takes boxes) encodes in
# Python too, and is left to transformers.
_ENCODE_METHODS = ("encode", "encode_plus", "_encode_plus", "_batch_encode_plus")


def text_encoder(tokenizer) -> Callable[[list[str]], list[list[int]]]:
    """Texts' token ids without special tokens, as `tokenizer.encode` gives each, many at a call.

    From a fast tokenizer's Rust backend directly, in one `encode_batch`: transformers' wrapper
    around it costs more than the encoding (2.4x the time on the byte tokenizer), and a batch is
    encoded on every core with the GIL released, while a GPU scoring a pool waits for the ids.
    Before it encodes, transformers only turns the backend's truncation and padding off; a backend
    saved with either on is left to transformers, so the ids are the same either way.
    """
    from transformers import PreTrainedTokenizerFast  # here: reading label files needs no transformers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    plain = all(getattr(type(tokenizer), name, None) is getattr(PreTrainedTokenizerFast, name, None)
                for name in _ENCODE_METHODS)
    if backend is None or not plain or backend.truncation is not None or backend.padding is not None:
        return lambda texts: [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    return lambda texts: [encoding.ids for encoding in backend.encode_batch(texts, add_special_tokens=False)]


# Solutions encoded a call: enough texts for the backend to keep every core busy, few enough that
# its encodings (offsets and strings beside the ids) stay small.
ENCODE_SOLUTIONS = 4096


def encode_solutions(tokenizer, solutions: Iterable[tuple[str, list[str]]]) -> Iterator[tuple[list[int], list[list[int]]]]:
    """Each (prompt, steps)'s ids: the prompt's with PROMPT_END, and each step's, without special
    tokens or markers; what `tokenize_example` and `scoring_windows` lay out."""
    encode = text_encoder(tokenizer)
    solutions = iter(solutions)
    while batch := list(itertools.islice(solutions, ENCODE_SOLUTIONS)):
        texts = [text for prompt, steps in batch for text in (prompt + PROMPT_END, *steps)]
        # The backend would read a pair of strings as a text and its pair, not refuse it.
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"a step is {type(text).__name__}, not text: {text!r:.80}")
        # The marker's text in a problem or step would be read as the marker itself: a step
        # boundary no label speaks of, and one more score than steps for a reader that finds the
        # markers by their id. It is dropped, as the model card's snippet drops it.
        ids = encode([without_marker(text) for text in texts])
        at = 0
        for _, steps in batch:
            yield ids[at], ids[at + 1:at + 1 + len(steps)]
            at += 1 + len(steps)


def tokenize_example(tokenizer, marker_id: int, prompt: str, steps: list[str],
                     labels: list[int | None] | None, max_length: int,
                     encoded: tuple[list[int], list[list[int]]] | None = None) -> dict:
    """Token ids with the step marker after each step; the marker is where the head is read.

    Returns `input_ids`, `labels` (rating + 1 at a labeled marker, IGNORE_INDEX elsewhere),
    `markers` (the marker position of each step, or -1 for a step cut off by `max_length`) and
    `prompt_length` (tokens before the first step).
    The prompt keeps at most half the budget, cut from the left: the question is at its end.
    A caller with many solutions passes each one's `encoded` from `encode_solutions`.
    """
    prompt_ids, step_ids = encoded or next(encode_solutions(tokenizer, [(prompt, steps)]))
    head = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    input_ids = head + prompt_ids[-(max_length // 2):]
    prompt_length = len(input_ids)
    targets = [IGNORE_INDEX] * len(input_ids)
    markers = []
    for i, ids in enumerate(step_ids):
        ids = ids + [marker_id]
        if len(input_ids) + len(ids) > max_length:
            markers.extend([-1] * (len(steps) - i))
            break
        input_ids += ids
        targets += [IGNORE_INDEX] * (len(ids) - 1)
        rating = labels[i] if labels is not None else None
        targets.append(IGNORE_INDEX if rating is None else rating + 1)
        markers.append(len(input_ids) - 1)
    return {"input_ids": input_ids, "labels": targets, "markers": markers,
            "prompt_length": prompt_length}


def scoring_windows(tokenizer, marker_id: int, prompt: str, steps: list[str], max_length: int,
                    encoded: tuple[list[int], list[list[int]]] | None = None) -> list[dict]:
    """Sequences of at most `max_length` tokens that together read every step's marker.

    The first window is `tokenize_example`'s layout. A step that does not fit after the steps
    before it opens a new window that carries up to half the limit of context: the question's
    tail (cut from the left, as in training; at most half the carried context while steps before
    it fill the rest), then as many of the steps just before it as fit; later steps follow while
    they fit. Carrying more would read each step in a longer context, but leave room for one
    step a window: a 200-step solution past the limit cost 200 full windows, where half a window
    carried costs about two tokens read per token of the solution.
    A step is left unread only when it alone, with the BOS token, is longer than the limit.
    Each window has `input_ids` and `reads`: (step index, marker position) pairs. `encoded` as
    in `tokenize_example`.
    """
    prompt_ids, step_ids = encoded or next(encode_solutions(tokenizer, [(prompt, steps)]))
    head = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    question = prompt_ids[-(max_length // 2):]
    step_ids = [ids + [marker_id] for ids in step_ids]
    windows: list[dict] = []
    i = 0
    while i < len(steps):
        room = max_length - len(head) - len(step_ids[i])
        if room < 0:
            i += 1
            continue
        carried = min(room, max_length // 2)
        earlier = sum(len(ids) for ids in step_ids[:i])
        context = question[len(question) - min(max(carried // 2, carried - earlier), len(question)):]
        room = carried - len(context)
        first = i
        while first > 0 and len(step_ids[first - 1]) <= room:
            first -= 1
            room -= len(step_ids[first])
        input_ids = head + context + [t for ids in step_ids[first:i] for t in ids]
        reads = []
        while i < len(steps) and len(input_ids) + len(step_ids[i]) <= max_length:
            input_ids += step_ids[i]
            reads.append((i, len(input_ids) - 1))
            i += 1
        windows.append({"input_ids": input_ids, "reads": reads})
    return windows
