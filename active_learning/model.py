"""The PRM: a Hugging Face backbone with a 3-class token head (-1 / 0 / +1) read at step markers.

It is `AutoModelForTokenClassification` over the backbone, so a checkpoint is a plain
`save_pretrained` directory that `AutoModelForTokenClassification.from_pretrained` and
`AutoTokenizer.from_pretrained` load; our `stepwise.json` beside it only adds provenance.
"""

import json
import os
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForTokenClassification, AutoTokenizer, Qwen2Config

from active_learning.bases import (
    PRESETS,
    BaseUnusable,
    Preset,
    check_base_directory,
    check_base_name,
    files_only_here,
    is_preset,
    refuse_without_tokenizer_files,
)
from active_learning.card import model_card, prompt_format
from active_learning.tokenizer import STEP_MARKER, build_byte_tokenizer

ID2LABEL = {0: "-1", 1: "0", 2: "+1"}  # class index = rating + 1
LABEL2ID = {v: k for k, v in ID2LABEL.items()}
META_FILE = "stepwise.json"


def preset_config(preset: Preset, tokenizer) -> Qwen2Config:
    """The backbone config of a preset over `tokenizer` (the byte tokenizer); the PRM and the
    pretrained base (active_learning.pretrain) share it, so one loads the other's weights."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=preset.hidden,
        intermediate_size=preset.hidden * 4,
        num_hidden_layers=preset.layers,
        num_attention_heads=preset.heads,
        num_key_value_heads=preset.heads,
        max_position_embeddings=preset.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        num_labels=3, id2label=ID2LABEL, label2id=LABEL2ID,
    )


def _from_preset(preset: Preset, dtype: torch.dtype, attn: str):
    tokenizer = build_byte_tokenizer()
    config = preset_config(preset, tokenizer)
    config._attn_implementation = attn
    model = AutoModelForTokenClassification.from_config(config, dtype=dtype)
    model.config.use_cache = False  # see load_base
    return model, tokenizer


PROBE_TEXT = "1 + 1 = 2"


def missing_weights(keys: list[str]) -> str:
    """The first few weights a model's files lack, for a message."""
    names = sorted(keys)
    return ", ".join(names[:3]) + (" …" if len(names) > 3 else "")


def check_tokenizer(tokenizer, base: str, remedy: str = "give a base with a working tokenizer") -> None:
    """Refuse a tokenizer that cannot read a step. Without its files, transformers may still
    build one from the model's config alone, with an empty vocabulary: every text encodes to
    nothing, and a PRM trained over it would see only the markers."""
    ids = tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
    unknown = tokenizer.unk_token_id
    if not ids or all(i == unknown for i in ids):
        raise ValueError(f"the tokenizer of {base} encodes {PROBE_TEXT!r} to "
                         f"{'no tokens' if not ids else 'unknown tokens only'}: it cannot read a "
                         f"solution; {remedy}")


def load_base(base: str, dtype: torch.dtype = torch.float32, attn: str = "sdpa"):
    """(model, tokenizer) for a preset name, a local directory or a hub id, head freshly made
    unless `base` is already a Stepwise checkpoint. A base whose tokenizer is missing or reads
    nothing is refused before its weights are loaded: BaseUnusable, unless a hub download failed,
    which may work on another try (ValueError)."""
    if os.path.isdir(base):
        check_base_directory(base)
    check_base_name(base, directories_here=True)
    if is_preset(base):
        return _from_preset(PRESETS[base], dtype, attn)
    local = files_only_here(base)
    refused = BaseUnusable if os.path.isdir(base) else ValueError
    try:
        tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=local)
    except Exception as e:  # noqa: BLE001 - a damaged tokenizer file raises whatever its parser does
        raise refused(f"cannot load the tokenizer of {base}: {type(e).__name__}: {e}") from None
    try:
        check_tokenizer(tokenizer, base)
    except ValueError as e:
        raise BaseUnusable(str(e)) from None
    try:
        model = AutoModelForTokenClassification.from_pretrained(
            base, local_files_only=local, dtype=dtype, attn_implementation=attn,
            num_labels=3, id2label=ID2LABEL, label2id=LABEL2ID)
    except (OSError, ValueError, KeyError) as e:
        # A config of an unknown model type, or weights that do not fit it.
        raise refused(f"cannot load the model of {base}: {type(e).__name__}: {e}") from None
    if STEP_MARKER not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [STEP_MARKER]})
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Hub models often pad the embedding matrix past the vocabulary; only grow it when needed.
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer))
    model.config.pad_token_id = tokenizer.pad_token_id
    # A PRM reads whole sequences and never decodes: a key-value cache would only be filled and
    # dropped at every forward pass (and make a compiled layer recompile for each layer).
    model.config.use_cache = False
    return model, tokenizer


