"""`stepwise prm ...`: synthesise data, train, score and evaluate a process reward model.

torch and transformers are imported inside the commands, so that `stepwise serve` and the other
commands of the group do not pay for them at start-up.
"""

import dataclasses
import json
import sys
import typing
from pathlib import Path

import click

from active_learning.config import BOOTSTRAP_SAMPLES, PretrainConfig, TrainConfig

prm = click.Group("prm", help="Process reward model: synthesise data, train, score, evaluate.")


# click's ranges are named "integer range" and "float range", a name their conversion error
# borrows: `--port abc` said "'abc' is not a valid integer range", as if a range were asked for.
# Named as click.INT and click.FLOAT are, they say "'abc' is not a valid integer", and the help
# shows INTEGER with the range beside it. Every command of `stepwise` (app.cli too) takes these.
class IntRange(click.IntRange):
    name = "integer"


class FloatRange(click.FloatRange):
    name = "float"


def quiet_transformers() -> None:
    from transformers.utils import logging

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def _load(model_dir: str, device: str, max_length: int | None):
    """(model, tokenizer, window) of a checkpoint, or the reason it cannot be scored with. The
    window is `max_length`, else the one the checkpoint was trained at (its card's metrics were
    measured with it), else 2048; within the model's positions."""
    from active_learning.model import load_checkpoint, resolve_device

    try:
        model, tokenizer, meta = load_checkpoint(model_dir, resolve_device(device))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if max_length is None:
        trained = (meta.get("config") or {}).get("max_length")
        max_length = trained if isinstance(trained, int) and trained > 0 else DEFAULT_WINDOW
    return model, tokenizer, _within_positions(model, max_length)


# Tokens per window for a checkpoint that does not say what it was trained at.
DEFAULT_WINDOW = 2048


def _output_file(path: str) -> Path:
    """Where `path` is written, checked before any data or model is loaded."""
    from active_learning.files import output_file

    try:
        return output_file(Path(path))
    except ValueError as e:
        raise click.ClickException(str(e)) from None


def _checkpoint_directory(output: str) -> None:
    """Refuses `-` for a checkpoint, a directory (its missing parents are made)."""
    if output == "-":
        raise click.ClickException("--output: a checkpoint is a directory, not standard output: name one")


def _within_positions(model, max_length: int) -> int:
    """active_learning.score.within_positions, saying so when it cuts."""
    from active_learning.score import within_positions

    positions = within_positions(model, max_length)
    if positions < max_length:
        click.echo(json.dumps({"note": f"--max-length {max_length} is beyond the model's {positions} "
                                       f"positions; windows are {positions} tokens"}), err=True)
    return positions


def _config_options(config_class):
    """One click option for each field of a config dataclass, with its help text."""
    return lambda command: _add_options(command, config_class)


def _add_options(command, config_class):
    for f in reversed(dataclasses.fields(config_class)):
        if f.name == "output":
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        flag = "--" + f.name.replace("_", "-")
        if f.type is bool:
            command = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=default,
                                   show_default=True, help=f.metadata["help"])(command)
            continue
        # `float | None` and `str | None` fields take their type's values, None when left out.
        kind = next(t for t in (int, float, str) if t in typing.get_args(f.type) or t is f.type)
        if "choices" in f.metadata:
            kind = click.Choice(f.metadata["choices"])
        command = click.option(flag, f.name, type=kind, default=default, show_default=True,
                               help=f.metadata["help"])(command)
    return command


@prm.command()
@click.option("--output", required=True, type=click.Path(dir_okay=False), help="JSONL file to write.")
@click.option("--problems", default=200, show_default=True, type=IntRange(min=1), help="Number of problems.")
@click.option("--solutions-per-problem", default=4, show_default=True, type=IntRange(min=1),
              help="Candidates per problem.")
