"""Training configuration: one dataclass, every field explained, shared by the CLI and Python."""

import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

DEVICES = ("auto", "cpu", "cuda")
# `prm train` runs under accelerate, which puts each process on its own GPU: cuda:N would fight it.
DEVICE_RULE = ("auto, cpu or cuda (for one GPU of several, set CUDA_VISIBLE_DEVICES=N; for "
               "several, `accelerate launch`)")
# Pretraining is one process on one device, which may be any GPU.
PRETRAIN_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")

# Padded tokens per scoring batch where no --batch-tokens is given (rounds, the score endpoint,
# evaluation). Read here, away from torch, so that the platform's settings apply the very rule
# the scorer does and a bad value stops the server at start-up.
BATCH_TOKENS_VARIABLE = "STEPWISE_SCORE_BATCH_TOKENS"


def batch_tokens_setting(value: str) -> int | None:
    """BATCH_TOKENS_VARIABLE's value; None when it is empty."""
    if not (value := value.strip()):
        return None
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise ValueError(f"{BATCH_TOKENS_VARIABLE} must be a whole number of tokens, 1 or more, not {value!r}")
    return int(value)


def _refuse(config, name: str, condition: bool, rule: str) -> None:
    """A setting that breaks `rule` is refused by its flag's name before anything is loaded or
    written: a zero batch size or log interval would otherwise fail deep inside training, after
    the work folder was made."""
    if condition:
        value = getattr(config, name)
        raise ValueError(f"--{name.replace('_', '-')} must be {rule}, not {value}")


def _positive(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value > 0)


# Resamples behind every metric's 95% interval (`prm train`, `prm eval`, rounds): enough for
# stable 2.5th and 97.5th percentiles, a fraction of a second for thousands of held-out solutions.
BOOTSTRAP_SAMPLES = 1000


