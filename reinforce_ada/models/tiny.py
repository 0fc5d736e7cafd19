"""A tiny Qwen2-architecture causal LM with a character-level tokenizer, built locally (nothing downloaded).

It is a real ``transformers`` model and tokenizer (``Qwen2ForCausalLM`` + ``PreTrainedTokenizerFast``), so every code
path that serves a 1.5B model -- generation, log-probabilities, save_pretrained/safetensors, TRL -- runs on it in
seconds on a CPU. Each character is one token; ``<eos>`` ends a completion and ``<pad>`` pads.

The default shape (hidden 64, 2 layers, 2 attention heads of 32 dimensions sharing 1 key/value head, ~0.1M
parameters) is one vLLM can serve: its CPU attention supports head sizes from 32 up (4 heads of 16 are refused with
"Unsupported CPU attention configuration: head_dim=16"), so the vLLM backends run on the same built-in model as HF.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

TINY_VOCAB: list[str] = ["<pad>", "<eos>", "<unk>"] + list(string.digits + string.ascii_letters + " +-*/=()?.,:;!'\"\n")
"""Special tokens first (pad=0, eos=1, unk=2), then one token per character."""


TINY_SHAPE: dict[str, int] = {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "max_positions": 64}
"""The built-in model's default shape (:func:`build_tiny_model`'s defaults). Part of the warm-start cache key
(:meth:`~reinforce_ada.training.warm_start.WarmStartSettings.key`), so a cache made for another shape is never loaded."""


SHIPPED_START_MODELS = Path(__file__).parent / "start_models"
"""Folder of the warm-started tiny models shipped with the package, one sub-folder per built-in task."""


def build_char_tokenizer():
    """A ``PreTrainedTokenizerFast`` that maps every character of :data:`TINY_VOCAB` to one token."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(TINY_VOCAB)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", padding_side="left", clean_up_tokenization_spaces=False)


def save_char_tokenizer(tokenizer: Any, folder: str | Path) -> None:
    """Save the char tokenizer into ``folder`` so that every supported transformers loads it with ``AutoTokenizer``:
    transformers 5 records its class as ``TokenizersBackend``, a name 4.x refuses; ``PreTrainedTokenizerFast`` names
    the same class in both. (On transformers 5 ``AutoTokenizer`` still builds a ``Qwen2Tokenizer`` for a folder whose
    ``config.json`` says qwen2, and its byte-level pre-tokenizer drops ' ' and newlines: the library's loaders
    (:func:`reinforce_ada.models.loading.load_tokenizer`) honour the declared class.)"""
    tokenizer.save_pretrained(folder)
    config_file = Path(folder) / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2) + "\n")


def build_tiny_model(vocab_size: int = len(TINY_VOCAB), *, hidden_size: int = TINY_SHAPE["hidden_size"],
                     num_layers: int = TINY_SHAPE["num_layers"], num_heads: int = TINY_SHAPE["num_heads"],
                     max_positions: int = TINY_SHAPE["max_positions"], seed: int = 0):
    """A randomly initialised ``Qwen2ForCausalLM`` of ~0.1M parameters (deterministic for a given seed); head size
    ``hidden_size // num_heads`` (32 by default, the smallest vLLM's CPU attention serves), ``num_heads // 2`` key/value
    heads (at least 1)."""
    return build_qwen2(seed=seed, vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=3 * hidden_size,
                       num_hidden_layers=num_layers, num_attention_heads=num_heads,
                       num_key_value_heads=max(1, num_heads // 2), max_position_embeddings=max_positions)


def build_qwen2(seed: int = 0, **config_fields: Any):
    """A randomly initialised ``Qwen2ForCausalLM`` (float32, CPU) of the shape ``config_fields`` give, with the char
    tokenizer's special ids (pad 0, eos 1, no bos) and tied embeddings; deterministic for a given seed."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**config_fields, tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model


def is_char_tokenizer_file(path: str | Path) -> bool:
    """Whether ``path`` (a ``tokenizer.json``) is :func:`build_char_tokenizer`'s: a word-level vocabulary of exactly
    :data:`TINY_VOCAB`, in its order."""
    try:
        model = json.loads(Path(path).read_text()).get("model", {})
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False
    return (isinstance(model, dict) and model.get("type") == "WordLevel"
            and model.get("vocab") == {token: i for i, token in enumerate(TINY_VOCAB)})


def holds_tiny_model(name: str) -> bool:
    """Whether the local folder ``name`` holds a model of the built-in char-level kind (the demo's, or any
    checkpoint trained from it): a model folder, a checkpoint (``model/`` inside) or a run folder (``checkpoint-N/
    model/`` inside) whose tokenizer is the char tokenizer. Reads one small JSON file; ``False`` for anything else
    (a hub id, a missing path, another model)."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return False
    candidates = [path / "tokenizer.json", path / "model" / "tokenizer.json",
                  *sorted(path.glob("checkpoint-*/model/tokenizer.json"))[:1]]  # a run's checkpoints share one
    return any(is_char_tokenizer_file(candidate) for candidate in candidates if candidate.is_file())