@click.option("--seed", default=0, show_default=True, help="Different seeds give different problems.")
@click.option("--full/--first-error", default=False, show_default=True,
              help="Rate every step, or stop at the first -1 as PRM800K phase 2 did.")
@click.option("--error-rate", default=0.6, show_default=True, type=FloatRange(0, 1),
              help="Share of solutions with a mistake; 0 writes reference solutions to pretrain on.")
def synth(output, problems, solutions_per_problem, seed, full, error_rate):
    """Write oracle-labeled synthetic solutions as PRM800K JSONL."""
    from active_learning.synthetic import iter_candidates, write_prm800k
    from active_learning.files import written_aside

    target = _output_file(output)
    candidates = iter_candidates(problems, solutions_per_problem, seed, error_rate)
    with written_aside(target) as partial:
        count = write_prm800k(str(partial), candidates, first_error_only=not full)
    click.echo(json.dumps({"output": output, "records": count}))


@prm.command()
@click.option("--train", "train_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="PRM800K or TRL JSONL with step labels.")
@click.option("--eval", "eval_file", type=click.Path(exists=True, dir_okay=False),
              help="Held-out labels; without it a share of the training problems is held out.")
@click.option("--output", required=True, type=click.Path(), help=TrainConfig.__dataclass_fields__["output"].metadata["help"])
@_config_options(TrainConfig)
def train(train_file, eval_file, **settings):
    """Train a PRM. Run again after a crash to resume; launch with `accelerate launch` or
    `torchrun` for several GPUs or nodes."""
    quiet_transformers()
    from active_learning.train import TrainingDiverged
    from active_learning.train import train as run_training

    _checkpoint_directory(settings["output"])
    try:
        run_training(TrainConfig(**settings), train_file, eval_file)
    except (FileExistsError, ValueError, TrainingDiverged) as e:
        raise click.ClickException(str(e)) from None


@prm.command()
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Solutions to learn from (PRM800K, TRL or candidate JSONL); ratings are ignored, "
                   "so give trusted ones, such as reference solutions.")
@click.option("--output", required=True, type=click.Path(), help=PretrainConfig.__dataclass_fields__["output"].metadata["help"])
@_config_options(PretrainConfig)
def pretrain(data, **settings):
    """Pretrain a preset backbone on solutions by next-token prediction; give the directory to
    `stepwise prm train --base`."""
    quiet_transformers()
    from active_learning.pretrain import pretrain as run_pretraining
    from active_learning.train import TrainingDiverged

    _checkpoint_directory(settings["output"])
    try:
        output = run_pretraining(PretrainConfig(**settings), data)
    except (FileExistsError, ValueError, TrainingDiverged) as e:
        raise click.ClickException(str(e)) from None
    click.echo(json.dumps({"output": str(output)}))


@prm.command()
@click.option("--model", "model_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--input", "input_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="PRM800K, TRL, or candidate JSONL ({problem, steps}).")
@click.option("--output", required=True, type=click.Path(dir_okay=False),
              help="JSONL, one line per input record, in order (blank input lines have none).")
@click.option("--neutral-as-correct/--neutral-as-wrong", default=True, show_default=True,
              help="Whether a step rated 0 counts as correct in step and solution scores.")
@click.option("--batch-tokens", type=IntRange(min=1), default=None,
              help="Padded tokens per batch. Default: STEPWISE_SCORE_BATCH_TOKENS, else 65536 on CUDA, "
                   "16384 on CPU.")
@click.option("--max-length", default=None, type=IntRange(min=1),
              help="Tokens per window (default: the checkpoint's training --max-length, else 2048): a longer "
                   "solution is read in windows, each step after the first window with up to half a window "
                   "of what precedes it; a step longer than this alone gets no score (truncated).")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--compile/--no-compile", "compile_model", default=False, show_default=True,
              help="Compile the backbone's repeated layer first (torch.compile): seconds of compiling, then "
                   "fused kernels; bench/prm_throughput.py measures the gain.")