@dataclass
class TrainConfig:
    output: str = field(metadata={"help": "Checkpoint directory; written only when training completes."})
    base: str = field(default="tiny", metadata={
        "help": "Backbone: a preset (tiny, 100m, 500m: built from a config, no download), a local "
                "directory, or a Hugging Face hub id."})
    base_name: str | None = field(default=None, metadata={
        "help": "How the checkpoint names its base (model card, stepwise.json), such as the hub id "
                "a local directory was downloaded from; default: the preset or hub id, or the "
                "local directory's name."})
    epochs: float = field(default=3.0, metadata={"help": "Passes over the training examples."})
    steps: int = field(default=0, metadata={
        "help": "Optimizer steps, whatever the number of examples (replaces epochs); 0 uses epochs."})
    learning_rate: float = field(default=1e-3, metadata={
        "help": "Peak AdamW learning rate (after warm-up, then linear decay to zero). 1e-3 suits "
                "the tiny preset; pretrained backbones want about 1e-5."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    warmup_fraction: float = field(default=0.05, metadata={"help": "Share of steps spent warming up."})
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step per process."})
    batch_tokens: int | None = field(default=None, metadata={
        "help": "Tokens, padding included, per optimizer step per process (replaces batch_size): "
                "sequences of similar length are packed up to it, so a GPU gets full batches "
                "whatever the lengths; a sequence longer than it is a batch of its own."})
    compile: bool = field(default=False, metadata={
        "help": "Compile the backbone's repeated layer (torch.compile, dynamic shapes): fuses the "
                "small kernels eager mode runs one by one, after a compile of seconds to a minute "
                "at the first step. Changes no result beyond rounding."})
    max_length: int = field(default=1024, metadata={
        "help": "Tokens per sequence; steps past it are not trained on (the problem keeps at most half)."})
    seed: int = field(default=0, metadata={"help": "Seed for initialisation, data order and dropout."})
    device: str = field(default="auto", metadata={
        "help": "auto (CUDA when present), cpu or cuda."})
    mixed_precision: str | None = field(default=None, metadata={
        "choices": ("no", "fp16", "bf16"),
        "help": "no, fp16 or bf16. Default: what `accelerate launch` was configured with (`accelerate "
                "config`, or ACCELERATE_MIXED_PRECISION); without either, bf16 on CUDA (fp32 "
                "master weights, so small updates are not rounded away) and fp32 on CPU."})
    eval_fraction: float = field(default=0.1, metadata={
        "help": "Without an eval file, the share of problems held out for validation."})
    save_every: int = field(default=200, metadata={
        "help": "Optimizer steps between resumable snapshots of the training state."})
    log_every: int = field(default=20, metadata={
        "help": "Optimizer steps between log lines (stderr, training_log.json, the tracker)."})
    report_to: str = field(default="auto", metadata={
        "choices": ("auto", "tensorboard", "wandb", "mlflow", "none"),
        "help": "Experiment tracker, through accelerate: tensorboard (event files under the "
                "checkpoint's logs/), wandb or mlflow (their own settings and environment "
                "variables apply), or none. auto: tensorboard when it is installed (pip install "
                "'stepwise[track]'), else none. training_log.json is written either way."})
    lm_loss_weight: float | None = field(default=None, metadata={
        "help": "Weight of an auxiliary next-token loss on the problem and on every step not "
                "rated -1, through a head dropped at save time. A backbone built from a config "
                "knows no arithmetic, and one label per step teaches it slowly; predicting each "
                "result digit teaches it densely. Default: 1 for presets, 0 for pretrained "
                "backbones, which already read text."})
    step_token_labels: bool = field(default=False, metadata={
        "help": "Train the head at every token of a rated step, not only at its marker; scoring "
                "still reads the marker. A slip shows at the token where it is written (a result "
                "digit, a copied value): a target there teaches a small model to notice it where "
                "it happens and carry the finding to the marker, which one target per step, "
                "three or more layers away, teaches it too slowly."})
    time_budget_s: float | None = field(default=None, metadata={
        "help": "Train at most this many seconds; the learning rate then decays with whichever of "
                "time or steps runs out first."})
    source_weights: str | None = field(default=None, metadata={
        "help": "Loss weight per label source, as a record's `source` names it (none: human), e.g. "
                "human=1,rollout=0.5; a source left out is not trained on. Default: human=1, "
                "so machine labels (rollout, judge, prm) are used only when asked for."})

    def check(self) -> None:
        """ValueError naming the first setting that cannot train."""
        _refuse(self, "epochs", self.steps == 0 and not _positive(self.epochs), "above 0 (or give --steps)")
        _refuse(self, "steps", self.steps < 0, "0 (use epochs) or more")
        _refuse(self, "learning_rate", not _positive(self.learning_rate), "a number above 0")
        _refuse(self, "weight_decay", not (math.isfinite(self.weight_decay) and self.weight_decay >= 0), "0 or more")
        _refuse(self, "warmup_fraction", not 0 <= self.warmup_fraction < 1, "from 0 up to, not including, 1")
        _refuse(self, "batch_size", self.batch_size < 1, "1 or more")
        _refuse(self, "batch_tokens", self.batch_tokens is not None and self.batch_tokens < 1, "1 or more")
        _refuse(self, "max_length", self.max_length < 1, "1 or more")
        _refuse(self, "device", self.device not in DEVICES, DEVICE_RULE)
        _refuse(self, "eval_fraction", not 0 <= self.eval_fraction < 1, "from 0 up to, not including, 1")
        _refuse(self, "save_every", self.save_every < 1, "1 or more")
        _refuse(self, "log_every", self.log_every < 1, "1 or more")
        _refuse(self, "lm_loss_weight", self.lm_loss_weight is not None and not (
            math.isfinite(self.lm_loss_weight) and self.lm_loss_weight >= 0), "0 or more")
        _refuse(self, "time_budget_s", not _positive(self.time_budget_s), "a number of seconds above 0")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def fingerprint(self) -> dict:
        """The settings a resumed run must share with the one it continues: all but where it
        reports to and whether it compiles, which change nothing that was trained."""
        return {k: v for k, v in self.to_dict().items() if k not in ("report_to", "compile")}

    def base_label(self) -> str:
        if self.base_name:
            return self.base_name
        return Path(self.base).name if os.path.isdir(self.base) else self.base

    def published(self) -> dict:
        """The settings as a checkpoint records them: base and output by name, never by a path
        of the machine that trained it, so that a checkpoint can be shared as it is."""
        return self.to_dict() | {"base": self.base_label(), "output": Path(self.output).name}


@dataclass
class PretrainConfig:
    output: str = field(metadata={"help": "Directory of the pretrained base; never overwritten."})
    base: str = field(default="tiny", metadata={"help": "Preset to build: tiny, 100m or 500m."})
    steps: int = field(default=500, metadata={"help": "Optimizer steps at most."})
    time_budget_s: float | None = field(default=None, metadata={
        "help": "Stop after this many seconds; the learning rate decays with whichever of time or "
                "steps runs out first."})
    learning_rate: float | None = field(default=None, metadata={
        "help": "Peak AdamW learning rate. Default: the preset's (tiny 3e-3, 100m 6e-4, 500m 3e-4)."})
    batch_size: int = field(default=32, metadata={"help": "Sequences per optimizer step."})
    max_length: int = field(default=1024, metadata={"help": "Tokens per sequence."})
    seed: int = field(default=0, metadata={"help": "Seed for initialisation and data order."})
    device: str = field(default="auto", metadata={"help": "auto (CUDA when present), cpu, cuda or cuda:N."})

    def check(self) -> None:
        """ValueError naming the first setting that cannot pretrain."""
        _refuse(self, "steps", self.steps < 1, "1 or more")
        _refuse(self, "time_budget_s", not _positive(self.time_budget_s), "a number of seconds above 0")
        _refuse(self, "learning_rate", not _positive(self.learning_rate), "a number above 0")
        _refuse(self, "batch_size", self.batch_size < 1, "1 or more")
        _refuse(self, "max_length", self.max_length < 1, "1 or more")
        _refuse(self, "device", not PRETRAIN_DEVICE.fullmatch(self.device), "auto, cpu, cuda or cuda:N")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}
