"""The project's own byte-level tokenizer, for the tiny model: no download, nothing to learn.

Byte-level BPE with an empty merge list is a pure byte tokenizer: every UTF-8 text encodes, and
each digit is its own token, which makes arithmetic easy to read for a small model.
"""

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

# Defined beside the data's layout, which reading label files needs without transformers.
from active_learning.data import STEP_MARKER

PAD = "<|pad|>"
EOS = "<|endoftext|>"


def build_byte_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # transformers 5 reloads a saved checkpoint of a Qwen2-shaped model with its Qwen2
    # tokenizer, which NFC-normalises: normalising here too reads a text the same way in
    # training and after reloading ("é" typed as e + U+0301 is one character either way).
    core.normalizer = normalizers.NFC()
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS)
    tokenizer.add_special_tokens({"additional_special_tokens": [STEP_MARKER]})
    return tokenizer