def needs_padding_mask(model) -> bool:
    """Whether a right-padded batch needs its padding mask for the real tokens' outputs to be
    those of each sequence alone.

    A causal backbone's token attends to the tokens before it only, and right padding comes after
    every real token, so the mask changes nothing the PRM reads (positions count from the start
    either way); without one, SDPA may take its causal flash kernel, which a padding mask rules
    out, and transformers builds no mask at all. An encoder's token attends both ways, so it keeps
    the mask, as does a model whose attention says nothing either way.
    """
    flags = [m.is_causal for m in model.modules() if isinstance(getattr(m, "is_causal", None), bool)]
    return not flags or not all(flags)


def compile_layers(model) -> int:
    """Compile the backbone's repeated layer in place (`torch.compile`, dynamic shapes); returns
    how many layers were compiled.

    Eager transformers runs each norm, rotary embedding and activation as kernels of their own,
    each reading and writing the activations in memory; at the hidden sizes of our presets that
    traffic is, by estimate, of the order of the matrix products' time, and compiling fuses it
    (bench/prm_throughput.py measures both ways). Only the repeated layer class is compiled (the one
    transformers keeps whole, `_no_split_modules`): every layer runs the same code, so it compiles
    once, in seconds rather than the minutes a whole model takes. In place, so the state dict keeps
    its names and checkpoints load anywhere; dynamic shapes, so a new batch shape does not
    recompile.
    """
    kinds = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in kinds]
    if not layers:
        raise ValueError(f"{type(model).__name__} names no repeated layer (_no_split_modules) to compile")
    for layer in layers:
        layer.compile(dynamic=True)
    return len(layers)


def marker_id(tokenizer) -> int:
    return tokenizer.convert_tokens_to_ids(STEP_MARKER)


