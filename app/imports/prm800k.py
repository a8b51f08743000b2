"""One PRM800K line -> the problem, solution and label it holds (both phases).

Phase 2 records carry `question.pre_generated_steps`: they are the solution. Phase 1 records do
not: the solution is the trajectory the labeler built, the chosen completion (or the
labeler's own human completion) of every step.

A line is decoded by msgspec straight into the typed structs below, which checks every field's
type in C: an import of 1,000,000 steps spent about a third of its Python time reading JSON
into dicts and checking them field by field. Keys PRM800K does not have fail that decode; such
a line is read again as a dict, its unknown keys are set aside for `Label.extra` (an import is
exported as it came), and the rest is checked against the same structs. What types cannot
say (ranges, indexes, the timestamp) is checked on the structs, for both.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
import orjson

from active_learning.data import is_blank
from app.exports.prm800k import (
    COMPLETION_KEYS,
    EMPTY_END,
    FINISH_NOTE,
    LABEL_KEYS,
    QUESTION_KEYS,
    RECORD_KEYS,
    STEP_KEYS,
    render_question,
)
from app.imports.fields import Invalid, beyond_64_bits, where
from app.imports.json_guard import check_depth
from app.imports.reader import json_object
from app.imports.records import (
    MAX_ANSWER,
    MAX_STEPS,
    LabelIn,
    LabelSteps,
    PrmRecord,
    ProblemIn,
    QuestionAsGiven,
    SolutionIn,
    StoredProblem,
    StoredSolution,
)
from app.models import INT32_MAX, FinishReason, StepsSource

_FINISH_REASONS = {r.value: r for r in FinishReason}
MAX_LABELER = 100
# As a labeler may write one (app.labeling.schemas).
MAX_FINISH_NOTE = 5000


# Strict structs (no unknown keys, `true` is no rating, `1.0` no index) that hold no cycles, so
# the cycle collector need not track them (gc=False).
#
# A label's steps are stored as these structs encode, once _label_steps has unset the texts
# that are the solution's own steps: the fields are in the order of their names, so the
# encoding is the one orjson gives the same steps as dicts with sorted keys, which the content
# hashes of earlier imports were taken from (msgspec and orjson write strings, integers, true,
# false and null alike). Export writes these fields in PRM800K's order whatever their order
# here. Making a dict of every step and completion, encoding them and freeing them took a
# fifth of an import's Python time.
class _Completion(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    flagged: bool | None = None
    rating: Literal[-1, 0, 1] | None = None
    text: str | msgspec.UnsetType


class _Step(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    chosen_completion: int | None = None
    # Null only in an empty step (nothing chosen, no human step) at the end of a label, as
    # PRM800K's phase-1 files have some (see _without_empty_end).
    completions: list[_Completion] | None
    # Stored as msgspec.Raw when an object: see _label_steps.
    human_completion: str | dict[str, Any] | msgspec.Raw | None = None


class _Label(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    steps: list[_Step]
    total_time: int | None = None
    finish_reason: str | None = None
    # Stepwise's export writes it (see app.exports.prm800k).
    finish_note: str | None = None


# A key left out is told from a null (UNSET), so that the export leaves it out too; _prm_record
# makes it None once noted.
class _Question(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    problem: str
    ground_truth_solution: str | None | msgspec.UnsetType = msgspec.UNSET
    ground_truth_answer: str | None | msgspec.UnsetType = msgspec.UNSET
    pre_generated_steps: list[str] | None | msgspec.UnsetType = msgspec.UNSET
    pre_generated_answer: str | None | msgspec.UnsetType = msgspec.UNSET
    # int or float as given: a score given as 1 must be exported as 1, not 1.0.
    pre_generated_verifier_score: int | float | None | msgspec.UnsetType = msgspec.UNSET


_OPTIONAL_QUESTION_KEYS = tuple(f for f in _Question.__struct_fields__ if f != "problem")


class _Record(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    question: _Question
    labeler: str | None = None
    timestamp: str | None = None
    generation: int | None = None
    is_quality_control_question: bool | None = None
    is_initial_screening_question: bool | None = None
    label: _Label | None = None


_DECODER = msgspec.json.Decoder(_Record)
_STEPS_ENCODER = msgspec.json.Encoder()


def parse_prm800k(raw: bytes, origin: dict[str, Any], now: datetime) -> PrmRecord:
    """The record on one line (its bytes); Invalid names the first thing wrong with it."""
    check_depth(raw)
    # The escaped NUL, which PostgreSQL text cannot hold, is refused by json_object. Any line
    # msgspec refuses (bad UTF-8 too) is read again there, to be told what is wrong with it.
    if b"\\u0000" not in raw:
        try:
            return _prm_record(_DECODER.decode(raw), {}, origin, now)
        except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
            pass
    obj = json_object(raw)
    _refuse_beyond_64_bits(obj)
    extra = _unknown_keys(obj)
    try:
        record = msgspec.convert(obj, _Record)
    except msgspec.ValidationError as exc:
        raise _invalid(str(exc)) from None
    return _prm_record(record, extra, origin, now)


def _refuse_beyond_64_bits(obj: dict[str, Any]) -> None:
    """What _prm_record tells msgspec's whole integers beyond 64 bits, told of the floats orjson
    reads them as, so that a line says the same on either path."""
    if beyond_64_bits(obj.get("generation")):
        raise Invalid("generation", f"must be between {-INT32_MAX} and {INT32_MAX}")
    question = obj.get("question")
    if type(question) is dict and beyond_64_bits(question.get("pre_generated_verifier_score")):
        raise Invalid("question.pre_generated_verifier_score", "is out of range")
    label = obj.get("label")
    for i, step in enumerate(label.get("steps") if type(label) is dict and type(label.get("steps")) is list else []):
        if type(step) is dict and beyond_64_bits(step.get("chosen_completion")):
            completions = step.get("completions")
            count = len(completions) if type(completions) is list else 0
            raise Invalid(f"label.steps[{i}].chosen_completion",
                          f"must be null or the index of one of the {count} completions")


def _prm_record(record: _Record, extra: dict[str, Any], origin: dict[str, Any], now: datetime) -> PrmRecord:
    question = record.question
    absent = tuple(key for key in _OPTIONAL_QUESTION_KEYS if getattr(question, key) is msgspec.UNSET)
    for key in absent:
        setattr(question, key, None)
    if not question.problem.strip():
        raise Invalid("question.problem", "is empty")
    problem = ProblemIn(question.problem, question.ground_truth_answer, question.ground_truth_solution)
    pre_steps = question.pre_generated_steps
    if pre_steps is not None:
        if not pre_steps:
            raise Invalid("question.pre_generated_steps", "is empty: a solution needs at least one step")
        if len(pre_steps) > MAX_STEPS:
            raise Invalid(
                "question.pre_generated_steps", f"has {len(pre_steps)} steps; at most {MAX_STEPS} are allowed"
            )
        if any(map(is_blank, pre_steps)):
            blank = next(i for i, step in enumerate(pre_steps) if is_blank(step))
            raise Invalid(f"question.pre_generated_steps[{blank}]", "is blank: a step needs text")
    given_answer = _short(question.pre_generated_answer, "question.pre_generated_answer", MAX_ANSWER)
    score = question.pre_generated_verifier_score
    # msgspec reads integers of any size; the hashes' JSON encoder takes 64 bits at most.
    if type(score) is int and not -(2**63) <= score < 2**64:
        raise Invalid("question.pre_generated_verifier_score", "is out of range")
    verifier_score = None if score is None else float(score)
    generation = _bounded(record.generation, "generation", -INT32_MAX)
    label = record.label
    if label is None:
        if pre_steps is None:
            raise Invalid("question.pre_generated_steps", "missing, and there is no label to take the steps from")
        solution = SolutionIn(pre_steps, given_answer, StepsSource.given, verifier_score, generation, origin)
        return PrmRecord(problem, solution, None)

    if len(label.steps) > MAX_STEPS:
        raise Invalid("label.steps", f"has {len(label.steps)} steps; at most {MAX_STEPS} are allowed")
    _without_empty_end(label.steps, extra)
    finish_reason = _finish_reason(label.finish_reason)
    if not label.steps and finish_reason in (FinishReason.found_error, FinishReason.solution):
        raise Invalid("label.steps", f"is empty, but finish_reason is {finish_reason.value}")
    if pre_steps is not None and len(label.steps) > len(pre_steps):
        # A phase-2 label rates the pre-generated steps and stops at the first error: a step
        # past them would be a step of no solution, which exports would put in one.
        raise Invalid(
            "label.steps",
            f"has {len(label.steps)} steps, more than the {len(pre_steps)} of question.pre_generated_steps",
        )
    steps, trajectory, human_texts = _label_steps(label.steps, pre_steps, finish_reason)
    if pre_steps is None:
        if not trajectory:
            raise Invalid("label.steps", "no chosen or human completion to make the solution's steps from")
        solution = SolutionIn(trajectory, given_answer, StepsSource.label, verifier_score, generation, origin)
    else:
        solution = SolutionIn(pre_steps, given_answer, StepsSource.given, verifier_score, generation, origin)

    record_extra = extra.setdefault("record", {})
    created_at, timestamp = _created_at(record.timestamp, now)
    # Every timestamp is kept as written but the one exports wrote before they wrote PRM800K's
    # form (ending in +00:00): which labels keep it is part of their hash, which must not change
    # for a file imported before.
    if timestamp != created_at.isoformat():
        record_extra["timestamp"] = timestamp
    is_qc = record.is_quality_control_question
    is_screening = record.is_initial_screening_question
    if is_qc is None:
        record_extra["is_quality_control_question"] = None
    if is_screening is None:
        record_extra["is_initial_screening_question"] = None
    if not record_extra:
        del extra["record"]
    labeler = _short(record.labeler, "labeler", MAX_LABELER)
    return PrmRecord(
        problem,
        solution,
        LabelIn(
            labeler=labeler,
            foreign_labeler=None if labeler is None or is_blank(labeler) else labeler,
            created_at=created_at,
            timestamp=timestamp,
            generation=generation,
            is_quality_control=bool(is_qc),
            is_initial_screening=bool(is_screening),
            finish_reason=finish_reason,
            total_time_ms=_bounded(label.total_time, "label.total_time", 0),
            finish_note=_short(label.finish_note, f"label.{FINISH_NOTE}", MAX_FINISH_NOTE),
            steps=steps,
            extra=extra,
            human_texts=human_texts,
            question=QuestionAsGiven(
                ground_truth_solution=problem.reference_solution,
                pre_generated_steps=pre_steps,
                pre_generated_answer=given_answer,
                pre_generated_verifier_score=score,
                absent=absent,
            ),
        ),
    )


def _short(value: str | None, field: str, limit: int) -> str | None:
    if value is not None and len(value) > limit:
        raise Invalid(field, f"longer than {limit} characters")
    return value


def _bounded(value: int | None, field: str, low: int) -> int | None:
    if value is not None and not low <= value <= INT32_MAX:
        raise Invalid(field, f"must be between {low} and {INT32_MAX}")
    return value


def _created_at(timestamp: str | None, now: datetime) -> tuple[datetime, str | None]:
    if timestamp is None:
        return now, None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise Invalid("timestamp", f"not an ISO 8601 date and time: {timestamp[:40]!r}") from None
    # PRM800K writes UTC without an offset.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC), timestamp
    try:
        return moment.astimezone(UTC), timestamp
    except OverflowError:
        # 9999-12-31T23:59-01:00 is in year 10000 in UTC.
        raise Invalid("timestamp", f"outside the years 1 to 9999 in UTC: {timestamp[:40]!r}") from None


def _without_empty_end(steps: list[_Step], extra: dict[str, Any]) -> None:
    """Take off the steps that end the label with nothing in them (`completions`,
    `human_completion` and `chosen_completion` all null), counting them in `extra` for the
    export to give back. PRM800K's phase-1 files end some labels so (TRL's conversion script
    stops at one); stored, each reader of a label's steps would have to know of them."""
    end = len(steps)
    while end and steps[end - 1].completions is None and steps[end - 1].human_completion is None \
            and steps[end - 1].chosen_completion is None:
        end -= 1
    for i, step in enumerate(steps[:end]):
        if step.completions is None:
            raise Invalid(f"label.steps[{i}].completions",
                          "is null, which only an empty step at the end of a label may be")
    if end < len(steps):
        extra[EMPTY_END] = len(steps) - end
        del steps[end:]