def score(model_dir, input_file, output, neutral_as_correct, batch_tokens, max_length, device, compile_model):
    """Per-step probabilities and solution scores (product and min) for every solution."""
    quiet_transformers()
    import orjson

    from active_learning.data import load_solutions
    from active_learning.model import compile_layers
    from active_learning.score import iter_scores
    from active_learning.files import written_aside

    target = _output_file(output)
    if target.resolve() == Path(input_file).resolve():
        raise click.ClickException(f"--output {output} is the input file: give another file for the scores")
    try:
        solutions = load_solutions(input_file, every_step_written=True)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if not solutions:
        raise click.ClickException(f"{input_file}: no solutions to score")
    model, tokenizer, window = _load(model_dir, device, max_length)
    if compile_model:
        compile_layers(model)
    scores = iter_scores(model, tokenizer, solutions, max_length=window,
                         batch_tokens=batch_tokens, neutral_as_correct=neutral_as_correct)
    with written_aside(target) as partial, partial.open("wb") as f:
        for solution, result in zip(solutions, scores):
            row = {"problem_id": solution.problem_id, **dataclasses.asdict(result)}
            f.write(orjson.dumps(row) + b"\n")
    click.echo(json.dumps({"output": output, "solutions": len(solutions)}))


@prm.command(name="eval")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "model_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--data", type=click.Path(exists=True, dir_okay=False),
              help="The file to evaluate on (or give it as the argument).")
@click.option("--format", "data_format", type=click.Choice(["labels", "processbench"]), default="labels",
              show_default=True, help="labels: PRM800K or TRL records with step labels; processbench: records of "
              "{problem, steps, label: first wrong step or -1}; either as JSONL or one JSON array.")
@click.option("--threshold", default=0.5, show_default=True, type=FloatRange(0, 1),
              help="A step with P(correct) below this is predicted to be an error.")
@click.option("--neutral-as-correct/--neutral-as-wrong", default=True, show_default=True,
              help="Whether a step labeled 0 counts as correct, in the labels and in the model's score alike.")
@click.option("--max-length", default=None, type=IntRange(min=1),
              help="Tokens per window, as prm score reads them (default: the checkpoint's training "
                   "--max-length, as its card's metrics were measured, else 2048); a step longer than this "
                   "alone gets no score (counted under n_truncated).")
@click.option("--bootstrap", default=BOOTSTRAP_SAMPLES, show_default=True, type=IntRange(min=0),
              help="Resamples behind each metric's 95% interval, printed under ci95; 0 for none. Labels: "
              "problems, each with all its solutions; processbench: records.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
def evaluate(file, model_dir, data, data_format, threshold, neutral_as_correct, max_length, bootstrap, device):
    """Print one JSON object: step AUROC/F1, first-error F1, best-of-N vs majority voting; with
    --format processbench, ProcessBench's accuracies on erroneous and correct solutions and F1.
    Each with its 95% bootstrap interval. A metric is null where the labels leave it undefined
    (step F1 without a wrong step; first-error accuracies without an erroneous or a correct
    solution, and their F1 without both)."""
    if (file is None) == (data is None):
        raise click.UsageError("give the file to evaluate on once: as the argument or as --data")
    quiet_transformers()
    from active_learning.data import load_examples
    from active_learning.evaluate import evaluate as run_evaluation
    from active_learning.evaluate import evaluate_processbench

    try:
        if data_format == "labels" and not load_examples(file or data):
            raise ValueError(f"{file or data}: no labeled steps to evaluate on")
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    model, tokenizer, window = _load(model_dir, device, max_length)
    run = evaluate_processbench if data_format == "processbench" else run_evaluation
    try:
        metrics = run(model, tokenizer, file or data, threshold=threshold, neutral_as_correct=neutral_as_correct,
                      max_length=window, bootstrap=bootstrap)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    json.dump(metrics, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    prm()