def save_tokenizer(tokenizer, directory: str | Path) -> None:
    """`save_pretrained`, with the tokenizer's class named so that transformers 4.45 (the
    oldest we support) loads it too.

    transformers 5 names a tokenizer built from a `tokenizers` object (our byte tokenizer)
    `TokenizersBackend`, a class older versions lack; `PreTrainedTokenizerFast` reads the same
    tokenizer.json in every version. Older versions read the marker from
    `additional_special_tokens`, newer ones from `extra_special_tokens`.
    """
    directory = Path(directory)
    tokenizer.save_pretrained(directory)
    path = directory / "tokenizer_config.json"
    config = json.loads(path.read_text())
    if config.get("tokenizer_class") == "TokenizersBackend" and (directory / "tokenizer.json").exists():
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = config.get("extra_special_tokens")
    if isinstance(extra, list) and "additional_special_tokens" not in config:
        config["additional_special_tokens"] = extra
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def save_checkpoint(model, tokenizer, directory: str | Path, meta: dict, name: str | None = None) -> None:
    """A `save_pretrained` directory with `stepwise.json` (meta and the prompt format) and a
    model card; `name` (default: the directory's) is what the card's snippet loads."""
    directory = Path(directory)
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory)
    meta = {**meta, "prompt_format": prompt_format(tokenizer)}
    (directory / META_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    (directory / "README.md").write_text(model_card(meta, name or directory.name))


def resolve_device(device: str) -> str:
    """The torch device a `--device` value names: auto is CUDA when present, else the CPU. A
    name torch does not know, or CUDA where there is none, is refused (ValueError) rather than
    left to fail halfway, or to run on the CPU unsaid."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"unknown device {device!r}: give auto, cpu or cuda (cuda:N for one GPU of several)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU here: give cpu or auto")
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r} is not supported: give auto, cpu or cuda")
    return device


class _NotAPrm(Exception):
    """A checkpoint whose head is not a PRM's, found while loading."""


def load_checkpoint(directory: str | Path, device: str = "cpu"):
    """(model, tokenizer, meta) from a checkpoint; bf16 with SDPA attention on CUDA.

    A directory that is not a whole PRM checkpoint is refused (ValueError) with what is wrong
    with it: scored by a random head or an empty tokenizer, it would give plausible numbers."""
    directory = Path(directory)
    cuda = device.startswith("cuda")
    if not (directory / "config.json").is_file():
        raise ValueError(f"{directory} is not a checkpoint: it has no config.json (give a directory "
                         "written by `stepwise prm train`)")
    refuse_without_tokenizer_files(directory)
    meta_path = directory / META_FILE
    try:
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        # Looked at before the weights: a config of another head size fails their loading with
        # transformers' "ignore_mismatched_sizes" advice, which says nothing of what is wrong.
        classes = AutoConfig.from_pretrained(directory, local_files_only=True).num_labels
        if classes != len(ID2LABEL):
            raise _NotAPrm(f"{directory} is not a PRM checkpoint: its head has {classes} classes, not "
                           f"{len(ID2LABEL)} (give a directory written by `stepwise prm train`)")
        model, loading = AutoModelForTokenClassification.from_pretrained(
            directory, local_files_only=True, attn_implementation="sdpa", output_loading_info=True,
            dtype=torch.bfloat16 if cuda else torch.float32)
    except _NotAPrm as e:
        raise ValueError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - a damaged file raises whatever its parser does
        raise ValueError(f"cannot load the checkpoint {directory}: {type(e).__name__}: {e}") from None
    check_tokenizer(tokenizer, str(directory), "its tokenizer files are damaged or not its own")
    if loading["missing_keys"]:
        raise ValueError(f"{directory} is not a whole PRM checkpoint: its weights lack "
                         f"{missing_weights(loading['missing_keys'])} (give a directory written by `stepwise prm train`)")
    if STEP_MARKER not in tokenizer.get_vocab():
        raise ValueError(f"{directory}'s tokenizer has no step marker {STEP_MARKER!r}: it is not a PRM checkpoint")
    model.config.use_cache = False  # as in load_base; older checkpoints have it on
    return _in_process_memory(model.to(device)).eval(), tokenizer, meta


def _in_process_memory(model):
    """The model with every CPU tensor copied out of the checkpoint's file.

    On the CPU, transformers and safetensors load zero-copy: the tensors are pages of
    model.safetensors mapped into memory. A model kept loaded (the API's scoring cache, a round's
    stages) would then read the file on each forward pass, and a file truncated or overwritten in
    place since (a `cp` over it) is a SIGBUS that kills the process without a log line. Tensors on
    a GPU were already copied there by `.to(device)`, so only the CPU's are cloned."""
    with torch.no_grad():
        # `.data` replaced on the Parameter itself, so weights tied to each other stay one object.
        for parameter in model.parameters():
            if parameter.device.type == "cpu":
                parameter.data = parameter.data.clone()
        for module in model.modules():
            for name, buffer in module._buffers.items():
                if buffer is not None and buffer.device.type == "cpu":
                    module._buffers[name] = buffer.clone()
    return model