def _finish_reason(value: str | None) -> FinishReason | None:
    if value is None:
        return None
    reason = _FINISH_REASONS.get(value)
    if reason is None:
        raise Invalid("label.finish_reason", f"unknown {value[:40]!r}; expected one of {', '.join(_FINISH_REASONS)}")
    return reason


def _label_steps(
    label_steps: list[_Step], solution_steps: list[str] | None, finish_reason: FinishReason | None
) -> tuple[LabelSteps, list[str], dict[str, str]]:
    """The steps as Label.steps stores them, encoded, the trajectory the labeler chose through
    them, and the human completions given as plain strings (by step index).

    A completion's `text` is left out where it is the solution's own step. Without
    pre-generated steps the solution is the trajectory, so there it is the chosen completions'
    texts that are left out. A human completion given as a string is stored as the object
    PRM800K writes, so that every reader of stored steps sees one shape; it is hashed as given,
    as earlier imports hashed it. The decoded steps are changed in place to be encoded.

    Invalid where the finish reason says otherwise than the ratings: a found_error with no
    step rated -1, or a phase-2 solution going on with a step rated -1 (its alternatives may
    be). Phase 1 is not held to the second: its labelers chose which completion to go on with,
    and PRM800K's own files are the authority on what they chose.
    """
    if finish_reason == FinishReason.found_error and not _rates_bad(label_steps):
        raise Invalid("label.finish_reason", "is found_error, but no step is rated -1")
    checks_path = finish_reason == FinishReason.solution and solution_steps is not None
    trajectory: list[str] = []
    open_end = False
    # Human completions: each step with the completion as stored and as hashed.
    objects: list[tuple[_Step, msgspec.Raw, msgspec.Raw | str]] = []
    human_texts: dict[str, str] = {}
    for i, step in enumerate(label_steps):
        completions = step.completions
        human = step.human_completion
        human_text = None
        if type(human) is str:
            human_text = human
            human_texts[str(i)] = human
            objects.append((step, msgspec.Raw(orjson.dumps(_string_as_object(human))), human))
            step.human_completion = objects[-1][1]
        elif human is not None:
            human_text, stored, hashed = _human_object(human, i)  # type: ignore[arg-type]
            objects.append((step, stored, hashed))
            step.human_completion = stored
        chosen = step.chosen_completion
        if chosen is not None and not 0 <= chosen < len(completions):
            raise Invalid(
                f"label.steps[{i}].chosen_completion",
                f"must be null or the index of one of the {len(completions)} completions",
            )
        if chosen is not None and human is not None:
            # PRM800K sets one of the two; with both, which step the labeler went on with is
            # anyone's guess, and training, review and agreement would each guess.
            raise Invalid(
                f"label.steps[{i}]",
                "has both a chosen_completion and a human_completion: a step goes on with one, "
                "a completion chosen or the labeler's own step",
            )
        if solution_steps is not None:
            # The label has no more steps than the solution (see _prm_record).
            own = solution_steps[i]
            for completion in completions:
                if completion.text == own:
                    completion.text = msgspec.UNSET
        else:
            if open_end:
                raise Invalid(f"label.steps[{i}]", "follows a step with neither a chosen nor a human completion")
            if chosen is not None:
                text = completions[chosen].text
                if is_blank(text):  # type: ignore[arg-type]
                    raise Invalid(f"label.steps[{i}].completions[{chosen}].text", "is blank: a step needs text")
                trajectory.append(text)  # type: ignore[arg-type]
                completions[chosen].text = msgspec.UNSET
            elif human_text is not None:
                if is_blank(human_text):
                    raise Invalid(f"label.steps[{i}].human_completion", "is blank: a step needs text")
                trajectory.append(human_text)
            else:
                open_end = True
        if checks_path and (chosen is None or completions[chosen].rating == -1):
            _check_went_on(i, step, human)
    stored = _STEPS_ENCODER.encode(label_steps).decode()
    if not objects:
        return LabelSteps(stored, stored), trajectory, human_texts
    for step, _, hashed in objects:
        step.human_completion = hashed
    return LabelSteps(stored, _STEPS_ENCODER.encode(label_steps).decode()), trajectory, human_texts


def _check_went_on(i: int, step: _Step, human: object) -> None:
    """Invalid if the step a solution goes on with is rated -1: the chosen completion, else the
    human completion, else the solution's own step, where the record has one (the completion
    whose text _label_steps left out)."""
    chosen = step.chosen_completion
    if chosen is not None:
        taken, rating = f"completions[{chosen}].rating", step.completions[chosen].rating
    elif human is not None:
        taken, rating = "human_completion", _human_rating(human)
    else:
        own = next((j for j, c in enumerate(step.completions) if c.text is msgspec.UNSET), None)
        if own is None:
            return
        taken, rating = f"completions[{own}].rating", step.completions[own].rating
    if rating == -1:
        raise Invalid(
            f"label.steps[{i}].{taken}", "is -1, but finish_reason is solution: a solution goes on with no step rated -1"
        )


def _rates_bad(steps: list[_Step]) -> bool:
    # From the end, in plain loops: a found error is mostly on the last step, and this runs for
    # every found_error record.
    for step in reversed(steps):
        for completion in step.completions:
            if completion.rating == -1:
                return True
        if _human_rating(step.human_completion) == -1:
            return True
    return False


def _human_rating(human: object) -> object:
    # A human completion given as a string says no rating.
    return human.get("rating") if type(human) is dict else None


def _string_as_object(text: str) -> dict[str, Any]:
    """A human completion given as a bare string, in the object form PRM800K writes: what the
    string does not say is null."""
    return {"text": text, "rating": None, "source": "human", "flagged": None, "corrected_rating": None}


def _human_object(human: dict[str, Any], i: int) -> tuple[str, msgspec.Raw, msgspec.Raw]:
    """A human completion object's text, and the object encoded as stored (keys as given, so
    that an export gives it back as it came) and as hashed (keys sorted)."""
    field = f"label.steps[{i}].human_completion"
    text = human.get("text")
    if type(text) is not str:
        raise Invalid(field, f"must be null, a string, or {_HUMAN_OBJECT}")
    # Kept whole and encoded by orjson, as the hashes of earlier imports were: msgspec writes
    # some numbers otherwise (1e16 for 1e+16). orjson takes integers of 64 bits at most;
    # msgspec reads any.
    try:
        return text, msgspec.Raw(orjson.dumps(human)), msgspec.Raw(orjson.dumps(human, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError:
        raise Invalid(field, "holds a number out of range") from None


def _unknown_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """Take the keys PRM800K does not have out of `obj`, in `Label.extra`'s shape.

    Only what has the right type is looked into; the rest is for the structs to refuse.
    """
    extra: dict[str, Any] = {}
    _put(extra, "record", _pop_unknown(obj, RECORD_KEYS))
    question, label = obj.get("question"), obj.get("label")
    if type(question) is dict:
        _put(extra, "question", _pop_unknown(question, QUESTION_KEYS))
    if type(label) is not dict:
        return extra
    _put(extra, "label", _pop_unknown(label, LABEL_KEYS))
    steps = label.get("steps")
    if type(steps) is not list:
        return extra
    of_steps: dict[str, Any] = {}
    of_completions: dict[str, Any] = {}
    for i, step in enumerate(steps):
        if type(step) is not dict:
            continue
        _put(of_steps, str(i), _pop_unknown(step, STEP_KEYS))
        completions = step.get("completions")
        if type(completions) is list:
            for j, completion in enumerate(completions):
                if type(completion) is dict:
                    _put(of_completions, f"{i}.{j}", _pop_unknown(completion, COMPLETION_KEYS))
    _put(extra, "steps", of_steps)
    _put(extra, "completions", of_completions)
    return extra


def _pop_unknown(obj: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {key: obj.pop(key) for key in [k for k in obj if k not in known]}


def _put(extra: dict[str, Any], key: str, values: dict[str, Any]) -> None:
    if values:
        extra[key] = values


# msgspec's words for a wrong type ("Expected `int | null`, got `str` - at `$.generation`")
# in the words of the other formats' checks ("generation: must be an integer or null, not a
# string"); a few fields say what they take in words of their own.
_AT = re.compile(r" - at `\$\.?(.*)`$")
_EXPECTED = re.compile(r"Expected `(.+)`, got `(.+)`")
_MISSING = re.compile(r"Object missing required field `(.+)`")
_ENUM = re.compile(r"Invalid enum value (.+)")
_LAST_KEY = re.compile(r"(\w+)(?:\[\d+\])*$")
_HUMAN_OBJECT = "an object with a string `text`"
_TAKES = {"rating": "-1, 0, 1 or null", "human_completion": f"null, a string, or {_HUMAN_OBJECT}",
          "completions": "an array or null (in an empty step ending the label)"}
_TYPE_WORDS = {
    "int": ["an integer"],
    "float": ["a number"],
    "str": ["a string"],
    "bool": ["true", "false"],
    "array": ["an array"],
    "object": ["an object"],
    "null": ["null"],
}
_VALUE_WORDS = {
    "int": "a number",
    # Where an integer is wanted: 1.5, or an integer msgspec could only read as a float (past
    # 64 bits); "not a number" said of 99999999999999999999 read as nonsense.
    "float": "a number with a fraction or too large for an integer",
    "str": "a string",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
}


def _invalid(message: str) -> Invalid:
    at = _AT.search(message)
    field = at.group(1) if at else ""
    if at:
        message = message[: at.start()]
    if missing := _MISSING.fullmatch(message):
        return Invalid(where(field, missing.group(1)), "missing")
    key = _LAST_KEY.search(field)
    takes = _TAKES.get(key.group(1)) if key else None
    if expected := _EXPECTED.fullmatch(message):
        wanted, got = expected.groups()
        if got == "null":
            return Invalid(field or None, "missing")
        return Invalid(field or None, f"must be {takes or _either(wanted)}, not {_VALUE_WORDS.get(got, got)}")
    if (value := _ENUM.fullmatch(message)) and takes is not None:
        return Invalid(field, f"must be {takes}, not {value.group(1)}")
    return Invalid(field or None, message)


def _either(types: str) -> str:
    names = types.split(" | ")
    if "float" in names and "int" in names:
        names.remove("int")
    words = [word for name in names for word in _TYPE_WORDS.get(name, [name])]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def label_extra(record: PrmRecord, problem: StoredProblem, solution: StoredSolution) -> dict[str, Any]:
    """The label's `extra`, completed with the question fields its shared rows render otherwise."""
    assert record.label is not None
    rendered = render_question(
        record.problem.statement,
        record.problem.answer,
        problem.reference_solution,
        record.solution.steps,
        solution.steps_source,
        solution.final_answer,
        solution.verifier_score,
    )
    given = record.label.question
    extra = record.label.extra
    if record.label.labeler is not None and record.label.foreign_labeler is None:
        # Stored as no labeler, exported as written.
        extra = {**extra, "record": {**extra.get("record", {}), "labeler": record.label.labeler}}
    if record.label.human_texts:
        # Stored as objects (see _label_steps), exported as the strings they came as.
        steps = {key: dict(value) for key, value in extra.get("steps", {}).items()}
        for key, text in record.label.human_texts.items():
            steps.setdefault(key, {})["human_completion"] = text
        extra = {**extra, "steps": steps}
    overrides = {
        key: original
        for key, original in (
            ("ground_truth_solution", given.ground_truth_solution),
            ("pre_generated_steps", given.pre_generated_steps),
            ("pre_generated_answer", given.pre_generated_answer),
            ("pre_generated_verifier_score", given.pre_generated_verifier_score),
        )
        # Type too: a score given as 1 renders as 1.0 from the float column.
        if key not in given.absent
        and (key not in rendered or type(original) is not type(rendered[key]) or original != rendered[key])
    }
    # A key the record had is kept, and one it had not is left out, where PRM800K's shape for
    # its phase would say otherwise.
    absent = [key for key in given.absent if key in rendered]
    if absent:
        extra = {**extra, "absent": {"question": absent}}
    if not overrides:
        return extra
    return {**extra, "question": {**extra.get("question", {}), **overrides}}
